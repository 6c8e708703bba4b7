//! Workflow expressions: edge conditions and consolidation logic, written in Python.
//!
//! Source is parsed by `rustpython-parser` (a real Python parser), lowered to a small tree
//! that admits only a safe subset — literals, names, subscripts and attribute access on
//! JSON values, comparisons, `and/or/not`, arithmetic, `in`, conditional expressions,
//! list and generator comprehensions, and the builtins `len any all sum min max abs round
//! int float str bool` — and evaluated with a step and size budget.

// Consumed by the functions and the runner: every public item says what it is.
#![warn(missing_docs)]

mod builtins;
mod compile;
mod eval;
mod value;

use std::fmt;
use std::rc::Rc;

use rustpython_parser::ast;

pub use value::{Value, repr};

/// Evaluation budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Evaluation steps (node visits and iterations) before giving up.
    pub max_steps: u64,
    /// Largest list or string an expression may build.
    pub max_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: 200_000,
            max_len: 100_000,
        }
    }
}

/// A parsed and checked expression, ready to evaluate many times.
#[derive(Debug, Clone, PartialEq)]
pub struct Expression {
    source: String,
    tree: compile::Expr,
}

/// Why an expression was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    /// What was wrong.
    pub message: String,
}

impl CompileError {
    fn refused(what: &str) -> CompileError {
        CompileError {
            message: format!("{what} is not allowed in workflow expressions"),
        }
    }
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CompileError {}

/// The Python exception an evaluation raised, or the budget it exceeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalError {
    /// The Python exception name (`KeyError`, `TypeError`, ...) or `BudgetExceeded`.
    pub kind: &'static str,
    /// Python's message.
    pub message: String,
}

impl EvalError {
    fn new(kind: &'static str, message: String) -> EvalError {
        EvalError { kind, message }
    }
    fn name(message: String) -> Self {
        Self::new("NameError", message)
    }
    fn key(message: String) -> Self {
        Self::new("KeyError", message)
    }
    fn index(message: String) -> Self {
        Self::new("IndexError", message)
    }
    fn type_error(message: String) -> Self {
        Self::new("TypeError", message)
    }
    fn value(message: String) -> Self {
        Self::new("ValueError", message)
    }
    fn attribute(message: String) -> Self {
        Self::new("AttributeError", message)
    }
    fn zero_division(message: String) -> Self {
        Self::new("ZeroDivisionError", message)
    }
    fn overflow(message: String) -> Self {
        Self::new("OverflowError", message)
    }
    fn budget(message: String) -> Self {
        Self::new("BudgetExceeded", message)
    }
    fn unsupported(message: String) -> Self {
        Self::new("UnsupportedOperation", message)
    }
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for EvalError {}

/// The names an expression can see.
#[derive(Debug, Clone, Default)]
pub struct Scope<'a> {
    names: Vec<(Rc<str>, Value<'a>)>,
}

impl<'a> Scope<'a> {
    /// An empty scope.
    pub fn new() -> Self {
        Scope::default()
    }

    /// Binds a name to a JSON value (borrowed, not copied); later bindings win.
    pub fn set_json(&mut self, name: &str, value: &'a serde_json::Value) {
        self.set(name, Value::from_json(value));
    }

    /// Binds a name to a value.
    pub fn set(&mut self, name: &str, value: Value<'a>) {
        match self.names.iter_mut().find(|(n, _)| n.as_ref() == name) {
            Some(slot) => slot.1 = value,
            None => self.names.push((Rc::from(name), value)),
        }
    }

    /// Every key of a JSON object becomes a name (a node result's fields).
    pub fn set_fields(&mut self, object: &'a serde_json::Value) {
        if let serde_json::Value::Object(map) = object {
            for (key, value) in map {
                self.set_json(key, value);
            }
        }
    }

    fn get(&self, name: &str) -> Option<Value<'a>> {
        self.names
            .iter()
            .rev()
            .find(|(n, _)| n.as_ref() == name)
            .map(|(_, v)| v.clone())
    }
}

impl Expression {
    /// Parses Python source and checks it uses only the safe subset.
    pub fn compile(source: &str) -> Result<Expression, CompileError> {
        let parsed = <ast::Expr as rustpython_parser::Parse>::parse(source.trim(), "<expression>")
            .map_err(|error| CompileError {
                message: format!("invalid Python expression: {}", error.error),
            })?;
        Ok(Expression {
            source: source.to_owned(),
            tree: compile::lower(&parsed)?,
        })
    }

    /// The source text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Evaluates to a value (borrowing from both the scope and the expression).
    pub fn evaluate<'a>(
        &'a self,
        scope: &Scope<'a>,
        limits: Limits,
    ) -> Result<Value<'a>, EvalError> {
        eval::Evaluator::new(scope, limits).eval(&self.tree)
    }

    /// Evaluates and applies Python truthiness (edge conditions, consolidation).
    pub fn is_true(&self, scope: &Scope<'_>, limits: Limits) -> Result<bool, EvalError> {
        self.evaluate(scope, limits).map(|value| value.truthy())
    }
}

#[cfg(test)]
mod tests;
