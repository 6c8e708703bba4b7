//! A TCP endpoint that forwards to a PostgreSQL server's unix socket, the way a managed
//! database's endpoint follows its primary: an RDS or Aurora cluster endpoint (a DNS name
//! moved on failover) or Patroni's HAProxy. Re-pointing it cuts every open connection, as
//! the old primary going away does; freezing it holds the bytes in flight, as a stalled
//! replication link does (used between a primary and its replica to make commits the
//! replica never receives).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixStream};
use tokio::sync::watch;

/// A forwarding endpoint on 127.0.0.1; it stops when dropped.
#[derive(Debug)]
pub struct Forwarder {
    port: u16,
    target: Arc<Mutex<PathBuf>>,
    /// Bumped to cut every open connection.
    cut: watch::Sender<u64>,
    /// While true, nothing is forwarded in either direction (bytes wait).
    frozen: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Forwarder {
    /// Starts forwarding 127.0.0.1:<a free port> to the unix socket `target`.
    pub async fn start(target: &Path) -> Forwarder {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port for the forwarder");
        let port = listener.local_addr().expect("its address").port();
        let target = Arc::new(Mutex::new(target.to_path_buf()));
        let (cut, _) = watch::channel(0u64);
        let (frozen, _) = watch::channel(false);
        let task = tokio::spawn(accept(
            listener,
            Arc::clone(&target),
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
        *self.target.lock().unwrap_or_else(PoisonError::into_inner) = target.to_path_buf();
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
    target: Arc<Mutex<PathBuf>>,
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
            let Ok(server) = UnixStream::connect(&to).await else {
                return;
            };
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            cut.mark_unchanged();
            // Either direction ending, or a cut, closes both.
            tokio::select! {
                () = copy(client_read, server_write, frozen.clone()) => {}
                () = copy(server_read, client_write, frozen) => {}
                _ = cut.changed() => {}
            }
        });
    }
}

/// Copies until either side closes, holding each chunk while frozen.
async fn copy(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    mut frozen: watch::Receiver<bool>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if frozen.wait_for(|f| !f).await.is_err() {
            return;
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}
