//! The `weft` command's end-to-end tests, one module per subject, in one test binary: each runs
//! the real executable (and `weft serve`, `weft restate`, the app's commands) against real
//! servers on loopback.

mod approvals;
mod cli;
mod common;
#[cfg(unix)]
mod crash;
mod debugging;
#[cfg(unix)]
mod files;
mod flow_diff;
mod flow_tests;
mod fmt;
mod hostile;
mod hosts;
mod mail;
mod mcp;
mod postgres;
#[cfg(unix)]
mod restate;
mod schedules;
mod serve;
#[cfg(unix)]
mod serve_limits;
mod team_servers;
mod traces;
mod versions;
