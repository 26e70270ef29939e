//! The run store in one SQLite file: the [`Db`] over a `rusqlite` connection. Its connection
//! settings and migrations are `schema`'s.

use std::path::Path;
use std::sync::Arc;

use rusqlite::Connection;
use rusqlite::types::{ToSql, ToSqlOutput, ValueRef};

use super::schema::Feature;
use super::sql::{Cell, Db, Dialect, Param, Row};
use super::{StoreError, schema};

/// One connection to a store file.
pub(super) struct SqliteDb {
    conn: Connection,
    /// This open made the store (from the image, or by SQL): it held no run then.
    made: bool,
    /// The writer's log, flushed to disk ahead of its fold.
    log: Option<schema::LogWriteback>,
}

impl SqliteDb {
    /// Opens the file (creating it) with the store's settings; the `writer` connection also
    /// brings the schema up to date. Errors are the messages [`StoreError::Open`] carries.
    pub(super) fn open(path: &Path, writer: bool) -> Result<SqliteDb, String> {
        // A store made now is put in place from the image when it can be; made by SQL
        // otherwise, it holds nothing yet: see `schema::configure`. Another process may make
        // it meanwhile, which opening then finds.
        let absent_or_empty = || std::fs::metadata(path).map_or(true, |file| file.len() == 0);
        let placed = writer && absent_or_empty() && schema::place_new_store(path);
        let new = writer && !placed && absent_or_empty();
        let mut conn = Connection::open(path).map_err(|err| schema::describe(&err))?;
        schema::configure(&conn, writer, new).map_err(|err| schema::describe(&err))?;
        if writer {
            schema::migrate(&mut conn)?;
        }
        if new {
            schema::sync_normally(&conn).map_err(|err| schema::describe(&err))?;
        }
        if placed {
            schema::start_a_new_log(&conn).map_err(|err| schema::describe(&err))?;
        }
        let log = writer.then(|| schema::LogWriteback::of(&conn)).flatten();
        Ok(SqliteDb {
            conn,
            made: placed || new,
            log,
        })
    }

    /// Whether this open made the store: no run is in it but those another process started
    /// since, which are alive (nothing to settle).
    pub(super) fn made_now(&self) -> bool {
        self.made
    }
}

impl ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match *self {
            Param::Text(Some(text)) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
            Param::Int(Some(value)) => ToSqlOutput::Borrowed(ValueRef::Integer(value)),
            Param::Text(None) | Param::Int(None) => ToSqlOutput::Borrowed(ValueRef::Null),
        })
    }
}

impl Db for SqliteDb {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn execute(&mut self, sql: &'static str, params: &[Param<'_>]) -> Result<u64, StoreError> {
        let changed = self
            .conn
            .prepare_cached(sql)?
            .execute(rusqlite::params_from_iter(params))?;
        Ok(changed as u64)
    }

    fn query(&mut self, sql: &'static str, params: &[Param<'_>]) -> Result<Vec<Row>, StoreError> {
        let mut statement = self.conn.prepare_cached(sql)?;
        let columns: Arc<[String]> = statement.column_names().map(str::to_string).collect();
        let mut rows = statement.query(rusqlite::params_from_iter(params))?;
        let mut answer = Vec::new();
        while let Some(row) = rows.next()? {
            let cells = (0..columns.len())
                .map(|index| {
                    Ok(match row.get_ref(index)? {
                        ValueRef::Null => Cell::Null,
                        ValueRef::Integer(value) => Cell::Int(value),
                        ValueRef::Text(bytes) => {
                            Cell::Text(String::from_utf8(bytes.to_vec()).map_err(|_| {
                                StoreError::Column {
                                    column: columns[index].clone(),
                                    message: "the text is not UTF-8".into(),
                                }
                            })?)
                        }
                        ValueRef::Real(_) | ValueRef::Blob(_) => {
                            return Err(StoreError::Column {
                                column: columns[index].clone(),
                                message: "expected text or an integer".into(),
                            });
                        }
                    })
                })
                .collect::<Result<Vec<Cell>, StoreError>>()?;
            answer.push(Row {
                columns: columns.clone(),
                cells,
            });
        }
        Ok(answer)
    }

    fn batch(&mut self, sql: &str) -> Result<(), StoreError> {
        Ok(self.conn.execute_batch(sql)?)
    }

    fn begin(&mut self) -> Result<(), StoreError> {
        self.batch("BEGIN IMMEDIATE")
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        self.batch("COMMIT")?;
        if let Some(log) = &mut self.log {
            log.committed();
        }
        Ok(())
    }

    fn close(&mut self) {
        schema::fold_a_long_log(&self.conn);
    }

    fn make_tables(&mut self, feature: Feature) -> Result<(), StoreError> {
        if self.has_tables(feature)? {
            return Ok(());
        }
        // Under a savepoint, inside the caller's transaction or as one of its own: the
        // feature's tables are all made, or none is.
        self.conn.execute_batch("SAVEPOINT make_tables")?;
        match self.conn.execute_batch(feature.sqlite_tables()) {
            Ok(()) => Ok(self.conn.execute_batch("RELEASE make_tables")?),
            Err(error) => {
                let _ = self
                    .conn
                    .execute_batch("ROLLBACK TO make_tables; RELEASE make_tables");
                Err(error.into())
            }
        }
    }

    fn has_tables(&mut self, feature: Feature) -> Result<bool, StoreError> {
        Ok(self
            .conn
            .prepare_cached("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1")?
            .exists([feature.table()])?)
    }

    fn prepare_ahead(&mut self, statements: &[&'static str]) {
        for sql in statements {
            let _ = self.conn.prepare_cached(sql);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pragma<T: rusqlite::types::FromSql>(db: &SqliteDb, name: &str) -> T {
        db.conn
            .pragma_query_value(None, name, |row| row.get(0))
            .expect("pragma")
    }

    #[test]
    fn a_new_store_is_made_without_a_journal_file_and_then_syncs_as_any_store() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("runs.db");
        // Made now, then opened again as an existing store: the same settings after either.
        for opening in ["new", "existing"] {
            let db = SqliteDb::open(&path, true).expect("open");
            assert_eq!(pragma::<i64>(&db, "synchronous"), 1, "{opening}: NORMAL");
            assert_eq!(pragma::<String>(&db, "journal_mode"), "wal", "{opening}");
            assert_eq!(
                pragma::<i64>(&db, "user_version"),
                schema::MIGRATIONS.len() as i64,
                "{opening}: the whole schema"
            );
            assert!(
                !dir.path().join("runs.db-journal").exists(),
                "{opening}: a rollback journal was left"
            );
        }
        // A reader of a store that is not there yet makes nothing without sync.
        let reader = SqliteDb::open(&dir.path().join("other.db"), false).expect("open");
        assert_eq!(pragma::<i64>(&reader, "synchronous"), 1);
    }

    /// `rows` commits of a 64 KiB row each into the table `filler`, growing the log.
    fn commit_filler(db: &mut SqliteDb, rows: usize) {
        for _ in 0..rows {
            db.begin().expect("begin");
            db.batch("INSERT INTO filler VALUES (randomblob(65536))")
                .expect("insert");
            db.commit().expect("commit");
        }
    }

    #[test]
    fn a_log_long_enough_to_be_folded_is_flushed_as_it_grows_and_a_short_one_is_not() {
        let dir = tempfile::tempdir().expect("dir");
        let log_of = |name: &str| std::fs::metadata(dir.path().join(format!("{name}-wal")));

        let mut short = SqliteDb::open(&dir.path().join("short.db"), true).expect("open");
        short
            .batch("CREATE TABLE filler (bytes BLOB)")
            .expect("table");
        commit_filler(&mut short, 8);
        let length = log_of("short.db").expect("log").len();
        assert!(length < schema::FOLD_LOG_ABOVE_BYTES, "{length} bytes");
        assert_eq!(short.log.as_ref().expect("writer").started, 0);

        let mut long = SqliteDb::open(&dir.path().join("long.db"), true).expect("open");
        long.batch("CREATE TABLE filler (bytes BLOB)")
            .expect("table");
        commit_filler(&mut long, 64);
        let length = log_of("long.db").expect("log").len();
        assert!(length > 3 * schema::FOLD_LOG_ABOVE_BYTES, "{length} bytes");
        assert!(long.log.as_ref().expect("writer").started >= 1);
        // Flushed or not, what was committed is there, and the fold empties the log.
        long.close();
        assert_eq!(log_of("long.db").expect("log").len(), 0);
        let rows = long
            .query("SELECT count(*) AS n FROM filler", &[])
            .expect("count");
        assert_eq!(rows[0].int("n").expect("n"), 64);
    }

    #[test]
    fn a_log_cut_by_another_writers_fold_is_flushed_again_as_it_grows_back() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("runs.db");
        let log_length =
            || std::fs::metadata(dir.path().join("runs.db-wal")).map_or(0, |log| log.len());
        let mut writer = SqliteDb::open(&path, true).expect("open");
        writer
            .batch("CREATE TABLE filler (bytes BLOB)")
            .expect("table");
        commit_filler(&mut writer, 48);
        let long = log_length();
        let flushes = writer.log.as_ref().expect("writer").started;
        assert!(flushes >= 1, "a {long}-byte log was not flushed");
        while writer.log.as_ref().expect("writer").flushing() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }

        // Another process's writer closes the store and folds the log in.
        SqliteDb::open(&path, true).expect("open").close();
        assert_eq!(log_length(), 0, "the other writer's fold cut the log");

        // Past the fold's size again, though shorter than before: flushed again.
        commit_filler(&mut writer, 24);
        let grown = log_length();
        assert!(
            grown > schema::FOLD_LOG_ABOVE_BYTES && grown < long,
            "{grown} bytes against {long}"
        );
        assert!(
            writer.log.as_ref().expect("writer").started > flushes,
            "a log grown back to {grown} bytes was not flushed"
        );
    }

    /// The names in `dir`, sorted.
    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("list")
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    }

    fn schema_version(db: &SqliteDb) -> i64 {
        pragma::<i64>(db, "user_version")
    }

    #[test]
    fn the_new_store_image_is_the_store_the_schema_makes() {
        let dir = tempfile::tempdir().expect("dir");
        let first = dir.path().join("first");
        let second = dir.path().join("second");
        std::fs::create_dir_all(&first).expect("dir");
        std::fs::create_dir_all(&second).expect("dir");
        let made = schema::new_store_image_from_sql(&first);
        assert!(
            made == schema::new_store_image_from_sql(&second),
            "the schema made twice gave two different files"
        );
        if std::env::var_os("WEFT_WRITE_STORE_IMAGE").is_some() {
            std::fs::write(schema::NEW_STORE_IMAGE_FILE, &made).expect("write the image");
        }
        assert!(
            made == schema::NEW_STORE_IMAGE,
            "{} is not the store the schema makes now (a migration was added, or SQLite \
             changed): write it again with WEFT_WRITE_STORE_IMAGE=1 cargo test -p weft-store \
             the_new_store_image, then build again",
            schema::NEW_STORE_IMAGE_FILE
        );
    }

    #[test]
    fn a_new_store_is_put_in_place_whole_and_leaves_nothing_beside_it() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("runs.db");
        let db = SqliteDb::open(&path, true).expect("open");
        assert_eq!(schema_version(&db), schema::MIGRATIONS.len() as i64);
        // Placed from the image, not written statement by statement (which would have left the
        // file to differ until its log was folded in).
        assert!(std::fs::read(&path).expect("read") == schema::NEW_STORE_IMAGE);
        assert_eq!(
            names_in(dir.path()),
            ["runs.db", "runs.db-shm", "runs.db-wal"],
            "nothing staged is left"
        );
        // Its log is begun already (the header and one page), written without a sync, so that
        // the first run's commit does not sync the new log and its folder.
        let log = std::fs::metadata(dir.path().join("runs.db-wal")).expect("the log");
        assert!(
            log.len() >= 32 + 24 + 4096,
            "the log holds {} bytes, not a header and a page",
            log.len()
        );
        assert_eq!(pragma::<i64>(&db, "synchronous"), 1, "then NORMAL");
        // An empty file there (made by hand, or by a tool) is a new store too.
        let empty = dir.path().join("empty.db");
        std::fs::write(&empty, b"").expect("empty file");
        let db = SqliteDb::open(&empty, true).expect("open");
        assert_eq!(schema_version(&db), schema::MIGRATIONS.len() as i64);
    }

    #[test]
    fn a_log_left_by_a_deleted_store_is_not_replayed_onto_a_new_one() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("runs.db");
        let mut old = SqliteDb::open(&path, true).expect("open");
        old.batch("CREATE TABLE left_over (x INTEGER); INSERT INTO left_over VALUES (1);")
            .expect("write");
        drop(old);
        assert!(dir.path().join("runs.db-wal").exists(), "the log stays");
        std::fs::remove_file(&path).expect("delete the store, not its log");

        let mut db = SqliteDb::open(&path, true).expect("a new store");
        assert_eq!(schema_version(&db), schema::MIGRATIONS.len() as i64);
        let left_over = db
            .query(
                "SELECT COUNT(*) AS n FROM sqlite_master WHERE name = 'left_over'",
                &[],
            )
            .expect("query");
        assert!(
            matches!(left_over[0].cells[0], Cell::Int(0)),
            "the old log's table came back"
        );
        let integrity: String = db
            .conn
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .expect("check");
        assert_eq!(integrity, "ok");
    }

    #[test]
    fn writers_opening_one_new_store_at_once_all_open_it() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("runs.db");
        let ready = std::sync::Barrier::new(8);
        std::thread::scope(|scope| {
            let opened: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        ready.wait();
                        let db = SqliteDb::open(&path, true).expect("open");
                        schema_version(&db)
                    })
                })
                .collect();
            for version in opened {
                assert_eq!(
                    version.join().expect("thread"),
                    schema::MIGRATIONS.len() as i64
                );
            }
        });
        assert_eq!(
            names_in(dir.path()),
            ["runs.db", "runs.db-shm", "runs.db-wal"]
        );
    }
}
