//! The virtio-serial port the host talks to. It stays open for the agent's life; each time
//! the host end connects a session runs over it, and a read of 0 bytes means the host end
//! disconnected (the session is over, the instances live on).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
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
        let dev = std::ffi::CString::new(format!("/dev/{}", entry.file_name().to_string_lossy()))
            .expect("no NUL");
        // SAFETY: a valid path; the fd is owned below.
        let fd = unsafe {
            libc::open(
                dev.as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: just opened, owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: the fd is owned by the AsyncFd from here on and closed only when it drops.
        let fd = unsafe { AsyncFd::register(fd) }.map_err(|e| e.into_parts().1)?;
        return Ok(Some(Port { fd: Arc::new(fd) }));
    }
    Ok(None)
}

impl Port {
    /// Whether the host end is connected: the driver reports POLLHUP while it is not.
    fn host_connected(&self) -> bool {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no wait.
        unsafe { libc::poll(&mut p, 1, 0) };
        p.revents & libc::POLLHUP == 0
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
            let unfilled = buf.initialize_unfilled();
            // SAFETY: reading into an initialized buffer of the given length.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    unfilled.as_mut_ptr().cast(),
                    unfilled.len(),
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::WouldBlock {
                    guard.clear_ready();
                    continue;
                }
                return Poll::Ready(Err(e));
            }
            buf.advance(n.cast_unsigned());
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
            // SAFETY: writing from a valid buffer.
            let n = unsafe { libc::write(self.fd.as_raw_fd(), data.as_ptr().cast(), data.len()) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::WouldBlock {
                    guard.clear_ready();
                    continue;
                }
                return Poll::Ready(Err(e));
            }
            return Poll::Ready(Ok(n.cast_unsigned()));
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
