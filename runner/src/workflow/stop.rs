//! Why and when a run must stop: the operation window's end, the runtime limit, or an
//! operator's cancel request, whichever comes first.

use std::time::Duration;

use res_shared::wire::FinishStatus;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Why a run stopped before its workflow ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopReason {
    /// The operation window closed (`operation_window_exceeded`).
    WindowClosed,
    /// `max_runtime_seconds` passed (`timeout`).
    RuntimeExceeded,
    /// The server asked the run to stop (`cancelled`).
    Cancelled,
}

impl StopReason {
    /// The status the execution ends with.
    pub(crate) fn status(self) -> FinishStatus {
        match self {
            StopReason::WindowClosed => FinishStatus::OperationWindowExceeded,
            StopReason::RuntimeExceeded => FinishStatus::Timeout,
            StopReason::Cancelled => FinishStatus::Cancelled,
        }
    }

    /// A sentence for logs and reports.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            StopReason::WindowClosed => "the operation window closed",
            StopReason::RuntimeExceeded => "the run exceeded max_runtime_seconds",
            StopReason::Cancelled => "cancellation was requested",
        }
    }
}

/// The stop signal executors watch. Cheap to check and to await; needs no task of its own.
#[derive(Debug, Clone)]
pub(crate) struct StopSignal {
    cancel: CancellationToken,
    /// The earlier of deadline and runtime end, with its reason.
    at: Option<(Instant, StopReason)>,
}

impl StopSignal {
    /// A signal that fires when `cancel` is cancelled, at `deadline` (window closed) or at
    /// `runtime_end` (timeout), whichever is first.
    pub(crate) fn new(
        cancel: CancellationToken,
        deadline: Option<Instant>,
        runtime_end: Option<Instant>,
    ) -> StopSignal {
        let at = match (deadline, runtime_end) {
            (Some(d), Some(r)) if r < d => Some((r, StopReason::RuntimeExceeded)),
            (Some(d), _) => Some((d, StopReason::WindowClosed)),
            (None, Some(r)) => Some((r, StopReason::RuntimeExceeded)),
            (None, None) => None,
        };
        StopSignal { cancel, at }
    }

    /// Whether the run must stop now, and why.
    pub(crate) fn reason(&self) -> Option<StopReason> {
        if self.cancel.is_cancelled() {
            return Some(StopReason::Cancelled);
        }
        match self.at {
            Some((at, reason)) if Instant::now() >= at => Some(reason),
            _ => None,
        }
    }

    /// Waits until the run must stop.
    pub(crate) async fn stopped(&self) -> StopReason {
        match self.at {
            Some((at, reason)) => tokio::select! {
                () = self.cancel.cancelled() => StopReason::Cancelled,
                () = tokio::time::sleep_until(at) => reason,
            },
            None => {
                self.cancel.cancelled().await;
                StopReason::Cancelled
            }
        }
    }

    /// Time left before the deadline or runtime end; `None` without either.
    pub(crate) fn remaining(&self) -> Option<Duration> {
        self.at
            .map(|(at, _)| at.saturating_duration_since(Instant::now()))
    }

    /// Sleeps for `duration` unless the run must stop first; returns why it stopped.
    pub(crate) async fn sleep(&self, duration: Duration) -> Result<(), StopReason> {
        tokio::select! {
            reason = self.stopped() => Err(reason),
            () = tokio::time::sleep(duration) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn runtime_before_deadline_is_a_timeout() {
        let now = Instant::now();
        let signal = StopSignal::new(
            CancellationToken::new(),
            Some(now + Duration::from_secs(60)),
            Some(now + Duration::from_secs(30)),
        );
        assert_eq!(signal.reason(), None);
        assert_eq!(signal.stopped().await, StopReason::RuntimeExceeded);
        assert_eq!(signal.reason(), Some(StopReason::RuntimeExceeded));
        assert_eq!(StopReason::RuntimeExceeded.status(), FinishStatus::Timeout);
    }

    #[tokio::test(start_paused = true)]
    async fn deadline_before_runtime_closes_the_window() {
        let now = Instant::now();
        let signal = StopSignal::new(
            CancellationToken::new(),
            Some(now + Duration::from_secs(10)),
            Some(now + Duration::from_secs(30)),
        );
        assert_eq!(
            signal.sleep(Duration::from_secs(20)).await,
            Err(StopReason::WindowClosed)
        );
        assert_eq!(signal.remaining(), Some(Duration::ZERO));
    }

    #[tokio::test(start_paused = true)]
    async fn cancel_wins_over_time_limits() {
        let cancel = CancellationToken::new();
        let signal = StopSignal::new(
            cancel.clone(),
            Some(Instant::now() + Duration::from_secs(5)),
            None,
        );
        assert_eq!(signal.sleep(Duration::from_secs(1)).await, Ok(()));
        cancel.cancel();
        assert_eq!(signal.reason(), Some(StopReason::Cancelled));
        assert_eq!(signal.stopped().await, StopReason::Cancelled);
    }
}
