//! Python source → the small expression tree the evaluator runs. Python's own grammar is
//! parsed by `rustpython-parser`; this step admits only the safe subset and says exactly
//! what it refused.

use std::sync::Arc;

use rustpython_parser::ast;

use super::CompileError;

/// A compiled expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A literal.
    Const(Const),
    /// A variable.
    Name(Arc<str>),
    /// `[a, b]` or `(a, b)`.
    List(Vec<Expr>),
    /// `{k: v}`.
    Dict(Vec<(Expr, Expr)>),
    /// `value.name` (key access on JSON objects).
    Attr(Box<Expr>, Arc<str>),
    /// `value[index]`.
    Index(Box<Expr>, Box<Expr>),
    /// `value[lower:upper:step]`.
    Slice(Box<Expr>, [Option<Box<Expr>>; 3]),
    /// `not x`.
    Not(Box<Expr>),
    /// `-x`.
    Neg(Box<Expr>),
    /// `+x`.
    Pos(Box<Expr>),
    /// Arithmetic.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `a and b and ...`.
    And(Vec<Expr>),
    /// `a or b or ...`.
    Or(Vec<Expr>),
    /// `a < b <= c ...`.
    Compare(Box<Expr>, Vec<(CmpOp, Expr)>),
    /// `body if test else orelse`.
    IfElse(Box<[Expr; 3]>),
    /// `[element for ... if ...]`.
    ListComp(Box<Comprehension>),
    /// `(element for ... if ...)`, consumed lazily by `any`, `all`, `sum`, `min`, `max`.
    Generator(Box<Comprehension>),
    /// A call of an allowed builtin.
    Call(Builtin, Vec<Expr>),
}

/// A literal value.
#[derive(Debug, Clone, PartialEq)]
pub enum Const {
    /// `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An integer that fits 64 bits.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(Arc<str>),
}

/// Arithmetic operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `//`
    FloorDiv,
    /// `%`
    Mod,
    /// `**`
    Pow,
}

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `==`
    Eq,
    /// `!=`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtE,
    /// `>`
    Gt,
    /// `>=`
    GtE,
    /// `in`
    In,
    /// `not in`
    NotIn,
    /// `is` (with `None`, `True`, `False`)
    Is,
    /// `is not`
    IsNot,
}

/// The builtins an expression may call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    /// `len(x)`
    Len,
    /// `any(iterable)`
    Any,
    /// `all(iterable)`
    All,
    /// `sum(iterable[, start])`
    Sum,
    /// `min(...)`
    Min,
    /// `max(...)`
    Max,
    /// `abs(x)`
    Abs,
    /// `round(x[, ndigits])`
    Round,
    /// `int(x)`
    Int,
    /// `float(x)`
    Float,
    /// `str(x)`
    Str,
    /// `bool(x)`
    Bool,
}

impl Builtin {
    fn from_name(name: &str) -> Option<Builtin> {
        Some(match name {
            "len" => Builtin::Len,
            "any" => Builtin::Any,
            "all" => Builtin::All,
            "sum" => Builtin::Sum,
            "min" => Builtin::Min,
            "max" => Builtin::Max,
            "abs" => Builtin::Abs,
            "round" => Builtin::Round,
            "int" => Builtin::Int,
            "float" => Builtin::Float,
            "str" => Builtin::Str,
            "bool" => Builtin::Bool,
            _ => return None,
        })
    }
}

/// `element for target in iter if ...` clauses.
#[derive(Debug, Clone, PartialEq)]
pub struct Comprehension {
    /// What each iteration produces.
    pub element: Expr,
    /// The `for` clauses, outermost first.
    pub clauses: Vec<Clause>,
}

/// One `for target in iter if cond ...` clause.
#[derive(Debug, Clone, PartialEq)]
pub struct Clause {
    /// What each item is bound to.
    pub target: Target,
    /// What is iterated.
    pub iter: Expr,
    /// Filters.
    pub conditions: Vec<Expr>,
}

/// A comprehension variable, possibly unpacked (`for k, v in ...`).
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// One name.
    Name(Arc<str>),
    /// A tuple of targets.
    Tuple(Vec<Target>),
}

/// Lowers a parsed expression, refusing anything outside the subset.
pub fn lower(expr: &ast::Expr) -> Result<Expr, CompileError> {
    use ast::Expr as E;
    Ok(match expr {
        E::Constant(c) => Expr::Const(constant(&c.value)?),
        E::Name(n) => Expr::Name(name(n.id.as_str())?),
        E::List(l) => Expr::List(all(&l.elts)?),
        E::Tuple(t) => Expr::List(all(&t.elts)?),
        E::Dict(d) => {
            let mut entries = Vec::with_capacity(d.values.len());
            for (key, value) in d.keys.iter().zip(&d.values) {
                let key = key
                    .as_ref()
                    .ok_or_else(|| CompileError::refused("'**' unpacking in a dict"))?;
                entries.push((lower(key)?, lower(value)?));
            }
            Expr::Dict(entries)
        }
        E::Attribute(a) => Expr::Attr(Box::new(lower(&a.value)?), name(a.attr.as_str())?),
        E::Subscript(s) => match s.slice.as_ref() {
            E::Slice(slice) => Expr::Slice(
                Box::new(lower(&s.value)?),
                [
                    optional(slice.lower.as_deref())?,
                    optional(slice.upper.as_deref())?,
                    optional(slice.step.as_deref())?,
                ],
            ),
            index => Expr::Index(Box::new(lower(&s.value)?), Box::new(lower(index)?)),
        },
        E::UnaryOp(u) => {
            let operand = Box::new(lower(&u.operand)?);
            match u.op {
                ast::UnaryOp::Not => Expr::Not(operand),
                ast::UnaryOp::USub => Expr::Neg(operand),
                ast::UnaryOp::UAdd => Expr::Pos(operand),
                ast::UnaryOp::Invert => return Err(CompileError::refused("the '~' operator")),
            }
        }
        E::BinOp(b) => {
            let op = match b.op {
                ast::Operator::Add => BinOp::Add,
                ast::Operator::Sub => BinOp::Sub,
                ast::Operator::Mult => BinOp::Mul,
                ast::Operator::Div => BinOp::Div,
                ast::Operator::FloorDiv => BinOp::FloorDiv,
                ast::Operator::Mod => BinOp::Mod,
                ast::Operator::Pow => BinOp::Pow,
                other => {
                    return Err(CompileError::refused(&format!(
                        "the bitwise or matrix operator {other:?}"
                    )));
                }
            };
            Expr::Binary(op, Box::new(lower(&b.left)?), Box::new(lower(&b.right)?))
        }
        E::BoolOp(b) => match b.op {
            ast::BoolOp::And => Expr::And(all(&b.values)?),
            ast::BoolOp::Or => Expr::Or(all(&b.values)?),
        },
        E::Compare(c) => {
            let mut rest = Vec::with_capacity(c.ops.len());
            for (op, right) in c.ops.iter().zip(&c.comparators) {
                let op = match op {
                    ast::CmpOp::Eq => CmpOp::Eq,
                    ast::CmpOp::NotEq => CmpOp::NotEq,
                    ast::CmpOp::Lt => CmpOp::Lt,
                    ast::CmpOp::LtE => CmpOp::LtE,
                    ast::CmpOp::Gt => CmpOp::Gt,
                    ast::CmpOp::GtE => CmpOp::GtE,
                    ast::CmpOp::In => CmpOp::In,
                    ast::CmpOp::NotIn => CmpOp::NotIn,
                    ast::CmpOp::Is => CmpOp::Is,
                    ast::CmpOp::IsNot => CmpOp::IsNot,
                };
                rest.push((op, lower(right)?));
            }
            Expr::Compare(Box::new(lower(&c.left)?), rest)
        }
        E::IfExp(i) => Expr::IfElse(Box::new([
            lower(&i.test)?,
            lower(&i.body)?,
            lower(&i.orelse)?,
        ])),
        E::ListComp(c) => Expr::ListComp(Box::new(comprehension(&c.elt, &c.generators)?)),
        E::GeneratorExp(g) => Expr::Generator(Box::new(comprehension(&g.elt, &g.generators)?)),
        E::Call(call) => {
            let E::Name(function) = call.func.as_ref() else {
                return Err(CompileError::refused(
                    "calling anything but len, any, all, sum, min, max, abs, round, int, float, str, bool",
                ));
            };
            let builtin = Builtin::from_name(function.id.as_str()).ok_or_else(|| {
                CompileError::refused(&format!(
                    "calling '{}' (only len, any, all, sum, min, max, abs, round, int, float, str, bool)",
                    function.id
                ))
            })?;
            if !call.keywords.is_empty() {
                return Err(CompileError::refused("keyword arguments"));
            }
            Expr::Call(builtin, all(&call.args)?)
        }
        E::Lambda(_) => return Err(CompileError::refused("lambda")),
        E::NamedExpr(_) => return Err(CompileError::refused("the ':=' operator")),
        E::Set(_) | E::SetComp(_) => return Err(CompileError::refused("sets")),
        E::DictComp(_) => return Err(CompileError::refused("dict comprehensions")),
        E::Await(_) | E::Yield(_) | E::YieldFrom(_) => {
            return Err(CompileError::refused("await and yield"));
        }
        E::JoinedStr(_) | E::FormattedValue(_) => return Err(CompileError::refused("f-strings")),
        E::Starred(_) => return Err(CompileError::refused("'*' unpacking")),
        E::Slice(_) => return Err(CompileError::refused("a slice outside brackets")),
    })
}

fn all(exprs: &[ast::Expr]) -> Result<Vec<Expr>, CompileError> {
    exprs.iter().map(lower).collect()
}

fn optional(expr: Option<&ast::Expr>) -> Result<Option<Box<Expr>>, CompileError> {
    expr.map(|e| lower(e).map(Box::new)).transpose()
}

/// Names may not be dunders: `__class__`, `__import__` and friends are the classic escapes.
fn name(id: &str) -> Result<Arc<str>, CompileError> {
    if id.starts_with("__") || id.ends_with("__") {
        return Err(CompileError::refused(&format!(
            "the name '{id}' (double underscores)"
        )));
    }
    Ok(Arc::from(id))
}

fn constant(value: &ast::Constant) -> Result<Const, CompileError> {
    Ok(match value {
        ast::Constant::None => Const::None,
        ast::Constant::Bool(b) => Const::Bool(*b),
        ast::Constant::Str(s) => Const::Str(Arc::from(s.as_str())),
        ast::Constant::Int(i) => Const::Int(
            i64::try_from(i).map_err(|_| CompileError::refused("integers beyond 64 bits"))?,
        ),
        ast::Constant::Float(f) => Const::Float(*f),
        ast::Constant::Bytes(_) => return Err(CompileError::refused("bytes literals")),
        ast::Constant::Complex { .. } => return Err(CompileError::refused("complex numbers")),
        ast::Constant::Ellipsis => return Err(CompileError::refused("'...'")),
        ast::Constant::Tuple(_) => return Err(CompileError::refused("constant tuples")),
    })
}

fn comprehension(
    element: &ast::Expr,
    generators: &[ast::Comprehension],
) -> Result<Comprehension, CompileError> {
    let mut clauses = Vec::with_capacity(generators.len());
    for generator in generators {
        if generator.is_async {
            return Err(CompileError::refused("async comprehensions"));
        }
        clauses.push(Clause {
            target: target(&generator.target)?,
            iter: lower(&generator.iter)?,
            conditions: all(&generator.ifs)?,
        });
    }
    Ok(Comprehension {
        element: lower(element)?,
        clauses,
    })
}

fn target(expr: &ast::Expr) -> Result<Target, CompileError> {
    match expr {
        ast::Expr::Name(n) => Ok(Target::Name(name(n.id.as_str())?)),
        ast::Expr::Tuple(t) => Ok(Target::Tuple(
            t.elts.iter().map(target).collect::<Result<_, _>>()?,
        )),
        ast::Expr::List(l) => Ok(Target::Tuple(
            l.elts.iter().map(target).collect::<Result<_, _>>()?,
        )),
        _ => Err(CompileError::refused(
            "a comprehension target other than names",
        )),
    }
}
