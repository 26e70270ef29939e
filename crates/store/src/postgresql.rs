//! The run store in a PostgreSQL database (docs/team-servers.md): the [`Db`] over a `postgres`
//! client, its
//! schema and migrations.
//!
//! The client is `tokio-postgres` driven by a small runtime of its own (the `postgres` crate):
//! the store's API is synchronous and its writer is a thread, as with SQLite. That runtime cannot
//! be entered from a thread that drives async tasks, so whatever may run on one (connecting,
//! reads, closing) goes through [`off_runtime`].
//!
//! The schema is SQLite's (the same tables, columns and keys; integers are `BIGINT`, text keys
//! sort bytewise with `COLLATE "C"` as SQLite's do), with migrations of its own recorded in
//! `weft_schema`, applied under an advisory lock so that workers starting together migrate once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use postgres::{Client, Config, NoTls, Statement};

use super::StoreError;
use super::sql::{Cell, Db, Dialect, Param, Row};

/// How long connecting waits for the server when the URL does not say (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The advisory lock a migration holds (any number, the same in every Weft).
const MIGRATION_LOCK: i64 = 0x7765_6674; // "weft"

/// The schema, one migration per entry; migration `n` (1-based) brings `weft_schema.version`
/// from `n - 1` to `n`. A newer Weft adds migrations at the end and never edits earlier ones.
pub(super) const MIGRATIONS: &[&str] = &[
    MIGRATION_1,
    MIGRATION_2,
    MIGRATION_3,
    MIGRATION_4,
    MIGRATION_5,
    MIGRATION_6,
    MIGRATION_7,
    MIGRATION_8,
    MIGRATION_9,
    MIGRATION_10,
    MIGRATION_11,
];

/// Migration 1: SQLite's schema as its migration 8 left it.
const MIGRATION_1: &str = r#"
CREATE TABLE runs (
    id TEXT COLLATE "C" PRIMARY KEY,
    flow_name TEXT NOT NULL,
    flow_path TEXT,
    status TEXT NOT NULL,
    input_json TEXT NOT NULL,
    result_json TEXT,
    error TEXT,
    waiting_node_id TEXT COLLATE "C",
    waiting_input_json TEXT,
    waiting_source_node_id TEXT COLLATE "C",
    state_json TEXT NOT NULL DEFAULT '{}',
    started_at TEXT COLLATE "C" NOT NULL,
    updated_at TEXT COLLATE "C" NOT NULL,
    ended_at TEXT COLLATE "C",
    lease_owner TEXT,
    lease_until TEXT COLLATE "C",
    deadline TEXT COLLATE "C"
);
CREATE INDEX runs_started_at ON runs(started_at);
CREATE INDEX runs_status ON runs(status);
CREATE INDEX runs_deadline ON runs(deadline) WHERE deadline IS NOT NULL;
CREATE TABLE run_flows (
    run_id TEXT COLLATE "C" PRIMARY KEY REFERENCES runs(id),
    flow_json TEXT NOT NULL
);
CREATE TABLE events (
    run_id TEXT COLLATE "C" NOT NULL REFERENCES runs(id),
    seq BIGINT NOT NULL,
    ts TEXT NOT NULL,
    type TEXT NOT NULL,
    node_id TEXT,
    content TEXT NOT NULL,
    scope TEXT,
    item BIGINT,
    usage_json TEXT,
    from_node TEXT,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE node_outputs (
    run_id TEXT COLLATE "C" NOT NULL,
    node_id TEXT COLLATE "C" NOT NULL,
    output_json TEXT NOT NULL,
    visits BIGINT NOT NULL,
    approval_json TEXT,
    updated_at TEXT NOT NULL,
    input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    metadata_json TEXT,
    PRIMARY KEY (run_id, node_id)
);
CREATE TABLE queue (
    run_id TEXT COLLATE "C" NOT NULL,
    position BIGINT NOT NULL,
    node_id TEXT NOT NULL,
    input_json TEXT NOT NULL,
    source_node_id TEXT,
    visit BIGINT,
    PRIMARY KEY (run_id, position)
);
CREATE TABLE llm_calls (
    run_id TEXT COLLATE "C" NOT NULL,
    node_key TEXT COLLATE "C" NOT NULL,
    visit BIGINT NOT NULL,
    call BIGINT NOT NULL,
    request_hash TEXT NOT NULL,
    response_json TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    model TEXT,
    input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, node_key, visit, call)
);
"#;

/// Migration 2: who drives a run when not whichever process claims it (SQLite's migration 9).
const MIGRATION_2: &str = "ALTER TABLE runs ADD COLUMN host TEXT;";

/// Migration 3: events stored a batch to a row (SQLite's migration 10).
const MIGRATION_3: &str = r#"
CREATE TABLE event_batches (
    run_id TEXT COLLATE "C" NOT NULL REFERENCES runs(id),
    first_seq BIGINT NOT NULL,
    last_seq BIGINT NOT NULL,
    events_json TEXT NOT NULL,
    PRIMARY KEY (run_id, first_seq)
);
INSERT INTO event_batches (run_id, first_seq, last_seq, events_json)
SELECT run_id, seq, seq, json_build_array(json_strip_nulls(json_build_object(
    'seq', seq, 'ts', ts, 'type', type, 'nodeId', node_id, 'content', content,
    'scope', scope, 'item', item, 'from', from_node, 'usage', usage_json::json)))::text
FROM events;
DROP TABLE events;
"#;

/// Migration 4: MCP tool calls kept beside the LLM calls (SQLite's migration 12).
const MIGRATION_4: &str = "ALTER TABLE llm_calls ADD COLUMN tool TEXT;";

/// Migration 5: triggers and the schedules' claims (SQLite's migration 13).
const MIGRATION_5: &str = r#"
ALTER TABLE runs ADD COLUMN trigger_json TEXT;
CREATE TABLE schedule_claims (
    flow TEXT COLLATE "C" NOT NULL,
    schedule BIGINT NOT NULL,
    occurrence TEXT COLLATE "C" NOT NULL,
    claimed_by TEXT NOT NULL,
    claimed_at TEXT NOT NULL,
    PRIMARY KEY (flow, schedule, occurrence)
);
"#;

/// Migration 6: flow versions (SQLite's migration 14).
const MIGRATION_6: &str = r#"
CREATE TABLE flow_versions (
    hash TEXT COLLATE "C" PRIMARY KEY,
    flow_json TEXT NOT NULL,
    created_at TEXT COLLATE "C" NOT NULL
);
CREATE TABLE flow_version_uses (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    path TEXT COLLATE "C" NOT NULL,
    hash TEXT COLLATE "C" NOT NULL,
    at TEXT COLLATE "C" NOT NULL,
    kind TEXT NOT NULL,
    run_id TEXT COLLATE "C",
    saved_by TEXT
);
CREATE INDEX flow_version_uses_path ON flow_version_uses(path, at);
ALTER TABLE runs ADD COLUMN flow_version TEXT COLLATE "C";
"#;

/// Migration 7: a run's pinned outputs in a column of their own (SQLite's migration 15).
const MIGRATION_7: &str = "ALTER TABLE runs ADD COLUMN pins_json TEXT;";

/// Migration 8: a run's pinned outputs in a table of their own (SQLite's migration 16).
const MIGRATION_8: &str = r#"
CREATE TABLE run_pins (
    run_id TEXT COLLATE "C" PRIMARY KEY REFERENCES runs(id),
    pins_json TEXT NOT NULL
);
INSERT INTO run_pins (run_id, pins_json) SELECT id, pins_json FROM runs WHERE pins_json IS NOT NULL;
UPDATE runs SET pins_json = NULL WHERE pins_json IS NOT NULL;
"#;

/// Migration 9: approval decisions in a hash chain (SQLite's migration 17).
const MIGRATION_9: &str = r#"
CREATE TABLE decisions (
    seq BIGINT PRIMARY KEY,
    run_id TEXT COLLATE "C" NOT NULL,
    node_id TEXT COLLATE "C" NOT NULL,
    pause BIGINT NOT NULL,
    decision TEXT NOT NULL,
    decided_by TEXT COLLATE "C" NOT NULL,
    channel TEXT NOT NULL,
    note TEXT NOT NULL,
    fields_json TEXT NOT NULL,
    draft_edit_json TEXT,
    at TEXT COLLATE "C" NOT NULL,
    prev_hash TEXT COLLATE "C" NOT NULL,
    hash TEXT COLLATE "C" NOT NULL
);
CREATE UNIQUE INDEX decisions_answer ON decisions(run_id, pause, decided_by);
CREATE INDEX decisions_run ON decisions(run_id, seq);
CREATE TABLE decision_chain (
    id BIGINT PRIMARY KEY CHECK (id = 1),
    count BIGINT NOT NULL,
    last_hash TEXT COLLATE "C" NOT NULL
);
INSERT INTO decision_chain (id, count, last_hash)
VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');
"#;

/// Migration 10: approval follow-ups (SQLite's migration 18).
const MIGRATION_10: &str = r#"
ALTER TABLE runs ADD COLUMN follow_up_at TEXT COLLATE "C";
CREATE INDEX runs_follow_up_at ON runs(follow_up_at) WHERE follow_up_at IS NOT NULL;
CREATE TABLE approval_follow_ups (
    run_id TEXT COLLATE "C" NOT NULL,
    pause BIGINT NOT NULL,
    kind TEXT COLLATE "C" NOT NULL,
    at TEXT COLLATE "C" NOT NULL,
    to_json TEXT NOT NULL,
    PRIMARY KEY (run_id, pause, kind)
);
"#;

/// Migration 11: SQLite's migration 19 (the outbox of approval emails).
const MIGRATION_11: &str = r#"
CREATE TABLE approval_mail (
    run_id TEXT COLLATE "C" NOT NULL,
    pause BIGINT NOT NULL,
    kind TEXT COLLATE "C" NOT NULL,
    person TEXT COLLATE "C" NOT NULL,
    email TEXT,
    queued_at TEXT COLLATE "C" NOT NULL,
    next_at TEXT COLLATE "C",
    attempts BIGINT NOT NULL,
    sent_at TEXT COLLATE "C",
    last_error TEXT,
    PRIMARY KEY (run_id, pause, kind, person)
);
CREATE INDEX approval_mail_next ON approval_mail(next_at) WHERE next_at IS NOT NULL;
"#;

/// Whether `location` names a PostgreSQL database rather than a SQLite file.
pub fn is_postgres_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// A store location as it may be shown (messages, hints, the app): a PostgreSQL URL without its
/// password (in the user part or a `password=` option); a file path as it is.
pub fn redacted(url: &str) -> String {
    let mut shown = url.to_string();
    if let Some(scheme_end) = shown.find("://") {
        let rest = scheme_end + 3;
        let authority_end = shown[rest..]
            .find(['/', '?'])
            .map_or(shown.len(), |end| rest + end);
        if let Some(at) = shown[rest..authority_end].rfind('@') {
            let user_info = &shown[rest..rest + at];
            if let Some(colon) = user_info.find(':') {
                shown.replace_range(rest + colon + 1..rest + at, "***");
            }
        }
    }
    if let Some(start) = shown.find("password=") {
        let value = start + "password=".len();
        let end = shown[value..]
            .find('&')
            .map_or(shown.len(), |end| value + end);
        shown.replace_range(value..end, "***");
    }
    shown
}

/// What a PostgreSQL error says: the server's own message (and detail) for a refusal, where the
/// client's display would only say "db error".
pub(super) fn describe(error: &postgres::Error) -> String {
    match error.as_db_error() {
        Some(refusal) => {
            let mut text = format!("{}: {}", refusal.severity(), refusal.message());
            if let Some(detail) = refusal.detail() {
                text.push_str(&format!(" ({detail})"));
            }
            text
        }
        None => error.to_string(),
    }
}

/// Runs `work` where the client may block: on this thread, unless it drives async tasks.
pub(super) fn off_runtime<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_err() {
        return work();
    }
    std::thread::scope(|scope| {
        scope
            .spawn(work)
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// One connection to the store's database, with its prepared statements. A connection the
/// server closed (a restart, a network cut, an administrator) is opened again at the next
/// transaction or statement outside one; the writer applies a batch cut off that way again.
pub(super) struct PostgresDb {
    /// `Some` until dropped (dropping the client blocks on its runtime: see [`Drop`]).
    client: Option<Client>,
    statements: HashMap<&'static str, Statement>,
    config: Config,
    in_transaction: bool,
}

impl PostgresDb {
    /// Connects; the `writer` connection also brings the schema up to date. Errors are the
    /// messages [`StoreError::Open`] carries.
    pub(super) fn connect(url: &str, writer: bool) -> Result<PostgresDb, String> {
        let mut config: Config = url
            .parse()
            .map_err(|error| format!("not a PostgreSQL connection URL: {error}"))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("weft");
        }
        // As libpq does: the password may stay out of the URL (and out of shell history).
        if config.get_password().is_none()
            && let Some(password) = std::env::var_os("PGPASSWORD")
        {
            config.password(password.as_encoded_bytes());
        }
        let mut client = off_runtime(|| config.connect(NoTls))
            .map_err(|error| format!("cannot connect: {}", describe(&error)))?;
        if writer {
            off_runtime(|| migrate(&mut client))?;
        }
        Ok(PostgresDb {
            client: Some(client),
            statements: HashMap::new(),
            config,
            in_transaction: false,
        })
    }

    fn client(&mut self) -> &mut Client {
        self.client
            .as_mut()
            .expect("the client is only taken when the connection is dropped")
    }

    /// Connects again when the server closed the connection, unless a transaction was going
    /// on it (that transaction is lost; its statements fail until the caller rolls back).
    fn reopen_if_closed(&mut self) -> Result<(), StoreError> {
        if self.in_transaction || !self.client().is_closed() {
            return Ok(());
        }
        tracing::warn!("the run store's connection to PostgreSQL was closed; connecting again");
        let client = self.config.connect(NoTls)?;
        if let Some(closed) = self.client.replace(client) {
            drop(closed);
        }
        self.statements.clear();
        Ok(())
    }

    /// `work`, and when it failed because the server had closed the connection (outside a
    /// transaction, so nothing of it was applied), `work` again on a new connection.
    fn once_more_if_closed<T>(
        &mut self,
        mut work: impl FnMut(&mut PostgresDb) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.reopen_if_closed()?;
        match work(self) {
            Err(_) if !self.in_transaction && self.client().is_closed() => {
                self.reopen_if_closed()?;
                work(self)
            }
            done => done,
        }
    }

    fn statement(&mut self, sql: &'static str) -> Result<Statement, StoreError> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client().prepare(&numbered(sql))?;
        self.statements.insert(sql, statement.clone());
        Ok(statement)
    }
}

impl Drop for PostgresDb {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            off_runtime(move || drop(client));
        }
    }
}

/// The table modules' `?1` parameters as PostgreSQL's `$1`.
fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(char) = chars.next() {
        if char == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(char);
        }
    }
    out
}

impl ToSql for Param<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match *self {
            Param::Text(Some(text)) => text.to_sql(ty, out),
            Param::Int(Some(value)) if *ty == Type::INT4 => i32::try_from(value)?.to_sql(ty, out),
            Param::Int(Some(value)) => value.to_sql(ty, out),
            Param::Text(None) | Param::Int(None) => Ok(IsNull::Yes),
        }
    }

    fn accepts(ty: &Type) -> bool {
        <&str as ToSql>::accepts(ty) || *ty == Type::INT8 || *ty == Type::INT4
    }

    to_sql_checked!();
}

fn bound<'a>(params: &'a [Param<'a>]) -> Vec<&'a (dyn ToSql + Sync)> {
    params
        .iter()
        .map(|param| param as &(dyn ToSql + Sync))
        .collect()
}

impl Db for PostgresDb {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn execute(&mut self, sql: &'static str, params: &[Param<'_>]) -> Result<u64, StoreError> {
        self.once_more_if_closed(|db| {
            let statement = db.statement(sql)?;
            Ok(db.client().execute(&statement, &bound(params))?)
        })
    }

    fn query(&mut self, sql: &'static str, params: &[Param<'_>]) -> Result<Vec<Row>, StoreError> {
        let (statement, rows) = self.once_more_if_closed(|db| {
            let statement = db.statement(sql)?;
            let rows = db.client().query(&statement, &bound(params))?;
            Ok((statement, rows))
        })?;
        let columns: Arc<[String]> = statement
            .columns()
            .iter()
            .map(|column| column.name().to_string())
            .collect();
        rows.iter()
            .map(|row| {
                let cells = statement
                    .columns()
                    .iter()
                    .enumerate()
                    .map(|(index, column)| cell(row, index, column.type_(), column.name()))
                    .collect::<Result<Vec<Cell>, StoreError>>()?;
                Ok(Row {
                    columns: columns.clone(),
                    cells,
                })
            })
            .collect()
    }

    fn batch(&mut self, sql: &str) -> Result<(), StoreError> {
        Ok(self.client().batch_execute(sql)?)
    }

    fn connection_lost(&mut self) -> bool {
        self.client().is_closed()
    }

    fn begin(&mut self) -> Result<(), StoreError> {
        self.in_transaction = false;
        self.once_more_if_closed(|db| db.batch("BEGIN"))?;
        self.in_transaction = true;
        Ok(())
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        self.in_transaction = false;
        self.batch("COMMIT")
    }

    fn rollback(&mut self) -> Result<(), StoreError> {
        self.in_transaction = false;
        self.batch("ROLLBACK")
    }
}

fn cell(row: &postgres::Row, index: usize, ty: &Type, name: &str) -> Result<Cell, StoreError> {
    let value = if *ty == Type::INT8 {
        row.try_get::<_, Option<i64>>(index)?.map(Cell::Int)
    } else if *ty == Type::INT4 {
        row.try_get::<_, Option<i32>>(index)?
            .map(|value| Cell::Int(value.into()))
    } else if <&str as ToSql>::accepts(ty) {
        row.try_get::<_, Option<String>>(index)?.map(Cell::Text)
    } else {
        return Err(StoreError::Column {
            column: name.to_string(),
            message: format!("unexpected type {ty}"),
        });
    };
    Ok(value.unwrap_or(Cell::Null))
}

/// Applies the migrations the database has not had yet, in one transaction under an advisory
/// lock (a worker starting at the same time waits, then finds the schema up to date).
fn migrate(client: &mut Client) -> Result<(), String> {
    let failed = |error: postgres::Error| format!("schema migration failed: {}", describe(&error));
    let latest = MIGRATIONS.len();
    let mut tx = client.transaction().map_err(failed)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(failed)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS weft_schema (version BIGINT NOT NULL)")
        .map_err(failed)?;
    let current: i64 = match tx
        .query_opt("SELECT version FROM weft_schema", &[])
        .map_err(failed)?
    {
        Some(row) => row.get(0),
        None => {
            tx.execute("INSERT INTO weft_schema (version) VALUES (0)", &[])
                .map_err(failed)?;
            0
        }
    };
    let current = usize::try_from(current)
        .map_err(|_| format!("the schema version {current} is not valid"))?;
    if current > latest {
        return Err(format!(
            "it was made by a newer version of Weft (schema version {current}; this version \
             knows up to {latest})"
        ));
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        let version = index + 1;
        tx.batch_execute(sql)
            .and_then(|()| {
                tx.execute("UPDATE weft_schema SET version = $1", &[&(version as i64)])
                    .map(|_| ())
            })
            .map_err(|error| format!("schema migration {version} failed: {}", describe(&error)))?;
    }
    tx.commit().map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_their_password() {
        assert_eq!(
            redacted("postgres://weft:s3cret@db.example:5432/runs"),
            "postgres://weft:***@db.example:5432/runs"
        );
        assert_eq!(
            redacted("postgresql://db/runs?user=weft&password=s3cret&sslmode=disable"),
            "postgresql://db/runs?user=weft&password=***&sslmode=disable"
        );
        assert_eq!(
            redacted("postgres://weft@db/runs"),
            "postgres://weft@db/runs"
        );
    }

    #[test]
    fn parameters_are_numbered_the_postgresql_way() {
        assert_eq!(
            numbered("UPDATE t SET a = ?2 WHERE id = ?1 AND b IS NOT DISTINCT FROM ?10"),
            "UPDATE t SET a = $2 WHERE id = $1 AND b IS NOT DISTINCT FROM $10"
        );
    }
}
