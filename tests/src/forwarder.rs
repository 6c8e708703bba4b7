//! A TCP endpoint that forwards to a PostgreSQL server's unix socket, the way a managed
//! database's endpoint follows its primary: an RDS or Aurora cluster endpoint (a DNS name
//! moved on failover) or Patroni's HAProxy. Re-pointing it cuts every open connection, as
//! the old primary going away does; freezing it holds the bytes in flight, as a stalled
//! replication link does (used between a primary and its replica to make commits the
//! replica never receives).
//!
//! It also makes a slow link in user space, where the kernel has no `netem` to add latency:
//! each chunk is held for a one-way delay, and the bytes leave at a set rate.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// Where a forwarder sends connections.
#[derive(Debug, Clone)]
pub enum Target {
    /// A unix socket (a PostgreSQL server's).
    Unix(PathBuf),
    /// A TCP address.
    Tcp(SocketAddr),
}

/// What a link does to the bytes it carries, each way.
#[derive(Debug, Clone, Copy, Default)]
pub struct Link {
    /// Held this long before they go on (half the round trip).
    pub delay: Duration,
    /// At most this many bits a second (none: as fast as they come).
    pub bits_per_second: Option<u64>,
}

/// A forwarding endpoint on 127.0.0.1; it stops when dropped.
#[derive(Debug)]
pub struct Forwarder {
    port: u16,
    target: Arc<Mutex<Target>>,
    /// Bumped to cut every open connection.
    cut: watch::Sender<u64>,
    /// While true, nothing is forwarded in either direction (bytes wait).
    frozen: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Forwarder {
    /// Starts forwarding 127.0.0.1:<a free port> to the unix socket `target`.
    pub async fn start(target: &Path) -> Forwarder {
        Forwarder::start_to(Target::Unix(target.to_path_buf()), Link::default()).await
    }

    /// Starts forwarding 127.0.0.1:<a free port> to `target` over `link`.
    pub async fn start_to(target: Target, link: Link) -> Forwarder {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port for the forwarder");
        let port = listener.local_addr().expect("its address").port();
        let target = Arc::new(Mutex::new(target));
        let (cut, _) = watch::channel(0u64);
        let (frozen, _) = watch::channel(false);
        let task = tokio::spawn(accept(
            listener,
            Arc::clone(&target),
            link,
            cut.clone(),
            frozen.clone(),
        ));
        Forwarder {
            port,
            target,
            cut,
            frozen,
            task,
        }
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Forwards new connections to `target` and cuts the open ones.
    pub fn point_at(&self, target: &Path) {
        *self.target.lock().unwrap_or_else(PoisonError::into_inner) =
            Target::Unix(target.to_path_buf());
        self.cut.send_modify(|n| *n += 1);
    }

    /// Holds what is in flight (true) or lets it through again (false).
    pub fn freeze(&self, frozen: bool) {
        self.frozen.send_replace(frozen);
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.cut.send_modify(|n| *n += 1);
        self.task.abort();
    }
}

async fn accept(
    listener: TcpListener,
    target: Arc<Mutex<Target>>,
    link: Link,
    cut: watch::Sender<u64>,
    frozen: watch::Sender<bool>,
) {
    while let Ok((client, _)) = listener.accept().await {
        let to = target
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let (mut cut, frozen) = (cut.subscribe(), frozen.subscribe());
        tokio::spawn(async move {
            let Some((server_read, server_write)) = connect(&to).await else {
                return;
            };
            let (client_read, client_write) = client.into_split();
            cut.mark_unchanged();
            // Either direction ending, or a cut, closes both.
            tokio::select! {
                () = carry(client_read, server_write, link, frozen.clone()) => {}
                () = carry(server_read, client_write, link, frozen) => {}
                _ = cut.changed() => {}
            }
        });
    }
}

type Halves = (
    Box<dyn AsyncRead + Unpin + Send>,
    Box<dyn AsyncWrite + Unpin + Send>,
);

/// A connection to `target`, split; none when it refuses.
async fn connect(target: &Target) -> Option<Halves> {
    Some(match target {
        Target::Unix(path) => {
            let (read, write) = UnixStream::connect(path).await.ok()?.into_split();
            (Box::new(read), Box::new(write))
        }
        Target::Tcp(address) => {
            let (read, write) = TcpStream::connect(address).await.ok()?.into_split();
            (Box::new(read), Box::new(write))
        }
    })
}

/// Carries bytes one way until either side closes: each chunk read is held for the link's
/// delay (reading goes on meanwhile) and written at its rate, and not while frozen.
async fn carry(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    link: Link,
    mut frozen: watch::Receiver<bool>,
) {
    let (chunks, mut held) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let read = async move {
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            match from.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if chunks
                        .send((Instant::now() + link.delay, buffer[..n].to_vec()))
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    };
    let write = async move {
        while let Some((due, chunk)) = held.recv().await {
            tokio::time::sleep_until(due).await;
            if frozen.wait_for(|f| !f).await.is_err() {
                return;
            }
            if to.write_all(&chunk).await.is_err() {
                return;
            }
            if let Some(bits) = link.bits_per_second {
                let seconds = chunk.len() as f64 * 8.0 / bits as f64;
                tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
            }
        }
    };
    // The write side ends after the read side has, once what was read is written.
    tokio::join!(read, write);
}
