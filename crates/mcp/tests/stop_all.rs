//! `stop_all_servers` (what a host calls before it exits) stops each stdio server with every
//! process it started. In a test binary of its own: it stops every server of the process.

mod support;

use support::{gone, marker, misbehaving, processes_marked, running};
use weft_mcp::{Hub, stop_all_servers};

#[tokio::test]
async fn stopping_all_servers_stops_what_they_started_too() {
    let hub = Hub::default();
    let marker = marker();
    let server = misbehaving("children", &marker, 5.0);
    hub.tools("parent", &server, None).await.expect("starts");
    assert!(running(&marker, 2).await, "the server and its child run");
    stop_all_servers();
    assert!(
        gone(&marker).await,
        "no orphan: {:?}",
        processes_marked(&marker)
    );
}
