//! The schedules of the flows in a folder (`settings.schedules`), as `weft schedules` lists
//! them and as servers start them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde::Serialize;
use weft_flow::Flow;
use weft_nodes::CheckedFlow;
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
    for (name, path) in weft_flow::flow_files(dir)? {
        let Ok(flow) = Flow::load(&path) else {
            continue;
        };
        if !flow.settings.contains_key("schedules") {
            continue;
        }
        found.push(ScheduledFlow {
            name,
            schedules: weft_schedule::parse_schedules(flow.settings.get("schedules")),
            path,
        });
    }
    Ok(found)
}

/// One schedule's next occurrences, as `weft schedules --json` prints them.
#[cfg_attr(feature = "specta", derive(specta::Type))]
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
    /// The run's input it gives (a text, or JSON as text); `None`: the start node's.
    pub input: Option<String>,
}

/// The input a run of `schedule` starts with: its `input`, a text as it is and anything else
/// as JSON.
fn input_of(schedule: &Schedule) -> Option<String> {
    schedule.def.input.as_ref().map(|input| match input {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    })
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
                input: input_of(schedule),
            })
        })
        .collect()
}

/// A run a schedule calls for, claimed and checked: what a [`StartScheduled`] starts.
pub struct ScheduledRun {
    /// The flow's name in its folder (`triage`).
    pub flow: String,
    pub path: PathBuf,
    /// The flow, validated.
    pub checked: CheckedFlow,
    /// The schedule's `input`: a string as it is, anything else as JSON.
    pub input: Option<String>,
    /// `schedule` with its occurrence and place.
    pub trigger: weft_store::Trigger,
}

/// How a host starts the runs its schedules call for; returns the run's id. `weft serve` starts
/// them in its own engine ([`LocalStart`]); a `weft restate` worker hands them to Restate, which
/// runs each as a durable workflow.
pub trait StartScheduled: Send + Sync {
    fn start(&self, run: ScheduledRun) -> BoxFuture<'_, Result<String, String>>;
}

/// Starts scheduled runs in this process's engine, their events to `on_event`.
pub struct LocalStart {
    pub weft: crate::Weft,
    pub on_event: Option<weft_event::EventListener>,
}

impl StartScheduled for LocalStart {
    fn start(&self, run: ScheduledRun) -> BoxFuture<'_, Result<String, String>> {
        async move {
            let request = crate::StartRequest {
                input: run.input,
                flow_path: Some(run.path),
                on_event: self.on_event.clone(),
                trigger: Some(run.trigger),
                ..crate::StartRequest::default()
            };
            let handle = self
                .weft
                .start(run.checked, request)
                .await
                .map_err(|error| error.to_string())?;
            Ok(handle.run_id)
        }
        .boxed()
    }
}

/// The next `count` occurrences after `now` of each schedule of `flow` (named `name`), as a
/// flow being edited shows them; none when its schedules do not parse (validation says why).
pub fn upcoming_of(name: &str, flow: &Flow, now: DateTime<Utc>, count: usize) -> Vec<Upcoming> {
    if !flow.settings.contains_key("schedules") {
        return Vec::new();
    }
    let scheduled = ScheduledFlow {
        name: name.to_string(),
        path: PathBuf::new(),
        schedules: weft_schedule::parse_schedules(flow.settings.get("schedules")),
    };
    upcoming(std::slice::from_ref(&scheduled), now, count)
}

/// Starts the runs a folder's schedules call for, as a server does: each occurrence is claimed
/// in the store first, so several servers on one store start it once. [`Schedules::tick`] is
/// one look at the clock (a test gives the time); [`Weft::start_schedules`] calls it as time
/// passes.
pub struct Schedules {
    weft: crate::Weft,
    dir: PathBuf,
    starter: Arc<dyn StartScheduled>,
    /// Occurrences up to here were looked at by this process.
    looked_until: std::sync::Mutex<Option<DateTime<Utc>>>,
}

/// What a look at the schedules did: the runs it started, `(flow, occurrence, run id)`.
pub type Started = Vec<(String, DateTime<Utc>, String)>;

/// How long a server sleeps at most between looks: an edited flow's schedules are read again
/// by then.
const LOOK_AT_LEAST_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// How long after an occurrence a server looks, so that it counts as come.
const JUST_PAST: std::time::Duration = std::time::Duration::from_millis(5);

impl Schedules {
    /// The schedules of `dir`, their runs started in `weft`'s engine.
    pub fn new(
        weft: crate::Weft,
        dir: PathBuf,
        on_event: Option<weft_event::EventListener>,
    ) -> Schedules {
        let starter = Arc::new(LocalStart {
            weft: weft.clone(),
            on_event,
        });
        Schedules::started_by(weft, dir, starter)
    }

    /// The schedules of `dir`, claimed in `weft`'s store and their runs started by `starter`.
    pub fn started_by(
        weft: crate::Weft,
        dir: PathBuf,
        starter: Arc<dyn StartScheduled>,
    ) -> Schedules {
        Schedules {
            weft,
            dir,
            starter,
            looked_until: std::sync::Mutex::new(None),
        }
    }

    /// The first look of a process: an occurrence missed since the latest one any server
    /// claimed is started once (`missed: once`), or not (`skip`). A schedule never claimed
    /// has missed nothing.
    pub async fn catch_up(&self, now: DateTime<Utc>) -> Started {
        let mut started = Vec::new();
        for flow in self.flows() {
            let Ok(schedules) = &flow.schedules else {
                continue;
            };
            for schedule in schedules {
                let index = schedule.index as u64;
                let name = flow.name.clone();
                let latest = crate::hosts::blocking(self.weft.store(), move |store| {
                    store.latest_claim(&name, index)
                })
                .await;
                let latest = match latest {
                    Ok(Some(latest)) => latest,
                    Ok(None) => continue,
                    Err(error) => {
                        tracing::warn!("the schedules of {} could not be read: {error}", flow.name);
                        continue;
                    }
                };
                let Ok(since) = DateTime::parse_from_rfc3339(&latest) else {
                    continue;
                };
                let missed = schedule.latest_missed(since.with_timezone(&Utc), now);
                match (missed, schedule.def.missed) {
                    (Some(occurrence), weft_schedule::Missed::Once) => {
                        if let Some(run) = self.start(&flow, schedule, occurrence).await {
                            started.push(run);
                        }
                    }
                    (Some(occurrence), weft_schedule::Missed::Skip) => tracing::info!(
                        "{}[{}]: the occurrences missed up to {occurrence} are skipped (missed: skip)",
                        flow.name,
                        schedule.index
                    ),
                    (None, _) => {}
                }
            }
        }
        *self
            .looked_until
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(now);
        started
    }

    /// Starts the latest occurrence of each schedule that came since the last look (and at or
    /// before `now`), unless another server claimed it. Returns when the next one comes.
    pub async fn tick(&self, now: DateTime<Utc>) -> (Started, Option<DateTime<Utc>>) {
        let since = self
            .looked_until
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .replace(now)
            .unwrap_or(now);
        let mut started = Vec::new();
        let mut next: Option<DateTime<Utc>> = None;
        for flow in self.flows() {
            let Ok(schedules) = &flow.schedules else {
                continue;
            };
            for schedule in schedules {
                if let Some(occurrence) = schedule.latest_missed(since, now)
                    && let Some(run) = self.start(&flow, schedule, occurrence).await
                {
                    started.push(run);
                }
                if let Some(upcoming) = schedule.next_after(now) {
                    next = Some(next.map_or(upcoming, |next| next.min(upcoming)));
                }
            }
        }
        (started, next)
    }

    fn flows(&self) -> Vec<ScheduledFlow> {
        match scheduled_flows(&self.dir) {
            Ok(flows) => flows,
            Err(error) => {
                tracing::warn!(
                    "the flows of {} could not be read: {error}",
                    self.dir.display()
                );
                Vec::new()
            }
        }
    }

    /// Claims `occurrence` and, when this process is the first, starts the run.
    async fn start(
        &self,
        flow: &ScheduledFlow,
        schedule: &Schedule,
        occurrence: DateTime<Utc>,
    ) -> Option<(String, DateTime<Utc>, String)> {
        let at = occurrence.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let (name, index, claimed_at) = (flow.name.clone(), schedule.index as u64, at.clone());
        let claimed = crate::hosts::blocking(self.weft.store(), move |store| {
            store.claim_occurrence(&name, index, &claimed_at, &Utc::now().to_rfc3339())
        })
        .await;
        match claimed {
            Ok(true) => {}
            Ok(false) => return None,
            Err(error) => {
                tracing::warn!(
                    "{}[{}] at {at} could not be claimed: {error}",
                    flow.name,
                    schedule.index
                );
                return None;
            }
        }
        let started = self.run(flow, schedule, &at).await;
        match started {
            Ok(run_id) => {
                tracing::info!("{}[{}] at {at}: run {run_id}", flow.name, schedule.index);
                Some((flow.name.clone(), occurrence, run_id))
            }
            Err(error) => {
                tracing::warn!(
                    "{}[{}] at {at} could not start: {error}",
                    flow.name,
                    schedule.index
                );
                None
            }
        }
    }

    async fn run(
        &self,
        flow: &ScheduledFlow,
        schedule: &Schedule,
        at: &str,
    ) -> Result<String, String> {
        let loaded = Flow::load(&flow.path).map_err(|error| error.to_string())?;
        let checked = weft_nodes::check_for_run(
            loaded,
            Some(&flow.path),
            self.weft.engine().llm().settings(),
        )
        .map_err(|problems| {
            problems
                .iter()
                .filter(|problem| problem.is_error())
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        })?;
        let input = input_of(schedule);
        self.starter
            .start(ScheduledRun {
                flow: flow.name.clone(),
                path: flow.path.clone(),
                checked,
                input,
                trigger: weft_store::Trigger {
                    kind: weft_store::TriggerKind::Schedule,
                    occurrence: Some(at.to_string()),
                    schedule: Some(schedule.index as u64),
                    by: None,
                },
            })
            .await
    }
}

/// A folder's schedules, running in the background (see [`crate::Weft::start_schedules`]).
pub struct ScheduleTask {
    stop: tokio_util::sync::CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl crate::Weft {
    /// Starts the schedules of the flows in `dir` on the current tokio runtime: missed
    /// occurrences first, then each as it comes.
    pub fn start_schedules(
        &self,
        dir: PathBuf,
        on_event: Option<weft_event::EventListener>,
    ) -> ScheduleTask {
        Schedules::new(self.clone(), dir, on_event).spawn()
    }
}

impl Schedules {
    /// Runs these schedules in the background on the current tokio runtime: missed
    /// occurrences first, then each as it comes.
    pub fn spawn(self) -> ScheduleTask {
        let schedules = self;
        let stop = tokio_util::sync::CancellationToken::new();
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            schedules.catch_up(Utc::now()).await;
            while !stopped.is_cancelled() {
                let (_, next) = schedules.tick(Utc::now()).await;
                // With no schedule in the folder, the next look is the one that reads an
                // edited flow's; one due already (negative wait) is looked at now.
                let wait = next.map_or(LOOK_AT_LEAST_EVERY, |next| {
                    (next - Utc::now())
                        .to_std()
                        .unwrap_or_default()
                        .min(LOOK_AT_LEAST_EVERY)
                }) + JUST_PAST;
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = stopped.cancelled() => {}
                }
            }
        });
        ScheduleTask {
            stop,
            task: Some(task),
        }
    }
}

impl ScheduleTask {
    /// Stops starting runs (the runs started go on).
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}
