//! The workflow engine: what a claimed branch rule runs.
//!
//! A [`config::Workflow`] is loaded and checked once; the [`engine::Engine`] runs it for an
//! execution with [`executors`] behind one trait, stops it at the deadline, the runtime
//! limit or on request ([`stop`]), pauses it at long delays ([`state`]) and reports every
//! node it ran ([`report`]).

pub mod config;
pub mod engine;
pub mod executors;
pub mod metrics;
pub mod prepare;
pub mod report;
pub mod services;
pub mod state;
pub mod stop;
