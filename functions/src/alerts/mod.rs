//! Alerts that reach a person: each sweep works out what needs someone (a rule needing
//! attention, a rule overdue because its branch's runners are silent, a runner gone, a
//! branch whose offline owner is silent), opens an item for each new one and resolves each
//! that cleared, and queues one message per item and channel of its brand; a delivery loop
//! sends them, signed, with retries and backoff, from a PostgreSQL outbox.

pub(crate) mod deliver;
pub(crate) mod evaluate;
pub(crate) mod items;
pub(crate) mod message;
pub(crate) mod sign;
pub(crate) mod target;

pub use deliver::{DeliveryRound, client, deliver_round, run};
pub use evaluate::{Evaluation, evaluate};
