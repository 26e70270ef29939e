//! Every visit of every node of a run (docs/debugging.md): a node that ran several times — in a
//! loop, for
//! each item of a `forEach`, inside a subflow — shows each visit's input, output, time, tokens and
//! cost, not only the latest.
//!
//! Read from what the run already keeps, so running costs nothing more: the events give each
//! step's start and end (its output is on `step_end`, its input is the output of the node named
//! by `step_start.from`), and the recorded LLM calls give tokens and cost per node and visit.

use std::collections::{HashMap, HashSet, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::compare::{NodeStatus, millis_between};
use crate::cost::{CallCost, Cost, RunCost};
use weft_event::call_segment;
use weft_event::{EventType, RunEvent, RunStatus};
use weft_flow::Flow;
use weft_nodes::NodeKind;
use weft_store::{NodeOutputRecord, RunRecord};

/// One run of one node.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeVisit {
    /// The node of the run's own flow this visit is part of: the node itself, or the `subflow`
    /// or `forEach` step it ran inside.
    pub node_id: String,
    /// The step's node key: `draft`, `research/draft` inside the subflow `research`,
    /// `each[2]/summarize` in item 2 of the forEach `each`.
    pub key: String,
    /// 1 for this node's first run in its (possibly nested) run, 2 for the second, …
    pub visit: u64,
    /// For a step inside a nested run: the visit of `node_id` it ran in.
    pub outer_visit: Option<u64>,
    /// For a step of a `forEach` item: the item's index.
    pub item: Option<u64>,
    pub status: NodeStatus,
    /// What the step was given (`None` where the events cannot tell, as for the node a partial
    /// run began at).
    pub input: Option<Value>,
    pub output: Option<Value>,
    pub error: Option<String>,
    pub started_at: String,
    pub duration_ms: Option<u64>,
    /// The LLM calls of this visit: its own, its subagents' and those of the steps inside it.
    pub cost: Cost,
    /// The MCP tool calls this step made, in the order they were made.
    pub tool_calls: Vec<VisitToolCall>,
    /// The models that answered this step (`provider/model`), in order, each once: a fallback
    /// model shows here when the node's own failed for good.
    pub models: Vec<String>,
}

/// One MCP tool call of a visit, as its events tell it.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VisitToolCall {
    pub server: String,
    pub tool: String,
    pub arguments: Value,
    /// The result as the model got it (cut at 64 KiB, as in the event); `None` until it came,
    /// and for a call that failed.
    pub result: Option<String>,
    /// The tool reported an error, or the call failed (`error` says why).
    pub is_error: bool,
    pub error: Option<String>,
    pub duration_ms: Option<u64>,
    #[serde(skip)]
    call_id: String,
}

/// Every visit of the stored run `record`, in the order the steps started, with the cost of
/// each at the prices `cost` was made with ([`crate::cost::run_cost`]).
pub fn node_visits(
    record: &RunRecord,
    events: &[RunEvent],
    outputs: &[NodeOutputRecord],
    cost: &RunCost,
) -> Vec<NodeVisit> {
    let flow = Flow::parse(&record.flow_json, "the stored flow").ok();
    let mut walk = Walk::new(record, flow.as_ref());
    for event in events {
        walk.see(event);
    }
    walk.finish(record.summary.status, outputs, cost)
}

/// A visit being read from the events.
struct Open {
    visit: NodeVisit,
    /// The step's key as its LLM calls are recorded (with the visits of enclosing steps).
    call_key: String,
    /// The step has no known input but passes it on (the first step of a nested run, its
    /// `start`): its input is its output.
    input_is_output: bool,
}

struct Walk<'a> {
    record: &'a RunRecord,
    flow: Option<&'a Flow>,
    visits: Vec<Open>,
    /// Steps started per call key.
    counts: HashMap<String, u64>,
    /// The latest visit started per call key (an index into `visits`).
    latest: HashMap<String, usize>,
    /// Visits started and not ended per call key, oldest first.
    open: HashMap<String, VecDeque<usize>>,
    /// The latest output per call key (for the input of the steps it starts).
    last_output: HashMap<String, Value>,
    /// Nested runs (by call scope) whose first step has started.
    scopes_started: HashSet<String>,
}

impl<'a> Walk<'a> {
    fn new(record: &'a RunRecord, flow: Option<&'a Flow>) -> Walk<'a> {
        Walk {
            record,
            flow,
            visits: Vec::new(),
            counts: HashMap::new(),
            latest: HashMap::new(),
            open: HashMap::new(),
            last_output: HashMap::new(),
            scopes_started: HashSet::new(),
        }
    }

    /// The call scope of the event scope `scope` (each enclosing step's segment with its visit),
    /// the top-level node it is inside and that node's visit.
    fn call_scope(&self, scope: &str) -> (String, String, u64) {
        let mut call_scope = String::new();
        let mut top = (String::new(), 1);
        for (index, segment) in scope.split('/').enumerate() {
            let step = segment.split_once('[').map_or(segment, |(node, _)| node);
            let step_key = if call_scope.is_empty() {
                step.to_string()
            } else {
                format!("{call_scope}/{step}")
            };
            let visit = self
                .latest
                .get(&step_key)
                .map_or(1, |&index| self.visits[index].visit.visit);
            if index == 0 {
                top = (step.to_string(), visit);
            }
            if !call_scope.is_empty() {
                call_scope.push('/');
            }
            call_scope.push_str(&call_segment(segment, visit));
        }
        (call_scope, top.0, top.1)
    }

    fn see(&mut self, event: &RunEvent) {
        let Some(node) = event.node_id.as_deref().filter(|node| !node.is_empty()) else {
            return;
        };
        let (call_scope, top, outer_visit) = match event.scope.as_deref() {
            Some(scope) => {
                let (call_scope, top, visit) = self.call_scope(scope);
                (Some(call_scope), top, Some(visit))
            }
            None => (None, node.to_string(), None),
        };
        let in_scope = |id: &str| match &call_scope {
            Some(scope) => format!("{scope}/{id}"),
            None => id.to_string(),
        };
        let call_key = in_scope(node);
        match event.kind {
            EventType::StepStart => {
                let count = self.counts.entry(call_key.clone()).or_insert(0);
                *count += 1;
                let visit = *count;
                let mut input_is_output = false;
                let input = match &event.from {
                    Some(from) => self.last_output.get(&in_scope(from)).cloned(),
                    None => match &call_scope {
                        None => self.top_level_input(node),
                        Some(scope) => {
                            // The first step of a nested run is its `start`, which passes the
                            // nested run's input on.
                            input_is_output = self.scopes_started.insert(scope.clone());
                            None
                        }
                    },
                };
                if let Some(scope) = &call_scope {
                    self.scopes_started.insert(scope.clone());
                }
                let key = match &event.scope {
                    Some(scope) => format!("{scope}/{node}"),
                    None => node.to_string(),
                };
                let index = self.visits.len();
                self.visits.push(Open {
                    visit: NodeVisit {
                        node_id: top,
                        key,
                        visit,
                        outer_visit,
                        item: event.item,
                        status: NodeStatus::Running,
                        input,
                        output: None,
                        error: None,
                        started_at: event.ts.to_string(),
                        duration_ms: None,
                        cost: Cost::default(),
                        tool_calls: Vec::new(),
                        models: Vec::new(),
                    },
                    call_key: call_key.clone(),
                    input_is_output,
                });
                self.latest.insert(call_key.clone(), index);
                self.open.entry(call_key).or_default().push_back(index);
            }
            EventType::StepEnd | EventType::Error => {
                let Some(index) = self.open.get_mut(&call_key).and_then(VecDeque::pop_front) else {
                    return;
                };
                let open = &mut self.visits[index];
                open.visit.duration_ms = millis_between(&open.visit.started_at, &event.ts);
                if event.kind == EventType::StepEnd {
                    let output = value_of_text(&event.content);
                    open.visit.status = NodeStatus::Completed;
                    if open.input_is_output {
                        open.visit.input = Some(output.clone());
                    }
                    open.visit.output = Some(output.clone());
                    self.last_output.insert(call_key, output);
                } else {
                    open.visit.status = NodeStatus::Failed;
                    open.visit.error = Some(event.content.clone());
                }
            }
            EventType::ToolCall => {
                let Some(&index) = self.latest.get(&call_key) else {
                    return;
                };
                let call: Value = serde_json::from_str(&event.content).unwrap_or_default();
                let text = |name: &str| call[name].as_str().unwrap_or_default().to_string();
                let calls = &mut self.visits[index].visit.tool_calls;
                // A step run again after a pause (a tool approval) logs its calls again.
                if calls.iter().any(|seen| {
                    seen.call_id == text("callId") && seen.arguments == call["arguments"]
                }) {
                    return;
                }
                calls.push(VisitToolCall {
                    server: text("server"),
                    tool: text("tool"),
                    arguments: call["arguments"].clone(),
                    result: None,
                    is_error: false,
                    error: None,
                    duration_ms: None,
                    call_id: text("callId"),
                });
            }
            EventType::ToolResult | EventType::ToolError => {
                let Some(&index) = self.latest.get(&call_key) else {
                    return;
                };
                let ended: Value = serde_json::from_str(&event.content).unwrap_or_default();
                let call_id = ended["callId"].as_str().unwrap_or_default();
                let Some(call) = self.visits[index]
                    .visit
                    .tool_calls
                    .iter_mut()
                    .rev()
                    .find(|call| call.call_id == call_id)
                else {
                    return;
                };
                call.duration_ms = ended["durationMs"].as_u64();
                if event.kind == EventType::ToolResult {
                    call.result = ended["content"].as_str().map(str::to_string);
                    call.is_error = ended["isError"] == true;
                } else {
                    call.is_error = true;
                    call.error = ended["error"].as_str().map(str::to_string);
                }
            }
            EventType::LlmResponse => {
                let (Some(&index), Some(model)) = (self.latest.get(&call_key), &event.model) else {
                    return;
                };
                let models = &mut self.visits[index].visit.models;
                if !models.contains(model) {
                    models.push(model.clone());
                }
            }
            EventType::WaitInput => self.mark_open(&call_key, NodeStatus::Waiting),
            EventType::InputReceived => self.mark_open(&call_key, NodeStatus::Running),
            _ => {}
        }
    }

    fn mark_open(&mut self, call_key: &str, status: NodeStatus) {
        if let Some(&index) = self.open.get(call_key).and_then(VecDeque::back) {
            self.visits[index].visit.status = status;
        }
    }

    /// The input of a step of the run's own flow that no node's output started: the run's input
    /// for `start`, the arrived outputs for a `join`.
    fn top_level_input(&self, node_id: &str) -> Option<Value> {
        let flow = self.flow?;
        match flow.node(node_id).and_then(NodeKind::of)? {
            NodeKind::Start => Some(self.record.input.clone()),
            NodeKind::Join => {
                let arrived: Map<String, Value> = flow
                    .edges
                    .iter()
                    .filter(|edge| edge.target == node_id && !edge.is_subagent())
                    .filter_map(|edge| {
                        let output = self.last_output.get(&edge.source)?;
                        Some((edge.source.clone(), output.clone()))
                    })
                    .collect();
                Some(Value::Object(arrived))
            }
            _ => None,
        }
    }

    fn finish(
        self,
        status: RunStatus,
        outputs: &[NodeOutputRecord],
        cost: &RunCost,
    ) -> Vec<NodeVisit> {
        let calls = CallIndex::new(&cost.calls);
        let subagents = self.flow.map(subagents_of).unwrap_or_default();
        // The store keeps each node's latest output exactly (a text that looks like JSON stays
        // a text there): it stands for the last visit that ended.
        let mut last_ended: HashMap<&str, usize> = HashMap::new();
        for (index, open) in self.visits.iter().enumerate() {
            if open.visit.status == NodeStatus::Completed {
                last_ended.insert(open.visit.key.as_str(), index);
            }
        }
        let exact: HashMap<usize, &Value> = outputs
            .iter()
            .filter(|stored| !stored.output.is_null())
            .filter_map(|stored| Some((*last_ended.get(stored.node_id.as_str())?, &stored.output)))
            .collect();
        let still_going = matches!(status, RunStatus::Running);
        self.visits
            .into_iter()
            .enumerate()
            .map(|(index, open)| {
                let mut visit = open.visit;
                if let Some(output) = exact.get(&index) {
                    visit.output = Some((*output).clone());
                }
                if visit.status == NodeStatus::Running && !still_going {
                    visit.status = NodeStatus::Stopped;
                }
                let top_level = visit.outer_visit.is_none();
                let mut spent = Cost::default();
                for call in calls.of(&open.call_key, visit.visit) {
                    spent.add(call);
                }
                if top_level {
                    for subagent in subagents.get(&visit.node_id).into_iter().flatten() {
                        for call in calls.of(subagent, visit.visit) {
                            spent.add(call);
                        }
                    }
                }
                for call in calls.inside(&open.call_key, visit.visit) {
                    spent.add(call);
                }
                visit.cost = spent;
                visit
            })
            .collect()
    }
}

/// The priced calls of a run, by the step that made them and by the step they ran inside.
struct CallIndex<'a> {
    /// By (call key, visit).
    own: HashMap<(String, u64), Vec<&'a CallCost>>,
    /// By (call key of an enclosing step, its visit).
    inside: HashMap<(String, u64), Vec<&'a CallCost>>,
}

impl<'a> CallIndex<'a> {
    fn new(calls: &'a [CallCost]) -> CallIndex<'a> {
        let mut own: HashMap<(String, u64), Vec<&CallCost>> = HashMap::new();
        let mut inside: HashMap<(String, u64), Vec<&CallCost>> = HashMap::new();
        for call in calls {
            own.entry((call.node_key.clone(), call.visit))
                .or_default()
                .push(call);
            // `outer@2/each[1]@3/x` ran inside visit 2 of `outer` and visit 3 of `outer@2/each`.
            let segments: Vec<&str> = call.node_key.split('/').collect();
            let mut scope = String::new();
            for segment in &segments[..segments.len().saturating_sub(1)] {
                let (without_visit, visit) = match segment.rsplit_once('@') {
                    Some((step, visit)) => (step, visit.parse().unwrap_or(1)),
                    None => (*segment, 1),
                };
                let step = without_visit
                    .split_once('[')
                    .map_or(without_visit, |(node, _)| node);
                let step_key = if scope.is_empty() {
                    step.to_string()
                } else {
                    format!("{scope}/{step}")
                };
                inside.entry((step_key, visit)).or_default().push(call);
                if !scope.is_empty() {
                    scope.push('/');
                }
                scope.push_str(segment);
            }
        }
        CallIndex { own, inside }
    }

    /// The calls step `call_key` made itself in visit `visit`.
    fn of(&self, call_key: &str, visit: u64) -> &[&'a CallCost] {
        self.own
            .get(&(call_key.to_string(), visit))
            .map_or(&[], Vec::as_slice)
    }

    /// The calls made inside visit `visit` of step `call_key` (by the steps of its nested runs).
    fn inside(&self, call_key: &str, visit: u64) -> &[&'a CallCost] {
        self.inside
            .get(&(call_key.to_string(), visit))
            .map_or(&[], Vec::as_slice)
    }
}

/// Each top-level agent's subagents, and theirs (a subagent call is made in its parent's visit).
fn subagents_of(flow: &Flow) -> HashMap<String, Vec<String>> {
    let mut direct: HashMap<&str, Vec<&str>> = HashMap::new();
    for edge in flow.edges.iter().filter(|edge| edge.is_subagent()) {
        direct
            .entry(edge.source.as_str())
            .or_default()
            .push(edge.target.as_str());
    }
    direct
        .keys()
        .map(|&parent| {
            let mut found: Vec<String> = Vec::new();
            let mut pending = vec![parent];
            while let Some(node) = pending.pop() {
                for &child in direct.get(node).into_iter().flatten() {
                    if child != parent && !found.iter().any(|seen| seen == child) {
                        found.push(child.to_string());
                        pending.push(child);
                    }
                }
            }
            (parent.to_string(), found)
        })
        .collect()
}

/// A step's output as its `step_end` shows it: JSON objects and arrays are read back as JSON,
/// anything else is text.
fn value_of_text(text: &str) -> Value {
    let trimmed = text.trim_start();
    if (trimmed.starts_with('{') || trimmed.starts_with('['))
        && let Ok(value) = serde_json::from_str(text)
    {
        return value;
    }
    Value::String(text.to_string())
}
