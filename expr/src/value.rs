//! Values during evaluation, with Python's semantics for truth, equality and order.
//!
//! Node results arrive as JSON; they are borrowed, not copied, so evaluating a
//! consolidation expression over a hundred results allocates almost nothing.

use std::cmp::Ordering;
use std::fmt::Write as _;
use std::rc::Rc;

use serde_json::{Map, Value as Json};

use super::EvalError;

/// A string, borrowed from the scope or owned.
#[derive(Debug, Clone)]
pub enum Str<'a> {
    /// Borrowed from JSON or the expression.
    Borrowed(&'a str),
    /// Built during evaluation.
    Owned(Rc<str>),
}

impl Str<'_> {
    /// The text.
    pub fn as_str(&self) -> &str {
        match self {
            Str::Borrowed(s) => s,
            Str::Owned(s) => s,
        }
    }
}

/// A value: Python's `None`, `bool`, `int`, `float`, `str`, `list`, `dict`.
#[derive(Debug, Clone)]
pub enum Value<'a> {
    /// `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An `int` (64-bit; overflow is an error, not a big integer).
    Int(i64),
    /// A `float`.
    Float(f64),
    /// A `str`.
    Str(Str<'a>),
    /// A `list` built during evaluation (tuples are lists here).
    List(Rc<Vec<Value<'a>>>),
    /// A `dict` built from a literal.
    Dict(Rc<Vec<(Value<'a>, Value<'a>)>>),
    /// A JSON array from the scope, not copied.
    JsonArray(&'a [Json]),
    /// A JSON object from the scope, not copied.
    JsonObject(&'a Map<String, Json>),
}

impl<'a> Value<'a> {
    /// Borrows a JSON value.
    pub fn from_json(json: &'a Json) -> Value<'a> {
        match json {
            Json::Null => Value::None,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Json::String(s) => Value::Str(Str::Borrowed(s)),
            Json::Array(items) => Value::JsonArray(items),
            Json::Object(map) => Value::JsonObject(map),
        }
    }

    /// An owned string.
    pub fn string(text: impl Into<Rc<str>>) -> Value<'a> {
        Value::Str(Str::Owned(text.into()))
    }

    /// Python's type name, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::None => "NoneType",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::List(_) | Value::JsonArray(_) => "list",
            Value::Dict(_) | Value::JsonObject(_) => "dict",
        }
    }

    /// Python truthiness.
    pub fn truthy(&self) -> bool {
        match self {
            Value::None => false,
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.as_str().is_empty(),
            Value::List(items) => !items.is_empty(),
            Value::JsonArray(items) => !items.is_empty(),
            Value::Dict(entries) => !entries.is_empty(),
            Value::JsonObject(map) => !map.is_empty(),
        }
    }

    /// The value as a number, if it is one (`bool` counts, as in Python).
    pub fn number(&self) -> Option<Number> {
        match self {
            Value::Bool(b) => Some(Number::Int(i64::from(*b))),
            Value::Int(i) => Some(Number::Int(*i)),
            Value::Float(f) => Some(Number::Float(*f)),
            _ => None,
        }
    }

    /// `len()`, for the types that have one.
    pub fn python_len(&self) -> Option<usize> {
        match self {
            Value::Str(s) => Some(s.as_str().chars().count()),
            Value::List(items) => Some(items.len()),
            Value::JsonArray(items) => Some(items.len()),
            Value::Dict(entries) => Some(entries.len()),
            Value::JsonObject(map) => Some(map.len()),
            _ => None,
        }
    }

    /// The list items, for list-like values.
    pub fn items(&self) -> Option<Vec<Value<'a>>> {
        match self {
            Value::List(items) => Some(items.to_vec()),
            Value::JsonArray(items) => Some(items.iter().map(Value::from_json).collect()),
            _ => None,
        }
    }
}

/// A number, for arithmetic and comparison.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    /// Integer (and `bool`).
    Int(i64),
    /// Float.
    Float(f64),
}

impl Number {
    /// As a float.
    pub fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }

    /// As a value.
    pub fn value<'a>(self) -> Value<'a> {
        match self {
            Number::Int(i) => Value::Int(i),
            Number::Float(f) => Value::Float(f),
        }
    }
}

/// `a == b` with Python's rules: numbers compare by value across `bool`/`int`/`float`;
/// other types are only equal to their own kind.
pub fn equal(a: &Value<'_>, b: &Value<'_>) -> bool {
    if let (Some(x), Some(y)) = (a.number(), b.number()) {
        return compare_numbers(x, y) == Some(Ordering::Equal);
    }
    match (a, b) {
        (Value::None, Value::None) => true,
        (Value::Str(x), Value::Str(y)) => x.as_str() == y.as_str(),
        (Value::List(_) | Value::JsonArray(_), Value::List(_) | Value::JsonArray(_)) => {
            match (a.items(), b.items()) {
                (Some(x), Some(y)) => {
                    x.len() == y.len() && x.iter().zip(&y).all(|(p, q)| equal(p, q))
                }
                _ => false,
            }
        }
        (Value::Dict(_) | Value::JsonObject(_), Value::Dict(_) | Value::JsonObject(_)) => {
            let (x, y) = (dict_entries(a), dict_entries(b));
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.iter().any(|(k2, v2)| equal(k, k2) && equal(v, v2)))
        }
        _ => false,
    }
}

/// `a < b` and friends: `Some(order)`, or `None` where Python raises `TypeError`.
pub fn compare(a: &Value<'_>, b: &Value<'_>) -> Option<Ordering> {
    if let (Some(x), Some(y)) = (a.number(), b.number()) {
        return compare_numbers(x, y);
    }
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => Some(x.as_str().cmp(y.as_str())),
        (Value::List(_) | Value::JsonArray(_), Value::List(_) | Value::JsonArray(_)) => {
            let (x, y) = (a.items()?, b.items()?);
            for (p, q) in x.iter().zip(&y) {
                if !equal(p, q) {
                    return compare(p, q);
                }
            }
            Some(x.len().cmp(&y.len()))
        }
        _ => None,
    }
}

/// Orders numbers exactly where possible; NaN compares unordered (all comparisons false).
pub fn compare_numbers(a: Number, b: Number) -> Option<Ordering> {
    match (a, b) {
        (Number::Int(x), Number::Int(y)) => Some(x.cmp(&y)),
        (x, y) => x.as_f64().partial_cmp(&y.as_f64()),
    }
}

/// Key/value pairs of a dict-like value.
pub fn dict_entries<'a>(value: &Value<'a>) -> Vec<(Value<'a>, Value<'a>)> {
    match value {
        Value::Dict(entries) => entries.to_vec(),
        Value::JsonObject(map) => map
            .iter()
            .map(|(k, v)| (Value::Str(Str::Borrowed(k)), Value::from_json(v)))
            .collect(),
        _ => Vec::new(),
    }
}

/// `x in container`.
pub fn contains(container: &Value<'_>, item: &Value<'_>) -> Result<bool, EvalError> {
    match container {
        Value::Str(haystack) => match item {
            Value::Str(needle) => Ok(haystack.as_str().contains(needle.as_str())),
            other => Err(EvalError::type_error(format!(
                "'in <string>' requires string as left operand, not {}",
                other.type_name()
            ))),
        },
        Value::List(items) => Ok(items.iter().any(|x| equal(x, item))),
        Value::JsonArray(items) => Ok(items.iter().any(|x| equal(&Value::from_json(x), item))),
        Value::JsonObject(_) | Value::Dict(_)
            if matches!(
                item,
                Value::List(_) | Value::JsonArray(_) | Value::Dict(_) | Value::JsonObject(_)
            ) =>
        {
            Err(EvalError::type_error(format!(
                "unhashable type: '{}'",
                item.type_name()
            )))
        }
        Value::JsonObject(map) => Ok(match item {
            Value::Str(key) => map.contains_key(key.as_str()),
            _ => false,
        }),
        Value::Dict(entries) => Ok(entries.iter().any(|(k, _)| equal(k, item))),
        other => Err(EvalError::type_error(format!(
            "argument of type '{}' is not iterable",
            other.type_name()
        ))),
    }
}

/// Python's `repr()`.
pub fn repr(value: &Value<'_>) -> String {
    let mut out = String::new();
    write_repr(&mut out, value);
    out
}

/// Python's `str()`: like `repr()`, but strings are not quoted.
pub fn to_str(value: &Value<'_>) -> String {
    match value {
        Value::Str(s) => s.as_str().to_owned(),
        other => repr(other),
    }
}

fn write_repr(out: &mut String, value: &Value<'_>) {
    match value {
        Value::None => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => out.push_str(&format_float(*f)),
        Value::Str(s) => write_string_repr(out, s.as_str()),
        Value::List(_) | Value::JsonArray(_) => {
            out.push('[');
            for (i, item) in value.items().unwrap_or_default().iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, item);
            }
            out.push(']');
        }
        Value::Dict(_) | Value::JsonObject(_) => {
            out.push('{');
            for (i, (k, v)) in dict_entries(value).iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, k);
                out.push_str(": ");
                write_repr(out, v);
            }
            out.push('}');
        }
    }
}

/// Python quotes with `'` unless the text contains `'` and no `"`.
fn write_string_repr(out: &mut String, text: &str) {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for ch in text.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

/// Python's `repr(float)`: the shortest round-trip digits, with `.0` on whole numbers and
/// exponent notation below 1e-4 and from 1e16.
pub fn format_float(f: f64) -> String {
    if f.is_nan() {
        return "nan".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    // `{:e}` gives the shortest round-trip digits as d.ddddde±x, but breaks a tie between two
    // equally near candidates upwards; Python takes the nearest, ties to even, which is the
    // correctly rounded value of that length (2**-25 is ...312e-08 in Python, ...313e-8 here).
    let shortest = format!("{f:e}");
    let length = shortest
        .split_once('e')
        .map_or(0, |(m, _)| m.chars().filter(char::is_ascii_digit).count());
    let nearest = format!("{f:.*e}", length.saturating_sub(1));
    let scientific = if nearest.parse::<f64>() == Ok(f) {
        nearest
    } else {
        shortest
    };
    let Some((mantissa, exponent)) = scientific.split_once('e') else {
        return scientific;
    };
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if !(-4..16).contains(&exponent) {
        let (first, rest) = digits.split_at(1);
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        return format!(
            "{sign}{first}{fraction}e{}{:02}",
            if exponent < 0 { '-' } else { '+' },
            exponent.abs()
        );
    }
    let point = exponent + 1;
    let body = if point <= 0 {
        format!("0.{}{digits}", "0".repeat((-point) as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
    } else {
        let (whole, fraction) = digits.split_at(point as usize);
        format!("{whole}.{fraction}")
    };
    format!("{sign}{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_like_python() {
        for (value, text) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (2.5, "2.5"),
            (2f64.powi(-25), "2.9802322387695312e-08"),
            (-3.25, "-3.25"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123456789012345.6, "123456789012345.6"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.2345e-7, "1.2345e-07"),
            (100.0, "100.0"),
            (1e300, "1e+300"),
            (-0.0, "-0.0"),
        ] {
            assert_eq!(format_float(value), text, "{value}");
        }
    }

    #[test]
    fn strings_quote_like_python() {
        assert_eq!(repr(&Value::string("it's")), "\"it's\"");
        assert_eq!(repr(&Value::string("say \"hi\"")), "'say \"hi\"'");
        assert_eq!(repr(&Value::string("both ' \"")), "'both \\' \"'");
        assert_eq!(repr(&Value::string("tab\there")), "'tab\\there'");
    }
}
