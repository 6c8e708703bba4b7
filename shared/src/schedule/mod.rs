//! The schedule rules: cron expressions, operation windows, time zones, the next run time,
//! deadlines and readiness. Pure functions over plain data; no I/O.

mod cron;
mod error;
mod fallback;
mod next_run;
mod readiness;
mod window;
mod zone;

pub use cron::CronSchedule;
pub use error::ScheduleError;
pub use fallback::{FallbackNextRun, UNSCHEDULABLE_RETRY, fallback_next_run};
pub use next_run::{Deadline, FAILED_RUN_RETRY, NextRun, Schedule, window_deadline};
pub use readiness::{Blocker, RuleState, RuleStatus};
pub use window::{OperationWindow, WindowPosition, parse_wall_time};
pub use zone::Zone;
