//! The functions' HTTP handlers: thin shells that check input, call the schedule rules and
//! the SQL in `db`, and shape the answer.

pub mod claim;
pub mod cursor;
mod fields;
pub mod health;
pub mod heartbeat;
pub mod next_run;
pub mod pause;
pub mod plan;
pub mod register;
pub mod violations;

pub(crate) use fields::{nul_path, require_object, require_raw_object, require_text};
