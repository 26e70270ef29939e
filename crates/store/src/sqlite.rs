//! The run store in one SQLite file: the [`Db`] over a `rusqlite` connection. Its connection
//! settings and migrations are `schema`'s.

use std::path::Path;
use std::sync::Arc;

use rusqlite::Connection;
use rusqlite::types::{ToSql, ToSqlOutput, ValueRef};

use super::sql::{Cell, Db, Dialect, Param, Row};
use super::{StoreError, schema};

/// One connection to a store file.
pub(super) struct SqliteDb {
    conn: Connection,
}

impl SqliteDb {
    /// Opens the file (creating it) with the store's settings; the `writer` connection also
    /// brings the schema up to date. Errors are the messages [`StoreError::Open`] carries.
    pub(super) fn open(path: &Path, writer: bool) -> Result<SqliteDb, String> {
        // A store made now holds nothing yet: see `schema::configure`.
        let new = writer && std::fs::metadata(path).map_or(true, |file| file.len() == 0);
        let mut conn = Connection::open(path).map_err(|err| schema::describe(&err))?;
        schema::configure(&conn, writer, new).map_err(|err| schema::describe(&err))?;
        if writer {
            schema::migrate(&mut conn)?;
        }
        if new {
            schema::sync_normally(&conn).map_err(|err| schema::describe(&err))?;
        }
        Ok(SqliteDb { conn })
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

    fn close(&mut self) {
        schema::fold_a_long_log(&self.conn);
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
}
