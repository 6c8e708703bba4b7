//! The operator functions: people and their tools (`resctl`) act on rules and executions
//! and read the history, within their key's scope.

pub(crate) mod acknowledge;
mod attention;
pub(crate) mod cancel;
pub(crate) mod channels;
pub(crate) mod config;
pub(crate) mod config_apply;
mod decide;
pub(crate) mod fleet;
pub(crate) mod history;
pub(crate) mod inspect;
pub(crate) mod keys;
pub(crate) mod overview;
mod page;
pub(crate) mod rules;
pub(crate) mod secrets;
