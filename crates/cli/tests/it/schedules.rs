//! `weft schedules` and the checks of `settings.schedules` (SPEC §15): the next occurrences of
//! each schedule in its time zone, and a cron expression or zone that does not parse named by
//! its field, by `weft schedules` and `weft validate` alike; and two real `weft serve` on one
//! PostgreSQL store starting a seconds schedule as time passes, each occurrence once.

use serde_json::{Value, json};

use crate::common::serve::Server;
use crate::common::{
    Sandbox, edge, every_second_flow, node, runs_by_occurrence, wait_for_scheduled_runs,
};

fn scheduled(schedules: Value) -> Value {
    json!({
        "version": 1,
        "settings": {"schedules": schedules},
        "nodes": [node("start", "start", json!({"initialInput": "hi"})), node("say", "template", json!({"template": "{{ PREVIOUS_OUTPUT }}"}))],
        "edges": [edge("a", "start", "say", None)]
    })
}

#[test]
fn lists_the_next_occurrences_in_each_schedules_time_zone_and_names_bad_ones() {
    let sandbox = Sandbox::new();
    sandbox.flow(
        "morning.json",
        &scheduled(json!([
            {"cron": "0 9 * * 1-5", "timezone": "Europe/Paris", "input": "Good morning"},
            {"cron": "*/20 * * * * *", "missed": "skip"}
        ])),
    );
    sandbox.flow("unscheduled.json", &scheduled(json!([])));
    let dir = sandbox.dir.path().display().to_string();

    let ran = sandbox.run(&["schedules", "--flows", &dir, "--json", "--count", "2"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let listed: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    let schedules = listed["schedules"].as_array().expect("a list");
    assert_eq!(schedules.len(), 2);
    assert_eq!(schedules[0]["flow"], "morning");
    assert_eq!(schedules[0]["timezone"], "Europe/Paris");
    assert_eq!(schedules[0]["input"], "Good morning");
    assert_eq!(schedules[1]["input"], Value::Null, "the start node's input");
    let next: Vec<&str> = schedules[0]["next"]
        .as_array()
        .expect("next")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(next.len(), 2);
    for at in &next {
        // 09:00 Paris time, in Paris's offset (winter or summer).
        assert!(
            at.contains("T09:00:00+01:00") || at.contains("T09:00:00+02:00"),
            "{at}"
        );
    }
    let seconds: Vec<&str> = schedules[1]["next"]
        .as_array()
        .expect("next")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for at in &seconds {
        assert!(
            at.ends_with(":00+00:00") || at.ends_with(":20+00:00") || at.ends_with(":40+00:00"),
            "{at}"
        );
    }

    sandbox.flow(
        "broken.json",
        &scheduled(json!([{"cron": "0 9 * *"}, {"cron": "@daily", "timezone": "Europe/Atlantis"}])),
    );
    let ran = sandbox.run(&["schedules", "--flows", &dir]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(
        ran.stdout
            .contains("broken: settings.schedules[0].cron: `0 9 * *` is not a cron expression"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains(
            "broken: settings.schedules[1].timezone: `Europe/Atlantis` is not a time zone"
        ),
        "{}",
        ran.stdout
    );
    let broken = sandbox.dir.path().join("broken.json").display().to_string();
    let validated = sandbox.run(&["validate", &broken]);
    assert_eq!(validated.code, Some(2), "{validated:?}");
    assert!(
        validated.stdout.contains("settings.schedules[1].timezone"),
        "{validated:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn two_servers_on_one_postgres_store_start_each_occurrence_once() {
    let sandbox = Sandbox::on_postgres();
    std::fs::create_dir_all(sandbox.dir.path().join("flows")).expect("flows");
    sandbox.flow(
        "flows/ticker.json",
        &every_second_flow("* * * * * *", "from the schedule"),
    );
    let first = Server::start(&sandbox, &[], None);
    let second = Server::start(&sandbox, &[], None);

    let runs = wait_for_scheduled_runs(&sandbox, 4).await;
    drop((first, second));

    let by_occurrence = runs_by_occurrence(&runs);
    assert!(by_occurrence.len() >= 4, "{by_occurrence:#?}");
    for (occurrence, runs) in &by_occurrence {
        assert_eq!(
            runs.len(),
            1,
            "occurrence {occurrence} was started {} times: {runs:#?}",
            runs.len()
        );
        assert!(occurrence.ends_with('Z'), "{occurrence}");
    }
    // A scheduled run ran with the schedule's input, not the start node's.
    let (_, runs) = by_occurrence.iter().next().expect("a run");
    let shown = sandbox.run(&[
        "show",
        runs[0]["id"].as_str().expect("id"),
        "--db",
        &sandbox.db_arg(),
        "--json",
    ]);
    assert_eq!(shown.code, Some(0), "{shown:?}");
    let shown: Value = serde_json::from_str(&shown.stdout).expect("show JSON");
    assert_eq!(
        shown["run"]["result"], "tick: from the schedule",
        "{shown:#}"
    );
}
