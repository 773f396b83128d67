//! A host UNIX socket standing in for an instance's proxy socket: each accepted connection is
//! piped through its own `connect` stream, so a plain HTTP client (iceboxd's RuntimeClient)
//! talks to the proxy in the guest unchanged.

use crate::client::AgentClient;
use std::path::{Path, PathBuf};
use tokio::net::UnixListener;
use tokio::task::JoinSet;

pub struct Forwarder {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl Forwarder {
    /// Bind `path` (a stale file there is removed) and serve until dropped; dropping it
    /// closes every forwarded connection and removes the socket file.
    pub fn serve(client: AgentClient, instance: &str, path: &Path) -> std::io::Result<Forwarder> {
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path)?;
        let instance = instance.to_string();
        let task = tokio::spawn(async move {
            let mut conns = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((mut host, _)) = accepted else { continue };
                        let client = client.clone();
                        let instance = instance.clone();
                        conns.spawn(async move {
                            match client.open_connection(&instance).await {
                                Ok(mut guest) => {
                                    let _ = tokio::io::copy_bidirectional(&mut host, &mut guest).await;
                                }
                                Err(e) => tracing::debug!(%instance, "cannot forward a connection: {e}"),
                            }
                        });
                    }
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                    _ = client.closed() => break,
                }
            }
        });
        Ok(Forwarder {
            path: path.to_path_buf(),
            task,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}
