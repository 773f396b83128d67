//! Stores activation records off the invocation path: a writer thread appends them to the
//! registry in batches, and records not yet written are served from memory, so a client that
//! reads its activation right after the response still finds it.

use crate::registry::Registry;
use icebox_core::ActivationRecord;
use std::collections::HashMap;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

/// Most records written in one go (one lock of the registry).
const BATCH: usize = 256;

pub struct Recorder {
    tx: Mutex<Option<Sender<ActivationRecord>>>,
    pending: Arc<Mutex<HashMap<String, ActivationRecord>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Recorder {
    pub fn start(registry: Arc<Registry>) -> Recorder {
        let (tx, rx) = mpsc::channel();
        let pending = Arc::new(Mutex::new(HashMap::new()));
        let writer_pending = pending.clone();
        let writer = std::thread::Builder::new()
            .name("activation-writer".into())
            .spawn(move || write_loop(registry, rx, writer_pending))
            .expect("spawning the activation writer thread");
        Recorder { tx: Mutex::new(Some(tx)), pending, writer: Mutex::new(Some(writer)) }
    }

    pub fn record(&self, record: ActivationRecord) {
        self.pending.lock().unwrap().insert(record.activation_id.clone(), record.clone());
        let sent = self.tx.lock().unwrap().as_ref().map(|tx| tx.send(record));
        if !matches!(sent, Some(Ok(()))) {
            tracing::error!("the activation writer has stopped; a record was not stored");
        }
    }

    /// A record accepted but not yet in the registry.
    pub fn pending(&self, namespace: &str, id: &str) -> Option<ActivationRecord> {
        self.pending.lock().unwrap().get(id).filter(|r| r.namespace == namespace).cloned()
    }

    /// Write everything accepted so far and stop the writer (daemon shutdown).
    pub fn flush_and_stop(&self) {
        drop(self.tx.lock().unwrap().take());
        if let Some(writer) = self.writer.lock().unwrap().take() {
            let _ = writer.join();
        }
    }
}

fn write_loop(registry: Arc<Registry>, rx: Receiver<ActivationRecord>, pending: Arc<Mutex<HashMap<String, ActivationRecord>>>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        for record in &batch {
            if let Err(e) = registry.insert_activation(record) {
                tracing::error!(activation = %record.activation_id, "cannot store the activation record: {e}");
            }
        }
        let mut pending = pending.lock().unwrap();
        for record in &batch {
            pending.remove(&record.activation_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::{ActivationResponse, ActivationStatus};

    fn record(id: &str) -> ActivationRecord {
        ActivationRecord {
            namespace: "guest".into(),
            name: "a".into(),
            version: "0.0.1".into(),
            subject: "guest".into(),
            activation_id: id.into(),
            start: 1,
            end: 2,
            duration: 1,
            status_code: 0,
            response: ActivationResponse::new(ActivationStatus::Success, serde_json::json!({})),
            logs: vec![],
            annotations: vec![],
            publish: false,
        }
    }

    #[test]
    fn every_record_reaches_the_registry() {
        let registry = Arc::new(Registry::open_in_memory().unwrap());
        let recorder = Recorder::start(registry.clone());
        for i in 0..1000 {
            recorder.record(record(&format!("{i:032x}")));
        }
        recorder.flush_and_stop();
        for i in [0, 500, 999] {
            assert!(registry.get_activation("guest", &format!("{i:032x}")).unwrap().is_some());
        }
        assert!(recorder.pending.lock().unwrap().is_empty());
    }

    #[test]
    fn pending_records_are_visible_only_in_their_namespace() {
        let recorder = Recorder { tx: Mutex::new(None), pending: Arc::new(Mutex::new(HashMap::new())), writer: Mutex::new(None) };
        recorder.pending.lock().unwrap().insert("x".into(), record("x"));
        assert!(recorder.pending("guest", "x").is_some());
        assert!(recorder.pending("other", "x").is_none());
    }
}
