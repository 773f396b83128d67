//! A stable hash for names and checksums (backend/ram.rs, snapshot/meta.rs).

/// 64-bit FNV-1a, hex: enough to tell a damaged file (not an adversary's).
pub fn fnv1a(bytes: &[u8]) -> String {
    let hash = bytes.iter().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100000001b3)
    });
    format!("{hash:016x}")
}
