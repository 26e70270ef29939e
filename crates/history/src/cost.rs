//! What runs cost (docs/debugging.md): a price per model (US dollars per million input and output
//! tokens), shipped for common OpenAI and Anthropic models and overridden by a JSON file
//! (`WEFT_PRICES`), applied to the tokens each recorded LLM call used. A call whose model has
//! no price counts its tokens and no dollars: a total over it says which models are unpriced
//! instead of guessing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use weft_flow::Flow;
use weft_providers::Usage;
use weft_store::{CallUsage, RunRecord, Store, StoreError};

/// The environment variable naming a JSON file of prices that add to or replace the shipped ones.
pub const PRICES_ENV: &str = "WEFT_PRICES";

/// The largest `WEFT_PRICES` file Weft reads (a price is some 60 bytes).
pub const MAX_PRICES_FILE_BYTES: u64 = weft_flow::MAX_FILE_BYTES;

/// The shipped table, in the same form as a `WEFT_PRICES` file.
const SHIPPED: &str = include_str!("prices.json");

/// A model's list price, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Price {
    pub input: f64,
    pub output: f64,
}

impl Price {
    /// What `usage` costs at this price, in US dollars.
    pub fn of(self, usage: Usage) -> f64 {
        (usage.input_tokens as f64 * self.input + usage.output_tokens as f64 * self.output)
            / 1_000_000.0
    }
}

/// Why a price file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    #[error("prices in {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("prices in {path}: line {line}, column {column}: {message}")]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("prices in {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// Prices by model, as `provider/model` (`openai/gpt-4o`, `anthropic/claude-sonnet-4-5`).
#[derive(Debug, Clone, PartialEq)]
pub struct Prices {
    /// Whether the shipped table lies under `added`. It is read when a price is first asked
    /// for, not when the prices are made: every command makes them as it starts, and a run
    /// with no LLM call (a short `weft run`, a test) never asks.
    shipped: bool,
    /// Prices added to the shipped ones, or replacing them (a model in both takes this one).
    added: HashMap<String, Price>,
}

impl Default for Prices {
    fn default() -> Prices {
        Prices::shipped()
    }
}

/// The shipped table, parsed once a process (a test checks that it always parses).
fn shipped_table() -> &'static HashMap<String, Price> {
    static SHIPPED_PRICES: std::sync::OnceLock<HashMap<String, Price>> = std::sync::OnceLock::new();
    SHIPPED_PRICES.get_or_init(|| parse(SHIPPED, Path::new("(shipped prices)")).unwrap_or_default())
}

impl Prices {
    /// The prices Weft ships (list prices; see the README for their date).
    pub fn shipped() -> Prices {
        Prices {
            shipped: true,
            added: HashMap::new(),
        }
    }

    /// No prices at all: every call is unpriced.
    pub fn none() -> Prices {
        Prices {
            shipped: false,
            added: HashMap::new(),
        }
    }

    /// The shipped prices, with those of the file `WEFT_PRICES` names added or replacing them.
    pub fn from_env() -> Result<Prices, PriceError> {
        match std::env::var_os(PRICES_ENV) {
            Some(path) if !path.is_empty() => Prices::shipped().with_file(Path::new(&path)),
            _ => Ok(Prices::shipped()),
        }
    }

    /// These prices with the file at `path` added (a model in both takes the file's price). The
    /// file must be a regular file (a named pipe or a device is refused, never waited on or
    /// read without end) of at most [`MAX_PRICES_FILE_BYTES`].
    pub fn with_file(mut self, path: &Path) -> Result<Prices, PriceError> {
        let text = weft_flow::read_text_file(path, MAX_PRICES_FILE_BYTES).map_err(|source| {
            PriceError::Read {
                path: path.to_path_buf(),
                source,
            }
        })?;
        self.added.extend(parse(&text, path)?);
        Ok(self)
    }

    /// These prices with the table `text` (the form of a `WEFT_PRICES` file) added; `origin`
    /// names where it comes from in errors.
    pub fn with_text(mut self, text: &str, origin: &Path) -> Result<Prices, PriceError> {
        self.added.extend(parse(text, origin)?);
        Ok(self)
    }

    /// These prices with the table `table` (an object as in a `WEFT_PRICES` file) added.
    pub fn with_table(mut self, table: &Value, origin: &Path) -> Result<Prices, PriceError> {
        self.added.extend(parse_value(table.clone(), origin)?);
        Ok(self)
    }

    /// The price of `model` (`provider/model`), exactly as named: a dated snapshot and its alias
    /// are separate entries, since their prices can differ.
    pub fn price(&self, model: &str) -> Option<Price> {
        self.added
            .get(model)
            .or_else(|| self.shipped.then(|| shipped_table().get(model)).flatten())
            .copied()
    }
}

/// Reads a table of the form `{"provider/model": {"input": 2.5, "output": 10}}`.
fn parse(text: &str, path: &Path) -> Result<HashMap<String, Price>, PriceError> {
    let value: Value = serde_json::from_str(text).map_err(|error| PriceError::Syntax {
        path: path.to_path_buf(),
        line: error.line(),
        column: error.column(),
        message: error.to_string(),
    })?;
    parse_value(value, path)
}

/// Reads a table already parsed as JSON.
fn parse_value(value: Value, path: &Path) -> Result<HashMap<String, Price>, PriceError> {
    let invalid = |message: String| PriceError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    let Value::Object(models) = value else {
        return Err(invalid(
            "expected an object of models, as {\"openai/gpt-4o\": {\"input\": 2.5, \"output\": 10}} (US dollars per million tokens)".into(),
        ));
    };
    let mut prices = HashMap::with_capacity(models.len());
    for (model, price) in models {
        if !model.contains('/') {
            return Err(invalid(format!(
                "`{model}`: name the provider too, as in `openai/{model}`"
            )));
        }
        let Value::Object(fields) = &price else {
            return Err(invalid(format!(
                "`{model}`: expected {{\"input\": …, \"output\": …}}"
            )));
        };
        if let Some(unknown) = fields
            .keys()
            .find(|field| !matches!(field.as_str(), "input" | "output"))
        {
            return Err(invalid(format!(
                "`{model}`: unknown field `{unknown}` (a price has `input` and `output`)"
            )));
        }
        let dollars = |field: &str| match fields.get(field).and_then(Value::as_f64) {
            Some(amount) if amount.is_finite() && amount >= 0.0 => Ok(amount),
            _ => Err(invalid(format!(
                "`{model}`: `{field}` must be a number of US dollars per million tokens, 0 or more"
            ))),
        };
        prices.insert(
            model.clone(),
            Price {
                input: dollars("input")?,
                output: dollars("output")?,
            },
        );
    }
    Ok(prices)
}

/// Tokens and dollars of some LLM calls.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// US dollars of the calls whose model has a price.
    pub usd: f64,
    /// Models of calls with no price (a call recorded without its model counts as `unknown`):
    /// `usd` leaves them out.
    pub unpriced_models: BTreeSet<String>,
}

impl Cost {
    /// The dollars, when every call was priced.
    pub fn known_usd(&self) -> Option<f64> {
        self.unpriced_models.is_empty().then_some(self.usd)
    }

    /// The tokens, as a [`Usage`].
    pub fn usage(&self) -> Usage {
        Usage {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
        }
    }

    pub(crate) fn add(&mut self, call: &CallCost) {
        self.calls += 1;
        self.input_tokens += call.usage.input_tokens;
        self.output_tokens += call.usage.output_tokens;
        match call.usd {
            Some(usd) => self.usd += usd,
            None => {
                self.unpriced_models
                    .insert(call.model.clone().unwrap_or_else(|| "unknown".into()));
            }
        }
    }

    /// `$0.0123`, `$0.0123 + tokens of unpriced models`, or `-` (no calls); tokens are shown
    /// apart, so an unpriced model gives no figure at all rather than a wrong one.
    pub fn text(&self) -> String {
        if self.calls == 0 {
            return "-".into();
        }
        match (self.known_usd(), self.usd > 0.0) {
            (Some(usd), _) => usd_text(usd),
            (None, true) => format!("{} + unpriced", usd_text(self.usd)),
            (None, false) => "no price".into(),
        }
    }
}

/// Dollars with enough digits to tell small calls apart: `$1.23`, `$0.0123`, `$0.000123`.
pub fn usd_text(usd: f64) -> String {
    if usd == 0.0 {
        "$0".into()
    } else if usd >= 1.0 {
        format!("${usd:.2}")
    } else if usd >= 0.01 {
        format!("${usd:.4}")
    } else {
        format!("${usd:.6}")
    }
}

/// One LLM call and what it cost (`None`: its model has no price).
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallCost {
    pub node_key: String,
    pub visit: u64,
    pub call: u64,
    pub model: Option<String>,
    pub usage: Usage,
    pub usd: Option<f64>,
}

/// A run's cost: in total, per node, per call.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunCost {
    pub total: Cost,
    /// By node key (`draft`, `research/draft` in a subflow, `each[2]/draft` in a forEach item).
    /// A node counts every visit, everything run inside it (a subflow's or forEach's nodes, each
    /// item) and the calls of its subagents; so nodes overlap, and only `total` is the sum.
    pub nodes: BTreeMap<String, Cost>,
    pub calls: Vec<CallCost>,
}

impl RunCost {
    /// The cost of `calls`, made by a run of `flow`, at `prices`.
    pub fn of(calls: Vec<CallUsage>, flow: Option<&Flow>, prices: &Prices) -> RunCost {
        let subagent_parents = flow.map(subagent_parents).unwrap_or_default();
        let mut cost = RunCost::default();
        for call in calls {
            let usd = call
                .model
                .as_deref()
                .and_then(|model| prices.price(model))
                .map(|price| price.of(call.usage));
            let call = CallCost {
                node_key: call.node_key,
                visit: call.visit,
                call: call.call,
                model: call.model,
                usage: call.usage,
                usd,
            };
            cost.total.add(&call);
            for key in counted_by(&call.node_key, &subagent_parents) {
                cost.nodes.entry(key).or_default().add(&call);
            }
            cost.calls.push(call);
        }
        cost
    }

    /// The cost of node `key` (nothing when it made no call).
    pub fn node(&self, key: &str) -> Cost {
        self.nodes.get(key).cloned().unwrap_or_default()
    }
}

/// The cost of the stored run `record` at `prices`.
pub fn run_cost(store: &Store, record: &RunRecord, prices: &Prices) -> Result<RunCost, StoreError> {
    // A stored flow that no longer parses only loses the subagents' share of their parents.
    let flow = Flow::parse(&record.flow_json, "the stored flow").ok();
    Ok(RunCost::of(
        store.call_usage(&record.summary.id)?,
        flow.as_ref(),
        prices,
    ))
}

/// What all the LLM calls of run `run_id` cost together (no flow needed: subagents only move
/// cost between a run's nodes) — a run as History and `weft runs` list it.
pub fn run_total(store: &Store, run_id: &str, prices: &Prices) -> Result<Cost, StoreError> {
    Ok(RunCost::of(store.call_usage(run_id)?, None, prices).total)
}

/// The node key (as events and node outputs name it) of an LLM call's key: without the visits
/// of enclosing steps (`sub@2/x` is `sub/x`, `each[1]@3/x` is `each[1]/x`).
pub fn store_key_of(call_key: &str) -> String {
    if !call_key.contains('@') {
        return call_key.to_string();
    }
    let segments: Vec<&str> = call_key.split('/').collect();
    let last = segments.len() - 1;
    segments
        .iter()
        .enumerate()
        .map(|(index, segment)| match segment.rsplit_once('@') {
            // Only the enclosing steps carry a visit; the node's own id is as written.
            Some((step, visit))
                if index < last
                    && !visit.is_empty()
                    && visit.bytes().all(|b| b.is_ascii_digit()) =>
            {
                step
            }
            _ => segment,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Each top-level agent's parents through subagent edges.
fn subagent_parents(flow: &Flow) -> HashMap<String, Vec<String>> {
    let mut parents: HashMap<String, Vec<String>> = HashMap::new();
    for edge in flow.edges.iter().filter(|edge| edge.is_subagent()) {
        parents
            .entry(edge.target.clone())
            .or_default()
            .push(edge.source.clone());
    }
    parents
}

/// The nodes a call of `key` counts for: the node itself, the nodes it runs inside
/// (`each[2]/inner` counts for `each[2]` and `each`), and the agents it is a subagent of (and
/// theirs), for calls of the top-level flow.
fn counted_by(key: &str, subagent_parents: &HashMap<String, Vec<String>>) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    // A call in the second visit of a subflow (`sub@2/x`) is the node `sub/x`'s.
    let key = store_key_of(key);
    let key = key.as_str();
    let segments: Vec<&str> = key.split('/').collect();
    for end in 1..=segments.len() {
        let prefix = segments[..end].join("/");
        if let Some((node, _item)) = segments[end - 1].split_once('[') {
            let mut without_item = segments[..end - 1].to_vec();
            without_item.push(node);
            keys.insert(without_item.join("/"));
        }
        keys.insert(prefix);
    }
    if segments.len() == 1 {
        let mut pending = vec![key.to_string()];
        while let Some(child) = pending.pop() {
            for parent in subagent_parents.get(&child).into_iter().flatten() {
                if keys.insert(parent.clone()) {
                    pending.push(parent.clone());
                }
            }
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(node_key: &str, model: Option<&str>, input: u64, output: u64) -> CallUsage {
        CallUsage {
            node_key: node_key.into(),
            visit: 1,
            call: 0,
            model: model.map(str::to_string),
            usage: Usage {
                input_tokens: input,
                output_tokens: output,
            },
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn the_shipped_table_parses_and_prices_common_models() {
        let table = parse(SHIPPED, Path::new("shipped")).expect("parses");
        assert_eq!(shipped_table(), &table);
        for model in [
            "openai/gpt-4o-mini",
            "openai/gpt-4.1",
            "anthropic/claude-sonnet-4-5",
            "anthropic/claude-3-5-haiku-20241022",
        ] {
            assert!(Prices::shipped().price(model).is_some(), "{model}");
        }
        // No guessing from a similar name: an unknown snapshot has no price.
        assert_eq!(Prices::shipped().price("openai/gpt-4o-2024-05-13"), None);
        assert_eq!(Prices::shipped().price("ollama/llama3"), None);
    }

    #[test]
    fn a_prices_file_overrides_and_adds() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("prices.json");
        std::fs::write(
            &path,
            json!({"openai/gpt-4o-mini": {"input": 1, "output": 2}, "ollama/llama3": {"input": 0, "output": 0}})
                .to_string(),
        )
        .expect("write");
        let prices = Prices::shipped().with_file(&path).expect("reads");
        assert_eq!(
            prices.price("openai/gpt-4o-mini"),
            Some(Price {
                input: 1.0,
                output: 2.0
            })
        );
        assert!(prices.price("ollama/llama3").is_some());
        assert!(
            prices.price("anthropic/claude-sonnet-4-5").is_some(),
            "kept"
        );
    }

    #[test]
    fn a_bad_prices_file_is_named_with_what_is_wrong() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("prices.json");
        let error_of = |text: &str| {
            std::fs::write(&path, text).expect("write");
            Prices::shipped()
                .with_file(&path)
                .expect_err("refused")
                .to_string()
        };
        let message = error_of("{\n  \"openai/x\": {\"input\": 1,\n}");
        assert!(message.contains("prices.json: line 3"), "{message}");
        let message = error_of(r#"{"gpt-4o": {"input": 1, "output": 2}}"#);
        assert!(message.contains("`openai/gpt-4o`"), "{message}");
        let message = error_of(r#"{"openai/x": {"input": -1, "output": 2}}"#);
        assert!(message.contains("`input` must be a number"), "{message}");
        let message = error_of(r#"{"openai/x": {"input": 1, "outptu": 2}}"#);
        assert!(message.contains("unknown field `outptu`"), "{message}");
        let message = Prices::shipped()
            .with_file(&dir.path().join("missing.json"))
            .expect_err("missing")
            .to_string();
        assert!(message.contains("missing.json"), "{message}");
    }

    #[cfg(unix)]
    #[test]
    fn a_prices_file_that_is_no_file_or_too_large_is_refused_naming_it() {
        let message = Prices::shipped()
            .with_file(Path::new("/dev/zero"))
            .expect_err("refused")
            .to_string();
        assert_eq!(
            message,
            "prices in /dev/zero: not a regular file but a character device"
        );
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("prices.json");
        std::fs::File::create(&path)
            .and_then(|file| file.set_len(MAX_PRICES_FILE_BYTES + 1))
            .expect("sparse file");
        let message = Prices::shipped()
            .with_file(&path)
            .expect_err("refused")
            .to_string();
        assert!(
            message
                .ends_with("prices.json: larger than 32 MiB, the most Weft reads of such a file"),
            "{message}"
        );
    }

    #[test]
    fn a_node_counts_its_visits_items_subflows_and_subagents() {
        let prices = Prices::shipped();
        let flow = Flow::parse(
            &json!({
                "nodes": [],
                "edges": [
                    {"id": "s", "source": "lead", "target": "helper", "sourceHandle": "subagent"},
                    {"id": "t", "source": "helper", "target": "fact", "sourceHandle": "subagent"}
                ]
            })
            .to_string(),
            "test",
        )
        .expect("flow");
        let mini = Some("openai/gpt-4o-mini");
        let calls = vec![
            call("lead", mini, 1_000_000, 0),
            call("helper", mini, 0, 1_000_000),
            call("fact", mini, 1_000_000, 1_000_000),
            call("each[0]/draft", mini, 1_000_000, 0),
            call("each[1]/draft", mini, 2_000_000, 0),
            call("sub/inner", Some("ollama/llama3"), 10, 20),
            call("sub/inner", mini, 1_000_000, 0),
        ];
        let cost = RunCost::of(calls, Some(&flow), &prices);
        // gpt-4o-mini: $0.15 in, $0.60 out per million.
        assert!(close(cost.node("fact").usd, 0.75));
        assert!(
            close(cost.node("helper").usd, 0.60 + 0.75),
            "with its subagent"
        );
        assert!(close(cost.node("lead").usd, 0.15 + 0.60 + 0.75));
        assert!(close(cost.node("each[1]").usd, 0.30));
        assert!(close(cost.node("each").usd, 0.15 + 0.30), "every item");
        assert_eq!(cost.node("each").calls, 2);
        assert_eq!(
            cost.node("sub").known_usd(),
            None,
            "an unpriced call inside"
        );
        assert!(close(cost.node("sub").usd, 0.15));
        assert_eq!(cost.node("sub").text(), "$0.1500 + unpriced");
        assert_eq!(cost.node("sub").input_tokens, 1_000_010);
        assert_eq!(
            cost.total.unpriced_models,
            BTreeSet::from(["ollama/llama3".to_string()])
        );
        assert!(close(cost.total.usd, 0.15 + 0.60 + 0.75 + 0.45 + 0.15));
        assert_eq!(cost.calls[5].usd, None);
        assert_eq!(cost.node("nothing").text(), "-");
    }

    #[test]
    fn dollars_read_at_every_size() {
        assert_eq!(usd_text(0.0), "$0");
        assert_eq!(usd_text(12.345), "$12.35");
        assert_eq!(usd_text(0.0123), "$0.0123");
        assert_eq!(usd_text(0.000_045), "$0.000045");
    }
}

/// Property tests over the prices file (`WEFT_PRICES`): random bytes, and the shipped table and
/// small ones mutated at random (as JSON and as text), must load into exactly the file's models
/// at the file's prices, or fail with an error naming the file; never panic.
///
/// As in `crates/engine/tests/it/fuzz.rs`, the test command runs a fixed number of cases from a
/// fixed seed; `scripts/fuzz.sh` runs many more from random seeds (`WEFT_FUZZ_CASES`,
/// `WEFT_FUZZ_SEED=random`), each case in a child process that catches aborts and hangs.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;
    use proptest::sample::Index;
    use serde_json::json;
    use weft_fuzz::{Change, apply, config};

    use super::*;

    /// Valid tables to mutate: the shipped one, and small ones.
    fn examples() -> Vec<String> {
        vec![
            SHIPPED.to_string(),
            json!({"openai/gpt-4o-mini": {"input": 1, "output": 2}}).to_string(),
            json!({"ollama/llama3": {"input": 0, "output": 0}, "a/b": {"output": 0.5, "input": 1e-9}})
                .to_string(),
            "{}".to_string(),
        ]
    }

    /// Values that might break the reader.
    fn hostile_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(json!(null)),
            Just(json!(true)),
            Just(json!(-1)),
            Just(json!(-0.0)),
            Just(json!(0)),
            Just(json!(u64::MAX)),
            Just(json!(i64::MIN)),
            Just(json!(f64::MAX)),
            Just(json!(f64::MIN_POSITIVE)),
            Just(json!("")),
            Just(json!("1")),
            Just(json!("/")),
            Just(json!("\u{0}\u{202e}\u{fffd}é")),
            Just(json!([])),
            Just(json!({})),
            Just(json!([1, 2])),
            Just(json!({"input": 1})),
            Just(json!({"input": 1, "output": 2})),
            Just(json!({"input": 1, "output": 2, "cached": 3})),
            Just(json!({"openai/x": {"input": 1, "output": 2}})),
            ".{0,20}".prop_map(Value::String),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(|number| json!(number)),
        ]
    }

    fn change() -> impl Strategy<Value = Change> {
        let key = prop_oneof![
            Just("input".to_string()),
            Just("output".to_string()),
            Just("openai/gpt-4o".to_string()),
            Just("gpt-4o".to_string()),
            Just(String::new()),
            ".{0,12}",
        ];
        prop_oneof![
            3 => (any::<Index>(), hostile_value()).prop_map(|(at, value)| Change::Replace(at, value)),
            1 => (any::<Index>(), key).prop_map(|(at, key)| Change::Rename(at, key)),
            1 => any::<Index>().prop_map(Change::Remove),
        ]
    }
    /// Writes `bytes` as a prices file and loads it over no prices: either exactly the file's
    /// models at the file's prices, or an error naming the file and saying what is wrong.
    fn load_and_check(bytes: &[u8]) -> Result<(), TestCaseError> {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("prices.json");
        std::fs::write(&path, bytes).expect("write the prices file");
        let shown = path.display().to_string();
        match Prices::none().with_file(&path) {
            Ok(prices) => {
                let value: Value =
                    serde_json::from_slice(bytes).expect("a table that loads is JSON");
                let models = value.as_object().expect("a table that loads is an object");
                prop_assert_eq!(prices.added.len(), models.len());
                for (model, written) in models {
                    let price = prices.price(model);
                    prop_assert!(price.is_some(), "`{}` was not loaded", model);
                    let price = price.expect("checked");
                    prop_assert_eq!(Some(price.input), written["input"].as_f64());
                    prop_assert_eq!(Some(price.output), written["output"].as_f64());
                    prop_assert!(price.input.is_finite() && price.input >= 0.0);
                    prop_assert!(price.output.is_finite() && price.output >= 0.0);
                    // Pricing with it, and showing the dollars, does not panic either.
                    let usage = Usage {
                        input_tokens: u64::from(u32::MAX),
                        output_tokens: 1,
                    };
                    let _ = usd_text(price.of(usage));
                }
                // The same table, over the shipped prices, replaces theirs.
                let over = Prices::shipped().with_file(&path).expect("loads again");
                for model in models.keys() {
                    prop_assert_eq!(over.price(model), prices.price(model));
                }
            }
            Err(error) => {
                let message = error.to_string();
                prop_assert!(
                    message.starts_with(&format!("prices in {shown}: ")),
                    "an error naming no file: {}",
                    message
                );
                prop_assert!(
                    message.len() > format!("prices in {shown}: ").len(),
                    "an error saying nothing: {}",
                    message
                );
                // The same text, read as text, fails the same way, naming its origin.
                if let Ok(text) = std::str::from_utf8(bytes) {
                    let again = Prices::none()
                        .with_text(text, Path::new("(a table)"))
                        .expect_err("the same text fails again")
                        .to_string();
                    prop_assert!(again.starts_with("prices in (a table): "), "{}", again);
                }
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(config(256))]

        #[test]
        fn mutated_prices_json_loads_exactly_or_fails_naming_the_file(
            example in any::<Index>(),
            changes in prop::collection::vec(change(), 1..6),
        ) {
            let examples = examples();
            let text = &examples[example.index(examples.len())];
            let mut value: Value = serde_json::from_str(text).expect("an example is JSON");
            for change in &changes {
                apply(&mut value, change);
            }
            load_and_check(value.to_string().as_bytes())?;
        }

        #[test]
        fn mutated_prices_text_loads_exactly_or_fails_naming_the_file(
            example in any::<Index>(),
            cut in any::<Index>(),
            length in 0usize..64,
            insert in prop::collection::vec(any::<u8>(), 0..16),
        ) {
            let examples = examples();
            let mut bytes = examples[example.index(examples.len())].clone().into_bytes();
            let at = cut.index(bytes.len() + 1);
            let end = (at + length).min(bytes.len());
            bytes.splice(at..end, insert);
            load_and_check(&bytes)?;
        }

        #[test]
        fn random_bytes_as_a_prices_file_fail_naming_the_file(
            bytes in prop::collection::vec(any::<u8>(), 0..300),
        ) {
            load_and_check(&bytes)?;
        }
    }
}
