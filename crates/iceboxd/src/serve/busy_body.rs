//! A response body that keeps its connection marked busy until it has been sent or dropped.

use super::connections::BusyGuard;
use axum::body::{Body, Bytes, HttpBody};
use http_body::{Frame, SizeHint};
use std::pin::Pin;
use std::task::{Context, Poll};

pub(super) struct BusyBody {
    inner: Body,
    _busy: BusyGuard,
}

impl BusyBody {
    pub fn new(inner: Body, busy: BusyGuard) -> BusyBody {
        BusyBody { inner, _busy: busy }
    }
}

impl HttpBody for BusyBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
