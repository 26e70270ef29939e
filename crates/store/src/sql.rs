//! What the table modules need of a database, so that one set of SQL serves both backends
//! (SQLite in a file, PostgreSQL on a server): statements with numbered parameters (`?1`,
//! written once; the PostgreSQL backend turns them into `$1`), transactions, and rows read by
//! column name.
//!
//! The SQL the table modules write is the common part of both dialects: `ON CONFLICT ... DO
//! UPDATE` rather than `INSERT OR REPLACE`, `IS NOT DISTINCT FROM` rather than `IS`, sums cast
//! to `BIGINT` (PostgreSQL sums integers as `numeric`), and parameters whose type PostgreSQL
//! cannot infer from a column cast with `CAST(? AS TEXT)`.

use super::StoreError;
use super::schema::Feature;

/// One statement parameter: text or a 64-bit integer, either of which may be `NULL`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Param<'a> {
    Text(Option<&'a str>),
    Int(Option<i64>),
}

impl<'a> From<&'a str> for Param<'a> {
    fn from(text: &'a str) -> Param<'a> {
        Param::Text(Some(text))
    }
}

impl<'a> From<&'a String> for Param<'a> {
    fn from(text: &'a String) -> Param<'a> {
        Param::Text(Some(text))
    }
}

impl<'a> From<Option<&'a str>> for Param<'a> {
    fn from(text: Option<&'a str>) -> Param<'a> {
        Param::Text(text)
    }
}

impl<'a> From<Option<&'a String>> for Param<'a> {
    fn from(text: Option<&'a String>) -> Param<'a> {
        Param::Text(text.map(String::as_str))
    }
}

impl<'a> From<&'a Option<String>> for Param<'a> {
    fn from(text: &'a Option<String>) -> Param<'a> {
        Param::Text(text.as_deref())
    }
}

impl From<i64> for Param<'_> {
    fn from(value: i64) -> Self {
        Param::Int(Some(value))
    }
}

impl From<Option<i64>> for Param<'_> {
    fn from(value: Option<i64>) -> Self {
        Param::Int(value)
    }
}

/// `[Param; N]` from values that convert, like `rusqlite::params!`.
macro_rules! params {
    ($($value:expr),* $(,)?) => {
        [$($crate::sql::Param::from($value)),*]
    };
}
pub(super) use params;

/// One value of a row as read.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Cell {
    Null,
    Int(i64),
    Text(String),
}

/// One row of a query's answer, its values by column name.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) columns: std::sync::Arc<[String]>,
    pub(super) cells: Vec<Cell>,
}

impl Row {
    fn cell(&self, column: &str) -> Result<&Cell, StoreError> {
        self.columns
            .iter()
            .position(|name| name == column)
            .map(|index| &self.cells[index])
            .ok_or_else(|| StoreError::Column {
                column: column.to_string(),
                message: "no such column in the answer".into(),
            })
    }

    fn mismatch(column: &str, wanted: &str, cell: &Cell) -> StoreError {
        StoreError::Column {
            column: column.to_string(),
            message: format!("expected {wanted}, found {cell:?}"),
        }
    }

    pub(super) fn opt_text(&self, column: &str) -> Result<Option<String>, StoreError> {
        match self.cell(column)? {
            Cell::Null => Ok(None),
            Cell::Text(text) => Ok(Some(text.clone())),
            other => Err(Row::mismatch(column, "text", other)),
        }
    }

    pub(super) fn text(&self, column: &str) -> Result<String, StoreError> {
        self.opt_text(column)?
            .ok_or_else(|| Row::mismatch(column, "text", &Cell::Null))
    }

    pub(super) fn opt_int(&self, column: &str) -> Result<Option<i64>, StoreError> {
        match self.cell(column)? {
            Cell::Null => Ok(None),
            Cell::Int(value) => Ok(Some(*value)),
            other => Err(Row::mismatch(column, "an integer", other)),
        }
    }

    pub(super) fn int(&self, column: &str) -> Result<i64, StoreError> {
        self.opt_int(column)?
            .ok_or_else(|| Row::mismatch(column, "an integer", &Cell::Null))
    }
}

/// Which database a [`Db`] speaks to, where the two differ in more than SQL text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    Sqlite,
    Postgres,
}

/// A connection to the run store's database.
pub(super) trait Db: Send {
    fn dialect(&self) -> Dialect;

    /// Whether the connection to the database server is gone (the server stopped or
    /// restarted, the network failed): what failed may succeed once it is back. Never for a
    /// file.
    fn connection_lost(&mut self) -> bool {
        false
    }

    /// Runs one statement; returns the number of rows it changed.
    fn execute(&mut self, sql: &'static str, params: &[Param<'_>]) -> Result<u64, StoreError>;

    /// Runs one query and returns all its rows.
    fn query(&mut self, sql: &'static str, params: &[Param<'_>]) -> Result<Vec<Row>, StoreError>;

    /// Runs statements without parameters (transaction control, savepoints).
    fn batch(&mut self, sql: &str) -> Result<(), StoreError>;

    /// Starts a transaction that holds the right to write from its start (SQLite's
    /// `BEGIN IMMEDIATE`; PostgreSQL locks rows as statements touch them).
    fn begin(&mut self) -> Result<(), StoreError>;

    fn commit(&mut self) -> Result<(), StoreError> {
        self.batch("COMMIT")
    }

    fn rollback(&mut self) -> Result<(), StoreError> {
        self.batch("ROLLBACK")
    }

    /// Called once when the store closes, after the last commit.
    fn close(&mut self) {}

    /// Makes `feature`'s tables if they are not there yet, before a write to them (SQLite
    /// makes them at their first use; PostgreSQL's schema has them from the start).
    fn make_tables(&mut self, _feature: Feature) -> Result<(), StoreError> {
        Ok(())
    }

    /// Whether `feature`'s tables are there: a read of them finds nothing while they are not.
    fn has_tables(&mut self, _feature: Feature) -> Result<bool, StoreError> {
        Ok(true)
    }

    /// Compiles `statements` now, so that their first use need not (SQLite keeps them in the
    /// connection's statement cache); one that fails to compile is left to fail where it is used.
    fn prepare_ahead(&mut self, _statements: &[&'static str]) {}

    /// The first row of a query's answer, if any.
    fn query_opt(
        &mut self,
        sql: &'static str,
        params: &[Param<'_>],
    ) -> Result<Option<Row>, StoreError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }
}
