//! The lifecycle event bus: a bounded replay buffer (the `since` cursor) plus live fan-out.

use icebox_core::{EventKind, LifecycleEvent, MemoryStats};
use std::collections::VecDeque;
use std::sync::Mutex;
use tokio::sync::broadcast;

const RETAINED: usize = 10_000;

pub struct EventBus {
    inner: Mutex<Ring>,
    live: broadcast::Sender<LifecycleEvent>,
}

struct Ring {
    next_seq: u64,
    events: VecDeque<LifecycleEvent>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self::new()
    }
}

impl EventBus {
    pub fn new() -> Self {
        let (live, _) = broadcast::channel(4096);
        EventBus {
            inner: Mutex::new(Ring {
                next_seq: 1,
                events: VecDeque::new(),
            }),
            live,
        }
    }

    pub fn emit(
        &self,
        instance: &str,
        action: &str,
        kind: EventKind,
        memory: Option<MemoryStats>,
        detail: Option<String>,
    ) {
        let mut ring = self.inner.lock().unwrap();
        let event = LifecycleEvent {
            seq: ring.next_seq,
            time_ms: crate::now_ms(),
            instance: instance.to_string(),
            action: action.to_string(),
            kind,
            memory,
            detail,
        };
        ring.next_seq += 1;
        if ring.events.len() == RETAINED {
            ring.events.pop_front();
        }
        ring.events.push_back(event.clone());
        // Sent while holding the ring lock so subscribers see events in seq order.
        let _ = self.live.send(event);
    }

    /// Retained events after `since`, and a receiver for everything emitted afterwards.
    pub fn subscribe(
        &self,
        since: u64,
    ) -> (Vec<LifecycleEvent>, broadcast::Receiver<LifecycleEvent>) {
        let ring = self.inner.lock().unwrap();
        let rx = self.live.subscribe();
        let past = ring
            .events
            .iter()
            .filter(|e| e.seq > since)
            .cloned()
            .collect();
        (past, rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn replays_after_cursor_then_streams_live() {
        let bus = EventBus::new();
        bus.emit("i1", "guest/a", EventKind::Created, None, None);
        bus.emit("i1", "guest/a", EventKind::RuntimeReady, None, None);
        let (past, mut rx) = bus.subscribe(1);
        assert_eq!(past.len(), 1);
        assert_eq!(past[0].seq, 2);
        bus.emit("i1", "guest/a", EventKind::InitDone, None, None);
        let live = rx.recv().await.unwrap();
        assert_eq!((live.seq, live.kind), (3, EventKind::InitDone));
    }
}
