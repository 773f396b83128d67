//! Collects a runtime's stdout/stderr and cuts it into per-activation logs at the sentinel
//! line the action protocol prints after each activation. What the daemon holds for an
//! instance is bounded whatever the action prints: each line is cut to [`MAX_LINE_BYTES`],
//! and the lines waiting for an activation to take them (an idle instance may print too) to
//! [`MAX_LINES`] and the action's log limit (at most [`MAX_BYTES`]). Across instances, the
//! lines held take from the node's [`OutputBudget`] when one is attached.

mod line;

use self::line::{Finished, Line};
use crate::output_budget::{Charge, OutputBudget};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::Notify;

pub const SENTINEL: &str = "XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX";

/// Lines kept per activation before the rest is dropped (with a note).
pub const MAX_LINES: usize = 10_000;
/// Bytes kept of one line; the rest of it is dropped (with a note).
pub const MAX_LINE_BYTES: usize = 16 * 1024;
/// Bytes of lines kept per activation: OpenWhisk's largest `limits.logs` (10 MB).
pub const MAX_BYTES: usize = 10 * 1024 * 1024;
/// Bytes read from a stream at a time.
const READ_CHUNK: usize = 8 * 1024;

/// Why lines were dropped, for the note that ends the activation's logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// A line longer than MAX_LINE_BYTES, or more than MAX_LINES lines.
    Lines,
    /// The activation's log limit, in bytes.
    Limit(usize),
    /// The node's output budget, in bytes.
    Node(u64),
}

#[derive(Default)]
struct Inner {
    lines: Vec<String>,
    /// Bytes of `lines`.
    bytes: usize,
    /// What `lines` take of the node's budget.
    charge: Charge,
    /// The first reason lines were dropped since the last take.
    cut: Option<Cut>,
    /// Sentinels seen per stream (0 = stdout, 1 = stderr).
    sentinels: [u64; 2],
    closed: [bool; 2],
}

pub struct LogCollector {
    inner: Mutex<Inner>,
    changed: Notify,
    /// Bytes each stream's pump holds of a line it has not finished.
    partial: [AtomicUsize; 2],
    /// Bytes of lines kept until they are taken (the action's `limits.logs`).
    limit: AtomicUsize,
    budget: OnceLock<Arc<OutputBudget>>,
}

impl Default for LogCollector {
    fn default() -> Self {
        LogCollector {
            inner: Mutex::default(),
            changed: Notify::new(),
            partial: Default::default(),
            limit: AtomicUsize::new(MAX_BYTES),
            budget: OnceLock::new(),
        }
    }
}

impl LogCollector {
    pub fn new() -> Self {
        Self::default()
    }

    /// Lines kept from now on take from `budget` (the first budget attached stays).
    pub fn attach_budget(&self, budget: &Arc<OutputBudget>) {
        let _ = self.budget.set(budget.clone());
    }

    /// At most `bytes` of lines are kept between two takes (capped at [`MAX_BYTES`]).
    pub fn set_limit(&self, bytes: u64) {
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX).min(MAX_BYTES);
        self.limit.store(bytes, Ordering::Relaxed);
    }

    /// Read one stream until EOF. `stream` is 0 for stdout, 1 for stderr.
    pub async fn pump<R: AsyncRead + Unpin>(&self, mut reader: R, stream: usize) {
        let mut chunk = vec![0u8; READ_CHUNK];
        let mut line = Line::new(MAX_LINE_BYTES);
        loop {
            let mut rest = match reader.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => &chunk[..n],
            };
            while let Some(end) = rest.iter().position(|b| *b == b'\n') {
                line.push(&rest[..end]);
                self.add(line.finish(), stream);
                rest = &rest[end + 1..];
            }
            line.push(rest);
            self.partial[stream].store(line.buffered(), Ordering::Relaxed);
        }
        // Output that ends without a newline still counts as a line.
        if !line.is_empty() {
            self.add(line.finish(), stream);
        }
        self.partial[stream].store(0, Ordering::Relaxed);
        self.inner.lock().unwrap().closed[stream] = true;
        self.changed.notify_waiters();
    }

    fn add(&self, line: Finished, stream: usize) {
        let mut inner = self.inner.lock().unwrap();
        if line.cut {
            inner.cut.get_or_insert(Cut::Lines);
        }
        if line.text.is_empty() && line.ends_activation {
            // Sentinel alone on its line: nothing to keep.
        } else {
            let ts = humantime::format_rfc3339_millis(SystemTime::now());
            let name = if stream == 0 { "stdout" } else { "stderr" };
            let entry = format!("{ts} {name}: {}", line.text);
            let limit = self.limit.load(Ordering::Relaxed);
            let inner = &mut *inner;
            let dropped = if inner.lines.len() >= MAX_LINES {
                Some(Cut::Lines)
            } else if inner.bytes + entry.len() > limit {
                Some(Cut::Limit(limit))
            } else {
                match self.budget.get() {
                    Some(budget)
                        if !budget.try_take_below(
                            budget.logs_limit(),
                            entry.len() as u64,
                            &mut inner.charge,
                        ) =>
                    {
                        Some(Cut::Node(budget.logs_limit()))
                    }
                    _ => None,
                }
            };
            match dropped {
                Some(cut) => {
                    inner.cut.get_or_insert(cut);
                }
                None => {
                    inner.bytes += entry.len();
                    inner.lines.push(entry);
                }
            }
        }
        if line.ends_activation {
            inner.sentinels[stream] += 1;
        }
        drop(inner);
        self.changed.notify_waiters();
    }

    /// Bytes of output held now: lines not yet taken, and the lines the pumps are reading.
    pub fn buffered_bytes(&self) -> usize {
        let partial: usize = self.partial.iter().map(|p| p.load(Ordering::Relaxed)).sum();
        self.inner.lock().unwrap().bytes + partial
    }

    /// Sentinel counts now; pass them to [`Self::take_after`] to wait for the next ones.
    pub fn marks(&self) -> [u64; 2] {
        self.inner.lock().unwrap().sentinels
    }

    /// Wait (at most `wait`) until both streams printed a sentinel past `marks`, then take the
    /// lines collected so far.
    pub async fn take_after(&self, marks: [u64; 2], wait: Duration) -> Vec<String> {
        self.take_after_charged(marks, wait).await.0
    }

    /// [`Self::take_after`], with what the lines take of the node's budget: hold it as long as
    /// the lines are held.
    pub async fn take_after_charged(
        &self,
        marks: [u64; 2],
        wait: Duration,
    ) -> (Vec<String>, Charge) {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.changed.notified();
            {
                let inner = self.inner.lock().unwrap();
                let done = (0..2).all(|s| inner.sentinels[s] > marks[s] || inner.closed[s]);
                if done {
                    break;
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                break;
            }
        }
        self.take_charged()
    }

    /// Take whatever was collected (e.g. after the instance died).
    pub fn take(&self) -> Vec<String> {
        self.take_charged().0
    }

    fn take_charged(&self) -> (Vec<String>, Charge) {
        let mut inner = self.inner.lock().unwrap();
        let mut lines = std::mem::take(&mut inner.lines);
        inner.bytes = 0;
        let charge = std::mem::take(&mut inner.charge);
        match inner.cut.take() {
            None => {}
            Some(Cut::Lines) => lines.push(format!(
                "Logs were truncated: at most {MAX_LINE_BYTES} bytes of a line and {MAX_LINES} lines are kept."
            )),
            // OpenWhisk's marker; for the node's budget, the total is that of every
            // activation's output the node holds.
            Some(Cut::Limit(limit)) => lines.push(truncation_marker(limit as u64)),
            Some(Cut::Node(limit)) => lines.push(truncation_marker(limit)),
        }
        (lines, charge)
    }
}

/// OpenWhisk's note at the end of logs cut at `limit` bytes.
pub fn truncation_marker(limit: u64) -> String {
    format!("Logs were truncated because the total bytes size exceeds the limit of {limit} bytes.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::units::{KIB_USIZE, MIB};

    #[tokio::test]
    async fn splits_at_sentinels_on_both_streams() {
        let c = LogCollector::new();
        let out = format!("hello\n{SENTINEL}\nno newline{SENTINEL}\n");
        let err = format!("oops\n{SENTINEL}\n{SENTINEL}\n");
        let marks = c.marks();
        c.pump(out.as_bytes(), 0).await;
        c.pump(err.as_bytes(), 1).await;
        let lines = c.take_after(marks, Duration::from_millis(10)).await;
        assert_eq!(lines.len(), 3);
        assert!(lines[1].ends_with(" stdout: no newline"));
        assert!(lines[0].ends_with(" stdout: hello"));
        assert!(lines.iter().any(|l| l.ends_with(" stderr: oops")));
        assert_eq!(c.marks(), [2, 2]);
        assert!(c.take().is_empty());
    }

    /// Counts the heap bytes each thread holds live: what the collector holds, whatever holds
    /// it inside, measured on the test's own thread (`#[tokio::test]` runs everything there)
    /// so the other tests of this binary do not count.
    mod heap {
        use std::alloc::{GlobalAlloc, Layout, System};
        use std::cell::Cell;

        thread_local! {
            static LIVE: Cell<isize> = const { Cell::new(0) };
        }

        fn count(delta: isize) {
            // Not available while a thread is being torn down: nothing to measure then.
            let _ = LIVE.try_with(|live| live.set(live.get() + delta));
        }

        struct Counting;

        // SAFETY: every call is forwarded to the system allocator unchanged.
        unsafe impl GlobalAlloc for Counting {
            #[expect(
                clippy::cast_possible_wrap,
                reason = "an allocation's size is at most isize::MAX (a Layout guarantees it)"
            )]
            unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
                let p = System.alloc(layout);
                if !p.is_null() {
                    count(layout.size() as isize);
                }
                p
            }
            #[expect(
                clippy::cast_possible_wrap,
                reason = "an allocation's size is at most isize::MAX (a Layout guarantees it)"
            )]
            unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
                System.dealloc(p, layout);
                count(-(layout.size() as isize));
            }
            #[expect(
                clippy::cast_possible_wrap,
                reason = "an allocation's size is at most isize::MAX (a Layout guarantees it)"
            )]
            unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
                let q = System.realloc(p, layout, new_size);
                if !q.is_null() {
                    count(new_size as isize - layout.size() as isize);
                }
                q
            }
        }

        #[global_allocator]
        static COUNTING: Counting = Counting;

        pub fn live() -> isize {
            LIVE.with(Cell::get)
        }
    }

    /// `len` bytes without a newline, then the sentinel ending that line: made as they are
    /// read, never held. At each read it notes the most the heap and the collector held.
    struct Flood {
        left: u64,
        end: &'static [u8],
        collector: std::sync::Arc<LogCollector>,
        heap_base: isize,
        peak_heap: isize,
        peak_buffered: usize,
    }

    impl AsyncRead for Flood {
        #[expect(
            clippy::cast_possible_truncation,
            reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
        )]
        fn poll_read(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            let me = self.get_mut();
            me.peak_heap = me.peak_heap.max(heap::live() - me.heap_base);
            me.peak_buffered = me.peak_buffered.max(me.collector.buffered_bytes());
            if me.left > 0 {
                let n = buf.remaining().min(me.left as usize);
                buf.initialize_unfilled_to(n).fill(b'x');
                buf.advance(n);
                me.left -= n as u64;
            } else {
                let n = buf.remaining().min(me.end.len());
                buf.put_slice(&me.end[..n]);
                me.end = &me.end[n..];
            }
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_gigabyte_without_newline_is_held_in_bounded_memory_and_ends_at_its_sentinel() {
        use icebox_core::units::GIB;
        let c = std::sync::Arc::new(LogCollector::new());
        let end = format!("{SENTINEL}\n").leak().as_bytes();
        let mut flood = Flood {
            left: GIB,
            end,
            collector: c.clone(),
            heap_base: heap::live(),
            peak_heap: 0,
            peak_buffered: 0,
        };
        let marks = c.marks();
        c.pump(&mut flood, 0).await;

        assert!(
            flood.peak_heap < isize::try_from(MIB).unwrap(),
            "reading 1 GiB without a newline held {} bytes",
            flood.peak_heap
        );
        assert!(
            flood.peak_buffered < 64 * KIB_USIZE,
            "the collector held {} bytes",
            flood.peak_buffered
        );
        assert_eq!(
            c.marks(),
            [marks[0] + 1, marks[1]],
            "the sentinel at the end of the line ends the activation"
        );
        let lines = c.take();
        assert_eq!(lines.len(), 2, "the cut line and one note");
        assert!(lines[0].ends_with(&"x".repeat(MAX_LINE_BYTES)) && !lines[0].contains(SENTINEL));
        assert!(lines[0].len() < MAX_LINE_BYTES + 64);
        assert!(lines[1].starts_with("Logs were truncated"));
        assert_eq!(c.buffered_bytes(), 0);
    }

    #[tokio::test]
    async fn lines_waiting_for_an_activation_are_capped_in_bytes() {
        let c = LogCollector::new();
        // An idle instance printing long lines: far fewer than MAX_LINES, far more than MAX_BYTES.
        let line = format!("{}\n", "y".repeat(MAX_LINE_BYTES));
        let out = line.repeat(2 * MAX_BYTES / MAX_LINE_BYTES);
        c.pump(out.as_bytes(), 0).await;
        assert!(c.buffered_bytes() <= MAX_BYTES);
        let lines = c.take();
        assert!(lines.len() < MAX_BYTES / MAX_LINE_BYTES + 1);
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.starts_with("Logs were truncated"))
                .count(),
            1
        );
        assert!(lines.last().unwrap().starts_with("Logs were truncated"));
        assert_eq!(c.buffered_bytes(), 0);
    }

    #[tokio::test]
    async fn collectors_share_the_node_budget_and_give_it_back_when_taken_lines_go() {
        let budget = OutputBudget::new(128 * 1024);
        let (a, b) = (LogCollector::new(), LogCollector::new());
        a.attach_budget(&budget);
        b.attach_budget(&budget);
        let out = format!("{}\n", "z".repeat(1000)).repeat(50);
        a.pump(out.as_bytes(), 0).await;
        b.pump(out.as_bytes(), 0).await;
        assert!(budget.held() <= 64 * 1024, "log lines take half the budget");
        let (lines_a, charge_a) = a.take_charged();
        let (lines_b, charge_b) = b.take_charged();
        assert_eq!(lines_a.len(), 50, "the first fits whole");
        assert_eq!(
            lines_b.last().unwrap(),
            &truncation_marker(64 * 1024),
            "the second is cut at the node's budget"
        );
        assert!(lines_b.len() < 50);
        assert_eq!(budget.held(), charge_a.bytes() + charge_b.bytes());
        drop((charge_a, charge_b));
        assert_eq!(budget.held(), 0);
    }

    #[tokio::test]
    async fn the_activation_limit_cuts_with_openwhisks_marker() {
        let c = LogCollector::new();
        c.set_limit(10_000);
        let out = format!("{}\n", "w".repeat(1000)).repeat(50);
        c.pump(out.as_bytes(), 0).await;
        let lines = c.take();
        assert!(
            lines[..lines.len() - 1]
                .iter()
                .map(String::len)
                .sum::<usize>()
                <= 10_000
        );
        assert_eq!(lines.last().unwrap(), &truncation_marker(10_000));
    }

    #[tokio::test]
    async fn waits_for_late_sentinel_then_gives_up() {
        let c = std::sync::Arc::new(LogCollector::new());
        let marks = c.marks();
        // Nothing ever arrives on either stream: returns empty after the wait.
        let lines = c.take_after(marks, Duration::from_millis(20)).await;
        assert!(lines.is_empty());
    }
}
