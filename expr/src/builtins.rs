//! The builtins an expression may call: `len any all sum min max abs round int float str
//! bool`, with Python's results and error types.

use std::cmp::Ordering;

use super::EvalError;
use super::compile::{BinOp, Builtin, Expr};
use super::eval::{Evaluator, Flow};
use super::value::{Number, Value, compare, to_str};

/// Calls `builtin` with the unevaluated `args` (so generators are consumed lazily).
pub(super) fn call<'a>(
    ev: &mut Evaluator<'_, 'a>,
    builtin: Builtin,
    args: &'a [Expr],
) -> Result<Value<'a>, EvalError> {
    match builtin {
        Builtin::Any => {
            let [arg] = one(args, "any")?;
            let mut found = false;
            iterate(ev, arg, &mut |_, item| {
                found = item.truthy();
                Ok(if found { Flow::Stop } else { Flow::Continue })
            })?;
            Ok(Value::Bool(found))
        }
        Builtin::All => {
            let [arg] = one(args, "all")?;
            let mut all = true;
            iterate(ev, arg, &mut |_, item| {
                all = item.truthy();
                Ok(if all { Flow::Continue } else { Flow::Stop })
            })?;
            Ok(Value::Bool(all))
        }
        Builtin::Sum => {
            let (iterable, start) = match args {
                [iterable] => (iterable, None),
                [iterable, start] => (iterable, Some(start)),
                _ => return Err(arity("sum", "1 or 2", args.len())),
            };
            // Python evaluates the arguments left to right before summing.
            let evaluated = match iterable {
                Expr::Generator(_) => None,
                other => Some(ev.eval(other)?),
            };
            let start = match start {
                Some(start) => ev.eval(start)?,
                None => Value::Int(0),
            };
            if matches!(start, Value::Str(_)) {
                return Err(EvalError::type_error(
                    "sum() can't sum strings [use ''.join(seq) instead]".into(),
                ));
            }
            // Python adds with '+' from `start`, so lists concatenate and an empty sum
            // returns `start` unchanged.
            let mut total = Some(start);
            let mut add =
                |ev: &mut Evaluator<'_, 'a>, item: Value<'a>| -> Result<Flow, EvalError> {
                    let so_far = total.take().unwrap_or(Value::Int(0));
                    total = Some(ev.binary(BinOp::Add, &so_far, &item)?);
                    Ok(Flow::Continue)
                };
            match evaluated {
                Some(value) => {
                    ev.for_each(&value, &mut add)?;
                }
                None => iterate(ev, iterable, &mut add)?,
            }
            Ok(total.unwrap_or(Value::Int(0)))
        }
        Builtin::Min | Builtin::Max => {
            let name = if builtin == Builtin::Min {
                "min"
            } else {
                "max"
            };
            let better = if builtin == Builtin::Min {
                Ordering::Less
            } else {
                Ordering::Greater
            };
            let mut best: Option<Value<'a>> = None;
            let mut consider = |_: &mut Evaluator<'_, 'a>,
                                item: Value<'a>|
             -> Result<Flow, EvalError> {
                best = Some(match best.take() {
                    None => item,
                    Some(current) => match compare(&item, &current) {
                        Some(order) if order == better => item,
                        Some(_) => current,
                        None if item.number().is_some() && current.number().is_some() => current,
                        None => {
                            return Err(EvalError::type_error(format!(
                                "'{}' not supported between instances of '{}' and '{}'",
                                if better == Ordering::Less { "<" } else { ">" },
                                item.type_name(),
                                current.type_name()
                            )));
                        }
                    },
                });
                Ok(Flow::Continue)
            };
            match args {
                [] => {
                    return Err(EvalError::type_error(format!(
                        "{name} expected at least 1 argument, got 0"
                    )));
                }
                [iterable] => {
                    iterate(ev, iterable, &mut consider)?;
                }
                several => {
                    for arg in several {
                        let value = ev.eval(arg)?;
                        consider(ev, value)?;
                    }
                }
            }
            best.ok_or_else(|| EvalError::value(format!("{name}() arg is an empty sequence")))
        }
        Builtin::Len => {
            let [arg] = one(args, "len")?;
            if matches!(arg, Expr::Generator(_)) {
                return Err(EvalError::type_error(
                    "object of type 'generator' has no len()".into(),
                ));
            }
            let value = ev.eval(arg)?;
            value
                .python_len()
                .map(|n| Value::Int(n as i64))
                .ok_or_else(|| {
                    EvalError::type_error(format!(
                        "object of type '{}' has no len()",
                        value.type_name()
                    ))
                })
        }
        Builtin::Abs => {
            let [arg] = one(args, "abs")?;
            let value = ev.eval(arg)?;
            match value.number() {
                Some(Number::Int(i)) => i.checked_abs().map(Value::Int).ok_or_else(|| {
                    EvalError::overflow("integer result does not fit in 64 bits".into())
                }),
                Some(Number::Float(f)) => Ok(Value::Float(f.abs())),
                None => Err(EvalError::type_error(format!(
                    "bad operand type for abs(): '{}'",
                    value.type_name()
                ))),
            }
        }
        Builtin::Round => {
            let (number, digits) = match args {
                [x] => (ev.eval(x)?, None),
                [x, d] => (ev.eval(x)?, Some(ev.eval(d)?)),
                _ => return Err(arity("round", "1 or 2", args.len())),
            };
            round(&number, digits.as_ref())
        }
        Builtin::Int => match args {
            [] => Ok(Value::Int(0)),
            [arg] => {
                let value = ev.eval(arg)?;
                to_int(&value)
            }
            _ => Err(arity("int", "at most 1", args.len())),
        },
        Builtin::Float => match args {
            [] => Ok(Value::Float(0.0)),
            [arg] => {
                let value = ev.eval(arg)?;
                to_float(&value)
            }
            _ => Err(arity("float", "at most 1", args.len())),
        },
        Builtin::Str => match args {
            [] => Ok(Value::string("")),
            [arg] => {
                let value = ev.eval(arg)?;
                let text = to_str(&value);
                ev.check_size(text.len())?;
                Ok(Value::string(text))
            }
            _ => Err(arity("str", "at most 1", args.len())),
        },
        Builtin::Bool => match args {
            [] => Ok(Value::Bool(false)),
            [arg] => Ok(Value::Bool(ev.eval(arg)?.truthy())),
            _ => Err(arity("bool", "at most 1", args.len())),
        },
    }
}

fn one<'e>(args: &'e [Expr], name: &str) -> Result<[&'e Expr; 1], EvalError> {
    match args {
        [arg] => Ok([arg]),
        _ => Err(EvalError::type_error(format!(
            "{name}() takes exactly one argument ({} given)",
            args.len()
        ))),
    }
}

fn arity(name: &str, expected: &str, given: usize) -> EvalError {
    EvalError::type_error(format!(
        "{name}() takes {expected} arguments ({given} given)"
    ))
}

/// Iterates an argument: a generator lazily, anything else after evaluating it.
fn iterate<'a>(
    ev: &mut Evaluator<'_, 'a>,
    arg: &'a Expr,
    f: &mut dyn FnMut(&mut Evaluator<'_, 'a>, Value<'a>) -> Result<Flow, EvalError>,
) -> Result<(), EvalError> {
    match arg {
        Expr::Generator(comprehension) => ev.comprehension(comprehension, 0, f).map(drop),
        other => {
            let value = ev.eval(other)?;
            ev.for_each(&value, f).map(drop)
        }
    }
}

fn to_int<'a>(value: &Value<'a>) -> Result<Value<'a>, EvalError> {
    match value {
        Value::Bool(b) => Ok(Value::Int(i64::from(*b))),
        Value::Int(i) => Ok(Value::Int(*i)),
        Value::Float(f) if f.is_nan() => Err(EvalError::value(
            "cannot convert float NaN to integer".into(),
        )),
        Value::Float(f) if f.is_infinite() => Err(EvalError::overflow(
            "cannot convert float infinity to integer".into(),
        )),
        Value::Float(f) => {
            let t = f.trunc();
            if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&t) {
                Ok(Value::Int(t as i64))
            } else {
                Err(EvalError::overflow(
                    "integer result does not fit in 64 bits".into(),
                ))
            }
        }
        Value::Str(s) => {
            let text = s.as_str().trim();
            let cleaned = text.replace('_', "");
            let valid = !text.starts_with('_') && !text.ends_with('_') && !text.contains("__");
            match cleaned.parse::<i64>() {
                Ok(i) if valid => Ok(Value::Int(i)),
                _ => Err(EvalError::value(format!(
                    "invalid literal for int() with base 10: {}",
                    super::value::repr(value)
                ))),
            }
        }
        other => Err(EvalError::type_error(format!(
            "int() argument must be a string, a bytes-like object or a real number, not '{}'",
            other.type_name()
        ))),
    }
}

fn to_float<'a>(value: &Value<'a>) -> Result<Value<'a>, EvalError> {
    match value.number() {
        Some(n) => Ok(Value::Float(n.as_f64())),
        None => match value {
            Value::Str(s) => {
                let text = s.as_str().trim();
                let lower = text.to_ascii_lowercase();
                let unsigned = lower.trim_start_matches(['+', '-']);
                let negative = lower.starts_with('-');
                let special = match unsigned {
                    "inf" | "infinity" => Some(f64::INFINITY),
                    "nan" => Some(f64::NAN),
                    _ => None,
                };
                if let Some(f) = special {
                    return Ok(Value::Float(if negative { -f } else { f }));
                }
                let digits_only = !lower.is_empty()
                    && lower
                        .chars()
                        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | '+' | '-' | '_'));
                match lower.replace('_', "").parse::<f64>() {
                    Ok(f) if digits_only => Ok(Value::Float(f)),
                    _ => Err(EvalError::value(format!(
                        "could not convert string to float: {}",
                        super::value::repr(value)
                    ))),
                }
            }
            other => Err(EvalError::type_error(format!(
                "float() argument must be a string or a real number, not '{}'",
                other.type_name()
            ))),
        },
    }
}

/// `round()`: halves go to the even neighbour, as in Python.
fn round<'a>(value: &Value<'a>, digits: Option<&Value<'a>>) -> Result<Value<'a>, EvalError> {
    let number = value.number().ok_or_else(|| {
        EvalError::type_error(format!(
            "type {} doesn't define __round__ method",
            value.type_name()
        ))
    })?;
    let digits = match digits {
        None | Some(Value::None) => None,
        Some(d) => match d.number() {
            Some(Number::Int(n)) => Some(n),
            _ => {
                return Err(EvalError::type_error(format!(
                    "'{}' object cannot be interpreted as an integer",
                    d.type_name()
                )));
            }
        },
    };
    match (number, digits) {
        (Number::Int(i), None) => Ok(Value::Int(i)),
        (Number::Int(i), Some(d)) if d >= 0 => Ok(Value::Int(i)),
        (Number::Int(i), Some(d)) => {
            let Some(unit) = u32::try_from(-d).ok().and_then(|e| 10i64.checked_pow(e)) else {
                return Ok(Value::Int(0));
            };
            let (q, r) = (i.div_euclid(unit), i.rem_euclid(unit));
            let twice = r * 2;
            let q = if twice > unit || (twice == unit && q % 2 != 0) {
                q + 1
            } else {
                q
            };
            q.checked_mul(unit)
                .map(Value::Int)
                .ok_or_else(|| EvalError::overflow("integer result does not fit in 64 bits".into()))
        }
        (Number::Float(f), None) => to_int(&Value::Float(f.round_ties_even())),
        (Number::Float(f), Some(_)) if !f.is_finite() => Ok(Value::Float(f)),
        (Number::Float(f), Some(d)) if d >= 0 => {
            // Formatting rounds the exact binary value correctly, as Python's round does.
            let precision = usize::try_from(d.min(300)).unwrap_or(300);
            Ok(Value::Float(
                format!("{f:.precision$}").parse().unwrap_or(f),
            ))
        }
        (Number::Float(f), Some(d)) => {
            let unit = 10f64.powi(i32::try_from(-d).unwrap_or(i32::MAX));
            Ok(Value::Float((f / unit).round_ties_even() * unit))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_goes_to_even() {
        let r = |x: f64| round(&Value::Float(x), None).map(|v| super::super::value::repr(&v));
        assert_eq!(r(2.5).ok().as_deref(), Some("2"));
        assert_eq!(r(3.5).ok().as_deref(), Some("4"));
        assert_eq!(r(-2.5).ok().as_deref(), Some("-2"));
        let with = |x: f64, d: i64| {
            round(&Value::Float(x), Some(&Value::Int(d))).map(|v| super::super::value::repr(&v))
        };
        assert_eq!(with(2.675, 2).ok().as_deref(), Some("2.67"));
        assert_eq!(with(0.125, 2).ok().as_deref(), Some("0.12"));
    }
}
