//! The engine's integration tests, one module per subject, in one test binary (one link and
//! one process instead of one per file): flows run through the real engine against a scripted
//! LLM server on loopback, a real llama.cpp server, SQLite and PostgreSQL stores.

mod anthropic_client;
mod approvals;
mod budgets;
mod cost;
mod crash_safety;
mod debugging;
mod engine_runs;
mod fallbacks;
mod fuzz;
mod golden;
mod llama_peer;
mod mcp_tools;
mod node_kinds;
mod openai_client;
mod visits;
