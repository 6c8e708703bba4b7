//! The functions' HTTP handlers: thin shells that check input, call the schedule rules and
//! the SQL in `db`, and shape the answer.

pub(crate) mod batch;
pub(crate) mod claim;
pub(crate) mod claim_group;
pub(crate) mod cursor;
pub(crate) mod fields;
pub(crate) mod group;
pub(crate) mod health;
pub(crate) mod heartbeat;
pub(crate) mod next_run;
pub(crate) mod operator;
pub(crate) mod pause;
pub(crate) mod plan;
pub(crate) mod register;
pub(crate) mod violations;

pub(crate) use fields::{
    nul_path, require_object, require_raw_object, require_runner_id, require_seconds, require_text,
    require_violation,
};
