//! Leases: a process that runs a run holds it, naming itself (`host:pid:start`), until a time it
//! keeps pushing forward while it lives. When a process dies without ending its runs (kill -9,
//! a power cut), the next process to open the store finds their owner gone (on this machine, by
//! its process id and start time; elsewhere, by the lease running out) and marks them
//! `interrupted`, so no run stays `running` forever.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// How long a lease lasts without being renewed.
pub(super) const LEASE: Duration = Duration::from_secs(15);
/// How often the writer renews the leases of this process's runs.
pub(super) const RENEW_EVERY: Duration = Duration::from_secs(5);

/// This process, as a lease owner: host, process id and the process's start time (so a later
/// process that reuses the id is not taken for it).
pub(super) fn current_owner() -> String {
    let pid = std::process::id();
    format!("{}:{pid}:{}", host(), start_time(pid).unwrap_or(0))
}

/// Whether the process that owns a lease still runs: `Some` when that can be told here (the
/// owner is on this machine, which has `/proc`), `None` otherwise.
pub(super) fn owner_alive(owner: &str) -> Option<bool> {
    let mut parts = owner.rsplitn(3, ':');
    let (Some(start), Some(pid), Some(owner_host)) = (parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    if owner_host != host() || !std::path::Path::new("/proc/self/stat").exists() {
        return None;
    }
    let pid: u32 = pid.parse().ok()?;
    let start: u64 = start.parse().ok()?;
    Some(start_time(pid) == Some(start))
}

/// The lease end for a lease taken or renewed at `now`.
pub(super) fn until(now: DateTime<Utc>) -> String {
    let end = now + chrono::Duration::from_std(LEASE).unwrap_or_default();
    end.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The current time as the store writes it.
pub(super) fn now_text() -> String {
    Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// When process `pid` started, in clock ticks since boot (field 22 of `/proc/<pid>/stat`).
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: read after it.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_made_up_one_is_not() {
        let me = current_owner();
        assert_eq!(owner_alive(&me), Some(true), "{me}");
        let (rest, start) = me.rsplit_once(':').expect("host:pid:start");
        let other_start = format!("{rest}:{}", start.parse::<u64>().expect("ticks") + 1);
        assert_eq!(
            owner_alive(&other_start),
            Some(false),
            "a reused pid is not the owner"
        );
        assert_eq!(
            owner_alive("elsewhere:1:1"),
            None,
            "another host cannot be told"
        );
        assert_eq!(owner_alive("garbage"), None);
    }
}
