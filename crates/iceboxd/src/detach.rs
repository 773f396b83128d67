//! Running a future on the caller's task without letting the caller cancel it.
//!
//! A blocking invocation used to be spawned and awaited through its JoinHandle, which costs a
//! cross-thread hand-off each way on the warm path. Running it inline is cheaper, but a client
//! that hangs up would drop it half-way (an activation without a record, an instance released
//! mid-/run). `Detachable` runs inline and, if it is dropped before it finishes, hands what is
//! left of the future to the runtime, so it completes exactly as a spawned task would.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

pub struct Detachable<T: Send + 'static> {
    future: Option<Pin<Box<dyn Future<Output = T> + Send + 'static>>>,
}

impl<T: Send + 'static> Detachable<T> {
    pub fn new(future: impl Future<Output = T> + Send + 'static) -> Self {
        Detachable {
            future: Some(Box::pin(future)),
        }
    }
}

impl<T: Send + 'static> Future for Detachable<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let future = self
            .future
            .as_mut()
            .expect("a Detachable is not polled after it completed");
        let ready = future.as_mut().poll(cx);
        if ready.is_ready() {
            self.future = None;
        }
        ready
    }
}

impl<T: Send + 'static> Drop for Detachable<T> {
    fn drop(&mut self) {
        if let Some(rest) = self.future.take() {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(rest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn completes_inline() {
        assert_eq!(Detachable::new(async { 7 }).await, 7);
    }

    #[tokio::test]
    async fn finishes_on_the_runtime_when_its_caller_gives_up() {
        let finished = Arc::new(AtomicBool::new(false));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let flag = finished.clone();
        let work = Detachable::new(async move {
            let _ = rx.await;
            flag.store(true, Ordering::SeqCst);
        });
        // The caller stops waiting (a client that hung up, or the 60 s blocking limit).
        assert!(tokio::time::timeout(Duration::from_millis(10), work)
            .await
            .is_err());
        assert!(!finished.load(Ordering::SeqCst));
        tx.send(()).unwrap();
        for _ in 0..100 {
            if finished.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the detached rest of the future never ran");
    }
}
