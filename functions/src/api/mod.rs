//! The functions' HTTP handlers: thin shells that check input, call the schedule rules and
//! the SQL in `db`, and shape the answer.

pub mod claim;
pub mod cursor;
pub mod health;
pub mod heartbeat;
pub mod next_run;
pub mod pause;
pub mod plan;
pub mod register;
pub mod violations;

use crate::error::ApiError;

/// Checks a required text field: not blank, at most `max` characters.
pub(crate) fn require_text(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    if value.trim().is_empty() {
        return Err(ApiError::unprocessable(
            "invalid_field",
            format!("{field} must not be empty"),
        ));
    }
    if value.chars().count() > max {
        return Err(ApiError::unprocessable(
            "invalid_field",
            format!("{field} must be at most {max} characters"),
        ));
    }
    Ok(())
}
