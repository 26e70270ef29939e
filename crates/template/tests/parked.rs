//! A process that has given up on [`MAX_PARKED`] renders (each stopped by the allocator at the
//! hard memory limit, its thread parked for good with what it holds) refuses renders by
//! MiniJinja from then on, instead of growing by a hard limit more with each hostile template:
//! a `weft serve` up for weeks stays bounded. A binary of its own: the count is the process's.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use weft_template::{
    MAX_PARKED, NodeOutputs, RENDER_MEMORY_HARD_LIMIT, RenderLimits, Scope, TemplateError,
    Templates,
};

// As the hosts do: a render's memory is bounded only under this allocator.
#[global_allocator]
static ALLOCATOR: weft_alloc::Counting<std::alloc::System> =
    weft_alloc::Counting(std::alloc::System);

fn render(templates: &Templates, source: &str) -> Result<String, TemplateError> {
    let (input, initial, vars) = (Value::Null, Arc::new(json!("")), Arc::new(json!({})));
    let nodes = Arc::new(NodeOutputs::default());
    let limits = RenderLimits::within(Duration::from_secs(60), &Arc::new(CancellationToken::new()));
    templates.render(
        source,
        &Scope {
            input: &input,
            initial: &initial,
            approval: None,
            vars: &vars,
            nodes: &nodes,
        },
        limits,
    )
}

#[test]
fn after_the_parked_renders_a_process_keeps_templates_are_refused_naming_why() {
    // A string doubled over a literal list: no checkpoint between the allocations, so each
    // render reaches the hard limit and its thread parks.
    let doubling = format!(
        "{{% set ns = namespace(s='x') %}}{{% for i in '{}' %}}{{% set ns.s = ns.s ~ ns.s %}}\
         {{% endfor %}}{{{{ ns.s | length }}}}",
        "x".repeat(64)
    );
    let templates = Templates::new();
    assert_eq!(render(&templates, "{{ 1 + 1 }}").expect("renders"), "2");
    for parked in 1..=MAX_PARKED {
        let error = render(&templates, &doubling).expect_err("stopped");
        assert_eq!(error, TemplateError::TooMuchMemory, "render {parked}");
        // The others still render meanwhile.
        if parked < MAX_PARKED {
            assert_eq!(render(&templates, "{{ 2 * 3 }}").expect("renders"), "6");
        }
    }
    let error = render(&templates, "{{ 2 * 3 }}").expect_err("refused");
    assert_eq!(error, TemplateError::Unavailable);
    let message = error.to_string();
    assert!(
        message.contains("cannot be rendered in this process any more")
            && message.contains(&format!("{MAX_PARKED} renders ran out of memory"))
            && message.contains("restart"),
        "{message}"
    );
    // Within what the parked renders may hold, and no more.
    let resident_kib: usize = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    assert!(
        resident_kib * 1024 <= (MAX_PARKED + 1) * RENDER_MEMORY_HARD_LIMIT,
        "{resident_kib} KiB resident"
    );
}
