//! The crash harness: the real `weft` is killed with SIGKILL at many moments (right after it
//! printed a chosen event, and after seeded random delays) while it runs a chain, a fan-out, a
//! flow up to its approval, and the resume of that approval. After every kill it checks what a
//! user would rely on:
//!
//! - the next `weft` start finds no run left `running` (the dead process's runs read
//!   `interrupted`, or `paused` when the pause was committed);
//! - every event the killed process printed is in the store (printed means committed);
//! - a paused run resumes, and an interrupted run completes with `weft resume --retry` without
//!   sending the scripted server again a request of a step that had finished;
//! - each run ends `completed` with the same result as a run that was never killed.
//!
//! The harness runs on SQLite and, with fewer kills, on PostgreSQL. `WEFT_CRASH_CASES` sets how
//! many kills (default 56 and 16); `WEFT_CRASH_SEED` the seed of the random
//! moments (default fixed, so a failure reproduces). The figures are printed at the end (run
//! with `--nocapture` to see them).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{Ran, Sandbox, crashed, edge, node, wait_within};
use serde_json::{Value, json};
use weft_scripted_llm::{Reply, Rule, Script, ScriptedLlm};

/// Far above what any step of this takes: reaching it means a hang.
const HANG: Duration = Duration::from_secs(60);

/// The shapes of run the harness kills.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Shape {
    /// start → a → b → c → out.
    Chain,
    /// start → x, y, z (concurrent agents) → join → out.
    FanOut,
    /// start → a → review (approval) → b → out, killed while running up to the approval.
    Pause,
    /// The same flow, paused, then killed while `weft resume --decision approve` runs it on.
    Resume,
}

const SHAPES: [Shape; 4] = [Shape::Chain, Shape::FanOut, Shape::Pause, Shape::Resume];

/// When the harness kills the process.
#[derive(Clone, Debug)]
enum Moment {
    /// Right after reading the `nth` (from 1) printed event of this type.
    AfterEvent(&'static str, usize),
    /// This long after the process started.
    After(Duration),
}

fn agent(id: &str) -> Value {
    node(
        id,
        "agent",
        json!({ "model": "m", "userPrompt": format!("[{{{{ initial }}}}/{id}] {{{{ PREVIOUS_OUTPUT }}}}") }),
    )
}

fn flow_of(shape: Shape, initial: &str) -> Value {
    let start = node("start", "start", json!({ "initialInput": initial }));
    let out = node("out", "output", json!({}));
    let (nodes, edges) = match shape {
        Shape::Chain => (
            vec![start, agent("a"), agent("b"), agent("c"), out],
            vec![
                edge("e1", "start", "a", None),
                edge("e2", "a", "b", None),
                edge("e3", "b", "c", None),
                edge("e4", "c", "out", None),
            ],
        ),
        Shape::FanOut => (
            vec![
                start,
                agent("x"),
                agent("y"),
                agent("z"),
                node("join", "join", json!({})),
                out,
            ],
            vec![
                edge("e1", "start", "x", None),
                edge("e2", "start", "y", None),
                edge("e3", "start", "z", None),
                edge("e4", "x", "join", None),
                edge("e5", "y", "join", None),
                edge("e6", "z", "join", None),
                edge("e7", "join", "out", None),
            ],
        ),
        Shape::Pause | Shape::Resume => (
            vec![
                start,
                agent("a"),
                node("review", "approval", json!({ "message": "Go on?" })),
                agent("b"),
                out,
            ],
            vec![
                edge("e1", "start", "a", None),
                edge("e2", "a", "review", None),
                edge("e3", "review", "b", Some("approve")),
                edge("e4", "b", "out", None),
            ],
        ),
    };
    json!({ "version": 1, "name": format!("{shape:?}"), "nodes": nodes, "edges": edges })
}

/// The moments of kill `case`: the chosen events in turn, then seeded random delays within
/// the time `lasts` an unkilled process of the shape took.
fn moment_of(shape: Shape, case: usize, lasts: Duration, random: &mut Lcg) -> Moment {
    let chosen: &[(&'static str, usize)] = match shape {
        Shape::Chain => &[
            ("run_start", 1),
            ("step_start", 2),
            ("llm_delta", 1),
            ("llm_delta", 5),
            ("step_end", 2),
            ("step_end", 3),
            ("llm_response", 2),
        ],
        Shape::FanOut => &[
            ("run_start", 1),
            ("step_start", 3),
            ("llm_delta", 2),
            ("step_end", 2),
            ("step_end", 3),
            ("llm_response", 1),
            ("step_start", 5),
        ],
        Shape::Pause => &[
            ("run_start", 1),
            ("llm_delta", 1),
            ("step_end", 2),
            ("step_start", 3),
            ("wait_input", 1),
            ("wait_input", 1),
        ],
        Shape::Resume => &[
            ("step_start", 1),
            ("step_end", 1),
            ("llm_delta", 2),
            ("step_end", 2),
            ("llm_response", 1),
            ("run_end", 1),
        ],
    };
    let round = case / SHAPES.len();
    match chosen.get(round) {
        Some(&(kind, nth)) => Moment::AfterEvent(kind, nth),
        None => {
            let millis = u64::try_from(lasts.as_millis()).unwrap_or(u64::MAX).max(1);
            Moment::After(Duration::from_millis(random.below(millis)))
        }
    }
}

/// A small seeded generator, so that a failing moment is found again with the same seed.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % bound
    }
}

/// What one killed process left behind.
struct Killed {
    /// Every line it printed on stdout, before and after the kill (the pipe keeps them).
    printed: Vec<Value>,
    /// Whether the chosen event was printed before the process ended on its own.
    hit: bool,
}

/// Starts `weft` with `--events`, kills it at `moment`, and returns what it printed.
fn kill_at(sandbox: &Sandbox, llm: &ScriptedLlm, args: &[&str], moment: &Moment) -> Killed {
    let mut command = sandbox.command(args, Some(llm));
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn weft");
    let stdout = child.stdout.take().expect("stdout");
    let (lines_tx, lines) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let started = Instant::now();
    let mut printed = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut hit = false;
    loop {
        let wait = match moment {
            Moment::After(delay) => match delay.checked_sub(started.elapsed()) {
                Some(left) => left,
                None => {
                    hit = true;
                    break;
                }
            },
            Moment::AfterEvent(..) => HANG,
        };
        match lines.recv_timeout(wait) {
            Ok(line) => {
                let event: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|error| panic!("not JSON ({error}): {line}"));
                let kind = event["type"].as_str().unwrap_or_default().to_string();
                printed.push(event);
                let count = seen.entry(kind.clone()).or_default();
                *count += 1;
                if let Moment::AfterEvent(wanted, nth) = moment
                    && *wanted == kind
                    && *count == *nth
                {
                    hit = true;
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Moment::After(_) = moment {
                    hit = true;
                    break;
                }
                panic!("{args:?}: no event for {HANG:?}");
            }
            // The process ended before the moment came.
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    // SIGKILL: no handler, no flush, no cleanup.
    let _ = child.kill();
    let ended = wait_within(child, HANG, "killed weft");
    reader.join().expect("reader");
    printed.extend(lines.try_iter().map(|line| {
        serde_json::from_str::<Value>(&line).unwrap_or_else(|error| panic!("{error}: {line}"))
    }));
    if hit {
        assert!(
            ended.code.is_none() || !crashed(&ended),
            "weft crashed on its own: {ended:?}"
        );
    } else {
        assert!(!crashed(&ended), "weft crashed on its own: {ended:?}");
    }
    Killed { printed, hit }
}

/// `weft` with these arguments, failed if it hangs.
fn weft(sandbox: &Sandbox, llm: &ScriptedLlm, args: &[&str]) -> Ran {
    sandbox.run_within(args, Some(llm), HANG)
}

/// `weft runs --json`: every run's id and status.
fn runs(sandbox: &Sandbox) -> BTreeMap<String, String> {
    sandbox
        .runs_within(HANG)
        .into_iter()
        .map(|run| {
            (
                run["id"].as_str().expect("id").to_string(),
                run["status"].as_str().expect("status").to_string(),
            )
        })
        .collect()
}

/// `weft show RUN --json`.
fn show(sandbox: &Sandbox, llm: &ScriptedLlm, run_id: &str) -> Value {
    let ran = weft(
        sandbox,
        llm,
        &["show", run_id, "--db", &sandbox.db_arg(), "--json"],
    );
    assert_eq!(ran.code, Some(0), "{ran:?}");
    serde_json::from_str(&ran.stdout).expect("show JSON")
}

/// The nodes of a run with a `step_end` in the store.
fn finished_nodes(shown: &Value) -> BTreeSet<String> {
    shown["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|event| event["type"] == "step_end")
        .filter_map(|event| event["nodeId"].as_str().map(str::to_string))
        .collect()
}

/// The nodes the server was asked for since request `since`, for the case whose initial input
/// is `initial` (each prompt starts with `[initial/node]`).
fn asked_nodes(llm: &ScriptedLlm, since: usize, initial: &str) -> Vec<String> {
    let prefix = format!("[{initial}/");
    llm.requests()
        .iter()
        .skip(since)
        .filter_map(|request| request.last_user_text())
        .filter_map(|text| {
            let rest = text.strip_prefix(&prefix)?;
            Some(rest[..rest.find(']')?].to_string())
        })
        .collect()
}

/// The counts a run of the harness ends with, printed as its figures.
#[derive(Default)]
struct Figures {
    kills: usize,
    ended_before_the_moment: usize,
    statuses_after_kill: BTreeMap<String, usize>,
    printed_events_checked: usize,
    retries: usize,
    resumes: usize,
    steps_kept_by_retry: usize,
}

#[test]
fn runs_killed_at_any_moment_are_recovered_without_loss_or_repeated_calls() {
    kill_and_recover(Sandbox::new(), 56);
}

/// The same with the run store on PostgreSQL (fewer kills: the moments are the same kinds).
#[test]
fn on_postgres_runs_killed_at_any_moment_are_recovered_without_loss_or_repeated_calls() {
    kill_and_recover(Sandbox::on_postgres(), 16);
}

fn kill_and_recover(sandbox: Sandbox, default_cases: usize) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    // Every agent echoes its prompt, streamed word by word, so a kill lands mid-stream too.
    let llm = runtime
        .block_on(ScriptedLlm::start(Script::default().with_rule(
            Rule::always(Reply::Text {
                content: "ok ".into(),
                delay_ms: 40,
                echo: true,
                chunk_gap_ms: 8,
            }),
        )))
        .expect("scripted server");
    let cases: usize = std::env::var("WEFT_CRASH_CASES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default_cases);
    let seed: u64 = std::env::var("WEFT_CRASH_SEED")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(20261123);
    let mut random = Lcg(seed);
    let db = sandbox.db_arg();
    let started = Instant::now();

    // What each shape ends with when nothing is killed, for an initial input of `ref`.
    // How long each shape's process takes, so random moments fall within it.
    let mut expected = BTreeMap::new();
    let mut lasts = BTreeMap::new();
    for shape in SHAPES {
        let path = sandbox.flow("reference.json", &flow_of(shape, "ref"));
        let before = runs(&sandbox);
        let ran_at = Instant::now();
        let ran = weft(&sandbox, &llm, &["run", &path, "--db", &db]);
        lasts.insert(shape, ran_at.elapsed());
        let run_id = new_run(&before, &runs(&sandbox)).expect("a reference run");
        let ran = if ran.code == Some(3) {
            let resumed_at = Instant::now();
            let ran = weft(
                &sandbox,
                &llm,
                &["resume", &run_id, "--decision", "approve", "--db", &db],
            );
            if shape == Shape::Resume {
                lasts.insert(shape, resumed_at.elapsed());
            }
            ran
        } else {
            ran
        };
        assert_eq!(ran.code, Some(0), "{shape:?}: {ran:?}");
        expected.insert(
            shape,
            show(&sandbox, &llm, &run_id)["run"]["result"].clone(),
        );
    }

    let mut figures = Figures::default();
    for case in 0..cases {
        let shape = SHAPES[case % SHAPES.len()];
        let moment = moment_of(shape, case, lasts[&shape], &mut random);
        let initial = format!("case{case}");
        let path = sandbox.flow(&format!("case{case}.json"), &flow_of(shape, &initial));
        let what = format!("case {case} ({shape:?}, killed {moment:?}, seed {seed})");
        let before = runs(&sandbox);

        let killed = if shape == Shape::Resume {
            let ran = weft(&sandbox, &llm, &["run", &path, "--db", &db]);
            assert_eq!(ran.code, Some(3), "{what}: {ran:?}");
            let run_id = new_run(&before, &runs(&sandbox)).expect("paused run");
            kill_at(
                &sandbox,
                &llm,
                &[
                    "resume",
                    &run_id,
                    "--decision",
                    "approve",
                    "--db",
                    &db,
                    "--events",
                ],
                &moment,
            )
        } else {
            kill_at(
                &sandbox,
                &llm,
                &["run", &path, "--db", &db, "--events"],
                &moment,
            )
        };
        figures.kills += usize::from(killed.hit);
        figures.ended_before_the_moment += usize::from(!killed.hit);
        if !killed.hit {
            eprintln!("{what}: ended before its moment");
        }

        // The next start of `weft` finds no run left running.
        let after = runs(&sandbox);
        let running: Vec<_> = after.iter().filter(|(_, s)| *s == "running").collect();
        assert!(running.is_empty(), "{what}: still running: {running:?}");
        let Some(run_id) = new_run(&before, &after).or_else(|| {
            killed
                .printed
                .first()
                .map(|event| event["runId"].as_str().expect("runId").to_string())
        }) else {
            // Killed before the run was stored: nothing printed, nothing to recover.
            assert!(killed.printed.is_empty(), "{what}: printed but not stored");
            *figures
                .statuses_after_kill
                .entry("not started".into())
                .or_default() += 1;
            continue;
        };
        *figures
            .statuses_after_kill
            .entry(after[&run_id].clone())
            .or_default() += 1;

        // Every printed event is in the store, as printed.
        let shown = show(&sandbox, &llm, &run_id);
        let stored: BTreeMap<u64, &Value> = shown["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|event| (event["seq"].as_u64().expect("seq"), event))
            .collect();
        for event in &killed.printed {
            let seq = event["seq"].as_u64().expect("seq");
            let Some(kept) = stored.get(&seq) else {
                panic!("{what}: printed event missing from the store: {event}");
            };
            assert_eq!(
                (&kept["type"], &kept["nodeId"], &kept["content"]),
                (&event["type"], &event["nodeId"], &event["content"]),
                "{what}: the stored event differs from the printed one"
            );
            figures.printed_events_checked += 1;
        }

        // Recover it the way a user would, until it completes.
        for _ in 0..4 {
            let status = runs(&sandbox)[&run_id].clone();
            match status.as_str() {
                "completed" => break,
                "paused" => {
                    figures.resumes += 1;
                    let ran = weft(
                        &sandbox,
                        &llm,
                        &["resume", &run_id, "--decision", "approve", "--db", &db],
                    );
                    assert_eq!(ran.code, Some(0), "{what}: resume: {ran:?}");
                }
                "interrupted" => {
                    figures.retries += 1;
                    let finished = finished_nodes(&show(&sandbox, &llm, &run_id));
                    let since = llm.request_count();
                    let ran = weft(&sandbox, &llm, &["resume", &run_id, "--retry", "--db", &db]);
                    assert!(
                        ran.code == Some(0) || ran.code == Some(3),
                        "{what}: retry: {ran:?}"
                    );
                    let asked = asked_nodes(&llm, since, &initial);
                    for node in &asked {
                        assert!(
                            !finished.contains(node),
                            "{what}: `{node}` had finished, yet retry asked the model again (asked {asked:?})"
                        );
                    }
                    figures.steps_kept_by_retry += finished.len();
                }
                other => panic!("{what}: the run reads `{other}` after the kill"),
            }
        }
        let shown = show(&sandbox, &llm, &run_id);
        assert_eq!(
            shown["run"]["summary"]["status"], "completed",
            "{what}: {shown}"
        );
        let want = serde_json::to_string(&expected[&shape])
            .expect("json")
            .replace("ref", &initial);
        assert_eq!(
            serde_json::to_string(&shown["run"]["result"]).expect("json"),
            want,
            "{what}: the recovered run's result differs from an unkilled run's"
        );
    }

    let kills = figures.kills;
    eprintln!(
        "crash harness: {kills} kills over {cases} cases in {:.1?} (seed {seed}); {} ended before their moment; \
         statuses after the kill: {:?}; {} printed events found in the store; {} retries kept {} finished steps; {} resumes",
        started.elapsed(),
        figures.ended_before_the_moment,
        figures.statuses_after_kill,
        figures.printed_events_checked,
        figures.retries,
        figures.steps_kept_by_retry,
        figures.resumes,
    );
    assert!(
        kills >= cases * 9 / 10,
        "most moments must land before the run ends"
    );
}

/// The one run in `after` that is not in `before`.
fn new_run(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Option<String> {
    let mut new = after.keys().filter(|id| !before.contains_key(*id));
    let id = new.next().cloned();
    assert!(new.next().is_none(), "one new run at a time");
    id
}
