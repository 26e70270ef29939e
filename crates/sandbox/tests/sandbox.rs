//! The sandbox's behaviour for ordinary code: wrapping, parameters, builtins, print, errors,
//! clean state between runs, concurrency.

use std::time::Duration;

use serde_json::{Value, json};
use weft_sandbox::{CodeRun, Limits, Sandbox, SandboxError};

fn fields(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

fn limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(10),
        ..Limits::default()
    }
}

/// Runs `body` with a single `input` parameter.
fn run(body: &str, input: Value) -> Result<CodeRun, SandboxError> {
    Sandbox::new().run(body, &[], &json!({}), &input, &limits())
}

fn value(body: &str) -> Value {
    match run(body, Value::Null) {
        Ok(run) => run.value,
        Err(e) => panic!("{body:?} failed: {e}"),
    }
}

#[test]
fn seed_000_example() {
    let result = Sandbox::new()
        .run(
            "full = first_name + \" \" + last_name\nreturn {\"full_name\": full, \"is_adult\": age >= 18}",
            &fields(&["first_name", "last_name", "age"]),
            &json!({"topic": "x"}),
            &json!({"first_name": "Ada", "last_name": "Lovelace", "age": 36}),
            &limits(),
        )
        .expect("the run succeeds");
    assert_eq!(
        result.value,
        json!({"full_name": "Ada Lovelace", "is_adult": true})
    );
    assert!(result.printed.is_empty());
}

#[test]
fn missing_fields_are_none_and_extra_keys_are_ignored() {
    let sandbox = Sandbox::new();
    let result = sandbox
        .run(
            "return [a, b]",
            &fields(&["a", "b"]),
            &json!({}),
            &json!({"a": 1, "c": 3}),
            &limits(),
        )
        .expect("the run succeeds");
    assert_eq!(result.value, json!([1, null]));
    // A non-object input: every field is None.
    let result = sandbox
        .run(
            "return a",
            &fields(&["a"]),
            &json!({}),
            &json!([1, 2]),
            &limits(),
        )
        .expect("the run succeeds");
    assert_eq!(result.value, Value::Null);
}

#[test]
fn single_input_parameter() {
    assert_eq!(
        run("return input['x'] * 2", json!({"x": 21}))
            .expect("the run succeeds")
            .value,
        json!(42)
    );
    assert_eq!(
        run("return len(input)", json!([1, 2, 3]))
            .expect("the run succeeds")
            .value,
        json!(3)
    );
    assert_eq!(
        run("return input", json!("text"))
            .expect("the run succeeds")
            .value,
        json!("text")
    );
}

#[test]
fn initial_is_available() {
    let result = Sandbox::new()
        .run(
            "return initial['topic'] + '!' + str(n)",
            &fields(&["n"]),
            &json!({"topic": "llamas"}),
            &json!({"n": 3}),
            &limits(),
        )
        .expect("the run succeeds");
    assert_eq!(result.value, json!("llamas!3"));
}

#[test]
fn a_field_may_share_a_refused_builtin_name() {
    let result = Sandbox::new()
        .run(
            "return type + '/' + str(input)",
            &fields(&["type", "input"]),
            &json!({}),
            &json!({"type": "doc", "input": 1}),
            &limits(),
        )
        .expect("the run succeeds");
    assert_eq!(result.value, json!("doc/1"));
}

#[test]
fn print_is_captured() {
    let result = run(
        "print('hello', 42)\nprint('a', 'b', sep='-', end='!')\nprint()\nfor i in range(2): print(i)\nreturn 'done'",
        Value::Null,
    )
    .expect("the run succeeds");
    assert_eq!(result.value, json!("done"));
    assert_eq!(result.printed, vec!["hello 42", "a-b!", "", "0", "1"]);
    assert!(run("print('x', file=None)", Value::Null).is_err());
}

#[test]
fn json_values_round_trip() {
    let input = json!({"s": "é✓", "i": -7, "big": 9007199254740993u64, "f": 1.5, "b": false, "n": null, "l": [1, [2, {}]], "d": {"k": "v"}});
    assert_eq!(
        run("return input", input.clone())
            .expect("the run succeeds")
            .value,
        input
    );
    assert_eq!(value("return (1, 'a', None)"), json!([1, "a", null]));
    assert_eq!(
        value("return {'a': (1, 2), 'b': [True]}"),
        json!({"a": [1, 2], "b": [true]})
    );
    assert_eq!(value("pass"), Value::Null);
    assert_eq!(value(""), Value::Null);
    assert_eq!(value("return 2**62"), json!(4611686018427387904i64));
    assert_eq!(value("return 2**64 - 1"), json!(u64::MAX));
}

#[test]
fn non_json_return_values() {
    for body in [
        "return {1, 2}",
        "return lambda: 0",
        "return float('nan')",
        "return float('inf')",
        "return {1: 'a'}",
        "return 2**64",
        "return range",
        "return (i for i in [1])",
        "x = []\nx.append(x)\nreturn x",
    ] {
        assert!(
            matches!(run(body, Value::Null), Err(SandboxError::NotJson(_))),
            "{body}: {:?}",
            run(body, Value::Null)
        );
    }
}

#[test]
fn every_allowed_builtin_works() {
    let body = r#"
checks = [
    abs(-3) == 3,
    bool(1) is True,
    dict(a=1)['a'] == 1,
    list(enumerate('ab')) == [(0, 'a'), (1, 'b')],
    float('2.5') == 2.5,
    int('42') == 42,
    isinstance(3, int) and isinstance('x', str) and not isinstance(3, (list, dict)),
    len([1, 2, 3]) == 3,
    list((1, 2)) == [1, 2],
    max(3, 9, 4) == 9,
    min([3, 9, 4]) == 3,
    list(range(2, 8, 2)) == [2, 4, 6],
    list(reversed([1, 2, 3])) == [3, 2, 1],
    round(2.567, 2) == 2.57,
    set([1, 1, 2]) == {1, 2},
    sorted([3, 1, 2], reverse=True) == [3, 2, 1],
    str(12) == '12',
    sum([1, 2, 3]) == 6,
    tuple([1, 2]) == (1, 2),
    list(zip([1, 2], 'ab')) == [(1, 'a'), (2, 'b')],
    True and not False and None is None,
]
print('printed')
return checks
"#;
    let result = run(body, Value::Null).expect("the run succeeds");
    assert_eq!(result.value, json!(vec![true; 21]));
    assert_eq!(result.printed, vec!["printed"]);
}

#[test]
fn ordinary_python_works() {
    let body = r#"
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
words = "the quick brown fox".split()
counts = {}
for w in words:
    counts[w[0]] = counts.get(w[0], 0) + 1
squares = [i * i for i in range(5) if i % 2 == 0]
text = f"{len(words)} words, pi={3.14159:.2f}, padded={'x':>4}|{7:{3}d}"
try:
    1 / 0
except:
    caught = True
assert caught, "not caught"
label = '%s-%03d' % ('n', 7)
return {
    "fib": fib(15),
    "counts": counts,
    "squares": squares,
    "text": text,
    "upper": "abc".upper().ljust(5, '.'),
    "joined": ", ".join(sorted(counts)),
    "replaced": "a-b-c".replace("-", "+"),
    "label": label,
    "big": 3 ** 100 % 1000,
    "shifted": 1 << 10,
    "repeat": "ab" * 3,
    "lambda": sorted(words, key=lambda w: -len(w))[0],
    "bytes": (258).to_bytes(2, 'big')[0],
    "for_underscore": [0 for _ in range(3)],
}
"#;
    assert_eq!(
        value(body),
        json!({
            "fib": 610,
            "counts": {"t": 1, "q": 1, "b": 1, "f": 1},
            "squares": [0, 4, 16],
            "text": "4 words, pi=3.14, padded=   x|  7",
            "upper": "ABC..",
            "joined": "b, f, q, t",
            "replaced": "a+b+c",
            "label": "n-007",
            "big": 1,
            "shifted": 1024,
            "repeat": "ababab",
            "lambda": "quick",
            "bytes": 1,
            "for_underscore": [0, 0, 0],
        })
    );
}

#[test]
fn augmented_assignment_is_guarded_but_keeps_its_meaning() {
    let body = r#"
x = 3
x *= 4
x **= 2
x <<= 1
x %= 1000
items = [1]
alias = items
items *= 3
d = {'k': 2}
d['k'] *= 5
s = '%d'
s %= 5
return [x, items, alias is items, d, s]
"#;
    assert_eq!(value(body), json!([288, [1, 1, 1], true, {"k": 10}, "5"]));
}

#[test]
fn exceptions_are_reported_with_kind_and_line() {
    assert_eq!(
        run("x = 1\ny = 0\nreturn x / y", Value::Null),
        Err(SandboxError::Raised {
            kind: "ZeroDivisionError".into(),
            line: 3,
            message: "division by zero".into()
        })
    );
    match run("d = {}\n\nreturn d['missing']", Value::Null) {
        Err(SandboxError::Raised { kind, line, .. }) => {
            assert_eq!((kind.as_str(), line), ("KeyError", 3));
        }
        other => panic!("{other:?}"),
    }
    // The innermost line of the body, even inside a nested function.
    match run("def f():\n    return [][1]\n\nreturn f()", Value::Null) {
        Err(SandboxError::Raised { kind, line, .. }) => {
            assert_eq!((kind.as_str(), line), ("IndexError", 2));
        }
        other => panic!("{other:?}"),
    }
    match run("assert 1 == 2, 'nope'", Value::Null) {
        Err(SandboxError::Raised { kind, message, .. }) => {
            assert_eq!(
                (kind.as_str(), message.as_str()),
                ("AssertionError", "nope")
            );
        }
        other => panic!("{other:?}"),
    }
    match run("return undefined_name", Value::Null) {
        Err(SandboxError::Raised { kind, .. }) => assert_eq!(kind, "NameError"),
        other => panic!("{other:?}"),
    }
    let error = run("return 1/0", Value::Null).expect_err("the run fails");
    assert_eq!(
        error.to_string(),
        "ZeroDivisionError at line 1: division by zero"
    );
}

#[test]
fn syntax_errors_have_lines() {
    match run("x = 1\nif x\n    return 2", Value::Null) {
        Err(SandboxError::Syntax { line, .. }) => assert_eq!(line, 2),
        other => panic!("{other:?}"),
    }
    match run("x = 1\nbreak", Value::Null) {
        Err(SandboxError::Syntax { line, .. }) => assert_eq!(line, 2),
        other => panic!("{other:?}"),
    }
}

#[test]
fn check_reports_every_refusal_with_its_line() {
    let errors = Sandbox::check(
        "x = 'getattr is fine in a string'\nimport os\ny = x.__class__\nz = eval('1')\nreturn f'{y.__dict__}'",
        &[],
    );
    let lines: Vec<(usize, String)> = errors
        .iter()
        .map(|e| match e {
            SandboxError::Refused { line, message } => (*line, message.clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        lines,
        vec![
            (2, "`import` is not allowed".to_owned()),
            (
                3,
                "`__class__`: names starting with an underscore are not allowed".to_owned()
            ),
            (4, "`eval` is not allowed".to_owned()),
            (
                5,
                "`__dict__`: names starting with an underscore are not allowed".to_owned()
            ),
        ]
    );
    assert!(Sandbox::check("return 1", &[]).is_empty());
    assert!(Sandbox::check("return a", &fields(&["a"])).is_empty());
    assert!(matches!(
        Sandbox::check("return (", &[]).as_slice(),
        [SandboxError::Syntax { line: 1, .. }]
    ));
}

#[test]
fn invalid_field_names_are_refused() {
    for bad in ["_private", "two words", "class", "initial", "1st", ""] {
        let errors = Sandbox::check("return 1", &fields(&[bad]));
        assert!(
            matches!(errors.as_slice(), [SandboxError::Refused { line: 0, .. }]),
            "{bad:?}: {errors:?}"
        );
    }
    assert!(matches!(
        Sandbox::check("return 1", &fields(&["a", "a"])).as_slice(),
        [SandboxError::Refused { line: 0, .. }]
    ));
    assert!(matches!(
        Sandbox::new().run(
            "return 1",
            &fields(&["__x"]),
            &json!({}),
            &json!({}),
            &limits()
        ),
        Err(SandboxError::Refused { line: 0, .. })
    ));
}

#[test]
fn no_state_leaks_between_runs() {
    let sandbox = Sandbox::new();
    let body = r#"
global counter
try:
    counter += 1
except:
    counter = 1
cache = input
return counter
"#;
    for _ in 0..5 {
        let result = sandbox.run(body, &[], &json!({}), &json!([]), &limits());
        assert_eq!(result.expect("the run succeeds").value, json!(1));
    }
    // A global set by one body is not visible to another.
    sandbox
        .run(
            "global shared\nshared = 'secret'\nreturn 1",
            &[],
            &json!({}),
            &json!(null),
            &limits(),
        )
        .expect("the run succeeds");
    let result = sandbox.run("return shared", &[], &json!({}), &json!(null), &limits());
    assert!(
        matches!(&result, Err(SandboxError::Raised { kind, .. }) if kind == "NameError"),
        "{result:?}"
    );
    // Mutating an input does not change the caller's value or the next run's input.
    let input = json!({"items": [1]});
    for _ in 0..2 {
        let result = sandbox
            .run(
                "input['items'].append(2)\nreturn input",
                &[],
                &json!({}),
                &input,
                &limits(),
            )
            .expect("the run succeeds");
        assert_eq!(result.value, json!({"items": [1, 2]}));
    }
}

#[test]
fn a_timeout_in_one_thread_does_not_disturb_others() {
    let handles: Vec<_> = (0..4)
        .map(|i| {
            std::thread::spawn(move || {
                let sandbox = Sandbox::new();
                if i == 0 {
                    let short = Limits {
                        timeout: Duration::from_millis(300),
                        ..Limits::default()
                    };
                    let result =
                        sandbox.run("while True: pass", &[], &json!({}), &json!(null), &short);
                    assert!(
                        matches!(result, Err(SandboxError::Timeout { .. })),
                        "{result:?}"
                    );
                } else {
                    for n in 0..200 {
                        let result = sandbox.run(
                            "total = 0\nfor i in range(input):\n    total += i\nreturn total",
                            &[],
                            &json!({}),
                            &json!(n),
                            &limits(),
                        );
                        assert_eq!(
                            result.expect("the run succeeds").value,
                            json!(n * (n.max(1) - 1) / 2)
                        );
                    }
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().expect("the thread finishes");
    }
}

#[test]
fn recursion_limit_is_configurable() {
    let body = "def depth(n):\n    return n if n == 0 else 1 + depth(n - 1)\nreturn depth(input)";
    let sandbox = Sandbox::new();
    assert_eq!(
        sandbox
            .run(body, &[], &json!({}), &json!(150), &limits())
            .expect("the run succeeds")
            .value,
        json!(150)
    );
    assert_eq!(
        sandbox.run(body, &[], &json!({}), &json!(250), &limits()),
        Err(SandboxError::Recursion(200))
    );
    let deeper = Limits {
        max_recursion: 400,
        ..limits()
    };
    assert_eq!(
        sandbox
            .run(body, &[], &json!({}), &json!(350), &deeper)
            .expect("the run succeeds")
            .value,
        json!(350)
    );
}

#[test]
fn the_handle_is_send_sync_and_clone() {
    fn assert_traits<T: Send + Sync + Clone + 'static>() {}
    assert_traits::<Sandbox>();
}
