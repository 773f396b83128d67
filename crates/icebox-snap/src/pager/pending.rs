//! The image-backed pages of one address space that are not installed yet, as runs keyed by
//! their current address, each remembering its address in the image (they differ after an
//! mremap). A run never spans two of the dumped VMAs, so one UFFDIO_COPY can serve it whole
//! unless the task has split the VMA since (mprotect): the caller handles that.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub start: u64,
    pub end: u64,
    /// Image address of `start`.
    pub img: u64,
}

impl Run {
    pub fn img_of(&self, addr: u64) -> u64 {
        self.img + (addr - self.start)
    }
}

#[derive(Debug, Clone, Default)]
pub struct Pending {
    runs: BTreeMap<u64, (u64, u64)>,
    /// Set once a run moved: image and current addresses may then differ.
    pub moved: bool,
}

impl Pending {
    pub fn insert(&mut self, start: u64, end: u64, img: u64) {
        if start < end {
            self.runs.insert(start, (end, img));
        }
    }

    pub fn bytes(&self) -> u64 {
        self.runs.iter().map(|(s, (e, _))| e - s).sum()
    }

    /// The run holding `addr`.
    pub fn find(&self, addr: u64) -> Option<Run> {
        let (start, (end, img)) = self.runs.range(..=addr).next_back()?;
        (addr < *end).then_some(Run {
            start: *start,
            end: *end,
            img: *img,
        })
    }

    /// The parts of runs inside `start..end`, clipped, in address order.
    pub fn within(&self, start: u64, end: u64) -> Vec<Run> {
        let first = self.find(start).map(|r| r.start).unwrap_or(start);
        self.runs
            .range(first..end)
            .filter_map(|(s, (e, img))| {
                let run = Run {
                    start: *s,
                    end: *e,
                    img: *img,
                };
                let lo = run.start.max(start);
                let hi = run.end.min(end);
                (lo < hi).then(|| Run {
                    start: lo,
                    end: hi,
                    img: run.img_of(lo),
                })
            })
            .collect()
    }

    /// Forgets `start..end`, splitting runs that straddle it.
    pub fn remove(&mut self, start: u64, end: u64) {
        for run in self.within(start, end) {
            let whole = self.find(run.start).expect("within returned it");
            self.runs.remove(&whole.start);
            if whole.start < run.start {
                self.runs.insert(whole.start, (run.start, whole.img));
            }
            if run.end < whole.end {
                self.runs
                    .insert(run.end, (whole.end, whole.img_of(run.end)));
            }
        }
    }

    /// mremap moved `from..from+len` to `to`.
    pub fn remap(&mut self, from: u64, to: u64, len: u64) {
        let moved = self.within(from, from + len);
        if moved.is_empty() {
            return;
        }
        self.remove(from, from + len);
        // Whatever was at the destination is gone (mremap unmaps it first).
        self.remove(to, to + len);
        for run in moved {
            let start = run.start - from + to;
            self.insert(start, start + (run.end - run.start), run.img);
        }
        self.moved = true;
    }

    /// Current address of image address `img`, if that page is still pending.
    pub fn current_of(&self, img: u64) -> Option<u64> {
        if !self.moved {
            return self.find(img).map(|_| img);
        }
        self.runs
            .iter()
            .find(|(s, (e, i))| img >= *i && img < *i + (*e - **s))
            .map(|(s, (_, i))| s + (img - i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_splits_and_keeps_image_addresses() {
        let mut p = Pending::default();
        p.insert(0x1000, 0x9000, 0x1000);
        p.remove(0x3000, 0x5000);
        assert_eq!(
            p.within(0, u64::MAX),
            vec![
                Run {
                    start: 0x1000,
                    end: 0x3000,
                    img: 0x1000
                },
                Run {
                    start: 0x5000,
                    end: 0x9000,
                    img: 0x5000
                }
            ]
        );
        assert_eq!(p.find(0x4000), None);
        assert_eq!(p.bytes(), 0x6000);
    }

    #[test]
    fn remap_moves_runs_and_tracks_the_image() {
        let mut p = Pending::default();
        p.insert(0x10000, 0x14000, 0x10000);
        p.insert(0x20000, 0x21000, 0x20000);
        p.remap(0x11000, 0x50000, 0x2000);
        assert_eq!(
            p.find(0x50000),
            Some(Run {
                start: 0x50000,
                end: 0x52000,
                img: 0x11000
            })
        );
        assert_eq!(p.find(0x11000), None);
        assert_eq!(p.current_of(0x12000), Some(0x51000));
        assert_eq!(p.current_of(0x13000), Some(0x13000));
        assert_eq!(p.current_of(0x11000 + 0x2000 + 0x1000), None);
        let all = p.within(0, u64::MAX);
        assert_eq!(all.len(), 4);
    }

    #[test]
    fn within_clips_to_the_window() {
        let mut p = Pending::default();
        p.insert(0x1000, 0x4000, 0x7000);
        assert_eq!(
            p.within(0x2000, 0x3000),
            vec![Run {
                start: 0x2000,
                end: 0x3000,
                img: 0x8000
            }]
        );
    }
}
