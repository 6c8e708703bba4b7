//! The schedule rules: cron expressions and intervals, operation windows, opening hours and
//! runs at opening or closing, validity dates, time zones, the next run time,
//! deadlines and readiness. Pure functions over plain data; no I/O.

mod anchor;
mod attention;
mod catch_up;
mod cron;
mod error;
mod hours;
mod interval;
mod jitter;
mod next_run;
mod overlap;
mod readiness;
mod recurrence;
mod reschedule;
mod rule;
mod start_slot;
mod timetable;
mod timing_spec;
mod window;
mod words;
mod zone;

pub use anchor::{AnchorSchedule, Edge};
pub use attention::{
    AfterRun, DEFAULT_FAILURE_THRESHOLD, after_run, failures_in_words, schedule_attention,
};
pub use catch_up::{MISSED_AFTER, Missed, missed_run};
pub use cron::CronSchedule;
pub use error::ScheduleError;
pub use hours::{
    Day, DaySpec, HoursError, HoursSpec, Interval, OpeningHours, SpecialDay, parse_interval,
    short_name, upcoming_special_days, week_in_words,
};
pub use interval::{IntervalSchedule, duration_text, parse_duration};
pub use jitter::{MAX_JITTER_SECONDS, jitter_offset};
pub use next_run::{Deadline, FAILED_RUN_RETRY, NextRun, Schedule, window_deadline};
pub use overlap::{OverlapPolicy, buffered_run};
pub use readiness::{Blocker, RuleState, RuleStatus};
pub use recurrence::Recurrence;
pub use reschedule::{Rescheduled, UNSCHEDULABLE_RETRY, reschedule, reschedule_run};
pub use rule::{RuleSchedule, RuleTiming, rule_timetable};
pub use start_slot::{START_SLOTS, start_offset};
pub use timetable::{MAX_OFFSET_SECONDS, Restriction, Timetable, Validity};
pub use timing_spec::{CatchUp, TimingSpec, WhileOpen};
pub use window::{OperationWindow, WindowPosition, parse_wall_time, read_stored_time};
pub use words::{describe_blocker, describe_blocker_in, describe_schedule, relative_time};
pub use zone::Zone;
