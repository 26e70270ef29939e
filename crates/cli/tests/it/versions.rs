//! `weft versions` (SPEC §17): each run keeps the version of the flow it ran (once per distinct
//! content, on SQLite and PostgreSQL), a file's versions are listed with the runs that used
//! them, a version's hash names it to `weft flow-diff`, and `--restore` writes one back.

use serde_json::{Value, json};

use crate::common::{Ran, Sandbox, edge, node};
use crate::flow_diff::shout;

fn run_id(ran: &Ran) -> String {
    let first: Value =
        serde_json::from_str(ran.stdout.lines().next().expect("an event")).expect("JSON");
    first["runId"].as_str().expect("id").to_string()
}

fn versions_json(sandbox: &Sandbox, path: &str) -> Value {
    let ran = sandbox.run(&["versions", path, "--db", &sandbox.db_arg(), "--json"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    serde_json::from_str(&ran.stdout).expect("JSON")
}

fn versions_are_kept_listed_diffed_and_restored(sandbox: &Sandbox) {
    let db = sandbox.db_arg();
    let path = sandbox.flow("shout.json", &shout("{{ PREVIOUS_OUTPUT }}!", false));
    let run = |sandbox: &Sandbox| {
        let ran = sandbox.run(&["run", &path, "--db", &db, "--events"]);
        assert_eq!(ran.code, Some(0), "{ran:?}");
        run_id(&ran)
    };
    let first = run(sandbox);
    // The same flow written another way (compact, keys in another order) is the same version.
    let mut reordered = shout("{{ PREVIOUS_OUTPUT }}!", false);
    reordered["nodes"][1]["data"] =
        json!({ "template": "{{ PREVIOUS_OUTPUT }}!", "label": "Shout" });
    std::fs::write(&path, serde_json::to_string(&reordered).expect("json")).expect("write");
    let second = run(sandbox);
    sandbox.flow("shout.json", &shout("{{ PREVIOUS_OUTPUT }}?", false));
    let third = run(sandbox);

    let listed = versions_json(sandbox, &path);
    let versions = listed["versions"].as_array().expect("versions");
    assert_eq!(versions.len(), 2, "{listed:#}");
    assert_eq!(
        versions[0]["runs"],
        json!([third]),
        "newest first: {listed:#}"
    );
    assert_eq!(versions[1]["runs"], json!([first, second]), "{listed:#}");
    assert_eq!(versions[0]["current"], true);
    assert_eq!(listed["current"], versions[0]["hash"]);
    let (new_hash, old_hash) = (
        versions[0]["hash"].as_str().expect("hash").to_string(),
        versions[1]["hash"].as_str().expect("hash").to_string(),
    );

    // `weft show` (and the API's run, the same JSON) names the version a run ran.
    let shown = sandbox.run(&["show", &first, "--db", &db, "--json"]);
    let detail: Value = serde_json::from_str(&shown.stdout).expect("JSON");
    assert_eq!(detail["run"]["flowVersion"], old_hash.as_str());
    let shown = sandbox.run(&["show", &third, "--db", &db]);
    assert!(
        shown
            .stdout
            .contains(&format!("version  {}", &new_hash[..12])),
        "{}",
        shown.stdout
    );
    let text = sandbox.run(&["versions", &path, "--db", &db]);
    assert!(
        text.stdout.contains(&format!("* {}", &new_hash[..12]))
            && text.stdout.contains("2 runs")
            && text.stdout.contains("(the file now)"),
        "{}",
        text.stdout
    );

    // A version's hash (a prefix of it) names it to flow-diff.
    let diffed = sandbox.run(&["flow-diff", &old_hash[..10], &path, "--db", &db]);
    assert_eq!(diffed.code, Some(1), "{diffed:?}");
    assert!(
        diffed
            .stdout
            .contains("template: \"{{ PREVIOUS_OUTPUT }}!\" → \"{{ PREVIOUS_OUTPUT }}?\""),
        "{}",
        diffed.stdout
    );

    // Restored, the file holds the old version, in canonical form, and says who restored it.
    let restored = sandbox.run(&["versions", &path, "--db", &db, "--restore", &old_hash[..8]]);
    assert_eq!(restored.code, Some(0), "{restored:?}");
    assert!(
        restored.stdout.contains(&format!(
            "to version {} (it held {})",
            &old_hash[..12],
            &new_hash[..12]
        )),
        "{}",
        restored.stdout
    );
    let same = sandbox.run(&["flow-diff", &old_hash, &path, "--db", &db]);
    assert_eq!(same.code, Some(0), "{same:?}");
    let canonical = sandbox.run(&["fmt", "--check", &path]);
    assert_eq!(canonical.code, Some(0), "{canonical:?}");
    let listed = versions_json(sandbox, &path);
    assert_eq!(listed["current"], old_hash.as_str());
    let saves = &listed["versions"][0]["saves"];
    assert_eq!(saves[0]["kind"], "restore", "{listed:#}");

    let missing = sandbox.run(&["versions", &path, "--db", &db, "--restore", "0000abcd"]);
    assert_eq!(missing.code, Some(2), "{missing:?}");
    assert!(
        missing
            .stderr
            .contains("no flow version 0000abcd in the store"),
        "{missing:?}"
    );
    let missing = sandbox.run(&["flow-diff", "0000abcd", &path, "--db", &db]);
    assert_eq!(missing.code, Some(2), "{missing:?}");
}

#[test]
fn versions_are_kept_listed_diffed_and_restored_on_sqlite() {
    versions_are_kept_listed_diffed_and_restored(&Sandbox::new());
}

#[test]
fn versions_are_kept_listed_diffed_and_restored_on_postgres() {
    versions_are_kept_listed_diffed_and_restored(&Sandbox::on_postgres());
}

/// A subflow's file lists the version a run of its parent ran it in, once however many times
/// the run ran it (a forEach over three items).
#[test]
fn a_subflow_file_lists_the_runs_that_ran_it() {
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    let part = sandbox.flow(
        "double.json",
        &json!({
            "version": 1, "name": "Double",
            "nodes": [
                node("start", "start", json!({})),
                node("twice", "template", json!({ "template": "{{ input }}{{ input }}" })),
            ],
            "edges": [edge("e1", "start", "twice", None)],
        }),
    );
    let parent = sandbox.flow(
        "parent.json",
        &json!({
            "version": 1, "name": "Parent",
            "nodes": [
                node("start", "start", json!({ "initialInput": ["a", "b", "c"] })),
                node("each", "forEach", json!({ "flow": "double.json" })),
            ],
            "edges": [edge("e1", "start", "each", None)],
        }),
    );
    let ran = sandbox.run(&["run", &parent, "--db", &db, "--events"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    // The file however its path is spelled: links and `..` resolved.
    std::fs::create_dir(sandbox.dir.path().join("sub")).expect("a folder");
    let roundabout = sandbox.dir.path().join("sub/../double.json");
    let listed = versions_json(&sandbox, &roundabout.display().to_string());
    assert_eq!(
        listed["versions"][0]["subflowRuns"],
        json!([run_id(&ran)]),
        "{listed:#}"
    );
    assert_eq!(listed["versions"][0]["current"], true);
    assert_eq!(
        versions_json(&sandbox, &part)["versions"],
        listed["versions"]
    );
}

/// A run stored by a Weft from before versions were kept names none (said, not guessed), and
/// its flow, kept with it, is still compared.
#[test]
fn a_run_from_before_versions_names_none_and_still_diffs() {
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    let path = sandbox.flow("shout.json", &shout("{{ PREVIOUS_OUTPUT }}!", false));
    let ran = sandbox.run(&["run", &path, "--db", &db, "--events"]);
    let id = run_id(&ran);
    // As an older Weft stored it: the flow in `run_flows`, no version.
    let conn = rusqlite::Connection::open(sandbox.db()).expect("sqlite");
    conn.execute(
        "INSERT INTO run_flows (run_id, flow_json) \
         SELECT ?1, flow_json FROM flow_versions WHERE hash = \
         (SELECT flow_version FROM runs WHERE id = ?1)",
        [&id],
    )
    .expect("old flow");
    conn.execute("UPDATE runs SET flow_version = NULL WHERE id = ?1", [&id])
        .expect("no version");
    drop(conn);

    let shown = sandbox.run(&["show", &id, "--db", &db]);
    assert!(
        shown
            .stdout
            .contains("version  none kept (run by a Weft from before flow versions)"),
        "{}",
        shown.stdout
    );
    let same = sandbox.run(&["flow-diff", &id, &path, "--db", &db]);
    assert_eq!(same.code, Some(0), "{same:?}");
}

/// The app keeps a version at each save, with the name its Settings give, and `weft versions`
/// (the same store) lists it; a run of the saved file then uses that version.
#[tokio::test(flavor = "multi_thread")]
async fn the_app_keeps_a_version_at_each_save_with_who_saved_it() {
    let sandbox = Sandbox::new();
    let config_dir = sandbox.dir.path().join("config");
    std::fs::create_dir_all(&config_dir).expect("config dir");
    std::fs::write(
        config_dir.join("settings.json"),
        r#"{"values": {"WEFT_USER": "ana"}}"#,
    )
    .expect("settings");
    let app = weft_app::AppState::open(
        weft_app::AppPaths {
            config_dir,
            store: weft_api::StoreLocation::from(sandbox.db()),
        },
        None,
    )
    .expect("the app opens the store");
    let path = sandbox.dir.path().join("shout.json").display().to_string();
    let flow = |template: &str| {
        weft_flow::Flow::parse(&shout(template, false).to_string(), "test").expect("a flow")
    };
    app.save_flow_file(&path, &flow("{{ PREVIOUS_OUTPUT }}!"))
        .await
        .expect("saved");
    app.save_flow_file(&path, &flow("{{ PREVIOUS_OUTPUT }}?"))
        .await
        .expect("saved again");

    let listed = tokio::task::spawn_blocking({
        let path = path.clone();
        move || versions_json(&sandbox, &path)
    })
    .await
    .expect("versions");
    let versions = listed["versions"].as_array().expect("versions");
    assert_eq!(versions.len(), 2, "{listed:#}");
    assert_eq!(versions[0]["saves"][0]["by"], "ana", "{listed:#}");
    assert_eq!(versions[0]["saves"][0]["kind"], "save");
    assert_eq!(versions[0]["current"], true, "the file holds the last save");
    assert_eq!(versions[1]["current"], false);
}
