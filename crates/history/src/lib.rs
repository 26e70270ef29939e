//! What stored runs did and cost, read back from the run store.
//!
//! - [`cost`]: the price table (shipped, `WEFT_PRICES`, the app's settings) and what each LLM
//!   call, node and run cost.
//! - [`visits`]: every visit of every node (loops, `forEach` items, steps inside subflows), with
//!   its input, output, time, tokens and cost.
//! - [`compare`]: two runs side by side, node by node.
//! - [`flow_diff`]: two versions of a flow, node by node and field by field.
//! - [`lines`]: two texts line by line.
//! - [`versions`]: a flow file's versions kept in the store.

pub mod compare;
pub mod cost;
pub mod flow_diff;
pub mod lines;
pub mod versions;
pub mod visits;
