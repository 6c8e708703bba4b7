//! Rules that run when something happens: when a listening rule's run starts, and what a
//! workflow's asked-for wake time becomes. One implementation for the runner (which runs
//! listening rules, online and offline) and the functions (which show them), as the
//! schedule's is. The design follows the reference's consumer scheduling
//! (`../shared/reference/004_*`): a run starts when the rule is idle and events are
//! waiting, a run was asked for, or the wake time came; triggers during a run are
//! coalesced into at most one more run.

pub mod event;
pub mod trigger;
pub mod wake;
