#!/usr/bin/env bash
# Runs every test of the keel workspace: formatting, clippy, docs, unit, integration,
# doc and load-smoke tests. Installs the tools the tests use when they are missing
# (with apt-get when run as root; otherwise it names the packages and stops).
set -euo pipefail
cd "$(dirname "$0")/.."

# tool -> Debian/Ubuntu package
declare -A packages=(
  [wrk]=wrk
  [python3]=python3
  [openssl]=openssl
  [dnsmasq]=dnsmasq
  [ip]=iproute2
  [unshare]=util-linux
  [prlimit]=util-linux
  [setpriv]=util-linux
  [strace]=strace
  [pkg-config]=pkg-config
  [redis-server]=redis-server
  [redis-cli]=redis-tools
)
missing=()
for tool in "${!packages[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("${packages[$tool]}")
done
# keel-tls builds against the system OpenSSL (the openssl crate, not vendored).
if ! { command -v pkg-config >/dev/null 2>&1 && pkg-config --exists openssl; }; then
  missing+=(libssl-dev)
fi
# keel-clients' PostgreSQL tests start a real server: Debian puts initdb and postgres
# under /usr/lib/postgresql/<version>/bin, off PATH.
if ! command -v initdb >/dev/null 2>&1 && ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  missing+=(postgresql)
fi
# The techempower database fixture (scripts/techempower-db.sh) preloads pg_stat_statements;
# Debian ships it inside postgresql-<version>, which postgresql-contrib depends on.
if ! compgen -G '/usr/share/postgresql/*/extension/pg_stat_statements.control' >/dev/null; then
  missing+=(postgresql-contrib)
fi
if ((${#missing[@]})); then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(printf '%s\n' "${missing[@]}" | sort -u) >/dev/null
  else
    echo "missing tools; install the Debian/Ubuntu packages: ${missing[*]}" >&2
    echo "  sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is missing: install a Rust toolchain (rustup, stable >= 1.88 for the tests)" >&2
  exit 1
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --all-features --quiet -- -D warnings
echo "== cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
echo "== cargo test"
# The server's integration tests run the examples, so build them first as programs
# (`cargo test --all-targets` would build them as test harnesses instead).
cargo build --workspace --examples --all-features --quiet
cargo test --workspace --all-features
echo "== fix-check (the newest fixes of conformance/fixes.toml are caught by their tests)"
cargo run --release --quiet -p keel-conformance --bin fix-check -- --newest 3
