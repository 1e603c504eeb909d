#!/usr/bin/env bash
# The PostgreSQL database of TechEmpower's database tests (/db, /queries, /fortunes,
# /updates, /cached-queries), for the `techempower` example and the server's tests.
#
#   scripts/techempower-db.sh start <dir> <port>   create (first time) and start a cluster
#   scripts/techempower-db.sh stop <dir>           stop it (pg_ctl stop -m fast)
#
# `start` makes a cluster in <dir>/data with initdb, listening on 127.0.0.1:<port> only
# (Unix socket in <dir>), with the user benchmarkdbuser (password benchmarkdbpass,
# scram-sha-256 over TCP), the database hello_world, the World and Fortune tables and
# the pg_stat_statements extension, as TechEmpower's toolset/databases/postgres/ sets
# them up (create-postgres.sql, postgresql.conf, postgres.dockerfile). `start` on a
# directory it made before starts the same cluster again (the data kept, the port
# possibly new). It waits until the server accepts TCP connections, then prints the
# connection URL on stdout; everything else goes to stderr.
#
# As root, PostgreSQL runs as the `postgres` system user (it refuses to run as root):
# <dir> is chowned to it. Binaries: the newest /usr/lib/postgresql/<version>/bin
# (Debian), else initdb on PATH.
set -euo pipefail

USER_NAME=benchmarkdbuser
USER_PASSWORD=benchmarkdbpass
DB_NAME=hello_world
# Bounds on each step, in seconds.
INITDB_TIMEOUT=120
START_TIMEOUT=60
STOP_TIMEOUT=60
SQL_TIMEOUT=120

die() {
  echo "techempower-db: $*" >&2
  exit 1
}

usage() {
  echo "usage: $0 start <dir> <port> | stop <dir>" >&2
  exit 2
}

# The directory holding initdb, pg_ctl, postgres, psql and pg_isready.
find_bin() {
  local best="" best_version=0 dir version
  for dir in /usr/lib/postgresql/*/bin; do
    version=${dir#/usr/lib/postgresql/}
    version=${version%/bin}
    [[ $version =~ ^[0-9]+$ && -x $dir/initdb ]] || continue
    if ((version > best_version)); then
      best=$dir
      best_version=$version
    fi
  done
  if [[ -z $best ]] && command -v initdb >/dev/null 2>&1; then
    best=$(dirname "$(command -v initdb)")
  fi
  [[ -n $best ]] || die "PostgreSQL's initdb is missing: install the Debian package postgresql (apt-get install postgresql)"
  local tool
  for tool in pg_ctl postgres; do
    [[ -x $best/$tool ]] || die "$best/$tool is missing: install the Debian package postgresql"
  done
  for tool in psql pg_isready; do
    [[ -x $best/$tool ]] || command -v "$tool" >/dev/null 2>&1 ||
      die "$tool is missing: install the Debian package postgresql-client"
  done
  BIN=$best
}

# A client tool from BIN, or from PATH when BIN lacks it.
client_tool() {
  if [[ -x $BIN/$1 ]]; then echo "$BIN/$1"; else command -v "$1"; fi
}

# pg_stat_statements must be installed next to the server: its library (loaded at
# start by shared_preload_libraries) and its extension control file.
check_pg_stat_statements() {
  local pkglibdir sharedir
  if [[ -x $BIN/pg_config ]]; then
    pkglibdir=$("$BIN/pg_config" --pkglibdir)
    sharedir=$("$BIN/pg_config" --sharedir)
  elif [[ $BIN =~ ^/usr/lib/postgresql/([0-9]+)/bin$ ]]; then
    pkglibdir=/usr/lib/postgresql/${BASH_REMATCH[1]}/lib
    sharedir=/usr/share/postgresql/${BASH_REMATCH[1]}
  else
    return 0 # unknown layout: a failed start names it instead (see start_server)
  fi
  [[ -e $pkglibdir/pg_stat_statements.so && -e $sharedir/extension/pg_stat_statements.control ]] ||
    die "pg_stat_statements is missing ($pkglibdir/pg_stat_statements.so, $sharedir/extension/pg_stat_statements.control): install the Debian package postgresql-contrib"
}

# Runs a command bounded by `timeout`, as the postgres user when we are root.
as_pg() {
  local limit=$1
  shift
  if [[ -n $RUN_AS ]]; then
    timeout "$limit" runuser -u "$RUN_AS" -- "$@"
  else
    timeout "$limit" "$@"
  fi
}

setup_user() {
  RUN_AS=""
  if [[ $(id -u) == 0 ]]; then
    id postgres >/dev/null 2>&1 ||
      die "running as root: PostgreSQL refuses root, and there is no postgres user to run it as (the Debian package postgresql creates one)"
    command -v runuser >/dev/null 2>&1 || die "runuser is missing: install the Debian package util-linux"
    RUN_AS=postgres
  fi
  command -v timeout >/dev/null 2>&1 || die "timeout is missing: install the Debian package coreutils"
}

# The postgresql.conf settings: TechEmpower's toolset/databases/postgres/postgresql.conf,
# scaled for a small test machine where noted.
write_config() {
  local conf=$1 dir=$2 port=$3 version
  version=$(cat "$DATA/PG_VERSION")
  version=${version%%.*}
  {
    echo
    echo "# --- scripts/techempower-db.sh (after TechEmpower's postgresql.conf) ---"
    echo "listen_addresses = '127.0.0.1'"
    echo "port = $port"
    echo "unix_socket_directories = '$dir'"
    echo "max_connections = ${TFB_MAX_CONNECTIONS:-2000}"
    echo "ssl = off"
    echo "shared_buffers = 256MB"
    echo "work_mem = 64MB"
    echo "maintenance_work_mem = 512MB"
    echo "wal_level = minimal"
    echo "max_wal_senders = 0"
    echo "synchronous_commit = off"
    echo "checkpoint_completion_target = 0.9"
    echo "random_page_cost = 2"
    # TechEmpower says 8GB for its 28-core, many-GB servers; a test machine has less.
    echo "effective_cache_size = 1GB"
    echo "log_line_prefix = '%t '"
    echo "track_activity_query_size = 2048"
    echo "shared_preload_libraries = 'pg_stat_statements'"
    echo "pg_stat_statements.track = all"
    # TechEmpower keeps 500000 statements; the tests issue a few dozen distinct ones,
    # and each slot costs shared memory.
    echo "pg_stat_statements.max = 10000"
    echo "max_pred_locks_per_transaction = 256"
    if ((version >= 18)); then
      # As TechEmpower's config.sh: (cores + 3) / 4 I/O workers (PostgreSQL 18's AIO).
      echo "io_workers = $((($(nproc) + 3) / 4))"
    fi
  } >>"$conf"
}

schema_sql() {
  # TechEmpower's create-postgres.sql makes each table twice, unquoted (folded to
  # world, fortune) and quoted ("World", "Fortune"), so that frameworks may use either.
  local world fortune
  echo "BEGIN;"
  echo "CREATE EXTENSION IF NOT EXISTS pg_stat_statements;"
  for world in World '"World"'; do
    cat <<SQL
CREATE TABLE $world (
  id integer NOT NULL,
  randomNumber integer NOT NULL DEFAULT 0,
  PRIMARY KEY (id)
);
INSERT INTO $world (id, randomNumber)
  SELECT x, least(floor(random() * 10000 + 1), 10000) FROM generate_series(1, 10000) AS x;
SQL
  done
  for fortune in Fortune '"Fortune"'; do
    cat <<SQL
CREATE TABLE $fortune (
  id integer NOT NULL,
  message varchar(2048) NOT NULL,
  PRIMARY KEY (id)
);
INSERT INTO $fortune (id, message) VALUES
  (1, 'fortune: No such file or directory'),
  (2, 'A computer scientist is someone who fixes things that aren''t broken.'),
  (3, 'After enough decimal places, nobody gives a damn.'),
  (4, 'A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1'),
  (5, 'A computer program does what you tell it to do, not what you want it to do.'),
  (6, 'Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen'),
  (7, 'Any program that runs right is obsolete.'),
  (8, 'A list is only as strong as its weakest link. — Donald Knuth'),
  (9, 'Feature: A bug with seniority.'),
  (10, 'Computers make very fast, very accurate mistakes.'),
  (11, '<script>alert("This should not be displayed in a browser alert box.");</script>'),
  (12, 'フレームワークのベンチマーク');
SQL
  done
  echo "COMMIT;"
}

# Starts the server of $DATA on $port and waits until it accepts TCP connections.
start_server() {
  local dir=$1 port=$2 log=$1/postgres.log
  if as_pg 10 "$BIN/pg_ctl" status -D "$DATA" >/dev/null 2>&1; then
    die "a server is already running in $DATA (stop it with: $0 stop $dir)"
  fi
  if ! as_pg $((START_TIMEOUT + 5)) "$BIN/pg_ctl" start -D "$DATA" -l "$log" -w -t "$START_TIMEOUT" \
    -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir" >/dev/null; then
    echo "techempower-db: PostgreSQL did not start; the end of $log:" >&2
    tail -n 20 "$log" >&2 || true
    if grep -q 'pg_stat_statements' "$log" 2>/dev/null; then
      die "pg_stat_statements could not be loaded: install the Debian package postgresql-contrib"
    fi
    if grep -qi 'could not bind\|address already in use' "$log" 2>/dev/null; then
      die "port $port on 127.0.0.1 is taken"
    fi
    die "PostgreSQL did not start within ${START_TIMEOUT}s (settings in $DATA/postgresql.conf)"
  fi
  # pg_ctl -w waits for the server to accept connections; check TCP as a client would.
  local isready deadline=$((SECONDS + START_TIMEOUT))
  isready=$(client_tool pg_isready)
  until timeout 5 "$isready" -q -h 127.0.0.1 -p "$port" -d "$DB_NAME" -U "$USER_NAME" -t 2; do
    ((SECONDS < deadline)) || die "PostgreSQL started but 127.0.0.1:$port does not accept connections"
    sleep 0.2
  done
}

cmd_start() {
  local dir=$1 port=$2
  [[ $port =~ ^[0-9]+$ ]] && ((port > 0 && port < 65536)) || die "bad port: $port"
  find_bin
  check_pg_stat_statements
  setup_user
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  # Unix socket paths are limited to 107 bytes: <dir>/.s.PGSQL.<port>.lock must fit.
  ((${#dir} <= 80)) || die "$dir is too long for a Unix socket directory (at most 80 bytes)"
  DATA=$dir/data
  if [[ -f $DATA/PG_VERSION ]]; then
    [[ -f $dir/.techempower-db ]] || die "$DATA holds a cluster this script did not make"
    [[ -z $RUN_AS ]] || chown -R "$RUN_AS:" "$dir"
    start_server "$dir" "$port"
    echo "techempower-db: started the existing cluster in $DATA" >&2
  else
    [[ -z $(ls -A "$dir") ]] || die "$dir is not empty (and holds no cluster made by this script)"
    [[ -z $RUN_AS ]] || chown "$RUN_AS:" "$dir"
    chmod 700 "$dir"
    local pwfile=$dir/.pwfile
    (umask 077 && echo "$USER_PASSWORD" >"$pwfile")
    [[ -z $RUN_AS ]] || chown "$RUN_AS:" "$pwfile"
    # benchmarkdbuser is the superuser, as in TechEmpower's image (POSTGRES_USER): it
    # can read and reset pg_stat_statements. TCP needs its password (scram-sha-256);
    # the Unix socket, in the private <dir>, trusts local users.
    if ! as_pg "$INITDB_TIMEOUT" "$BIN/initdb" -D "$DATA" -U "$USER_NAME" --pwfile="$pwfile" \
      -E UTF8 --locale=C --auth-local=trust --auth-host=scram-sha-256 --no-sync \
      >"$dir/initdb.log" 2>&1; then
      tail -n 20 "$dir/initdb.log" >&2
      die "initdb failed (log: $dir/initdb.log)"
    fi
    rm -f "$pwfile"
    write_config "$DATA/postgresql.conf" "$dir" "$port"
    start_server "$dir" "$port"
    local psql
    psql=$(client_tool psql)
    local -a psql_args=(-X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U "$USER_NAME")
    as_pg "$SQL_TIMEOUT" "$psql" "${psql_args[@]}" -d postgres \
      -c "CREATE DATABASE $DB_NAME OWNER $USER_NAME ENCODING 'UTF8' TEMPLATE template0" >&2 ||
      die "creating the database $DB_NAME failed"
    schema_sql | as_pg "$SQL_TIMEOUT" "$psql" "${psql_args[@]}" -d "$DB_NAME" -f - >&2 ||
      die "creating the tables in $DB_NAME failed"
    as_pg "$SQL_TIMEOUT" "$psql" "${psql_args[@]}" -d "$DB_NAME" -c "VACUUM ANALYZE" >&2 ||
      die "VACUUM ANALYZE in $DB_NAME failed"
    touch "$dir/.techempower-db"
    [[ -z $RUN_AS ]] || chown "$RUN_AS:" "$dir/.techempower-db"
    echo "techempower-db: created and started a cluster in $DATA" >&2
  fi
  echo "postgres://$USER_NAME:$USER_PASSWORD@127.0.0.1:$port/$DB_NAME"
}

cmd_stop() {
  local dir=$1
  find_bin
  setup_user
  DATA=$dir/data
  [[ -f $DATA/PG_VERSION ]] || die "$DATA is not a PostgreSQL cluster"
  if ! as_pg 10 "$BIN/pg_ctl" status -D "$DATA" >/dev/null 2>&1; then
    echo "techempower-db: no server is running in $DATA" >&2
    return 0
  fi
  as_pg $((STOP_TIMEOUT + 5)) "$BIN/pg_ctl" stop -D "$DATA" -m fast -w -t "$STOP_TIMEOUT" >/dev/null ||
    die "pg_ctl stop -m fast did not stop the server in $DATA within ${STOP_TIMEOUT}s"
}

case "${1:-}" in
  start)
    (($# == 3)) || usage
    cmd_start "$2" "$3"
    ;;
  stop)
    (($# == 2)) || usage
    cmd_stop "$2"
    ;;
  *) usage ;;
esac
