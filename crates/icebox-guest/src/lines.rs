//! JSON lines on a stream. The header and ack lines are read byte by byte: the bytes after
//! them belong to whoever gets the stream next (a proxy connection, output), so nothing may be
//! read ahead into a buffer.

use crate::protocol::MAX_LINE;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::io::{Error, ErrorKind};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// One line without its newline; `None` at a clean end of stream.
pub async fn read_line_exact<R: AsyncRead + Unpin>(r: &mut R) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        if r.read(&mut byte).await? == 0 {
            return if line.is_empty() {
                Ok(None)
            } else {
                Err(Error::new(ErrorKind::UnexpectedEof, "line cut short"))
            };
        }
        if byte[0] == b'\n' {
            return Ok(Some(line));
        }
        if line.len() >= MAX_LINE {
            return Err(Error::new(ErrorKind::InvalidData, "line too long"));
        }
        line.push(byte[0]);
    }
}

pub async fn read_json_exact<R, T>(r: &mut R) -> std::io::Result<Option<T>>
where
    R: AsyncRead + Unpin,
    T: DeserializeOwned,
{
    match read_line_exact(r).await? {
        None => Ok(None),
        Some(line) => serde_json::from_slice(&line)
            .map(Some)
            .map_err(|e| Error::new(ErrorKind::InvalidData, e)),
    }
}

pub async fn write_json<W, T>(w: &mut W, value: &T) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin,
    T: Serialize,
{
    let mut bytes = serde_json::to_vec(value).map_err(|e| Error::new(ErrorKind::InvalidData, e))?;
    bytes.push(b'\n');
    w.write_all(&bytes).await?;
    w.flush().await
}
