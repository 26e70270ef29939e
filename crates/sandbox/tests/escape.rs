//! A battery of hostile snippets, all run in this one process (one test, so that the memory
//! bombs do not overlap other tests' runs): each must be refused before running or stopped
//! with a clear error, and the sandbox must still work normally afterwards.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weft_sandbox::{Limits, Sandbox, SandboxError};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// Refused by the static check.
    Refused,
    /// Stopped by the clock.
    Timeout,
    /// Stopped for memory (a guard or the watchdog).
    Memory,
    /// Stopped for memory or by the clock, whichever comes first.
    MemoryOrTimeout,
    /// Stopped by the recursion limit.
    Recursion,
    /// Raised an exception of this kind (the operation is not available).
    Raised(&'static str),
}

use Expect::*;

const BATTERY: &[(&str, Expect)] = &[
    // Imports, in every spelling.
    ("import os", Refused),
    ("import os.path as p", Refused),
    ("from os import path", Refused),
    ("from . import x", Refused),
    (
        "import importlib\nreturn importlib.import_module('os')",
        Refused,
    ),
    (
        "def f():\n    import sys\n    return sys\nreturn 1",
        Refused,
    ),
    ("return __import__('os').system('true')", Refused),
    ("return __builtins__", Refused),
    // Dunder traversal.
    ("return ().__class__.__base__.__subclasses__()", Refused),
    ("return [].__class__", Refused),
    ("x = 1\nreturn x.__class__.__mro__", Refused),
    ("return print.__self__", Refused),
    ("return len.__module__", Refused),
    ("return (lambda: 0).__code__", Refused),
    ("return (lambda: 0).__globals__", Refused),
    ("return str.mro()", Refused),
    ("return {}.__class__.__dict__", Refused),
    // Frames through generators and tracebacks.
    ("g = (i for i in [1])\nreturn g.gi_frame", Refused),
    (
        "g = (i for i in [1])\nreturn g.gi_frame.f_back.f_globals",
        Refused,
    ),
    (
        "def f():\n    yield 1\nreturn f().gi_code.co_consts",
        Refused,
    ),
    (
        "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    return e.__traceback__.tb_frame",
        Refused,
    ),
    // Reflection builtins.
    ("return getattr(1, '__cl' + 'ass__')", Refused),
    ("setattr(len, 'x', 1)", Refused),
    ("return type(1)", Refused),
    ("return type(1)('5')", Refused),
    ("return vars()", Refused),
    ("return globals()", Refused),
    ("return locals()", Refused),
    ("return dir()", Refused),
    ("return eval('1')", Refused),
    ("exec('x = 1')", Refused),
    ("return open('/etc/passwd').read()", Refused),
    ("return compile('1', 'f', 'eval')", Refused),
    ("breakpoint()", Refused),
    ("help()", Refused),
    ("return memoryview(b'x')", Refused),
    ("return object()", Refused),
    ("class A:\n    pass\nreturn A", Refused),
    (
        "match 1:\n    case int(__class__=c):\n        return c",
        Refused,
    ),
    ("async def f():\n    pass\nreturn 1", Refused),
    // Format strings that could reach attributes.
    ("return '{0.__class__}'.format(1)", Refused),
    ("return '{x}'.format_map({'x': 1})", Refused),
    ("return str.format('{0.__class__}', 1)", Refused),
    ("x = 1\nreturn f'{x.__class__}'", Refused),
    ("return f'{print.__self__!r}'", Refused),
    ("return f'{1:>10000000000}'", Refused),
    // Names that are simply not there.
    ("return iter([1])", Raised("NameError")),
    ("return ValueError", Raised("NameError")),
    ("return chr(65)", Raised("NameError")),
    // Recursion.
    ("def f(n):\n    return f(n + 1)\nreturn f(0)", Recursion),
    ("f = lambda n: f(n + 1)\nreturn f(0)", Recursion),
    // Endless loops.
    ("while True:\n    pass", Timeout),
    ("for i in range(10**12):\n    pass", Timeout),
    ("return sum(range(10**12))", Timeout),
    ("return max(i for i in range(10**12))", MemoryOrTimeout),
    (
        "while True:\n    try:\n        while True:\n            pass\n    except:\n        pass",
        Timeout,
    ),
    (
        "while True:\n    try:\n        pass\n    finally:\n        continue",
        Timeout,
    ),
    (
        "def g():\n    try:\n        yield 1\n    finally:\n        while True:\n            pass\nx = g()\nfor v in x:\n    break\nwhile True:\n    pass",
        Timeout,
    ),
    // Memory bombs stopped by a guard before allocating.
    ("x = [0] * (10**9)", Memory),
    ("x = (10**9) * [0]", Memory),
    ("x = 'x' * 10**10", Memory),
    ("x = b'x' * 10**10", Memory),
    ("x = (1, 2) * 10**9", Memory),
    ("x = [0]\nx *= 10**9", Memory),
    ("x = 10**10**10", Memory),
    ("x = 2 ** (2 ** 40)", Memory),
    ("x = 1 << 10**10", Memory),
    ("x = 7\nwhile True:\n    x = x * x", Memory),
    ("return '%10000000000d' % 1", Memory),
    ("return '%*d' % (10**10, 1)", Memory),
    ("return 'a'.ljust(10**10)", Memory),
    ("f = 'a'.center\nreturn f(10**10)", Memory),
    ("return '1'.zfill(10**10)", Memory),
    ("return ('\\t' * 1000).expandtabs(10**8)", Memory),
    ("return ('a' * 1000).replace('', 'b' * 100000)", Memory),
    (
        "s = 'x' * 10**6\nreturn ''.join([s for i in range(1000)])",
        Memory,
    ),
    ("s = 'x' * 10**6\nreturn [s] * 1000", Memory),
    ("return ('a' * 10**6).translate({97: 'b' * 1000})", Memory),
    ("return (1).to_bytes(10**10, 'big')", Memory),
    ("n = 10**10\nreturn f'{1:>{n}}'", Memory),
    // Memory bombs stopped by the watchdog (or the clock).
    ("s = 'a'\nwhile True:\n    s = s + s", MemoryOrTimeout),
    ("l = [[1]]\nwhile True:\n    l = l + l", MemoryOrTimeout),
    ("return list(range(10**9))", MemoryOrTimeout),
    ("return sorted(range(10**10))", MemoryOrTimeout),
    (
        "d = {}\ni = 0\nwhile True:\n    d[i] = str(i) * 10\n    i += 1",
        MemoryOrTimeout,
    ),
    (
        "l = []\nwhile True:\n    l.append([1] * 1000)",
        MemoryOrTimeout,
    ),
    ("l = [0]\nwhile True:\n    l.extend(l)", MemoryOrTimeout),
];

fn matches(expect: Expect, result: &Result<weft_sandbox::CodeRun, SandboxError>) -> bool {
    match (expect, result) {
        (Refused, Err(SandboxError::Refused { line, .. })) => *line >= 1,
        (Timeout, Err(SandboxError::Timeout { .. })) => true,
        (Memory, Err(SandboxError::Memory)) => true,
        (MemoryOrTimeout, Err(SandboxError::Memory | SandboxError::Timeout { .. })) => true,
        (Recursion, Err(SandboxError::Recursion(200))) => true,
        (Raised(kind), Err(SandboxError::Raised { kind: k, .. })) => k == kind,
        _ => false,
    }
}

#[test]
fn hostile_snippets_are_refused_or_stopped() {
    assert!(BATTERY.len() >= 30);
    let sandbox = Sandbox::new();
    // The first run starts an interpreter; on a machine busy with other tests that alone can
    // take longer than the battery's short timeout, which is for the snippets.
    sandbox
        .run(
            "return 1",
            &[],
            &json!({}),
            &Value::Null,
            &Limits::default(),
        )
        .expect("an interpreter starts");
    let limits = Limits {
        timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let started = Instant::now();
    let mut failures = Vec::new();
    for (body, expect) in BATTERY {
        let run_started = Instant::now();
        let result = sandbox.run(body, &[], &json!({}), &Value::Null, &limits);
        let took = run_started.elapsed();
        if !matches(*expect, &result) {
            failures.push(format!("{body:?}: expected {expect:?}, got {result:?}"));
        }
        // Stopped runs answer within the timeout plus the grace period.
        if took > Duration::from_secs(2) {
            failures.push(format!("{body:?} took {took:?}"));
        }
        // The static check agrees with the run about refusals.
        if *expect == Refused && Sandbox::check(body, &[]).is_empty() {
            failures.push(format!("{body:?}: check() found nothing"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!(
        "{} hostile snippets in {:?}",
        BATTERY.len(),
        started.elapsed()
    );

    // The sandbox still works normally.
    let result = sandbox
        .run(
            "full = first_name + \" \" + last_name\nreturn {\"full_name\": full, \"is_adult\": age >= 18}",
            &["first_name".to_owned(), "last_name".to_owned(), "age".to_owned()],
            &json!({}),
            &json!({"first_name": "Ada", "last_name": "Lovelace", "age": 36}),
            &limits,
        )
        .expect("the run succeeds");
    assert_eq!(
        result.value,
        json!({"full_name": "Ada Lovelace", "is_adult": true})
    );
}

#[test]
fn strings_that_mention_refused_names_are_fine() {
    let sandbox = Sandbox::new();
    let result = sandbox.run(
        "text = 'import os; getattr(x, \"__class__\"); eval(1)'\nreturn text.split(';')[0]",
        &[],
        &json!({}),
        &Value::Null,
        &Limits::default(),
    );
    assert_eq!(result.expect("the run succeeds").value, json!("import os"));
}

#[test]
fn deeply_nested_code_is_refused_not_a_crash() {
    let deep = [
        format!("return {}", vec!["1"; 100_000].join("+")),
        format!("return {}1{}", "(".repeat(10_000), ")".repeat(10_000)),
        format!("return {}1{}", "[".repeat(101), "]".repeat(101)),
        format!("return {}1", "-".repeat(100_000)),
        format!("return {}1", "not ".repeat(100_000)),
        format!("return {}1", "lambda: ".repeat(100_000)),
        format!("f = lambda: f\nreturn f{}", "()".repeat(100_000)),
        (0..150)
            .map(|i| format!("{}if True:\n", " ".repeat(i)))
            .collect::<String>()
            + &" ".repeat(150)
            + "pass\n",
        "x = 1\n".repeat(200_000),
    ];
    for body in &deep {
        // From a thread with a small stack, like a runtime's blocking pool.
        let checked = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn({
                let body = body.clone();
                move || Sandbox::check(&body, &[])
            })
            .expect("a thread")
            .join()
            .expect("the check does not crash");
        assert!(
            matches!(checked.as_slice(), [SandboxError::Refused { .. }]),
            "{}: {checked:?}",
            &body[..40]
        );
        let result = Sandbox::new().run(body, &[], &json!({}), &Value::Null, &Limits::default());
        assert!(
            matches!(result, Err(SandboxError::Refused { .. })),
            "{}: {result:?}",
            &body[..40]
        );
    }
    // Up to the limits, nesting is fine.
    let result = Sandbox::new().run(
        &format!("return {}", vec!["1"; 1000].join("+")),
        &[],
        &json!({}),
        &Value::Null,
        &Limits::default(),
    );
    assert_eq!(result.map(|r| r.value), Ok(json!(1000)));
}
