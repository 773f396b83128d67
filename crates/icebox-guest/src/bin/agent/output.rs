//! One output stream (stdout or stderr) of an instance, between the pipe the runtime writes
//! and the host's `output` stream. While the host is attached a full buffer holds the runtime
//! back (as a pipe would); while nobody is attached (between sessions) the oldest bytes are
//! dropped so the runtime never blocks and the guest holds at most `CAPACITY` bytes.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::Notify;

pub const CAPACITY: usize = 1 << 20;
const CHUNK: usize = 64 * 1024;

#[derive(Default)]
struct State {
    data: VecDeque<u8>,
    /// Bytes dropped while nobody was attached.
    dropped: u64,
    /// Generation of the attached reader (0: none). A new attach replaces the old reader.
    reader: u64,
    next_reader: u64,
    /// The runtime closed its end and everything was read from the pipe.
    closed: bool,
}

/// Two wake-ups, one per direction, so neither side wakes itself.
#[derive(Default)]
pub struct Output {
    state: Mutex<State>,
    /// Bytes arrived, the output closed, or the reader was replaced.
    data_ready: Notify,
    /// Bytes were taken or the reader went away.
    space_ready: Notify,
}

impl Output {
    /// Copy the pipe into the buffer until the runtime closes it.
    pub async fn pump<R: AsyncRead + Unpin>(self: Arc<Self>, mut pipe: R) {
        let mut chunk = vec![0u8; CHUNK];
        loop {
            let n = match pipe.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            self.push(&chunk[..n]).await;
        }
        self.close();
    }

    async fn push(&self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let notified = self.space_ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut s = self.state.lock().unwrap();
                let room = CAPACITY - s.data.len();
                if s.reader == 0 {
                    let excess = (s.data.len() + bytes.len()).saturating_sub(CAPACITY);
                    let drop_buffered = excess.min(s.data.len());
                    s.data.drain(..drop_buffered);
                    let skip = excess - drop_buffered;
                    s.dropped += excess as u64;
                    s.data.extend(&bytes[skip..]);
                    bytes = &[];
                } else if room > 0 {
                    let n = room.min(bytes.len());
                    s.data.extend(&bytes[..n]);
                    bytes = &bytes[n..];
                }
            }
            self.data_ready.notify_waiters();
            if !bytes.is_empty() {
                notified.await;
            }
        }
    }

    pub fn close(&self) {
        self.state.lock().unwrap().closed = true;
        self.data_ready.notify_waiters();
    }

    /// Become the reader; the previous reader (if any) gets `None` from then on.
    pub fn attach(self: &Arc<Self>) -> Reader {
        let mut s = self.state.lock().unwrap();
        s.next_reader += 1;
        s.reader = s.next_reader;
        let generation = s.reader;
        drop(s);
        self.data_ready.notify_waiters();
        self.space_ready.notify_waiters();
        Reader {
            output: self.clone(),
            generation,
        }
    }

    /// What is buffered now, for an error message (not consumed).
    pub fn peek(&self) -> String {
        let s = self.state.lock().unwrap();
        let (a, b) = s.data.as_slices();
        let mut v = a.to_vec();
        v.extend_from_slice(b);
        String::from_utf8_lossy(&v).into_owned()
    }

    #[cfg(test)]
    fn dropped(&self) -> u64 {
        self.state.lock().unwrap().dropped
    }
}

pub struct Reader {
    output: Arc<Output>,
    generation: u64,
}

impl Reader {
    /// The next bytes; `None` at the end (runtime closed its output, or another reader took
    /// over).
    pub async fn next(&self) -> Option<Vec<u8>> {
        loop {
            let notified = self.output.data_ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut s = self.output.state.lock().unwrap();
                if s.reader != self.generation {
                    return None;
                }
                if !s.data.is_empty() {
                    let n = s.data.len().min(CHUNK);
                    let out: Vec<u8> = s.data.drain(..n).collect();
                    drop(s);
                    self.output.space_ready.notify_waiters();
                    return Some(out);
                }
                if s.closed {
                    return None;
                }
            }
            notified.await;
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let mut s = self.output.state.lock().unwrap();
        if s.reader == self.generation {
            s.reader = 0;
        }
        drop(s);
        self.output.space_ready.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn detached_output_keeps_the_newest_bytes_within_capacity() {
        let out = Arc::new(Output::default());
        let big = vec![b'a'; CAPACITY];
        out.push(&big).await;
        out.push(b"tail").await;
        assert_eq!(out.dropped(), 4);
        out.close();
        let reader = out.attach();
        let mut all = Vec::new();
        while let Some(chunk) = reader.next().await {
            all.extend(chunk);
        }
        assert_eq!(all.len(), CAPACITY);
        assert!(all.ends_with(b"tail"));
    }

    #[tokio::test]
    async fn attached_output_holds_the_writer_back_instead_of_dropping() {
        let out = Arc::new(Output::default());
        let reader = out.attach();
        let writer = {
            let out = out.clone();
            tokio::spawn(async move {
                out.push(&vec![b'x'; 3 * CAPACITY]).await;
                out.close();
            })
        };
        let mut total = 0;
        while let Some(chunk) = reader.next().await {
            total += chunk.len();
        }
        writer.await.unwrap();
        assert_eq!(total, 3 * CAPACITY);
        assert_eq!(out.dropped(), 0);
    }

    #[tokio::test]
    async fn a_new_reader_ends_the_old_one() {
        let out = Arc::new(Output::default());
        let old = out.attach();
        let new = out.attach();
        assert!(old.next().await.is_none());
        out.push(b"hi").await;
        assert_eq!(new.next().await.unwrap(), b"hi");
    }
}
