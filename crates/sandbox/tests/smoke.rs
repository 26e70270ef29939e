use serde_json::json;
use weft_sandbox::*;

fn rss() -> usize {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let l = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    l.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<usize>()
        .unwrap()
        / 1024
}

#[test]
fn smoke() {
    let sb = Sandbox::new();
    let lim = Limits {
        timeout: std::time::Duration::from_millis(
            std::env::var("TMO")
                .map(|r| r.parse().unwrap())
                .unwrap_or(2000),
        ),
        ..Limits::default()
    };
    let srcs: Vec<String> = std::env::var("SRCS")
        .unwrap()
        .split("|||")
        .map(|s| s.to_string())
        .collect();
    for _ in 0..std::env::var("REPS")
        .map(|r| r.parse().unwrap())
        .unwrap_or(1)
    {
        for src in &srcs {
            let t = std::time::Instant::now();
            let r = sb.run(src, &[], &json!({}), &json!(null), &lim);
            let mut s = format!("{:?}", r);
            s.truncate(300);
            println!("{src:?} -> {s} {:?} rss={}MB", t.elapsed(), rss());
        }
    }
}
