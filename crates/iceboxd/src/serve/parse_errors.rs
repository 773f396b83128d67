//! hyper answers a request it cannot parse (bad request line, URI or head too large) by
//! itself, before any handler runs, with an empty body. Clients of the API expect every
//! error in OpenWhisk's JSON shape, so the connection's writer recognises those bare answers
//! and gives them a body. Nothing else is touched: the daemon's own error answers always
//! carry a JSON body, so a 4xx head with `content-length: 0` can only be hyper's.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub struct JsonParseErrors<IO> {
    inner: IO,
    /// A rewritten answer not yet fully handed to `inner`.
    pending: Vec<u8>,
    sent: usize,
}

impl<IO> JsonParseErrors<IO> {
    pub fn new(inner: IO) -> Self {
        JsonParseErrors {
            inner,
            pending: Vec::new(),
            sent: 0,
        }
    }
}

/// The message for a status hyper sends on its own, if it is one.
fn message(status: &str) -> Option<&'static str> {
    Some(match status {
        "400" => "The request is not valid HTTP/1.1 and could not be parsed.",
        "414" => "The request URI is too long.",
        "431" => "The request's header fields are too large.",
        "505" => "The HTTP version is not supported: use HTTP/1.1.",
        _ => return None,
    })
}

/// `buf` with a JSON body, if it is exactly one of hyper's bare error answers.
fn rewrite(buf: &[u8]) -> Option<Vec<u8>> {
    let head = std::str::from_utf8(buf).ok()?;
    let rest = head.strip_prefix("HTTP/1.1 ")?;
    let msg = message(rest.get(..3)?)?;
    if !head.ends_with("\r\n\r\n") || head.matches("\r\n\r\n").count() != 1 {
        return None;
    }
    let lower = head.to_ascii_lowercase();
    if !lower.contains("\r\ncontent-length: 0\r\n") {
        return None;
    }
    let body = serde_json::json!({
        "error": msg,
        "code": icebox_core::ids::random_hex128(),
    })
    .to_string();
    let at = lower.find("\r\ncontent-length: 0\r\n")?;
    let (before, after) = head.split_at(at);
    let after = &after["\r\ncontent-length: 0".len()..];
    Some(
        format!(
            "{before}\r\ncontent-type: application/json\r\ncontent-length: {}{after}{body}",
            body.len()
        )
        .into_bytes(),
    )
}

impl<IO: AsyncWrite + Unpin> JsonParseErrors<IO> {
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.pending.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.pending.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for JsonParseErrors<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for JsonParseErrors<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.drain(cx))?;
        if let Some(answer) = rewrite(buf) {
            self.pending = answer;
            // The caller's bytes are taken whole; what `inner` has not accepted yet goes
            // out on the next write, flush or shutdown.
            let _ = self.drain(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.drain(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    #[test]
    fn a_bare_parse_error_gets_a_json_body() {
        let bare = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Sat, 28 Nov 2026 12:00:00 GMT\r\n\r\n";
        let out = String::from_utf8(rewrite(bare).unwrap()).unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"], "The request's header fields are too large.");
        assert_eq!(v["code"].as_str().unwrap().len(), 32);
        assert!(head.contains(&format!("content-length: {}", body.len())));
        assert!(head.contains("content-type: application/json"));
        assert!(head.starts_with("HTTP/1.1 431 "));
    }

    #[test]
    fn answers_with_a_body_or_other_statuses_pass_untouched() {
        for answer in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\n\r\n{\"error\":1}"[..],
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n",
            b"partial body bytes",
        ] {
            assert!(
                rewrite(answer).is_none(),
                "{}",
                String::from_utf8_lossy(answer)
            );
        }
    }
}
