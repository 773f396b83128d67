//! The table of open connections: admission under the cap, and which connection to close to
//! make room. A connection is idle while no request of it is being answered; an idle one can
//! be closed without losing anything, a busy one (an invocation, a follow stream) cannot.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::Notify;

/// Counters the metrics endpoint reports.
#[derive(Debug, Default)]
pub struct ConnectionStats {
    pub open: AtomicU64,
    pub accepted: AtomicU64,
    /// Idle connections closed to make room for a new one.
    pub evicted: AtomicU64,
    /// New connections closed because every open one was busy.
    pub refused: AtomicU64,
}

pub(super) struct Connections {
    max: usize,
    table: Mutex<HashMap<u64, Arc<Connection>>>,
    next_id: AtomicU64,
    epoch: Instant,
    stats: Arc<ConnectionStats>,
}

pub(super) struct Connection {
    id: u64,
    busy: AtomicUsize,
    /// Microseconds since the table's epoch when the connection last became idle.
    idle_since_us: AtomicU64,
    closing: AtomicBool,
    close: Notify,
    table: Arc<Connections>,
}

pub(super) enum Admission {
    Admitted(Arc<Connection>),
    Refused,
}

impl Connections {
    pub fn new(max: usize, stats: Arc<ConnectionStats>) -> Connections {
        Connections {
            max: max.max(1),
            table: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            epoch: Instant::now(),
            stats,
        }
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Admits a new connection; at the cap, the longest-idle connection is asked to close
    /// and the new one takes its place. With every connection busy the new one is refused.
    pub fn admit(self: &Arc<Self>) -> Admission {
        let mut table = self.table.lock().unwrap();
        let open_not_closing = table
            .values()
            .filter(|c| !c.closing.load(Ordering::Relaxed))
            .count();
        if open_not_closing >= self.max {
            let victim = table
                .values()
                .filter(|c| {
                    c.busy.load(Ordering::Acquire) == 0 && !c.closing.load(Ordering::Relaxed)
                })
                .min_by_key(|c| c.idle_since_us.load(Ordering::Relaxed))
                .cloned();
            match victim {
                Some(victim) => {
                    victim.closing.store(true, Ordering::Relaxed);
                    victim.close.notify_one();
                    self.stats.evicted.fetch_add(1, Ordering::Relaxed);
                }
                None => {
                    self.stats.refused.fetch_add(1, Ordering::Relaxed);
                    return Admission::Refused;
                }
            }
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Connection {
            id,
            busy: AtomicUsize::new(0),
            idle_since_us: AtomicU64::new(self.now_us()),
            closing: AtomicBool::new(false),
            close: Notify::new(),
            table: self.clone(),
        });
        table.insert(id, conn.clone());
        self.stats.accepted.fetch_add(1, Ordering::Relaxed);
        self.stats.open.store(table.len() as u64, Ordering::Relaxed);
        Admission::Admitted(conn)
    }

    #[cfg(test)]
    fn open(&self) -> usize {
        self.table.lock().unwrap().len()
    }
}

impl Connection {
    /// Marks the connection busy until the guard is dropped.
    pub fn busy(self: &Arc<Self>) -> BusyGuard {
        self.busy.fetch_add(1, Ordering::AcqRel);
        BusyGuard { conn: self.clone() }
    }

    pub async fn close_requested(&self) {
        self.close.notified().await
    }

    /// The connection's task ended: it leaves the table.
    pub fn finished(&self) {
        let mut table = self.table.table.lock().unwrap();
        table.remove(&self.id);
        self.table
            .stats
            .open
            .store(table.len() as u64, Ordering::Relaxed);
    }
}

pub struct BusyGuard {
    conn: Arc<Connection>,
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.conn
            .idle_since_us
            .store(self.conn.table.now_us(), Ordering::Relaxed);
        self.conn.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitted(a: Admission) -> Arc<Connection> {
        match a {
            Admission::Admitted(c) => c,
            Admission::Refused => panic!("refused"),
        }
    }

    #[test]
    fn at_the_cap_the_longest_idle_connection_makes_room() {
        let stats = Arc::new(ConnectionStats::default());
        let table = Arc::new(Connections::new(2, stats.clone()));
        let oldest = admitted(table.admit());
        std::thread::sleep(std::time::Duration::from_millis(2));
        let newer = admitted(table.admit());
        let third = admitted(table.admit());
        assert!(
            oldest.closing.load(Ordering::Relaxed),
            "the longest-idle connection is asked to close"
        );
        assert!(!newer.closing.load(Ordering::Relaxed));
        assert!(!third.closing.load(Ordering::Relaxed));
        assert_eq!(stats.evicted.load(Ordering::Relaxed), 1);
        oldest.finished();
        assert_eq!(table.open(), 2);
    }

    #[test]
    fn busy_connections_are_never_closed_to_make_room() {
        let stats = Arc::new(ConnectionStats::default());
        let table = Arc::new(Connections::new(2, stats.clone()));
        let a = admitted(table.admit());
        let b = admitted(table.admit());
        let _busy_a = a.busy();
        let busy_b = b.busy();
        assert!(matches!(table.admit(), Admission::Refused));
        assert_eq!(stats.refused.load(Ordering::Relaxed), 1);
        drop(busy_b);
        let _c = admitted(table.admit());
        assert!(
            b.closing.load(Ordering::Relaxed),
            "b became idle, so it makes room"
        );
        assert!(!a.closing.load(Ordering::Relaxed));
    }
}
