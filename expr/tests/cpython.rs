//! The expression evaluator against CPython itself: thousands of random expressions from
//! the supported subset are evaluated by both, and the results (`repr`) or exception
//! types must agree. Also: evaluation never panics on arbitrary input.

use std::io::Write;
use std::process::{Command, Stdio};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use res_expr::{Expression, Limits, Scope, repr};
use serde_json::{Value, json};

/// The scope both evaluators see. Object keys are sorted, as serde_json keeps them.
fn scope_json() -> Value {
    json!({
        "d": {"a": 1, "b": [1, 2], "c": "x"},
        "empty": [],
        "flag": true,
        "items": [3, 1, 2],
        "n": 3,
        "none": null,
        "objs": [{"v": 1, "w": "a"}, {"v": 0, "w": "b"}, {"v": 5, "w": "c"}],
        "s": "ab",
        "x": 0.5
    })
}

fn leaf() -> BoxedStrategy<String> {
    prop_oneof![
        (-5i64..10).prop_map(|i| i.to_string()),
        prop::sample::select(vec!["0.0", "0.5", "-1.5", "2.25", "1e-05", "1e+20", "3.0"])
            .prop_map(str::to_owned),
        prop::sample::select(vec!["''", "'a'", "'ab'", "\"it's\"", "'b'"]).prop_map(str::to_owned),
        prop::sample::select(vec!["True", "False", "None"]).prop_map(str::to_owned),
        prop::sample::select(vec![
            "n", "x", "s", "items", "objs", "d", "flag", "none", "empty"
        ])
        .prop_map(str::to_owned),
    ]
    .boxed()
}

fn expression() -> impl Strategy<Value = String> {
    leaf().prop_recursive(4, 40, 3, |inner: BoxedStrategy<String>| {
        let binary = prop::sample::select(vec!["+", "-", "*", "/", "//", "%"]);
        let comparison =
            prop::sample::select(vec!["==", "!=", "<", "<=", ">", ">=", "in", "not in"]);
        let function = prop::sample::select(vec![
            "len", "abs", "int", "float", "str", "bool", "round", "min", "max", "sum", "any", "all",
        ]);
        prop_oneof![
            (inner.clone(), binary, inner.clone()).prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            // A computed exponent such as `9 ** 8` would have CPython build a 100-million-digit
            // integer for minutes before we could compare; a leaf exponent keeps it instant.
            (inner.clone(), leaf()).prop_map(|(a, b)| format!("({a} ** {b})")),
            (inner.clone(), comparison.clone(), inner.clone())
                .prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            (
                inner.clone(),
                comparison.clone(),
                inner.clone(),
                comparison,
                inner.clone()
            )
                .prop_map(|(a, op1, b, op2, c)| format!("({a} {op1} {b} {op2} {c})")),
            (
                inner.clone(),
                prop::sample::select(vec!["and", "or"]),
                inner.clone()
            )
                .prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            inner.clone().prop_map(|a| format!("(not {a})")),
            inner.clone().prop_map(|a| format!("(-{a})")),
            (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(a, b, c)| format!("({a} if {b} else {c})")),
            (function.clone(), inner.clone()).prop_map(|(f, a)| format!("{f}({a})")),
            (
                prop::sample::select(vec!["min", "max", "round", "sum"]),
                inner.clone(),
                inner.clone()
            )
                .prop_map(|(f, a, b)| format!("{f}({a}, {b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, i)| format!("{a}[{i}]")),
            (
                inner.clone(),
                prop::option::of(-3i64..4),
                prop::option::of(-3i64..4)
            )
                .prop_map(|(a, lo, hi)| format!(
                    "{a}[{}:{}]",
                    lo.map(|v| v.to_string()).unwrap_or_default(),
                    hi.map(|v| v.to_string()).unwrap_or_default()
                )),
            prop::collection::vec(inner.clone(), 0..4)
                .prop_map(|items| format!("[{}]", items.join(", "))),
            (
                element(inner.clone()),
                inner.clone(),
                element(inner.clone())
            )
                .prop_map(|(e, it, c)| format!("[{e} for v in {it} if {c}]")),
            (
                prop::sample::select(vec!["any", "all", "sum", "min", "max"]),
                element(inner.clone()),
                inner
            )
                .prop_map(|(f, e, it)| format!("{f}({e} for v in {it})")),
        ]
    })
}

/// A comprehension element or condition: the loop variable, something using it, or not.
fn element(inner: BoxedStrategy<String>) -> BoxedStrategy<String> {
    prop_oneof![
        Just("v".to_owned()),
        (
            inner.clone(),
            prop::sample::select(vec!["+", "*", "==", "<", "in"])
        )
            .prop_map(|(e, op)| format!("(v {op} {e})")),
        inner,
    ]
    .boxed()
}

/// Runs every expression through CPython in one process; one JSON line per expression:
/// `{"ok": repr}` or `{"err": exception name}`.
fn python(sources: &[String]) -> Vec<Value> {
    let program = r#"
import json, sys
scope = json.loads(sys.argv[1])
allowed = {name: getattr(__builtins__, name) for name in
           ["len", "any", "all", "sum", "min", "max", "abs", "round", "int", "float", "str", "bool"]}
for line in sys.stdin:
    source = json.loads(line)
    try:
        # The scope goes in as globals: comprehensions cannot see eval's locals.
        value = eval(source, dict(scope, __builtins__=allowed))
        if isinstance(value, complex):
            print(json.dumps({"skip": "complex"}))
        elif isinstance(value, (list, str)) and len(value) > int(sys.argv[2]):
            print(json.dumps({"large": True}))
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**63:
            print(json.dumps({"big": True}))
        else:
            print(json.dumps({"ok": repr(value)}))
    except Exception as error:
        print(json.dumps({"err": type(error).__name__}))
"#;
    let input: String = sources
        .iter()
        .map(|s| format!("{}\n", Value::String(s.clone())))
        .collect();
    let cap = Limits::default().max_len.to_string();
    cpython(program, &[&scope_json().to_string(), &cap], input)
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON from python"))
        .collect()
}

/// Runs `program` in CPython with `args`, feeds it `input` and returns what it printed.
fn cpython(program: &str, args: &[&str], input: String) -> String {
    if let Err(message) = res_setup::require(
        &[res_setup::Tool::Python3],
        "checking expressions against CPython",
    ) {
        panic!("{message}");
    }
    let mut child = Command::new("python3")
        .args(["-c", program])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 is needed for this test (CPython is the reference); install it");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().expect("python3 runs");
    writer.join().expect("writer").expect("stdin written");
    String::from_utf8(output.stdout).expect("UTF-8")
}

fn ours(source: &str, data: &Value) -> Value {
    let mut scope = Scope::new();
    scope.set_fields(data);
    match Expression::compile(source) {
        Err(e) => json!({"compile": e.message}),
        Ok(expression) => match expression.evaluate(&scope, Limits::default()) {
            Ok(value) => json!({"ok": repr(&value)}),
            Err(error) => json!({"err": error.kind}),
        },
    }
}

#[test]
fn agrees_with_cpython_on_random_expressions() {
    let cases: usize = std::env::var("EXPR_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3_000);
    let mut runner = TestRunner::new(Config::default());
    let strategy = expression();
    let sources: Vec<String> = (0..cases)
        .map(|_| strategy.new_tree(&mut runner).expect("a tree").current())
        .collect();
    let reference = python(&sources);
    assert_eq!(reference.len(), sources.len(), "python answered every line");
    let data = scope_json();
    let mut compared = 0;
    let mut overflowed = 0;
    let mut mismatches = Vec::new();
    for (source, expected) in sources.iter().zip(&reference) {
        if expected.get("skip").is_some() {
            continue;
        }
        let got = ours(source, &data);
        // Python's integers are unbounded; ours stop at 64 bits with OverflowError.
        if expected.get("big").is_some() {
            if got["err"] != "OverflowError" {
                mismatches.push(format!("{source}: python has a >64-bit int, we gave {got}"));
            }
            continue;
        }
        // A 64-bit overflow ends our evaluation early where Python's big integers carry on
        // (and may fail later, differently): the documented limit, not a disagreement.
        if got["err"] == "OverflowError" && expected["err"] != "OverflowError" {
            overflowed += 1;
            continue;
        }
        // Past our size cap Python carries on; we must refuse with BudgetExceeded.
        if expected.get("large").is_some() {
            if got["err"] != "BudgetExceeded" {
                mismatches.push(format!(
                    "{source}: python built a huge value, we gave {got}"
                ));
            }
            overflowed += 1;
            continue;
        }
        // Deliberately unsupported (printf-style '%' on strings): refused, not emulated.
        if got["err"] == "UnsupportedOperation" {
            overflowed += 1;
            continue;
        }
        compared += 1;
        if &got != expected {
            mismatches.push(format!("{source}: python {expected}, ours {got}"));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {compared} disagree with CPython, e.g.:\n{}",
        mismatches.len(),
        mismatches
            .iter()
            .take(15)
            // A mismatch may carry a repr of 100,000 items; the start says enough.
            .map(|m| m.chars().take(400).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        compared > cases * 9 / 10,
        "most cases are compared ({compared}; {overflowed} hit the 64-bit limit)"
    );
}

/// Every float prints as CPython's `repr` does: random bit patterns, every power of two and
/// odd multiples of them (where shortest-digit ties happen), and the usual suspects.
#[test]
fn floats_print_like_cpython() {
    let mut runner = TestRunner::new(Config::default());
    let mut floats: Vec<f64> = (0..20_000)
        .map(|_| f64::from_bits(any::<u64>().new_tree(&mut runner).expect("bits").current()))
        .collect();
    for k in -1074..1024 {
        let power = 2f64.powi(k);
        floats.extend([power, 3.0 * power, 5.0 * power, 7.0 * power, -power]);
    }
    floats.extend([
        0.1,
        0.2 + 0.1,
        1.0 / 3.0,
        1e16,
        1e-5,
        123456789.0,
        f64::MAX,
        f64::MIN_POSITIVE,
    ]);
    // NaN and infinities print alike in both but are not what this test is about; random
    // bits and 7 * 2**1023 produce them.
    floats.retain(|f| f.is_finite());
    let program = r#"
import struct, sys
for line in sys.stdin:
    print(repr(struct.unpack('<d', int(line).to_bytes(8, 'little'))[0]))
"#;
    let input: String = floats
        .iter()
        .map(|f| format!("{}\n", f.to_bits()))
        .collect();
    let expected = cpython(program, &[], input);
    let expected: Vec<&str> = expected.lines().collect();
    assert_eq!(expected.len(), floats.len(), "python answered every line");
    let mismatches: Vec<String> = floats
        .iter()
        .zip(&expected)
        .map(|(f, python)| (repr(&res_expr::Value::Float(*f)), python))
        .filter(|(ours, python)| ours != *python)
        .map(|(ours, python)| format!("python {python}, ours {ours}"))
        .collect();
    assert!(
        mismatches.is_empty(),
        "{} of {} floats print differently, e.g.:\n{}",
        mismatches.len(),
        floats.len(),
        mismatches[..mismatches.len().min(10)].join("\n")
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(source in any::<String>()) {
        let data = scope_json();
        let _ = ours(&source, &data);
    }

    #[test]
    fn generated_expressions_never_panic_on_odd_data(
        source in expression(),
        data in proptest::arbitrary::any::<(i64, f64, String, Vec<i32>)>(),
    ) {
        let (i, f, s, v) = data;
        let odd = json!({"n": i, "x": f, "s": s, "items": v, "objs": [], "d": {}, "flag": null, "none": i, "empty": s});
        let _ = ours(&source, &odd);
    }
}
