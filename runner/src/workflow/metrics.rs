//! System metrics sampled while an execution runs (`sysinfo`): the runner process's memory
//! and CPU, and the host's.

use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Resources used during a run. Process figures are the runner's own (programs started by
/// `command` actions are separate processes and not included).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub samples: u32,
    /// Largest resident memory of the runner process, bytes.
    pub process_memory_max_bytes: u64,
    /// Largest CPU use of the runner process, percent of one core.
    pub(crate) process_cpu_max_percent: f32,
    /// Mean CPU use of the runner process, percent of one core.
    pub(crate) process_cpu_mean_percent: f32,
    /// Largest used host memory, bytes.
    pub(crate) host_memory_used_max_bytes: u64,
    pub host_memory_total_bytes: u64,
    /// Mean host CPU use, percent of all cores.
    pub(crate) host_cpu_mean_percent: f32,
}

/// Samples in the background until [`Sampler::finish`].
#[derive(Debug)]
pub(crate) struct Sampler {
    done: CancellationToken,
    task: JoinHandle<Option<Metrics>>,
}

impl Sampler {
    /// Samples every `interval` while the run lasts, and once at the end. CPU figures are
    /// use since the previous sample of any run: the probe is shared by the process, so a
    /// run needs no baseline sample of its own.
    pub(crate) fn start(interval: Duration) -> Sampler {
        let done = CancellationToken::new();
        let until = done.clone();
        let task = tokio::spawn(async move {
            let mut metrics = Metrics::default();
            let mut cpu = CpuMeans::default();
            loop {
                tokio::select! {
                    () = until.cancelled() => break,
                    () = tokio::time::sleep(interval) => cpu.add(&mut metrics, sample()?),
                }
            }
            cpu.add(&mut metrics, sample()?);
            Some(metrics)
        });
        Sampler { done, task }
    }

    /// Takes the last sample and returns the figures; `None` if this platform has none.
    pub(crate) async fn finish(self) -> Option<Metrics> {
        self.done.cancel();
        self.task.await.ok().flatten()
    }
}

/// One reading.
struct Sample {
    process_memory: u64,
    host_memory_used: u64,
    host_memory_total: u64,
    /// `None` on the process's first reading (CPU use is a difference of two).
    cpu: Option<(f32, f32)>,
}

#[derive(Default)]
struct CpuMeans {
    count: u32,
    process_sum: f32,
    host_sum: f32,
}

impl CpuMeans {
    fn add(&mut self, m: &mut Metrics, sample: Sample) {
        m.samples += 1;
        m.process_memory_max_bytes = m.process_memory_max_bytes.max(sample.process_memory);
        m.host_memory_used_max_bytes = m.host_memory_used_max_bytes.max(sample.host_memory_used);
        m.host_memory_total_bytes = sample.host_memory_total;
        if let Some((process, host)) = sample.cpu {
            self.count += 1;
            self.process_sum += process;
            self.host_sum += host;
            m.process_cpu_max_percent = m.process_cpu_max_percent.max(process);
            m.process_cpu_mean_percent = self.process_sum / self.count as f32;
            m.host_cpu_mean_percent = self.host_sum / self.count as f32;
        }
    }
}

/// The process-wide probe: building a `System` reads much of /proc, so it is made once.
struct Probe {
    system: System,
    pid: Pid,
    refreshed: bool,
}

static PROBE: Mutex<Option<Probe>> = Mutex::new(None);

/// Reads memory and CPU now; `None` where sysinfo has no figures.
fn sample() -> Option<Sample> {
    let mut guard = PROBE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if guard.is_none() {
        *guard = Some(Probe {
            system: System::new().ok()?,
            pid: sysinfo::get_current_pid().ok()?,
            refreshed: false,
        });
    }
    let probe = guard.as_mut()?;
    let system = &mut probe.system;
    system.refresh_memory();
    system.refresh_cpu_usage();
    system.refresh_processes_specifics(
        ProcessesToUpdate::Some(&[probe.pid]),
        false,
        ProcessRefreshKind::nothing().with_memory().with_cpu(),
    );
    let process = system.process(probe.pid);
    let cpu = probe.refreshed.then(|| {
        (
            process.map_or(0.0, |p| p.cpu_usage()),
            system.global_cpu_usage(),
        )
    });
    probe.refreshed = true;
    Some(Sample {
        process_memory: process.map_or(0, |p| p.memory()),
        host_memory_used: system.used_memory(),
        host_memory_total: system.total_memory(),
        cpu,
    })
}
