//! A flow's schedules (`settings.schedules`): when each starts a run. A schedule is a cron
//! expression (five fields, or six with seconds first; `@daily` and the like too) read in a
//! time zone of the IANA database, with the input its runs get and what to do about
//! occurrences missed while no server ran (`missed`: `once`, the default, or `skip`).
//!
//! Parsing and the calendar are the `croner` crate's (POSIX cron, with its documented rules for
//! daylight-saving changes: a time that falls in a spring-forward gap runs at the first time
//! after it, and a time that a fall-back repeats runs once, at its first) and `chrono-tz`'s.
//! Nothing here starts runs: the hosts do, claiming each occurrence in the run store.

use std::str::FromStr;

use chrono::{DateTime, SubsecRound, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One schedule as the flow file writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleDef {
    pub cron: String,
    /// An IANA time zone (`Europe/Paris`); UTC when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// The run's input; the start node's `initialInput` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    #[serde(default)]
    pub missed: Missed,
}

/// What a server does about occurrences that passed while none ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Missed {
    /// Starts one run for them (the latest), when a server starts.
    #[default]
    Once,
    /// Starts none.
    Skip,
}

/// A schedule ready to tell its occurrences.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub def: ScheduleDef,
    /// Its place in `settings.schedules`: with the flow, what names it in the store's claims.
    pub index: usize,
    cron: Cron,
    zone: Tz,
}

/// Reads `settings.schedules` (absent: none). Every problem is named by its path
/// (`settings.schedules[0].cron: …`).
pub fn parse_schedules(value: Option<&Value>) -> Result<Vec<Schedule>, Vec<String>> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let Some(list) = value.as_array() else {
        return Err(vec![
            "settings.schedules must be a list of schedules, as [{\"cron\": \"0 9 * * 1-5\", \"timezone\": \"Europe/Paris\"}]".into(),
        ]);
    };
    let mut schedules = Vec::new();
    let mut problems = Vec::new();
    for (index, item) in list.iter().enumerate() {
        let path = format!("settings.schedules[{index}]");
        let def: ScheduleDef = match serde_json::from_value(item.clone()) {
            Ok(def) => def,
            Err(error) => {
                problems.push(format!("{path}: {error}"));
                continue;
            }
        };
        match Schedule::new(def, index) {
            Ok(schedule) => schedules.push(schedule),
            Err(problem) => problems.push(format!("{path}.{problem}")),
        }
    }
    if problems.is_empty() {
        Ok(schedules)
    } else {
        Err(problems)
    }
}

impl Schedule {
    /// `def` checked: its cron expression and its time zone (the problem starts with the
    /// field's name).
    pub fn new(def: ScheduleDef, index: usize) -> Result<Schedule, String> {
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .build()
            .parse(def.cron.trim())
            .map_err(|error| format!("cron: `{}` is not a cron expression: {error}", def.cron))?;
        let zone = match &def.timezone {
            None => Tz::UTC,
            Some(name) => Tz::from_str(name.trim()).map_err(|_| {
                format!("timezone: `{name}` is not a time zone of the IANA database (like Europe/Paris or America/New_York)")
            })?,
        };
        // An expression that never matches (the 31st of February) is refused now, not found
        // out by a server.
        let schedule = Schedule {
            def,
            index,
            cron,
            zone,
        };
        if schedule.next_after(Utc::now()).is_none() {
            return Err(format!(
                "cron: `{}` never comes (no date matches it)",
                schedule.def.cron
            ));
        }
        Ok(schedule)
    }

    /// The first occurrence strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // Occurrences fall on whole seconds; the search would keep `after`'s fraction.
        let local = after.trunc_subsecs(0).with_timezone(&self.zone);
        self.cron
            .find_next_occurrence(&local, false)
            .ok()
            .map(|next| next.with_timezone(&Utc))
    }

    /// The next `count` occurrences after `after`.
    pub fn upcoming(&self, after: DateTime<Utc>, count: usize) -> Vec<DateTime<Utc>> {
        let mut found = Vec::with_capacity(count);
        let mut from = after;
        while found.len() < count {
            let Some(next) = self.next_after(from) else {
                break;
            };
            found.push(next);
            from = next;
        }
        found
    }

    /// The latest occurrence after `since` and at or before `now`: what a server starts for
    /// the occurrences missed in between (with `missed: once`).
    pub fn latest_missed(&self, since: DateTime<Utc>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = now.trunc_subsecs(0).with_timezone(&self.zone);
        let latest = self
            .cron
            .find_previous_occurrence(&local, true)
            .ok()?
            .with_timezone(&Utc);
        (latest > since).then_some(latest)
    }

    /// The time zone, as the flow names it (`UTC` when it names none).
    pub fn zone(&self) -> Tz {
        self.zone
    }

    /// The expression in words (`At 09:00 on Monday through Friday`).
    pub fn describe(&self) -> String {
        self.cron.describe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    fn one(value: Value) -> Schedule {
        parse_schedules(Some(&json!([value])))
            .expect("valid")
            .remove(0)
    }

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("a time")
            .with_timezone(&Utc)
    }

    #[test]
    fn bad_expressions_and_zones_are_named_by_their_field() {
        let problems = parse_schedules(Some(&json!([
            {"cron": "0 9 * * 1-5"},
            {"cron": "every morning"},
            {"cron": "0 9 * * *", "timezone": "Mars/Olympus"},
            {"cron": "0 9 * * *", "missed": "twice"},
            {"cron": "0 0 31 2 *"},
        ])))
        .expect_err("invalid");
        assert!(
            problems[0].starts_with(
                "settings.schedules[1].cron: `every morning` is not a cron expression"
            ),
            "{problems:?}"
        );
        assert!(
            problems[1]
                .starts_with("settings.schedules[2].timezone: `Mars/Olympus` is not a time zone"),
            "{problems:?}"
        );
        assert!(
            problems[2].starts_with("settings.schedules[3]: unknown variant `twice`"),
            "{problems:?}"
        );
        assert!(problems[3].contains("never comes"), "{problems:?}");
        assert_eq!(problems.len(), 4);
        assert!(parse_schedules(Some(&json!({"cron": "x"}))).is_err());
    }

    #[test]
    fn occurrences_follow_the_time_zone_and_seconds_are_optional() {
        let paris = one(json!({"cron": "0 9 * * 1-5", "timezone": "Europe/Paris"}));
        // Friday 2026-11-27 10:00 UTC is 11:00 in Paris: the next is Monday 09:00 Paris (08:00 UTC).
        assert_eq!(
            paris.upcoming(utc("2026-11-27T10:00:00Z"), 2),
            [utc("2026-11-30T08:00:00Z"), utc("2026-12-01T08:00:00Z")]
        );
        let seconds = one(json!({"cron": "*/5 * * * * *"}));
        assert_eq!(
            seconds.next_after(utc("2026-11-27T10:00:02.75Z")),
            Some(utc("2026-11-27T10:00:05Z")),
            "on the second, whatever the fraction of the time asked from"
        );
        assert!(paris.describe().contains("09:00"), "{}", paris.describe());
    }

    #[test]
    fn a_spring_forward_day_runs_a_time_in_the_gap_once_right_after_it() {
        // Europe/Paris, 2026-03-29: 02:00 becomes 03:00. 02:30 does not exist that day.
        let nightly = one(json!({"cron": "30 2 * * *", "timezone": "Europe/Paris"}));
        let runs = nightly.upcoming(utc("2026-03-28T12:00:00Z"), 2);
        let paris = |run: &DateTime<Utc>| run.with_timezone(&chrono_tz::Europe::Paris).to_rfc3339();
        assert_eq!(paris(&runs[0]), "2026-03-29T03:00:00+02:00");
        assert_eq!(paris(&runs[1]), "2026-03-30T02:30:00+02:00");
    }

    #[test]
    fn a_fall_back_day_runs_a_repeated_time_once() {
        // Europe/Paris, 2026-10-25: 03:00 goes back to 02:00, so 02:30 happens twice.
        let nightly = one(json!({"cron": "30 2 * * *", "timezone": "Europe/Paris"}));
        let runs = nightly.upcoming(utc("2026-10-24T12:00:00Z"), 2);
        assert_eq!(
            runs[0],
            chrono_tz::Europe::Paris
                .with_ymd_and_hms(2026, 10, 25, 2, 30, 0)
                .earliest()
                .expect("a time")
                .with_timezone(&Utc)
        );
        assert_eq!(
            runs[0],
            utc("2026-10-25T00:30:00Z"),
            "the first 02:30 (summer time)"
        );
        assert_eq!(
            runs[1],
            utc("2026-10-26T01:30:00Z"),
            "then the next day, not the repeated hour"
        );
    }

    #[test]
    fn the_latest_missed_occurrence_is_the_one_started_once() {
        let hourly = one(json!({"cron": "0 * * * *"}));
        assert_eq!(
            hourly.latest_missed(utc("2026-11-27T06:00:00Z"), utc("2026-11-27T09:30:00Z")),
            Some(utc("2026-11-27T09:00:00Z"))
        );
        assert_eq!(
            hourly.latest_missed(utc("2026-11-27T09:00:00Z"), utc("2026-11-27T09:30:00Z")),
            None,
            "nothing missed since the last one"
        );
    }
}
