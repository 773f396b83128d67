//! One yamux session over a byte stream (the virtio-serial port), driven by a task of its own:
//! yamux's `Connection` only moves bytes while it is polled, so a single task polls it for
//! inbound streams and opens the outbound ones others ask for.

use futures::future::poll_fn;
use std::collections::VecDeque;
use std::task::Poll;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::compat::{Compat, FuturesAsyncReadCompatExt, TokioAsyncReadCompatExt};

pub use yamux::Mode;

/// A multiplexed stream as tokio I/O.
pub type MuxStream = Compat<yamux::Stream>;

type OpenReply = oneshot::Sender<std::io::Result<MuxStream>>;

enum Ask {
    Open(OpenReply),
    Close,
}

/// Opens outbound streams on a session; cheap to clone.
#[derive(Clone)]
pub struct MuxHandle {
    asks: mpsc::UnboundedSender<Ask>,
    ended: watch::Receiver<bool>,
}

impl MuxHandle {
    pub async fn open(&self) -> std::io::Result<MuxStream> {
        let (tx, rx) = oneshot::channel();
        self.asks.send(Ask::Open(tx)).map_err(|_| session_ended())?;
        rx.await.map_err(|_| session_ended())?
    }

    /// End the session: every stream breaks and the peer sees the byte stream close.
    pub async fn close(&self) {
        let _ = self.asks.send(Ask::Close);
        self.ended().await;
    }

    /// Resolves when the session has ended (the peer closed the byte stream or an I/O error).
    pub async fn ended(&self) {
        let mut ended = self.ended.clone();
        let _ = ended.wait_for(|e| *e).await;
    }

    pub fn is_ended(&self) -> bool {
        *self.ended.borrow()
    }
}

fn session_ended() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "the agent session has ended",
    )
}

fn config() -> yamux::Config {
    let mut cfg = yamux::Config::default();
    // One stream per proxy connection and two per instance for output: far below this.
    cfg.set_max_num_streams(4096);
    cfg
}

/// Start a session over `io`. Inbound streams arrive on the returned receiver (the host side
/// may drop it: the host never accepts streams). The driver task ends when the byte stream
/// does, or when every [`MuxHandle`] and the receiver are gone.
pub fn start<T>(io: T, mode: Mode) -> (MuxHandle, mpsc::UnboundedReceiver<MuxStream>)
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (open_tx, mut open_rx) = mpsc::unbounded_channel::<Ask>();
    let (inbound_tx, inbound_rx) = mpsc::unbounded_channel();
    let (ended_tx, ended_rx) = watch::channel(false);
    let mut conn = yamux::Connection::new(io.compat(), config(), mode);
    tokio::spawn(async move {
        let mut pending: VecDeque<OpenReply> = VecDeque::new();
        let mut handles_gone = false;
        let result: Result<(), yamux::ConnectionError> = poll_fn(|cx| {
            while !handles_gone {
                match open_rx.poll_recv(cx) {
                    Poll::Ready(Some(Ask::Open(reply))) => pending.push_back(reply),
                    Poll::Ready(Some(Ask::Close)) => return Poll::Ready(Ok(())),
                    Poll::Ready(None) => handles_gone = true,
                    Poll::Pending => break,
                }
            }
            while !pending.is_empty() {
                match conn.poll_new_outbound(cx) {
                    Poll::Ready(Ok(stream)) => {
                        let reply = pending.pop_front().expect("not empty");
                        let _ = reply.send(Ok(stream.compat()));
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => break,
                }
            }
            loop {
                match conn.poll_next_inbound(cx) {
                    Poll::Ready(Some(Ok(stream))) => {
                        let _ = inbound_tx.send(stream.compat());
                    }
                    Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                    Poll::Ready(None) => return Poll::Ready(Ok(())),
                    Poll::Pending => break,
                }
            }
            if handles_gone && inbound_tx.is_closed() && pending.is_empty() {
                return Poll::Ready(Ok(()));
            }
            Poll::Pending
        })
        .await;
        if let Err(e) = &result {
            tracing::debug!("yamux session ended: {e}");
        }
        let _ = poll_fn(|cx| conn.poll_close(cx)).await;
        for reply in pending {
            let _ = reply.send(Err(session_ended()));
        }
        let _ = ended_tx.send(true);
    });
    (
        MuxHandle {
            asks: open_tx,
            ended: ended_rx,
        },
        inbound_rx,
    )
}
