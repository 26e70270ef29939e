use serde_json::json;
use weft_sandbox::*;

#[test]
fn smoke() {
    let n: usize = std::env::var("N").unwrap().parse().unwrap();
    let kind = std::env::var("KIND").unwrap();
    let body = match kind.as_str() {
        "add" => format!("return {}", vec!["1"; n].join("+")),
        "paren" => format!("return {}1{}", "(".repeat(n), ")".repeat(n)),
        "list" => format!("return {}1{}", "[".repeat(n), "]".repeat(n)),
        "neg" => format!("return {}1", "-".repeat(n)),
        "pow" => format!("return {}", vec!["1"; n].join("**")),
        "if" => {
            let mut s = String::new();
            for i in 0..n {
                s.push_str(&" ".repeat(i));
                s.push_str("if True:\n");
            }
            s.push_str(&" ".repeat(n));
            s.push_str("pass\n");
            s
        }
        _ => panic!(),
    };
    let where_ = std::env::var("WHERE").unwrap();
    if where_ == "check" {
        let h = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || Sandbox::check(&body, &[]).len())
            .unwrap();
        println!("check -> {:?}", h.join().map(|_| "ok"));
    } else {
        let r = Sandbox::new().run(&body, &[], &json!({}), &json!(null), &Limits::default());
        let mut s = format!("{:?}", r);
        s.truncate(200);
        println!("run -> {s}");
    }
}
