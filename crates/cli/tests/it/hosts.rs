//! One policy, whatever the host: the same decision refused the same way through `weft resume`,
//! `weft serve`'s API and the desktop app's command, with the same words, and the run left as
//! it was. The three hosts share one store here, as they do on a person's machine.

use crate::common;

use common::serve::{Server, TOKEN};
use common::{Sandbox, edge, node};
use serde_json::{Value, json};
use weft_app::{AppPaths, AppState};
use weft_nodes::Decision;

/// start → review (a form: `amount`, a required number) → done; and a breakpoint-ready `hold`.
fn review_flow() -> Value {
    json!({
        "version": 1,
        "name": "Review",
        "nodes": [
            node("start", "start", json!({ "initialInput": "a refund" })),
            node("hold", "template", json!({ "template": "held {{ PREVIOUS_OUTPUT }}" })),
            node("review", "approval", json!({
                "message": "Refund {{ PREVIOUS_OUTPUT }}?",
                "fields": [{ "name": "amount", "type": "number", "required": true }]
            })),
            node("done", "template", json!({ "template": "done ({{ approval.amount }})" })),
        ],
        "edges": [
            edge("e1", "start", "hold", None),
            edge("e2", "hold", "review", None),
            edge("e3", "review", "done", Some("approve")),
            edge("e4", "review", "done", Some("reject")),
        ]
    })
}

/// The three hosts over one store.
struct Hosts {
    sandbox: Sandbox,
    server: Server,
    app: AppState,
}

impl Hosts {
    fn new() -> Hosts {
        let sandbox = Sandbox::new();
        let server = Server::start(&sandbox, &[], None);
        sandbox.flow("flows/review.json", &review_flow());
        let app = AppState::open(
            AppPaths {
                config_dir: sandbox.dir.path().join("config"),
                store: weft_api::StoreLocation::from(sandbox.db()),
            },
            None,
        )
        .expect("the app opens the store");
        Hosts {
            sandbox,
            server,
            app,
        }
    }

    /// A new run of the review flow, paused (at the approval, or at a breakpoint at `hold`).
    fn paused_run(&self, at_breakpoint: bool) -> String {
        let flow = self
            .sandbox
            .dir
            .path()
            .join("flows/review.json")
            .display()
            .to_string();
        let db = self.sandbox.db_arg();
        let mut args = vec!["run", flow.as_str(), "--db", db.as_str()];
        if at_breakpoint {
            args.extend(["--break", "hold"]);
        }
        common::paused_run_id(&self.sandbox.run(&args))
    }

    fn status(&self, run_id: &str) -> String {
        let db = self.sandbox.db_arg();
        let shown = self.sandbox.run(&["show", run_id, "--db", &db, "--json"]);
        let shown: Value = serde_json::from_str(&shown.stdout).expect("show --json");
        shown["run"]["summary"]["status"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// What each host says when it refuses `decision` for `run_id`: the command's stderr line
    /// (after `error: `), the API's message, the app's message; and their codes.
    async fn refusals(&self, run_id: &str, decision: &Value) -> [(String, String); 3] {
        let choice = decision["decision"].as_str().expect("a choice");
        let db = self.sandbox.db_arg();
        let mut args = vec!["resume", run_id, "--decision", choice, "--db", db.as_str()];
        let fields: Vec<String> = decision["fields"]
            .as_object()
            .map(|fields| {
                fields
                    .iter()
                    .map(|(name, value)| {
                        format!(
                            "{name}={}",
                            value.as_str().map_or(value.to_string(), str::to_string)
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        for field in &fields {
            args.extend(["--field", field.as_str()]);
        }
        let ran = self.sandbox.run(&args);
        let said = ran
            .stderr
            .lines()
            .find_map(|line| line.strip_prefix("error: "))
            .unwrap_or_else(|| panic!("the command was refused: {ran:?}"))
            .to_string();
        let cli = (format!("exit {}", ran.code.unwrap_or(-1)), said);

        let (status, body) = self
            .server
            .call(
                reqwest::Method::POST,
                &format!("/v1/runs/{run_id}/decision"),
                Some(TOKEN),
                Some(decision.to_string()),
            )
            .await;
        let api = (
            format!("{status} {}", body["code"].as_str().unwrap_or_default()),
            body["message"].as_str().unwrap_or_default().to_string(),
        );

        let decision: Decision = serde_json::from_value(decision.clone()).expect("a decision");
        let refused = self
            .app
            .decide(run_id, decision, None)
            .await
            .expect_err("the app refuses it too");
        let app = (format!("{:?}", refused.code), refused.message);
        [cli, api, app]
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_decision_is_refused_alike_by_the_command_the_api_and_the_app() {
    let hosts = Hosts::new();

    // An answer that does not fit the form (the required amount left out).
    let run_id = hosts.paused_run(false);
    let [cli, api, app] = hosts
        .refusals(&run_id, &json!({ "decision": "approve" }))
        .await;
    assert_eq!(
        cli.1,
        format!(
            "the answer for `review` does not fit its form: `amount` needs an answer; run {run_id} stays paused"
        )
    );
    assert_eq!(
        (api.1.as_str(), app.1.as_str()),
        (cli.1.as_str(), cli.1.as_str())
    );
    assert_eq!(
        (cli.0.as_str(), api.0.as_str(), app.0.as_str()),
        ("exit 2", "400 bad_request", "BadRequest")
    );
    assert_eq!(hosts.status(&run_id), "paused");

    // A run stopped at a breakpoint takes no decision.
    let stopped = hosts.paused_run(true);
    let [cli, api, app] = hosts
        .refusals(
            &stopped,
            &json!({ "decision": "approve", "fields": { "amount": "40" } }),
        )
        .await;
    assert_eq!(
        cli.1,
        format!(
            "run {stopped} is paused at a breakpoint at `hold`, not at an approval: continue it instead of deciding"
        )
    );
    assert_eq!(
        (api.1.as_str(), app.1.as_str()),
        (cli.1.as_str(), cli.1.as_str())
    );
    assert_eq!(
        (cli.0.as_str(), api.0.as_str(), app.0.as_str()),
        ("exit 2", "409 conflict", "Conflict")
    );
    assert_eq!(hosts.status(&stopped), "paused");

    // A run decided already (here by the app) takes no second decision.
    let answer: Decision =
        serde_json::from_value(json!({ "decision": "approve", "fields": { "amount": 40 } }))
            .expect("a decision");
    hosts
        .app
        .decide(&run_id, answer, None)
        .await
        .expect("the app decides");
    let ended = (0..100).find_map(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        (hosts.status(&run_id) == "completed").then_some(())
    });
    assert!(ended.is_some(), "the decided run completed");
    let [cli, api, app] = hosts
        .refusals(&run_id, &json!({ "decision": "reject" }))
        .await;
    // It says who decided it, and how.
    let said = &cli.1;
    assert!(
        said.starts_with(&format!(
            "run {run_id} has already finished (completed); it cannot be resumed; "
        )) && said.contains(" decided `review` already (approve at ")
            && said.ends_with(", through app)"),
        "{said}"
    );
    assert_eq!(
        (api.1.as_str(), app.1.as_str()),
        (cli.1.as_str(), cli.1.as_str())
    );
    assert_eq!(
        (cli.0.as_str(), api.0.as_str(), app.0.as_str()),
        ("exit 2", "409 conflict", "Conflict")
    );
}
