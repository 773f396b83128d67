//! Read-only connections over the WAL file, so a slow reader (a deep page of activations, many
//! clients at once) never holds the lock that writers (deploys, activation records) need.

use rusqlite::{Connection, OpenFlags};
use std::ops::Deref;
use std::path::Path;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Readers beyond this wait for a free connection; each one is a file descriptor and a page
/// cache, and the machine this runs on has few cores anyway.
pub(super) const READERS: usize = 4;

pub(super) struct ReadPool {
    idle: Mutex<Vec<Connection>>,
    returned: Condvar,
    size: usize,
}

impl ReadPool {
    /// No connections: every read goes to the writer (an in-memory registry has no file that
    /// a second connection could open).
    #[cfg(test)]
    pub(super) fn none() -> ReadPool {
        ReadPool {
            idle: Mutex::new(Vec::new()),
            returned: Condvar::new(),
            size: 0,
        }
    }

    /// Opens `n` read-only connections; the writer must already have put the file in WAL mode.
    pub(super) fn open(path: &Path, n: usize, cache: usize) -> rusqlite::Result<ReadPool> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conns = (0..n)
            .map(|_| {
                let conn = Connection::open_with_flags(path, flags)?;
                conn.busy_timeout(Duration::from_secs(5))?;
                conn.set_prepared_statement_cache_capacity(cache);
                Ok(conn)
            })
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(ReadPool {
            idle: Mutex::new(conns),
            returned: Condvar::new(),
            size: n,
        })
    }

    /// A free connection, waiting for one if all are in use; None when the pool has none.
    pub(super) fn get(&self) -> Option<Reader<'_>> {
        if self.size == 0 {
            return None;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(conn) = idle.pop() {
                return Some(Reader {
                    conn: Some(conn),
                    pool: self,
                });
            }
            idle = self.returned.wait(idle).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// A connection on loan; it goes back to the pool on drop.
pub(super) struct Reader<'a> {
    conn: Option<Connection>,
    pool: &'a ReadPool,
}

impl Deref for Reader<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn.as_ref().expect("present until drop")
    }
}

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            // A read that panicked mid-transaction would leave it open and pin the WAL: end it.
            if !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            self.pool
                .idle
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(conn);
            self.pool.returned.notify_one();
        }
    }
}
