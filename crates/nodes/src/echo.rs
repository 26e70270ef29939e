//! `echo`: a kind that exists only in the engine's own tests, added the way the README's
//! "Adding a node kind" says (this one file and one registry line), to show that the registry
//! alone makes a kind described, validated and run.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{FieldError, Handle, Kind, Scheduling};
use crate::step::{Step, StepEnv, StepError, StepOutput};
use weft_template::output_text;

/// Repeats the previous output `times` times, each time after `prefix` (a template).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct EchoConfig {
    /// What comes before each repetition (a template).
    #[serde(default)]
    #[schemars(extend("x-weft" = "template"))]
    pub prefix: String,
    /// How many repetitions.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 3))]
    pub times: u32,
}

fn one() -> u32 {
    1
}

const TOO_LOUD: Handle = Handle::execution("tooLoud", "Too loud");

impl Kind for EchoConfig {
    const ID: &'static str = "echo";
    const TITLE: &'static str = "Echo";
    const SCHEDULING: Scheduling = Scheduling::Instant;
    const HANDLES: &'static [Handle] = &[Handle::OUTPUT, TOO_LOUD];

    fn template(&self, field: &str) -> Option<&str> {
        (field == "prefix").then_some(self.prefix.as_str())
    }

    fn check(&self) -> Result<(), FieldError> {
        if self.prefix.contains('!') {
            return Err(FieldError::new("prefix", "no shouting"));
        }
        Ok(())
    }

    async fn run(&self, step: &Step<'_>, env: &dyn StepEnv) -> Result<StepOutput, StepError> {
        let prefix = env.render(step.node_id, "prefix", step.input)?;
        let text = output_text(step.input);
        let echoed: String = (0..self.times).map(|_| format!("{prefix}{text}")).collect();
        let handle = if echoed.len() > 40 { TOO_LOUD } else { Handle::OUTPUT };
        Ok(StepOutput::new(serde_json::Value::String(echoed), handle.id))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use crate::step::fake::{FakeEnv, step};
    use crate::{FieldType, NodeConfig, NodeKind, all_kinds, validate};
    use weft_flow::Flow;

    fn flow(echo_data: serde_json::Value, handle: &str) -> Flow {
        Flow::from_value(
            json!({
                "nodes": [
                    {"id": "start", "type": "start", "data": {"initialInput": "hi"}},
                    {"id": "shout", "type": "echo", "data": echo_data},
                    {"id": "end", "type": "output", "data": {}}
                ],
                "edges": [
                    {"id": "e1", "source": "start", "target": "shout"},
                    {"id": "e2", "source": "shout", "target": "end", "sourceHandle": handle}
                ]
            }),
            "test",
        )
        .expect("a flow")
    }

    /// The one registry line made the kind known everywhere: described for the canvas (fields
    /// from its config type, handles from its declaration), checked by the validator, and run
    /// through the registry's dispatch, as the engine runs every kind.
    #[tokio::test]
    async fn a_kind_added_by_one_file_and_one_line_is_described_validated_and_run() {
        let description = all_kinds()
            .into_iter()
            .find(|kind| kind.id == "echo")
            .expect("echo is listed");
        assert_eq!(description.title, "Echo");
        let handles: Vec<&str> = description.handles.iter().map(|handle| handle.id).collect();
        assert_eq!(handles, ["output", "tooLoud"]);
        let times = &description.fields[1];
        assert_eq!((times.name.as_str(), times.default.clone()), ("times", json!(1)));
        assert_eq!(
            times.field_type,
            FieldType::Integer {
                min: Some(1),
                max: Some(3)
            }
        );
        let kind = NodeKind::from_id("echo").expect("registered");
        assert!(kind.has_input());

        assert!(validate(&flow(json!({"prefix": "> "}), "output"), None).is_empty());
        let messages = |flow: Flow| -> Vec<String> {
            validate(&flow, None).iter().map(ToString::to_string).collect()
        };
        assert_eq!(
            messages(flow(json!({"times": 9}), "output")),
            ["node shout: error: field `times`: must be between 1 and 3"]
        );
        assert_eq!(
            messages(flow(json!({}), "nope")),
            ["edge e2: error: node `shout` (echo) has no handle `nope`; it has output, tooLoud"]
        );
        let problems = validate(&flow(json!({"prefix": "hey!"}), "output"), None);
        assert_eq!(problems[0].to_string(), "node shout: error: field `prefix`: no shouting");

        let run = |prefix: &'static str| async move {
            let data = json!({"prefix": prefix, "times": 2});
            let config = NodeConfig::parse(kind, data.as_object().expect("an object")).expect("parses");
            let env = FakeEnv::new()
                .initial(json!("hi"))
                .template("shout", "prefix", prefix);
            config.run(&step("shout", &Arc::new(json!("hi"))), &env).await.expect("runs")
        };
        let output = run("{{ initial }}: ").await;
        assert_eq!((Arc::unwrap_or_clone(output.value), output.handle.as_str()), (json!("hi: hihi: hi"), "output"));
        // Too long for the output handle: it leaves by `tooLoud`.
        let output = run("a long prefix that makes it long ").await;
        assert_eq!(output.handle, "tooLoud");
        assert_eq!(*output.value, json!("a long prefix that makes it long hia long prefix that makes it long hi"));
    }
}
