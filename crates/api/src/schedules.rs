//! The schedules of the flows in a folder (`settings.schedules`), as `weft schedules` lists
//! them and as servers start them.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Serialize;
use weft_flow::Flow;
use weft_schedule::Schedule;

/// A flow of the folder that has schedules, or whose schedules cannot be used.
#[derive(Debug, Clone)]
pub struct ScheduledFlow {
    /// The file's name without `.json` (`triage`), what names the flow in the store's claims.
    pub name: String,
    pub path: PathBuf,
    pub schedules: Result<Vec<Schedule>, Vec<String>>,
}

/// Every flow file of `dir` (not its tests or pins) that has `settings.schedules`, in name
/// order. A file that does not load is left out: `weft validate` names it.
pub fn scheduled_flows(dir: &Path) -> std::io::Result<Vec<ScheduledFlow>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)?.flatten() {
        let path = entry.path();
        let Some(name) = path
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.strip_suffix(".json"))
        else {
            continue;
        };
        if name.ends_with(".tests") || name.ends_with(".pins") {
            continue;
        }
        let Ok(flow) = Flow::load(&path) else {
            continue;
        };
        if !flow.settings.contains_key("schedules") {
            continue;
        }
        found.push(ScheduledFlow {
            name: name.to_string(),
            schedules: weft_schedule::parse_schedules(flow.settings.get("schedules")),
            path,
        });
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

/// One schedule's next occurrences, as `weft schedules --json` prints them.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Upcoming {
    pub flow: String,
    /// Its place in the flow's `settings.schedules`.
    pub schedule: usize,
    pub cron: String,
    pub timezone: String,
    /// The expression in words.
    pub description: String,
    /// RFC 3339, in the schedule's time zone.
    pub next: Vec<String>,
}

/// The next `count` occurrences after `now` of each schedule of `flows`.
pub fn upcoming(flows: &[ScheduledFlow], now: DateTime<Utc>, count: usize) -> Vec<Upcoming> {
    flows
        .iter()
        .filter_map(|flow| Some((flow, flow.schedules.as_ref().ok()?)))
        .flat_map(|(flow, schedules)| {
            schedules.iter().map(move |schedule| Upcoming {
                flow: flow.name.clone(),
                schedule: schedule.index,
                cron: schedule.def.cron.clone(),
                timezone: schedule.zone().name().to_string(),
                description: schedule.describe(),
                next: schedule
                    .upcoming(now, count)
                    .into_iter()
                    .map(|at| at.with_timezone(&schedule.zone()).to_rfc3339())
                    .collect(),
            })
        })
        .collect()
}
