//! The TechEmpower database fixture (`scripts/techempower-db.sh` through
//! `util::techempower_db`): the tables hold what TechEmpower's `create-postgres.sql`
//! puts in them, `pg_stat_statements` counts statements as its verifier reads them,
//! and the cluster can be stopped and started again with its data.

mod util;

use util::techempower_db::{StatementCounts, TechEmpowerDb, FORTUNE_ROWS, WORLD_ROWS};
use util::techempower_verify::FORTUNES;

#[test]
fn tables_counts_and_restart() {
    let mut db = TechEmpowerDb::start();
    assert_eq!(
        db.url(),
        format!(
            "postgres://benchmarkdbuser:benchmarkdbpass@127.0.0.1:{}/hello_world",
            db.port()
        )
    );
    assert!(db.dir().join("data/PG_VERSION").is_file());

    // Both spellings TechEmpower creates: unquoted (folded to lower case) and quoted.
    for table in ["World", "\"World\""] {
        assert_eq!(db.count(table), WORLD_ROWS, "{table}");
        let world = db.world(table);
        assert_eq!(world.len() as u64, WORLD_ROWS);
        assert!(
            (1..=10_000).all(|id| world.contains_key(&id)),
            "{table}: ids 1..=10000"
        );
        assert!(
            world.values().all(|n| (1..=10_000).contains(n)),
            "{table}: randomNumber in 1..=10000"
        );
    }
    for table in ["Fortune", "\"Fortune\""] {
        assert_eq!(db.count(table), FORTUNE_ROWS, "{table}");
        let rows = db.rows(&format!("SELECT id, message FROM {table} ORDER BY id"));
        let got: Vec<(i32, String)> = rows
            .into_iter()
            .map(|r| {
                (
                    r[0].as_deref().unwrap().parse().unwrap(),
                    r[1].clone().unwrap(),
                )
            })
            .collect();
        let want: Vec<(i32, String)> = FORTUNES.iter().map(|(i, m)| (*i, m.to_string())).collect();
        assert_eq!(
            got, want,
            "{table}: the 12 standard fortunes, byte for byte"
        );
    }
    let settings = db.rows(
        "SELECT current_setting('max_connections'), current_setting('synchronous_commit'), \
                current_setting('shared_preload_libraries'), current_setting('listen_addresses')",
    );
    assert_eq!(
        settings[0],
        ["2000", "off", "pg_stat_statements", "127.0.0.1"].map(|s| Some(s.to_owned()))
    );

    // pg_stat_statements counts statements naming a table, as TechEmpower reads them.
    db.reset_statements();
    assert_eq!(db.statement_counts("world"), StatementCounts::default());
    let mut client = db.client();
    for id in 1..=5 {
        let rows = client
            .query(
                "SELECT id, randomnumber FROM world WHERE id = $1",
                &[Some(&id.to_string())],
            )
            .expect("select a World row");
        assert_eq!(rows.len(), 1);
    }
    let updated = client
        .execute(
            "UPDATE world SET randomnumber = 1 WHERE id IN (1, 2, 3)",
            &[],
        )
        .expect("update");
    assert_eq!(updated, 3);
    let counts = db.statement_counts("world");
    assert_eq!(
        counts,
        StatementCounts {
            queries: 6,
            rows_read: 5,
            rows_updated: 3
        },
        "statements: {:?}",
        db.statements()
    );
    assert!(db
        .statements()
        .iter()
        .any(|(calls, _, q)| *calls == 5 && q.contains("FROM world WHERE id = $1")));
    assert_eq!(db.statement_counts("fortune").queries, 0);

    // Taken away and brought back: same port, same data, and connections made before
    // the stop are dead.
    let before = db.world("World");
    db.stop();
    assert!(!db.is_running());
    assert!(
        client.query("SELECT 1", &[]).is_err(),
        "the old session ended"
    );
    assert!(std::net::TcpStream::connect(("127.0.0.1", db.port())).is_err());
    db.start_again();
    assert_eq!(db.world("World"), before);
    db.restart();
    assert_eq!(db.count("World"), WORLD_ROWS);

    let dir = db.dir().to_owned();
    drop(db);
    assert!(!dir.exists(), "the directory is removed on drop");
}
