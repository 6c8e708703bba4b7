//! `command` detection: run a site team's program with the job as JSON on stdin and read
//! one JSON result from stdout. stderr goes to the log. The last bytes of both streams go
//! with the report. When the run must stop, the program's process group gets SIGTERM, then
//! SIGKILL after the grace period; whatever it printed by then is kept as the partial
//! result.

use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use res_shared::secrets::Masker;
use res_shared::untrusted::Untrusted;
use res_shared::wire::OutputStream;
use res_workflow::actions::{CommandConfig, parse_config};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tracing::Instrument;

use super::{ActionCall, ActionError, ActionKind, Executor, parse_result};
use crate::workflow::lines::Lines;
use crate::workflow::output::{Captured, Tail};

/// Most stdout kept from a program.
const MAX_STDOUT_BYTES: usize = 16 * 1024 * 1024;

/// Told when a program's process group starts and when its leader has ended, so whoever
/// supervises the runner can end groups a killed runner left behind.
pub(crate) trait ProcessLedger: Send + Sync + std::fmt::Debug {
    /// A program started as the leader of process group `group`.
    fn started(&self, group: i32);
    /// That program has exited and was reaped.
    fn ended(&self, group: i32);
}

/// Runs local programs.
#[derive(Debug, Clone, Default)]
pub(crate) struct CommandExecutor {
    ledger: Option<Arc<dyn ProcessLedger>>,
}

impl CommandExecutor {
    /// Records every program's process group in `ledger` while it runs.
    pub(crate) fn with_ledger(ledger: Arc<dyn ProcessLedger>) -> CommandExecutor {
        CommandExecutor {
            ledger: Some(ledger),
        }
    }
}

impl Executor for CommandExecutor {
    fn name(&self) -> &'static str {
        "command"
    }

    fn kind(&self) -> ActionKind {
        ActionKind::Detection
    }

    fn check_config(&self, config: &Value) -> Vec<String> {
        CommandConfig::problems(config)
    }

    fn run<'a>(&'a self, call: ActionCall<'a>) -> BoxFuture<'a, Result<Value, ActionError>> {
        Box::pin(async move {
            let config: CommandConfig = parse_config(call.config).map_err(ActionError::failed)?;
            let grace = config.grace_seconds.map_or(call.grace, Duration::from_secs);
            let input = serde_json::to_vec(call.job)
                .map_err(|e| ActionError::failed(format!("cannot encode the job: {e}")))?;
            let mut command = Command::new(&config.program);
            command
                .args(&config.args)
                .envs(&config.env)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                // Its own process group, so a stop reaches the programs it starts too.
                .process_group(0)
                .kill_on_drop(true);
            if let Some(dir) = &config.working_dir {
                command.current_dir(dir);
            }
            let mut child = command.spawn().map_err(|e| {
                ActionError::failed(format!("cannot start '{}': {e}", config.program))
            })?;
            let group = child.id().and_then(|id| i32::try_from(id).ok());
            if let (Some(ledger), Some(group)) = (&self.ledger, group) {
                ledger.started(group);
            }
            let io = ChildIo::attach(&mut child, input, call.secrets.masker().clone());
            let ended = tokio::select! {
                // An exit that is already known wins over a timer that fired at the same
                // wake-up (after the runner itself was frozen, say).
                biased;
                status = child.wait() => Ended::Exited(status),
                _ = call.stop.stopped() => Ended::Stopped,
                () = tokio::time::sleep(Duration::from_secs(config.timeout_seconds)) => Ended::TimedOut,
            };
            let ended = match ended {
                Ended::Exited(status) => Ended::Exited(status),
                // The timeout measures the program, not the runner: if the runner was
                // stopped (SIGSTOP, a frozen VM) past the timeout while the program had
                // already exited, the program finished in time and keeps its result.
                other => match child.try_wait() {
                    Ok(Some(status)) => Ended::Exited(Ok(status)),
                    _ => {
                        terminate(&mut child, grace).await;
                        other
                    }
                },
            };
            if let (Some(ledger), Some(group)) = (&self.ledger, group) {
                ledger.ended(group);
            }
            let (stdout, last_error_line) = io.finish(call.output).await;
            let partial = parse_result(&stdout);
            let program = &config.program;
            let with_stderr = |message: String| match &last_error_line {
                Some(line) => format!("{message}: {line}"),
                None => message,
            };
            match ended {
                Ended::Exited(Ok(status)) if status.success() => partial.ok_or_else(|| {
                    ActionError::failed(with_stderr(format!(
                        "'{program}' printed no JSON result on stdout"
                    )))
                }),
                Ended::Exited(Ok(status)) => Err(ActionError::Failed {
                    message: with_stderr(format!("'{program}' {}", describe(status))),
                    partial,
                }),
                Ended::Exited(Err(error)) => Err(ActionError::Failed {
                    message: format!("waiting for '{program}' failed: {error}"),
                    partial,
                }),
                Ended::Stopped => Err(ActionError::Stopped { partial }),
                Ended::TimedOut => Err(ActionError::Failed {
                    message: format!(
                        "'{program}' did not finish within timeout_seconds = {}",
                        config.timeout_seconds
                    ),
                    partial,
                }),
            }
        })
    }
}

enum Ended {
    Exited(std::io::Result<ExitStatus>),
    Stopped,
    TimedOut,
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => format!("ended with {status}"),
    }
}

/// SIGTERM to the program's group, SIGKILL after `grace` if it is still there.
async fn terminate(child: &mut Child, grace: Duration) {
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let Some(group) = group else {
        return; // Already reaped.
    };
    if killpg(group, Signal::SIGTERM).is_err() {
        return; // The group is gone.
    }
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        tracing::warn!(
            grace_seconds = grace.as_secs_f64(),
            "program ignored SIGTERM; killing it"
        );
        let _ = killpg(group, Signal::SIGKILL);
        let _ = child.wait().await;
    }
}

/// The tasks feeding stdin, collecting stdout and logging stderr.
struct ChildIo {
    stdout: tokio::task::JoinHandle<(Vec<u8>, Tail)>,
    stderr: tokio::task::JoinHandle<(Option<String>, Tail)>,
}

impl ChildIo {
    fn attach(child: &mut Child, input: Vec<u8>, masker: Masker) -> ChildIo {
        if let Some(mut stdin) = child.stdin.take() {
            tokio::spawn(async move {
                // A program that does not read its stdin closes the pipe; that is its choice.
                let _ = stdin.write_all(&input).await;
            });
        }
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        ChildIo {
            stdout: tokio::spawn(async move {
                match stdout {
                    Some(out) => read_capped(out).await,
                    None => (Vec::new(), Tail::default()),
                }
            }),
            stderr: tokio::spawn(
                async move {
                    match stderr {
                        Some(err) => log_lines(err, masker).await,
                        None => (None, Tail::default()),
                    }
                }
                .instrument(tracing::Span::current()),
            ),
        }
    }

    /// Stdout and the last stderr line; both streams' tails go to `output`. A grandchild
    /// that escaped the process group may hold the pipes open; do not wait for it longer
    /// than a moment.
    async fn finish(self, output: &Captured) -> (Vec<u8>, Option<String>) {
        let linger = Duration::from_secs(2);
        let stdout = tokio::time::timeout(linger, self.stdout).await;
        let stderr = tokio::time::timeout(linger, self.stderr).await;
        let (stdout, out_tail) = stdout.ok().and_then(Result::ok).unwrap_or_default();
        let (last_line, err_tail) = stderr.ok().and_then(Result::ok).unwrap_or_default();
        output.keep(OutputStream::Stdout, out_tail);
        output.keep(OutputStream::Stderr, err_tail);
        (stdout, last_line)
    }
}

/// The first [`MAX_STDOUT_BYTES`] of stdout (for the result) and its tail (for the report).
async fn read_capped(mut out: impl AsyncRead + Unpin) -> (Vec<u8>, Tail) {
    let mut kept = Vec::new();
    let mut tail = Tail::default();
    let mut chunk = [0u8; 8192];
    loop {
        match out.read(&mut chunk).await {
            Ok(0) | Err(_) => return (kept, tail),
            Ok(n) => {
                let room = MAX_STDOUT_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
                tail.push(&chunk[..n]);
            }
        }
    }
}

/// Logs each stderr line, secret values masked before a line is split or cut; returns the
/// last non-empty one, and the stream's tail.
async fn log_lines(mut err: impl AsyncRead + Unpin, masker: Masker) -> (Option<String>, Tail) {
    let mut tail = Tail::default();
    let mut lines = Lines::new(masker);
    let mut last = None;
    let log = |batch: Vec<String>, last: &mut Option<String>| {
        for text in batch {
            // A program's output may carry escapes and colour codes: shown, not obeyed.
            tracing::info!(target: "res_runner::program", "{}", Untrusted(&text));
            *last = Some(text);
        }
    };
    let mut chunk = [0u8; 4096];
    loop {
        let n = match err.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        tail.push(&chunk[..n]);
        log(lines.push(&chunk[..n]), &mut last);
    }
    log(lines.finish(), &mut last);
    (last, tail)
}
