//! Text of the kernel's /proc files: paths in /proc/swaps and /proc/PID/mountinfo have their
//! spaces, tabs, newlines and backslashes written as `\ooo` octal.

/// Undoes the kernel's `\ooo` octal escapes; anything else (a lone backslash) stays as it is.
pub fn unescape_octal(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push(
                    d.iter()
                        .fold(0u8, |acc, c| acc.wrapping_mul(8) + (c - b'0')),
                );
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octal_escapes_become_bytes_and_lone_backslashes_stay() {
        assert_eq!(unescape_octal(r"/mnt/my\040disk"), "/mnt/my disk");
        assert_eq!(unescape_octal(r"a\134b"), r"a\b");
        assert_eq!(unescape_octal(r"a\9"), r"a\9");
        assert_eq!(unescape_octal(r"end\"), r"end\");
    }
}
