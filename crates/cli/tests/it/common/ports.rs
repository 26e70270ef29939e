//! Loopback ports for the servers the tests start as programs of their own (aiosmtpd, Phoenix,
//! Restate), which are told a port rather than reporting the one they bound.
//!
//! A port picked free may be taken before the server binds it: by another test's server, or by
//! any program. A server that then fails to bind exits; but a wait that only connects to the
//! port would find the other listener first and hand the test a stranger. [`listened_by`]
//! tells the server that was started from any other.

use std::net::TcpListener;

/// A port free on loopback at this moment.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// The server of the first of three starts that does not exit while starting: `start` starts
/// one on ports it picks free, and gives the server's log when it exits (another program may
/// take a port between its pick and the server's bind). Fails with the last log.
pub fn start_on_free_ports<T>(server: &str, start: impl Fn() -> Result<T, String>) -> T {
    const ATTEMPTS: usize = 3;
    for attempt in 1..=ATTEMPTS {
        match start() {
            Ok(started) => return started,
            Err(log) if attempt < ATTEMPTS => {
                eprintln!("{server} exited while starting; again on other ports:\n{log}");
            }
            Err(log) => panic!("{server} exited while starting:\n{log}"),
        }
    }
    unreachable!("the last attempt returns or panics")
}

/// Whether the process `pid`, or a process it started, holds a socket listening on `port`
/// (Linux: the listening sockets of `/proc/net/tcp`, matched to the processes' descriptors).
pub fn listened_by(pid: u32, port: u16) -> bool {
    let sockets = listening_sockets(port);
    !sockets.is_empty()
        && process_tree(pid)
            .into_iter()
            .any(|member| holds_any(member, &sockets))
}

/// The `socket:[INODE]` names of the sockets listening on `port`, IPv4 or IPv6.
fn listening_sockets(port: u16) -> Vec<String> {
    // Each line: slot, local address as HEX_IP:HEX_PORT, remote address, state (0A: listening),
    // queues and timers, uid, timeout, inode.
    let local_port = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|text| {
            text.lines()
                .skip(1)
                .filter_map(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    let listening = fields.get(3) == Some(&"0A");
                    let on_port = fields
                        .get(1)
                        .is_some_and(|local| local.ends_with(&local_port));
                    (listening && on_port)
                        .then(|| fields.get(9).map(|inode| format!("socket:[{inode}]")))
                        .flatten()
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// `pid` and every process descended from it.
fn process_tree(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let child: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // After the command's closing parenthesis: state, then the parent's id.
            let parent = stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()?;
            Some((child, parent))
        })
        .collect();
    let mut tree = vec![pid];
    let mut next = 0;
    while let Some(&member) = tree.get(next) {
        tree.extend(
            parents
                .iter()
                .filter(|(_, parent)| *parent == member)
                .map(|(child, _)| *child),
        );
        next += 1;
    }
    tree
}

fn holds_any(pid: u32, sockets: &[String]) -> bool {
    let Ok(descriptors) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    descriptors.flatten().any(|descriptor| {
        std::fs::read_link(descriptor.path()).is_ok_and(|target| {
            sockets
                .iter()
                .any(|socket| target.as_os_str() == socket.as_str())
        })
    })
}

#[test]
fn a_port_is_listened_by_the_process_holding_it_and_by_no_other() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    assert!(listened_by(std::process::id(), port));
    let mut other = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("sleep");
    let stranger = listened_by(other.id(), port);
    let _ = other.kill();
    let _ = other.wait();
    assert!(
        !stranger,
        "a process holding no socket was taken for the listener"
    );
    drop(listener);
    assert!(!listened_by(std::process::id(), port), "a closed listener");
}
