//! The flow file: what a flow is on disk, and the values its nodes address.
//!
//! - [`Flow`] (`file`): loading (older and foreign forms normalized), saving in canonical form.
//! - [`path`]: dotted paths into JSON values (`scores.0`), as conditions and templates name them.
//! - [`output_schema`]: a node's `outputSchema`, compiled and checked.
//! - [`flow_in_dir`] (`folder`): a flow named in a folder of flows, never outside it.
//! - [`read_text_file`] (`read`): a file handed to Weft (a flow, pins, tests, datasets, prices),
//!   read whole when it is a regular file within a size limit.
//! - [`replace_file`] (`write`): a person's file written whole or not at all.
//!
//! Nothing here runs a flow; every other Weft crate stands on this one.

mod file;
mod folder;
pub mod output_schema;
pub mod path;
mod read;
mod write;

use std::collections::HashMap;

pub use file::*;
pub use folder::{FlowNameError, flow_files, flow_in_dir};
pub use read::{MAX_FILE_BYTES, read_file, read_text_file};
pub use write::{Access, replace_file};

/// A map by node id. Looked up several times per step, so with a faster hash than std's
/// SipHash (the ids come from the flow being run, not from a stranger).
pub type ByNode<V> = HashMap<String, V, foldhash::fast::RandomState>;
