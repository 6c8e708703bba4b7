//! Every supported construct, every refused one, the budget, and Python's answers.

use serde_json::json;

use super::*;

fn scope_json() -> serde_json::Value {
    json!({
        "feature_result": "detection_complete",
        "is_success": true,
        "count": 3,
        "ratio": 0.5,
        "nothing": null,
        "aggregated_actions_details": [
            {"violations": 0, "camera": "a"},
            {"violations": 2, "camera": "b"},
            {"violations": 1, "camera": "c"}
        ],
        "branch_rule": {"id": "r1", "settings": {"threshold": 2}},
        "names": ["a", "b"],
        "empty": []
    })
}

/// `repr()` of the result, or the exception name.
fn run(source: &str) -> Result<String, String> {
    let data = scope_json();
    let mut scope = Scope::new();
    scope.set_fields(&data);
    let expression = Expression::compile(source).map_err(|e| format!("CompileError: {e}"))?;
    expression
        .evaluate(&scope, Limits::default())
        .map(|v| repr(&v))
        .map_err(|e| e.kind.to_owned())
}

fn ok(source: &str) -> String {
    match run(source) {
        Ok(value) => value,
        Err(error) => panic!("{source}: {error}"),
    }
}

fn err(source: &str) -> String {
    match run(source) {
        Ok(value) => panic!("{source} evaluated to {value}"),
        Err(error) => error,
    }
}

#[test]
fn the_contract_examples() {
    assert_eq!(ok("feature_result == 'detection_complete'"), "True");
    assert_eq!(ok("is_success"), "True");
    assert_eq!(
        ok("any(d['violations'] > 0 for d in aggregated_actions_details)"),
        "True"
    );
}

#[test]
fn literals() {
    assert_eq!(ok("1"), "1");
    assert_eq!(ok("1.5"), "1.5");
    assert_eq!(ok("'x'"), "'x'");
    assert_eq!(ok("\"it's\""), "\"it's\"");
    assert_eq!(ok("True"), "True");
    assert_eq!(ok("None"), "None");
    assert_eq!(ok("[1, 'a', None]"), "[1, 'a', None]");
    assert_eq!(ok("(1, 2)"), "[1, 2]");
    assert_eq!(ok("{'a': 1, 'b': [2]}"), "{'a': 1, 'b': [2]}");
    assert_eq!(ok("1_000"), "1000");
}

#[test]
fn names_subscripts_and_attributes() {
    assert_eq!(ok("count"), "3");
    assert_eq!(ok("aggregated_actions_details[1]['camera']"), "'b'");
    assert_eq!(ok("aggregated_actions_details[-1].camera"), "'c'");
    assert_eq!(ok("branch_rule.settings.threshold"), "2");
    assert_eq!(ok("branch_rule['settings']['threshold']"), "2");
    assert_eq!(ok("names[0]"), "'a'");
    assert_eq!(ok("'abc'[1]"), "'b'");
    assert_eq!(ok("[1, 2, 3, 4][1:3]"), "[2, 3]");
    assert_eq!(ok("[1, 2, 3, 4][::-1]"), "[4, 3, 2, 1]");
    assert_eq!(ok("'hello'[-3:]"), "'llo'");
    assert_eq!(ok("{'a': 1}['a']"), "1");
    assert_eq!(err("missing"), "NameError");
    assert_eq!(err("branch_rule['nope']"), "KeyError");
    assert_eq!(err("branch_rule.nope"), "AttributeError");
    assert_eq!(err("names[5]"), "IndexError");
    assert_eq!(err("names['x']"), "TypeError");
    assert_eq!(err("count[0]"), "TypeError");
}

#[test]
fn comparisons_chain_and_mix_numbers() {
    assert_eq!(ok("1 < count < 5"), "True");
    assert_eq!(ok("1 < count < 2"), "False");
    assert_eq!(ok("1 == 1.0"), "True");
    assert_eq!(ok("True == 1"), "True");
    assert_eq!(ok("'a' < 'b'"), "True");
    assert_eq!(ok("[1, 2] < [1, 3]"), "True");
    assert_eq!(ok("[1, 2] == (1, 2)"), "True");
    assert_eq!(ok("1 == '1'"), "False");
    assert_eq!(ok("None == None"), "True");
    assert_eq!(ok("nothing is None"), "True");
    assert_eq!(ok("count is not None"), "True");
    assert_eq!(err("1 < 'a'"), "TypeError");
    assert_eq!(err("None < 1"), "TypeError");
    assert_eq!(ok("float('nan') == float('nan')"), "False");
    assert_eq!(ok("float('nan') < 1"), "False");
}

#[test]
fn membership() {
    assert_eq!(ok("'a' in names"), "True");
    assert_eq!(ok("'z' not in names"), "True");
    assert_eq!(ok("'ell' in 'hello'"), "True");
    assert_eq!(ok("'settings' in branch_rule"), "True");
    assert_eq!(ok("2 in [1, 2.0]"), "True");
    assert_eq!(err("1 in 'abc'"), "TypeError");
    assert_eq!(err("1 in 5"), "TypeError");
}

#[test]
fn boolean_operators_return_operands() {
    assert_eq!(ok("0 or 'x'"), "'x'");
    assert_eq!(ok("1 and 'y'"), "'y'");
    assert_eq!(ok("[] and 1"), "[]");
    assert_eq!(ok("not []"), "True");
    assert_eq!(ok("not 'x'"), "False");
    // Short-circuit: the right side is never evaluated.
    assert_eq!(ok("False and missing"), "False");
    assert_eq!(ok("True or missing"), "True");
}

#[test]
fn truthiness_follows_python() {
    for falsy in ["0", "0.0", "''", "[]", "{}", "None", "False"] {
        assert_eq!(ok(&format!("bool({falsy})")), "False", "{falsy}");
    }
    for truthy in ["1", "-0.5", "'0'", "[0]", "{'a': 0}", "True", "'False'"] {
        assert_eq!(ok(&format!("bool({truthy})")), "True", "{truthy}");
    }
}

#[test]
fn arithmetic_follows_python() {
    assert_eq!(ok("7 / 2"), "3.5");
    assert_eq!(ok("4 / 2"), "2.0");
    assert_eq!(ok("7 // 2"), "3");
    assert_eq!(ok("-7 // 2"), "-4");
    assert_eq!(ok("-7 % 3"), "2");
    assert_eq!(ok("7 % -3"), "-2");
    assert_eq!(ok("-7.5 % 2"), "0.5");
    assert_eq!(ok("2 ** 10"), "1024");
    assert_eq!(ok("2 ** -1"), "0.5");
    assert_eq!(ok("True + True"), "2");
    assert_eq!(ok("count * ratio"), "1.5");
    assert_eq!(ok("-count"), "-3");
    assert_eq!(ok("+ratio"), "0.5");
    assert_eq!(ok("'ab' + 'cd'"), "'abcd'");
    assert_eq!(ok("'ab' * 2"), "'abab'");
    assert_eq!(ok("2 * [0]"), "[0, 0]");
    assert_eq!(ok("[1] + [2]"), "[1, 2]");
    assert_eq!(err("1 / 0"), "ZeroDivisionError");
    assert_eq!(err("1 // 0"), "ZeroDivisionError");
    assert_eq!(err("1 % 0"), "ZeroDivisionError");
    assert_eq!(err("1.0 / 0"), "ZeroDivisionError");
    assert_eq!(err("'a' + 1"), "TypeError");
    assert_eq!(err("-'a'"), "TypeError");
    assert_eq!(err("9223372036854775807 + 1"), "OverflowError");
    assert_eq!(err("2 ** 64"), "OverflowError");
}

#[test]
fn conditional_expressions() {
    assert_eq!(ok("'many' if count > 2 else 'few'"), "'many'");
    assert_eq!(ok("'many' if count > 5 else 'few'"), "'few'");
}

#[test]
fn comprehensions() {
    assert_eq!(
        ok("[d['violations'] for d in aggregated_actions_details if d['violations']]"),
        "[2, 1]"
    );
    assert_eq!(
        ok("[x * y for x in [1, 2] for y in [10, 100]]"),
        "[10, 100, 20, 200]"
    );
    assert_eq!(ok("[k for k in branch_rule]"), "['id', 'settings']");
    assert_eq!(ok("[a + b for a, b in [[1, 2], [3, 4]]]"), "[3, 7]");
    assert_eq!(ok("[c for c in 'ab']"), "['a', 'b']");
    assert_eq!(
        ok("sum(d['violations'] for d in aggregated_actions_details)"),
        "3"
    );
    assert_eq!(
        ok("all(d['violations'] >= 0 for d in aggregated_actions_details)"),
        "True"
    );
    assert_eq!(
        ok("max(d['violations'] for d in aggregated_actions_details)"),
        "2"
    );
    // Comprehension variables do not leak.
    assert_eq!(err("[x for x in [1]] and x"), "NameError");
    assert_eq!(err("[a for a, b in [[1]]]"), "ValueError");
    assert_eq!(err("[x for x in 5]"), "TypeError");
}

#[test]
fn generators_short_circuit_like_python() {
    // The second item has no 'x': Python's any() stops before reaching it.
    assert_eq!(ok("any(d['x'] for d in [{'x': 1}, {}])"), "True");
    assert_eq!(err("all(d['x'] for d in [{'x': 1}, {}])"), "KeyError");
    assert_eq!(err("len(x for x in [1])"), "TypeError");
    assert_eq!(err("(x for x in [1]) == 1"), "TypeError");
}

#[test]
fn builtins() {
    assert_eq!(ok("len(names)"), "2");
    assert_eq!(ok("len('héllo')"), "5");
    assert_eq!(ok("len(branch_rule)"), "2");
    assert_eq!(ok("any([])"), "False");
    assert_eq!(ok("all([])"), "True");
    assert_eq!(ok("sum([1, 2.5])"), "3.5");
    assert_eq!(ok("sum([1, 2], 10)"), "13");
    assert_eq!(ok("min(3, 1, 2)"), "1");
    assert_eq!(ok("max([1, 5, 2])"), "5");
    assert_eq!(ok("min('b', 'a')"), "'a'");
    assert_eq!(ok("abs(-2)"), "2");
    assert_eq!(ok("abs(-2.5)"), "2.5");
    assert_eq!(ok("round(2.5)"), "2");
    assert_eq!(ok("round(3.5)"), "4");
    assert_eq!(ok("round(2.675, 2)"), "2.67");
    assert_eq!(ok("round(1234, -2)"), "1200");
    assert_eq!(ok("int('42')"), "42");
    assert_eq!(ok("int(-2.9)"), "-2");
    assert_eq!(ok("int(True)"), "1");
    assert_eq!(ok("float('1.5')"), "1.5");
    assert_eq!(ok("float(2)"), "2.0");
    assert_eq!(ok("str(1.0)"), "'1.0'");
    assert_eq!(ok("str(None)"), "'None'");
    assert_eq!(ok("str([1, 'a'])"), "\"[1, 'a']\"");
    assert_eq!(ok("bool('')"), "False");
    assert_eq!(err("len(5)"), "TypeError");
    assert_eq!(err("min([])"), "ValueError");
    assert_eq!(err("sum(['a'])"), "TypeError");
    assert_eq!(err("int('4.5')"), "ValueError");
    assert_eq!(err("float('abc')"), "ValueError");
    assert_eq!(err("max(1, 'a')"), "TypeError");
    assert_eq!(err("len(1, 2)"), "TypeError");
}

#[test]
fn everything_else_is_refused_at_compile_time() {
    for source in [
        "__import__('os')",
        "open('/etc/passwd')",
        "eval('1')",
        "exec('1')",
        "getattr(x, 'y')",
        "x.__class__",
        "().__class__.__bases__",
        "__builtins__",
        "lambda: 1",
        "(y := 1)",
        "{1, 2}",
        "{k: v for k, v in x}",
        "{x for x in y}",
        "f'{x}'",
        "b'x'",
        "1j",
        "...",
        "~1",
        "1 << 2",
        "1 & 2",
        "x.lower()",
        "len(x=1)",
        "[*x]",
        "99999999999999999999999",
        "await x",
        "import os",
        "x = 1",
        "1 +",
        "",
    ] {
        assert!(
            run(source).is_err_and(|e| e.starts_with("CompileError")),
            "{source} should be refused: {:?}",
            run(source)
        );
    }
}

#[test]
fn refusals_say_what_was_refused() {
    let message = |source: &str| match Expression::compile(source) {
        Err(e) => e.message,
        Ok(_) => panic!("{source} compiled"),
    };
    assert_eq!(
        message("lambda: 1"),
        "lambda is not allowed in workflow expressions"
    );
    assert!(message("open('x')").contains("calling 'open'"));
    assert!(message("x.__class__").contains("double underscores"));
    assert!(message("1 +").starts_with("invalid Python expression"));
}

#[test]
fn the_budget_stops_hostile_expressions() {
    let data = scope_json();
    let scope = Scope::new();
    let _ = data;
    let tight = Limits {
        max_steps: 10_000,
        max_len: 1_000,
    };
    for source in [
        "[x for x in [0] * 1000 for y in [0] * 1000]",
        "sum(1 for a in [0] * 900 for b in [0] * 900)",
        "'x' * 100000",
        "[0] * 100000",
        "[[0] * 1000 for i in [0] * 1000]",
    ] {
        let expression = Expression::compile(source).expect("compiles");
        let result = expression.evaluate(&scope, tight);
        let summary = result.as_ref().map(|v| repr(v).len());
        assert!(
            result.as_ref().is_err_and(|e| e.kind == "BudgetExceeded"),
            "{source}: {summary:?}"
        );
    }
}

#[test]
fn repeating_an_empty_sequence_a_huge_number_of_times_is_instant() {
    // Found by the property test: the list path once looped `count` times even when
    // there was nothing to copy, so `[] * 10**18` hung the evaluator.
    let scope = Scope::new();
    for (source, expected) in [
        ("[] * 3113243720096251676", "[]"),
        ("3113243720096251676 * []", "[]"),
        ("'' * 3113243720096251676", "''"),
        ("len([1, 2] * 3)", "6"),
        ("[1, 2] * 2", "[1, 2, 1, 2]"),
    ] {
        let value = Expression::compile(source)
            .expect("compiles")
            .evaluate(&scope, Limits::default())
            .map(|v| repr(&v));
        assert_eq!(value.as_deref(), Ok(expected), "{source}");
    }
}

#[test]
fn scope_names_shadow_in_binding_order() {
    let data = json!({"a": 1});
    let mut scope = Scope::new();
    scope.set_fields(&data);
    scope.set("a", Value::Int(2));
    let value = Expression::compile("a")
        .expect("compiles")
        .evaluate(&scope, Limits::default())
        .map(|v| repr(&v));
    assert_eq!(value.as_deref(), Ok("2"));
}
