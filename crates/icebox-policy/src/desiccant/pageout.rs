//! Desiccant's library unmapping (§4.6) after a reclaim: what happens to the private,
//! unmodified library pages of the reclaimed instance's processes.

use std::str::FromStr;

#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[strum(serialize_all = "kebab-case")]
pub enum LibraryPageout {
    /// Page them out, then read them back into the page cache, unmapped: the instance's USS
    /// drops and its next activation faults them in from memory.
    #[default]
    KeepCached,
    /// Page them out and leave them to be re-read from disk.
    Evict,
    /// Leave them mapped.
    Off,
}

impl LibraryPageout {
    pub const ALL: &'static [Self] = <Self as strum::VariantArray>::VARIANTS;

    /// The spelling of the daemon's `--library-pageout` flag.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown library page-out mode '{0}' (expected keep-cached, evict or off)")]
pub struct ParseLibraryPageoutError(pub String);

impl FromStr for LibraryPageout {
    type Err = ParseLibraryPageoutError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LibraryPageout::ALL
            .iter()
            .copied()
            .find(|m| m.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| ParseLibraryPageoutError(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip() {
        for &m in LibraryPageout::ALL {
            assert_eq!(m.as_str().parse::<LibraryPageout>(), Ok(m));
        }
        assert!("keep_cached".parse::<LibraryPageout>().is_err());
    }
}
