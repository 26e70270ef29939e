//! The `approval_mail` table: the outbox of approval emails. A row with no person yet
//! (`person = ''`) says an email is owed for one pause of a run — asking its approvers when it
//! pauses (queued with the pause itself), a reminder or an escalation (queued by whichever
//! process did the follow-up). Only processes that send email read it: one addresses the owed
//! email (a row per person, from the people file it knows), then sends each person's, claiming
//! it for a while first so that two mailers do not both send it, and on a failure keeps the
//! error and when to try again. A row with `next_at` NULL is done: sent, or given up with its
//! reason in `last_error`.

use serde::{Deserialize, Serialize};

use super::schema::Feature;
use super::sql::{Db, Row, params};
use super::{StoreError, corrupt, to_i64};

/// An email owed or sent: the pause it is about, its kind and (once addressed) its person.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoredMail {
    pub run_id: String,
    pub pause: u64,
    /// "ask" | "remind" | "escalate"
    pub kind: String,
    /// Whom it is for; empty while not addressed yet.
    pub person: String,
    /// Where it goes (`None` for a person the people file gives no address).
    pub email: Option<String>,
    /// When it was owed (RFC 3339, UTC).
    pub queued_at: String,
    /// When it is to be (re)tried; `None` once done.
    pub next_at: Option<String>,
    /// Attempts at sending it so far.
    pub attempts: u32,
    /// When it was sent.
    pub sent_at: Option<String>,
    /// Why the last attempt failed, or why it was not sent.
    pub last_error: Option<String>,
}

/// Which email: one pause, one kind, one person (`""`: not addressed yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MailKey<'a> {
    pub run_id: &'a str,
    pub pause: u64,
    pub kind: &'a str,
    pub person: &'a str,
}

impl StoredMail {
    pub fn key(&self) -> MailKey<'_> {
        MailKey {
            run_id: &self.run_id,
            pause: self.pause,
            kind: &self.kind,
            person: &self.person,
        }
    }
}

/// The columns a [`StoredMail`] is read from (a macro: statements are `&'static str`).
macro_rules! columns {
    () => {
        "run_id, pause, kind, person, email, queued_at, next_at, attempts, sent_at, last_error"
    };
}

/// Owes an email of `kind` for pause `pause` of `run_id`, not addressed yet, due at `at`;
/// whether it was not owed already.
pub(super) fn queue(
    db: &mut dyn Db,
    run_id: &str,
    pause: u64,
    kind: &str,
    at: &str,
) -> Result<bool, StoreError> {
    let pause = to_i64("a pause's number", pause)?;
    db.make_tables(Feature::Mail)?;
    let queued = db.execute(
        "INSERT INTO approval_mail (run_id, pause, kind, person, queued_at, next_at, attempts) \
         VALUES (?1, ?2, ?3, '', ?4, ?4, 0) ON CONFLICT DO NOTHING",
        &params![run_id, pause, kind, at],
    )?;
    Ok(queued == 1)
}

/// Emails to address or (re)try at `now`, earliest first, at most `limit`.
pub(super) fn due(db: &mut dyn Db, now: &str, limit: u32) -> Result<Vec<StoredMail>, StoreError> {
    if !db.has_tables(Feature::Mail)? {
        return Ok(Vec::new());
    }
    let sql = concat!(
        "SELECT ",
        columns!(),
        " FROM approval_mail WHERE next_at IS NOT NULL AND next_at <= ?1 \
         ORDER BY next_at, run_id, pause, kind, person LIMIT ?2"
    );
    let rows = db.query(sql, &params![now, i64::from(limit)])?;
    rows.iter().map(read_row).collect()
}

/// Takes the email `key` for this caller until `until`, counting an attempt, if it is still due
/// at `seen` (what the caller read): whether this caller has it.
pub(super) fn claim(
    db: &mut dyn Db,
    key: &MailKey<'_>,
    seen: &str,
    until: &str,
) -> Result<bool, StoreError> {
    let pause = to_i64("a pause's number", key.pause)?;
    if !db.has_tables(Feature::Mail)? {
        return Ok(false);
    }
    let claimed = db.execute(
        "UPDATE approval_mail SET next_at = ?6, attempts = attempts + 1 \
         WHERE run_id = ?1 AND pause = ?2 AND kind = ?3 AND person = ?4 AND next_at = ?5",
        &params![key.run_id, pause, key.kind, key.person, seen, until],
    )?;
    Ok(claimed == 1)
}

/// Addresses the owed email `key` (person `""`): one email for each of `to` (person, address),
/// due at `at`, and the owed one done. Addressing the same again adds nobody twice.
pub(super) fn address(
    db: &mut dyn Db,
    key: &MailKey<'_>,
    to: &[(String, Option<String>)],
    at: &str,
) -> Result<(), StoreError> {
    let pause = to_i64("a pause's number", key.pause)?;
    db.make_tables(Feature::Mail)?;
    for (person, email) in to {
        // Nobody to send to: kept done, saying why, so that what was not sent shows.
        let (next_at, last_error) = match email {
            Some(_) => (Some(at), None),
            None => (None, Some("no email address in the people file")),
        };
        db.execute(
            "INSERT INTO approval_mail \
             (run_id, pause, kind, person, email, queued_at, next_at, attempts, last_error) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0, ?8) ON CONFLICT DO NOTHING",
            &params![
                key.run_id,
                pause,
                key.kind,
                person.as_str(),
                email.as_deref(),
                at,
                next_at,
                last_error
            ],
        )?;
    }
    finish(db, key, None, Some(at), None)
}

/// Ends the email `key`: sent at `sent_at`, or not sent for `error`; `retry_at` keeps it due
/// again then instead.
pub(super) fn finish(
    db: &mut dyn Db,
    key: &MailKey<'_>,
    retry_at: Option<&str>,
    sent_at: Option<&str>,
    error: Option<&str>,
) -> Result<(), StoreError> {
    let pause = to_i64("a pause's number", key.pause)?;
    if !db.has_tables(Feature::Mail)? {
        return Ok(());
    }
    db.execute(
        "UPDATE approval_mail SET next_at = ?5, sent_at = ?6, last_error = ?7 \
         WHERE run_id = ?1 AND pause = ?2 AND kind = ?3 AND person = ?4",
        &params![
            key.run_id, pause, key.kind, key.person, retry_at, sent_at, error
        ],
    )?;
    Ok(())
}

/// Every email of run `run_id`, by pause, time owed, kind and person.
pub(super) fn of_run(db: &mut dyn Db, run_id: &str) -> Result<Vec<StoredMail>, StoreError> {
    if !db.has_tables(Feature::Mail)? {
        return Ok(Vec::new());
    }
    let sql = concat!(
        "SELECT ",
        columns!(),
        " FROM approval_mail WHERE run_id = ?1 ORDER BY pause, queued_at, kind, person"
    );
    let rows = db.query(sql, &params![run_id])?;
    rows.iter().map(read_row).collect()
}

fn read_row(row: &Row) -> Result<StoredMail, StoreError> {
    let run_id = row.text("run_id")?;
    let pause = row.int("pause")?;
    let pause = u64::try_from(pause)
        .map_err(|_| corrupt(&run_id, format!("an email's pause {pause} is negative")))?;
    let attempts = row.int("attempts")?;
    let attempts = u32::try_from(attempts).map_err(|_| {
        corrupt(
            &run_id,
            format!("an email's attempts {attempts} is out of range"),
        )
    })?;
    Ok(StoredMail {
        pause,
        kind: row.text("kind")?,
        person: row.text("person")?,
        email: row.opt_text("email")?,
        queued_at: row.text("queued_at")?,
        next_at: row.opt_text("next_at")?,
        attempts,
        sent_at: row.opt_text("sent_at")?,
        last_error: row.opt_text("last_error")?,
        run_id,
    })
}
