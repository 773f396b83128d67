//! One output line assembled from read chunks. However long the line grows, only its first
//! `max` bytes and a short tail are held: the tail is what shows whether the activation
//! sentinel ends it.

use super::SENTINEL;

/// Enough of a line's end to find the sentinel before a few carriage returns.
const TAIL: usize = SENTINEL.len() + 8;

pub(super) struct Line {
    /// The first `max` bytes of the line.
    head: Vec<u8>,
    /// The last `TAIL` bytes of the line (overlapping `head` on a short line).
    tail: Vec<u8>,
    /// Bytes of the line so far, kept or not.
    len: usize,
    max: usize,
}

/// A completed line.
pub(super) struct Finished {
    /// Its text without the sentinel, cut to `max` bytes.
    pub text: String,
    /// The text was longer than `max` bytes.
    pub cut: bool,
    /// It ended with the activation sentinel.
    pub ends_activation: bool,
}

impl Line {
    pub fn new(max: usize) -> Line {
        Line {
            head: Vec::new(),
            tail: Vec::new(),
            len: 0,
            max,
        }
    }

    /// Append bytes of the line (without its newline).
    pub fn push(&mut self, bytes: &[u8]) {
        let room = self.max - self.head.len();
        self.head.extend_from_slice(&bytes[..bytes.len().min(room)]);
        if bytes.len() >= TAIL {
            self.tail.clear();
            self.tail.extend_from_slice(&bytes[bytes.len() - TAIL..]);
        } else {
            self.tail.extend_from_slice(bytes);
            let excess = self.tail.len().saturating_sub(TAIL);
            self.tail.drain(..excess);
        }
        self.len += bytes.len();
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes held for this line.
    pub fn buffered(&self) -> usize {
        self.head.capacity() + self.tail.capacity()
    }

    /// Complete the line and start the next one.
    pub fn finish(&mut self) -> Finished {
        let carriage_returns = self.tail.iter().rev().take_while(|b| **b == b'\r').count();
        let ends_activation =
            self.tail[..self.tail.len() - carriage_returns].ends_with(SENTINEL.as_bytes());
        let text_len =
            self.len - carriage_returns - if ends_activation { SENTINEL.len() } else { 0 };
        let cut = text_len > self.max;
        let mut kept = &self.head[..text_len.min(self.head.len())];
        if cut {
            // Cut at a character boundary, not inside a multi-byte character.
            if let Err(e) = std::str::from_utf8(kept) {
                if e.error_len().is_none() {
                    kept = &kept[..e.valid_up_to()];
                }
            }
        }
        let text = String::from_utf8_lossy(kept).into_owned();
        self.head.clear();
        self.tail.clear();
        self.len = 0;
        Finished {
            text,
            cut,
            ends_activation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line_of(max: usize, chunks: &[&[u8]]) -> Finished {
        let mut line = Line::new(max);
        for chunk in chunks {
            line.push(chunk);
        }
        line.finish()
    }

    #[test]
    fn short_lines_are_whole_and_the_sentinel_is_stripped() {
        let f = line_of(64, &[b"hello\r"]);
        assert_eq!(
            (f.text.as_str(), f.cut, f.ends_activation),
            ("hello", false, false)
        );
        let f = line_of(64, &[b"no newline", SENTINEL.as_bytes()]);
        assert_eq!(
            (f.text.as_str(), f.cut, f.ends_activation),
            ("no newline", false, true)
        );
        let f = line_of(64, &[SENTINEL.as_bytes()]);
        assert_eq!(
            (f.text.as_str(), f.cut, f.ends_activation),
            ("", false, true)
        );
    }

    #[test]
    fn a_long_line_keeps_its_head_and_still_shows_the_sentinel() {
        let sentinel = SENTINEL.as_bytes();
        // The sentinel split across pushes, one byte at a time at the end.
        let mut chunks: Vec<&[u8]> = vec![&[b'x'; 100]; 50];
        chunks.extend(sentinel.chunks(1));
        let f = line_of(64, &chunks);
        assert_eq!((f.text.len(), f.cut, f.ends_activation), (64, true, true));
        // Exactly `max` bytes before the sentinel: not cut.
        let f = line_of(64, &[&[b'x'; 64], sentinel, b"\r"]);
        assert_eq!((f.text.len(), f.cut, f.ends_activation), (64, false, true));
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        let f = line_of(6, &["ab€€".as_bytes()]);
        assert_eq!((f.text.as_str(), f.cut), ("ab€", true));
    }
}
