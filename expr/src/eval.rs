//! The evaluator: walks the compiled tree with Python's semantics, counting every step
//! against a budget so no expression can hang the runner or exhaust its memory.

use std::cmp::Ordering;
use std::rc::Rc;

use super::compile::{BinOp, Clause, CmpOp, Comprehension, Const, Expr, Target};
use super::value::{Number, Str, Value, compare, contains, equal, repr};
use super::{EvalError, Limits, Scope};

/// One evaluation: the scope, comprehension variables, and the budget spent so far.
pub(super) struct Evaluator<'s, 'a> {
    scope: &'s Scope<'a>,
    locals: Vec<(&'a str, Value<'a>)>,
    steps: u64,
    limits: Limits,
}

/// Whether an iteration should go on.
pub(super) enum Flow {
    /// Next item.
    Continue,
    /// Stop early (e.g. `any` found a true item).
    Stop,
}

impl<'s, 'a> Evaluator<'s, 'a> {
    pub(super) fn new(scope: &'s Scope<'a>, limits: Limits) -> Self {
        Evaluator {
            scope,
            locals: Vec::new(),
            steps: 0,
            limits,
        }
    }

    /// Spends one step of the budget.
    pub(super) fn tick(&mut self) -> Result<(), EvalError> {
        self.steps += 1;
        if self.steps > self.limits.max_steps {
            return Err(EvalError::budget(format!(
                "the expression needed more than {} evaluation steps",
                self.limits.max_steps
            )));
        }
        Ok(())
    }

    /// Refuses collections and strings beyond the size limit before building them, and
    /// charges their size to the step budget, so nested builders cannot hoard memory.
    pub(super) fn check_size(&mut self, size: usize) -> Result<(), EvalError> {
        self.steps = self.steps.saturating_add(size as u64);
        if self.steps > self.limits.max_steps {
            return Err(EvalError::budget(format!(
                "the expression needed more than {} evaluation steps",
                self.limits.max_steps
            )));
        }
        if size > self.limits.max_len {
            return Err(EvalError::budget(format!(
                "a value of {size} items or characters exceeds the limit of {}",
                self.limits.max_len
            )));
        }
        Ok(())
    }

    pub(super) fn eval(&mut self, expr: &'a Expr) -> Result<Value<'a>, EvalError> {
        self.tick()?;
        match expr {
            Expr::Const(c) => Ok(match c {
                Const::None => Value::None,
                Const::Bool(b) => Value::Bool(*b),
                Const::Int(i) => Value::Int(*i),
                Const::Float(f) => Value::Float(*f),
                Const::Str(s) => Value::Str(Str::Borrowed(s)),
            }),
            Expr::Name(name) => self.lookup(name),
            Expr::List(items) => {
                self.check_size(items.len())?;
                let values = items
                    .iter()
                    .map(|e| self.eval(e))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Value::List(Rc::new(values)))
            }
            Expr::Dict(entries) => {
                let mut built: Vec<(Value<'a>, Value<'a>)> = Vec::with_capacity(entries.len());
                for (k, v) in entries {
                    let key = self.eval(k)?;
                    if matches!(
                        key,
                        Value::List(_)
                            | Value::JsonArray(_)
                            | Value::Dict(_)
                            | Value::JsonObject(_)
                    ) {
                        return Err(EvalError::type_error(format!(
                            "unhashable type: '{}'",
                            key.type_name()
                        )));
                    }
                    let value = self.eval(v)?;
                    match built.iter_mut().find(|(existing, _)| equal(existing, &key)) {
                        Some(slot) => slot.1 = value,
                        None => built.push((key, value)),
                    }
                }
                Ok(Value::Dict(Rc::new(built)))
            }
            Expr::Attr(target, name) => {
                let target = self.eval(target)?;
                attribute(&target, name)
            }
            Expr::Index(target, index) => {
                let target = self.eval(target)?;
                let index = self.eval(index)?;
                subscript(&target, &index)
            }
            Expr::Slice(target, bounds) => {
                let target = self.eval(target)?;
                let mut parts = [None, None, None];
                for (part, bound) in parts.iter_mut().zip(bounds) {
                    if let Some(bound) = bound {
                        *part = match self.eval(bound)? {
                            Value::None => None,
                            v => Some(slice_index(&v)?),
                        };
                    }
                }
                slice(&target, parts)
            }
            Expr::Not(operand) => Ok(Value::Bool(!self.eval(operand)?.truthy())),
            Expr::Neg(operand) => {
                let value = self.eval(operand)?;
                match value.number() {
                    Some(Number::Int(i)) => i.checked_neg().map(Value::Int).ok_or_else(overflow),
                    Some(Number::Float(f)) => Ok(Value::Float(-f)),
                    None => Err(unary_type_error("-", &value)),
                }
            }
            Expr::Pos(operand) => {
                let value = self.eval(operand)?;
                value
                    .number()
                    .map(Number::value)
                    .ok_or_else(|| unary_type_error("+", &value))
            }
            Expr::Binary(op, left, right) => {
                let (left, right) = (self.eval(left)?, self.eval(right)?);
                self.binary(*op, &left, &right)
            }
            Expr::And(operands) => {
                let mut last = Value::Bool(true);
                for operand in operands {
                    last = self.eval(operand)?;
                    if !last.truthy() {
                        break;
                    }
                }
                Ok(last)
            }
            Expr::Or(operands) => {
                let mut last = Value::Bool(false);
                for operand in operands {
                    last = self.eval(operand)?;
                    if last.truthy() {
                        break;
                    }
                }
                Ok(last)
            }
            Expr::Compare(first, rest) => {
                let mut left = self.eval(first)?;
                for (op, right) in rest {
                    let right = self.eval(right)?;
                    if !compare_op(*op, &left, &right)? {
                        return Ok(Value::Bool(false));
                    }
                    left = right;
                }
                Ok(Value::Bool(true))
            }
            Expr::IfElse(parts) => {
                let [test, body, orelse] = parts.as_ref();
                if self.eval(test)?.truthy() {
                    self.eval(body)
                } else {
                    self.eval(orelse)
                }
            }
            Expr::ListComp(comprehension) => {
                let mut out = Vec::new();
                self.comprehension(comprehension, 0, &mut |ev, value| {
                    if out.len() >= ev.limits.max_len {
                        ev.check_size(out.len() + 1)?;
                    }
                    out.push(value);
                    Ok(Flow::Continue)
                })?;
                Ok(Value::List(Rc::new(out)))
            }
            Expr::Generator(_) => Err(EvalError::type_error(
                "a generator expression can only be passed to any, all, sum, min or max".into(),
            )),
            Expr::Call(builtin, args) => super::builtins::call(self, *builtin, args),
        }
    }

    fn lookup(&self, name: &str) -> Result<Value<'a>, EvalError> {
        if let Some((_, value)) = self.locals.iter().rev().find(|(n, _)| *n == name) {
            return Ok(value.clone());
        }
        self.scope
            .get(name)
            .ok_or_else(|| EvalError::name(format!("name '{name}' is not defined")))
    }

    /// Feeds every item of `iterable` to `f` until it says stop.
    pub(super) fn for_each(
        &mut self,
        iterable: &Value<'a>,
        f: &mut dyn FnMut(&mut Self, Value<'a>) -> Result<Flow, EvalError>,
    ) -> Result<Flow, EvalError> {
        macro_rules! feed {
            ($items:expr) => {
                for item in $items {
                    self.tick()?;
                    if let Flow::Stop = f(self, item)? {
                        return Ok(Flow::Stop);
                    }
                }
            };
        }
        match iterable {
            Value::List(items) => feed!(items.iter().cloned()),
            Value::JsonArray(items) => feed!(items.iter().map(Value::from_json)),
            Value::Str(s) => {
                let text = s.as_str().to_owned();
                feed!(text.chars().map(|c| Value::string(c.to_string())))
            }
            Value::Dict(entries) => feed!(entries.iter().map(|(k, _)| k.clone())),
            Value::JsonObject(map) => feed!(map.keys().map(|k| Value::Str(Str::Borrowed(k)))),
            other => {
                return Err(EvalError::type_error(format!(
                    "'{}' object is not iterable",
                    other.type_name()
                )));
            }
        }
        Ok(Flow::Continue)
    }

    /// Runs a comprehension from clause `index`, feeding each element to `emit`.
    pub(super) fn comprehension(
        &mut self,
        comprehension: &'a Comprehension,
        index: usize,
        emit: &mut dyn FnMut(&mut Self, Value<'a>) -> Result<Flow, EvalError>,
    ) -> Result<Flow, EvalError> {
        let Some(clause) = comprehension.clauses.get(index) else {
            let element = self.eval(&comprehension.element)?;
            return emit(self, element);
        };
        let iterable = self.eval(&clause.iter)?;
        let mark = self.locals.len();
        let flow = self.for_each(&iterable, &mut |ev, item| {
            ev.locals.truncate(mark);
            ev.bind(&clause.target, item)?;
            if !ev.conditions_hold(clause)? {
                return Ok(Flow::Continue);
            }
            ev.comprehension(comprehension, index + 1, emit)
        });
        self.locals.truncate(mark);
        flow
    }

    fn conditions_hold(&mut self, clause: &'a Clause) -> Result<bool, EvalError> {
        for condition in &clause.conditions {
            if !self.eval(condition)?.truthy() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn bind(&mut self, target: &'a Target, value: Value<'a>) -> Result<(), EvalError> {
        match target {
            Target::Name(name) => {
                self.locals.push((name, value));
                Ok(())
            }
            Target::Tuple(targets) => {
                let items = value.items().ok_or_else(|| {
                    EvalError::type_error(format!(
                        "cannot unpack non-iterable {} object",
                        value.type_name()
                    ))
                })?;
                if items.len() != targets.len() {
                    return Err(EvalError::value(format!(
                        "expected {} values to unpack, got {}",
                        targets.len(),
                        items.len()
                    )));
                }
                for (target, item) in targets.iter().zip(items) {
                    self.bind(target, item)?;
                }
                Ok(())
            }
        }
    }

    pub(super) fn binary(
        &mut self,
        op: BinOp,
        left: &Value<'a>,
        right: &Value<'a>,
    ) -> Result<Value<'a>, EvalError> {
        if let (Some(a), Some(b)) = (left.number(), right.number()) {
            return arithmetic(op, a, b);
        }
        match (op, left, right) {
            (BinOp::Mod, Value::Str(_), _) => Err(EvalError::unsupported(
                "printf-style string formatting ('%' on a string) is not supported".into(),
            )),
            (BinOp::Add, Value::Str(a), Value::Str(b)) => {
                self.check_size(a.as_str().len() + b.as_str().len())?;
                Ok(Value::string(format!("{}{}", a.as_str(), b.as_str())))
            }
            (
                BinOp::Add,
                Value::List(_) | Value::JsonArray(_),
                Value::List(_) | Value::JsonArray(_),
            ) => {
                let mut items = left.items().unwrap_or_default();
                let more = right.items().unwrap_or_default();
                self.check_size(items.len() + more.len())?;
                items.extend(more);
                Ok(Value::List(Rc::new(items)))
            }
            (
                BinOp::Mul,
                Value::Str(_) | Value::List(_) | Value::JsonArray(_),
                Value::Int(_) | Value::Bool(_),
            ) => self.repeat(left, repeat_count(right)),
            (
                BinOp::Mul,
                Value::Int(_) | Value::Bool(_),
                Value::Str(_) | Value::List(_) | Value::JsonArray(_),
            ) => self.repeat(right, repeat_count(left)),
            _ => Err(EvalError::type_error(format!(
                "unsupported operand type(s) for {}: '{}' and '{}'",
                symbol(op),
                left.type_name(),
                right.type_name()
            ))),
        }
    }

    fn repeat(&mut self, sequence: &Value<'a>, count: usize) -> Result<Value<'a>, EvalError> {
        match sequence {
            Value::Str(s) => {
                self.check_size(s.as_str().len().saturating_mul(count))?;
                Ok(Value::string(s.as_str().repeat(count)))
            }
            other => {
                let items = other.items().unwrap_or_default();
                let size = items.len().saturating_mul(count);
                self.check_size(size)?;
                // Built from the result size, not the count: `[] * 10**18` must not loop.
                let out: Vec<Value<'a>> = items.iter().cycle().take(size).cloned().collect();
                Ok(Value::List(Rc::new(out)))
            }
        }
    }
}

/// How many times `n * sequence` repeats (negative counts give an empty result).
fn repeat_count(times: &Value<'_>) -> usize {
    match times.number() {
        Some(Number::Int(n)) => usize::try_from(n.max(0)).unwrap_or(0),
        _ => 0,
    }
}

fn overflow() -> EvalError {
    EvalError::overflow("integer result does not fit in 64 bits".into())
}

fn unary_type_error(op: &str, value: &Value<'_>) -> EvalError {
    EvalError::type_error(format!(
        "bad operand type for unary {op}: '{}'",
        value.type_name()
    ))
}

fn symbol(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::FloorDiv => "//",
        BinOp::Mod => "%",
        BinOp::Pow => "** or pow()",
    }
}

/// Arithmetic on numbers with Python's rules: `/` is always float, `//` and `%` floor
/// towards negative infinity, `%` takes the divisor's sign.
pub(super) fn arithmetic<'a>(op: BinOp, a: Number, b: Number) -> Result<Value<'a>, EvalError> {
    use Number::Int;
    let zero = |message: &str| Err(EvalError::zero_division(message.to_owned()));
    Ok(match (op, a, b) {
        (BinOp::Add, Int(x), Int(y)) => Value::Int(x.checked_add(y).ok_or_else(overflow)?),
        (BinOp::Sub, Int(x), Int(y)) => Value::Int(x.checked_sub(y).ok_or_else(overflow)?),
        (BinOp::Mul, Int(x), Int(y)) => Value::Int(x.checked_mul(y).ok_or_else(overflow)?),
        (BinOp::Add, x, y) => Value::Float(x.as_f64() + y.as_f64()),
        (BinOp::Sub, x, y) => Value::Float(x.as_f64() - y.as_f64()),
        (BinOp::Mul, x, y) => Value::Float(x.as_f64() * y.as_f64()),
        (BinOp::Div, _, y) if y.as_f64() == 0.0 => {
            return zero(if matches!(y, Int(_)) {
                "division by zero"
            } else {
                "float division by zero"
            });
        }
        (BinOp::Div, x, y) => Value::Float(x.as_f64() / y.as_f64()),
        (BinOp::FloorDiv, Int(_), Int(0)) => return zero("integer division or modulo by zero"),
        (BinOp::FloorDiv, Int(x), Int(y)) => Value::Int(floor_div(x, y).ok_or_else(overflow)?),
        (BinOp::FloorDiv, _, y) if y.as_f64() == 0.0 => {
            return zero("float floor division by zero");
        }
        (BinOp::FloorDiv, x, y) => Value::Float(float_div_mod(x.as_f64(), y.as_f64()).0),
        (BinOp::Mod, Int(_), Int(0)) => return zero("integer modulo by zero"),
        (BinOp::Mod, Int(x), Int(y)) => Value::Int(
            x.checked_rem_euclid(y)
                .map(|r| if y < 0 && r != 0 { r + y } else { r })
                .ok_or_else(overflow)?,
        ),
        (BinOp::Mod, _, y) if y.as_f64() == 0.0 => return zero("float modulo"),
        (BinOp::Mod, x, y) => Value::Float(float_div_mod(x.as_f64(), y.as_f64()).1),
        (BinOp::Pow, Int(x), Int(y)) if y >= 0 => {
            let exponent = u32::try_from(y).map_err(|_| overflow())?;
            Value::Int(x.checked_pow(exponent).ok_or_else(overflow)?)
        }
        (BinOp::Pow, x, y) => {
            let (x, y) = (x.as_f64(), y.as_f64());
            if x == 0.0 && y < 0.0 {
                return zero("0.0 cannot be raised to a negative power");
            }
            if x < 0.0 && y.fract() != 0.0 && y.is_finite() {
                return Err(EvalError::unsupported(
                    "a negative number to a fractional power is complex; complex numbers are not supported".into(),
                ));
            }
            let result = x.powf(y);
            if result.is_infinite() && x.is_finite() && y.is_finite() {
                return Err(EvalError::overflow(
                    "(34, 'Numerical result out of range')".into(),
                ));
            }
            Value::Float(result)
        }
    })
}

/// Float `//` and `%` exactly as CPython computes them (`float_divmod`), so results agree to
/// the last bit: the quotient comes from the remainder, not from `floor(x / y)`.
fn float_div_mod(x: f64, y: f64) -> (f64, f64) {
    let mut remainder = x % y;
    let mut quotient = (x - remainder) / y;
    if remainder != 0.0 {
        if (y < 0.0) != (remainder < 0.0) {
            remainder += y;
            quotient -= 1.0;
        }
    } else {
        remainder = 0.0f64.copysign(y);
    }
    let floored = if quotient != 0.0 {
        let mut f = quotient.floor();
        if quotient - f > 0.5 {
            f += 1.0;
        }
        f
    } else {
        0.0f64.copysign(x / y)
    };
    (floored, remainder)
}

fn floor_div(x: i64, y: i64) -> Option<i64> {
    let q = x.checked_div(y)?;
    Some(if (x % y != 0) && ((x < 0) != (y < 0)) {
        q - 1
    } else {
        q
    })
}

fn compare_op(op: CmpOp, left: &Value<'_>, right: &Value<'_>) -> Result<bool, EvalError> {
    let ordered = |wanted: fn(Ordering) -> bool, symbol: &str| -> Result<bool, EvalError> {
        match compare(left, right) {
            Some(order) => Ok(wanted(order)),
            // NaN: every ordering comparison is false, as in Python.
            None if left.number().is_some() && right.number().is_some() => Ok(false),
            None => Err(EvalError::type_error(format!(
                "'{symbol}' not supported between instances of '{}' and '{}'",
                left.type_name(),
                right.type_name()
            ))),
        }
    };
    match op {
        CmpOp::Eq => Ok(equal(left, right)),
        CmpOp::NotEq => Ok(!equal(left, right)),
        CmpOp::Lt => ordered(Ordering::is_lt, "<"),
        CmpOp::LtE => ordered(Ordering::is_le, "<="),
        CmpOp::Gt => ordered(Ordering::is_gt, ">"),
        CmpOp::GtE => ordered(Ordering::is_ge, ">="),
        CmpOp::In => contains(right, left),
        CmpOp::NotIn => contains(right, left).map(|found| !found),
        CmpOp::Is | CmpOp::IsNot => {
            let same = match (left, right) {
                (Value::None, Value::None) => true,
                (Value::Bool(a), Value::Bool(b)) => a == b,
                (Value::None | Value::Bool(_), _) | (_, Value::None | Value::Bool(_)) => false,
                _ => {
                    return Err(EvalError::unsupported(
                        "'is' is only supported with None, True and False; use '=='".into(),
                    ));
                }
            };
            Ok(same == (op == CmpOp::Is))
        }
    }
}

fn attribute<'a>(target: &Value<'a>, name: &str) -> Result<Value<'a>, EvalError> {
    let found = match target {
        Value::JsonObject(map) => map.get(name).map(Value::from_json),
        Value::Dict(entries) => entries
            .iter()
            .find(|(k, _)| matches!(k, Value::Str(s) if s.as_str() == name))
            .map(|(_, v)| v.clone()),
        _ => None,
    };
    found.ok_or_else(|| {
        EvalError::attribute(format!(
            "'{}' object has no attribute '{name}'",
            target.type_name()
        ))
    })
}

fn subscript<'a>(target: &Value<'a>, index: &Value<'a>) -> Result<Value<'a>, EvalError> {
    match target {
        Value::List(_) | Value::JsonArray(_) | Value::Str(_) => {
            let Some(Number::Int(i)) = index.number() else {
                return Err(EvalError::type_error(format!(
                    "{} indices must be integers or slices, not {}",
                    if matches!(target, Value::Str(_)) {
                        "string"
                    } else {
                        "list"
                    },
                    index.type_name()
                )));
            };
            let len = target.python_len().unwrap_or(0);
            let position = if i < 0 { i + len as i64 } else { i };
            if position < 0 || position >= len as i64 {
                return Err(EvalError::index(format!(
                    "{} index out of range",
                    if matches!(target, Value::Str(_)) {
                        "string"
                    } else {
                        "list"
                    }
                )));
            }
            let position = position as usize;
            Ok(match target {
                Value::List(items) => items[position].clone(),
                Value::JsonArray(items) => Value::from_json(&items[position]),
                Value::Str(s) => Value::string(
                    s.as_str()
                        .chars()
                        .nth(position)
                        .map(String::from)
                        .unwrap_or_default(),
                ),
                _ => Value::None,
            })
        }
        Value::JsonObject(map) => match index {
            Value::Str(key) => map
                .get(key.as_str())
                .map(Value::from_json)
                .ok_or_else(|| EvalError::key(repr(index))),
            Value::List(_) | Value::JsonArray(_) | Value::Dict(_) | Value::JsonObject(_) => Err(
                EvalError::type_error(format!("unhashable type: '{}'", index.type_name())),
            ),
            _ => Err(EvalError::key(repr(index))),
        },
        Value::Dict(entries) => entries
            .iter()
            .find(|(k, _)| equal(k, index))
            .map(|(_, v)| v.clone())
            .ok_or_else(|| EvalError::key(repr(index))),
        other => Err(EvalError::type_error(format!(
            "'{}' object is not subscriptable",
            other.type_name()
        ))),
    }
}

fn slice_index(value: &Value<'_>) -> Result<i64, EvalError> {
    match value.number() {
        Some(Number::Int(i)) => Ok(i),
        _ => Err(EvalError::type_error(
            "slice indices must be integers or None".into(),
        )),
    }
}

/// `sequence[start:stop:step]` with Python's clamping rules.
fn slice<'a>(
    target: &Value<'a>,
    [start, stop, step]: [Option<i64>; 3],
) -> Result<Value<'a>, EvalError> {
    let step = step.unwrap_or(1);
    if step == 0 {
        return Err(EvalError::value("slice step cannot be zero".into()));
    }
    let len = match target {
        Value::Str(_) | Value::List(_) | Value::JsonArray(_) => {
            target.python_len().unwrap_or(0) as i64
        }
        Value::Dict(_) | Value::JsonObject(_) => {
            return Err(EvalError::type_error("unhashable type: 'slice'".into()));
        }
        other => {
            return Err(EvalError::type_error(format!(
                "'{}' object is not subscriptable",
                other.type_name()
            )));
        }
    };
    let clamp = |index: i64, low: i64, high: i64| -> i64 {
        let index = if index < 0 { index + len } else { index };
        index.clamp(low, high)
    };
    let (start, stop) = if step > 0 {
        (
            start.map_or(0, |s| clamp(s, 0, len)),
            stop.map_or(len, |s| clamp(s, 0, len)),
        )
    } else {
        (
            start.map_or(len - 1, |s| clamp(s, -1, len - 1)),
            stop.map_or(-1, |s| clamp(s, -1, len - 1)),
        )
    };
    let mut positions = Vec::new();
    let mut i = start;
    while (step > 0 && i < stop) || (step < 0 && i > stop) {
        positions.push(i as usize);
        i += step;
    }
    Ok(match target {
        Value::Str(s) => {
            let chars: Vec<char> = s.as_str().chars().collect();
            Value::string(
                positions
                    .iter()
                    .filter_map(|p| chars.get(*p))
                    .collect::<String>(),
            )
        }
        other => {
            let items = other.items().unwrap_or_default();
            Value::List(Rc::new(
                positions
                    .iter()
                    .filter_map(|p| items.get(*p).cloned())
                    .collect(),
            ))
        }
    })
}
