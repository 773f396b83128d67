//! The virtio-serial port the host talks to. It stays open for the agent's life; each time
//! the host end connects a session runs over it, and a read of 0 bytes means the host end
//! disconnected (the session is over, the instances live on).

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

#[derive(Clone)]
pub struct Port {
    fd: Arc<AsyncFd<OwnedFd>>,
}

/// Find the port named `name` (no udev in the guest: /sys says which /dev/vportNpM it is) and
/// open it, waiting for the driver to create it.
pub async fn open(name: &str) -> Port {
    let mut warned = false;
    loop {
        match try_open(name) {
            Ok(Some(port)) => return port,
            Ok(None) => {}
            Err(e) if !warned => {
                eprintln!("icebox-guest-agent: cannot open port {name}: {e}");
                warned = true;
            }
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn try_open(name: &str) -> std::io::Result<Option<Port>> {
    let Ok(dir) = std::fs::read_dir("/sys/class/virtio-ports") else {
        return Ok(None);
    };
    for entry in dir.flatten() {
        let port_name = std::fs::read_to_string(entry.path().join("name")).unwrap_or_default();
        if port_name.trim() != name {
            continue;
        }
        // std opens with O_CLOEXEC.
        let fd: OwnedFd = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(Path::new("/dev").join(entry.file_name()))?
            .into();
        // SAFETY: the fd is owned by the AsyncFd from here on and closed only when it drops.
        let fd = unsafe { AsyncFd::register(fd) }.map_err(|e| e.into_parts().1)?;
        return Ok(Some(Port { fd: Arc::new(fd) }));
    }
    Ok(None)
}

impl Port {
    /// Whether the host end is connected: the driver reports POLLHUP while it is not.
    fn host_connected(&self) -> bool {
        let mut fds = [PollFd::new(self.fd.get_ref(), PollFlags::IN)];
        let _ = poll(&mut fds, Some(&Timespec::default()));
        !fds[0].revents().contains(PollFlags::HUP)
    }

    /// Wait until a host connects. The driver keeps the port readable (POLLIN|POLLHUP) while
    /// nobody is connected, so readiness cannot be awaited: poll.
    pub async fn wait_connected(&self) {
        while !self.host_connected() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The byte stream of one session.
    pub fn session(&self) -> PortIo {
        PortIo {
            fd: self.fd.clone(),
        }
    }
}

pub struct PortIo {
    fd: Arc<AsyncFd<OwnedFd>>,
}

impl AsyncRead for PortIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        loop {
            let mut guard = match self.fd.poll_read_ready(cx) {
                Poll::Ready(Ok(g)) => g,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            let n = match rustix::io::read(self.fd.get_ref(), buf.initialize_unfilled()) {
                Ok(n) => n,
                Err(rustix::io::Errno::AGAIN) => {
                    guard.clear_ready();
                    continue;
                }
                Err(e) => return Poll::Ready(Err(e.into())),
            };
            buf.advance(n);
            return Poll::Ready(Ok(()));
        }
    }
}

impl AsyncWrite for PortIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        loop {
            let mut guard = match self.fd.poll_write_ready(cx) {
                Poll::Ready(Ok(g)) => g,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            let n = match rustix::io::write(self.fd.get_ref(), data) {
                Ok(n) => n,
                Err(rustix::io::Errno::AGAIN) => {
                    guard.clear_ready();
                    continue;
                }
                Err(e) => return Poll::Ready(Err(e.into())),
            };
            return Poll::Ready(Ok(n));
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // The port outlives the session: nothing to shut down.
        Poll::Ready(Ok(()))
    }
}
