//! CRIU's image framing (criu/image.c, criu/protobuf.c): a file starts with the common magic
//! and the image's own magic (inventory.img has only its own), then holds entries, each a
//! little-endian u32 length followed by one protobuf message. pages-*.img files have no
//! framing: they are raw pages.

use icebox_core::units::MIB_USIZE;
use prost::Message;
use std::io::{self, Write};
use std::path::Path;

pub const IMG_COMMON_MAGIC: u32 = 0x5456_4319;
pub const PSTREE_MAGIC: u32 = 0x5027_3030;
pub const PAGEMAP_MAGIC: u32 = 0x5608_4025;
pub const MM_MAGIC: u32 = 0x5749_2820;

/// Largest entry accepted: a corrupt length must not make us allocate gigabytes.
const MAX_ENTRY: usize = 16 * MIB_USIZE;

fn invalid(path: &Path, why: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {why}", path.display()),
    )
}

/// Every entry of the image `path` whose magic must be `magic`.
pub fn read_entries<M: Message + Default>(path: &Path, magic: u32) -> io::Result<Vec<M>> {
    let data = std::fs::read(path)?;
    let frames = frames(&data, magic).map_err(|why| invalid(path, why))?;
    frames
        .into_iter()
        .map(|(at, body)| {
            M::decode(body).map_err(|e| invalid(path, format!("entry at offset {at}: {e}")))
        })
        .collect()
}

/// An image whose first entry is a head of another type (pagemap-*.img).
pub fn read_head_and_entries<H: Message + Default, M: Message + Default>(
    path: &Path,
    magic: u32,
) -> io::Result<(H, Vec<M>)> {
    let data = std::fs::read(path)?;
    let frames = frames(&data, magic).map_err(|why| invalid(path, why))?;
    let mut frames = frames.into_iter();
    let (_, head) = frames
        .next()
        .ok_or_else(|| invalid(path, "no head entry"))?;
    let head = H::decode(head).map_err(|e| invalid(path, format!("head: {e}")))?;
    let entries = frames
        .map(|(at, body)| {
            M::decode(body).map_err(|e| invalid(path, format!("entry at offset {at}: {e}")))
        })
        .collect::<io::Result<Vec<M>>>()?;
    Ok((head, entries))
}

/// The framed entries of an image, each with its offset.
fn frames(data: &[u8], magic: u32) -> Result<Vec<(usize, &[u8])>, String> {
    let word = |at: usize| -> Option<u32> {
        data.get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    };
    if word(0) != Some(IMG_COMMON_MAGIC) || word(4) != Some(magic) {
        return Err(format!("not a CRIU image with magic {magic:#x}"));
    }
    let mut at = 8;
    let mut out = Vec::new();
    while at < data.len() {
        let len = word(at).ok_or("truncated entry length")? as usize;
        if len > MAX_ENTRY {
            return Err(format!("entry of {len} bytes at offset {at}"));
        }
        let body = data
            .get(at + 4..at + 4 + len)
            .ok_or_else(|| format!("entry at offset {at} runs past the end"))?;
        out.push((at, body));
        at += 4 + len;
    }
    Ok(out)
}

/// Writes an image: the magics, then each entry framed. Written to `path` directly; callers
/// that replace an image write a sibling and rename it.
#[expect(
    clippy::cast_possible_truncation,
    reason = "a CRIU image entry is far below 4 GiB"
)]
pub fn write_image(path: &Path, magic: u32, entries: &[&dyn EncodeEntry]) -> io::Result<()> {
    let mut buf = Vec::with_capacity(8 + entries.len() * 16);
    buf.extend_from_slice(&IMG_COMMON_MAGIC.to_le_bytes());
    buf.extend_from_slice(&magic.to_le_bytes());
    for entry in entries {
        let body = entry.encode_entry();
        buf.extend_from_slice(&(body.len() as u32).to_le_bytes());
        buf.extend_from_slice(&body);
    }
    let mut file = std::fs::File::create(path)?;
    file.write_all(&buf)?;
    file.sync_all()
}

/// Object-safe encoding, so one image can hold a head and entries of another type.
pub trait EncodeEntry {
    fn encode_entry(&self) -> Vec<u8>;
}

impl<M: Message> EncodeEntry for M {
    fn encode_entry(&self) -> Vec<u8> {
        self.encode_to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::proto::{PagemapEntry, PagemapHead};

    #[test]
    fn entries_round_trip_and_damage_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pagemap-1.img");
        let head = PagemapHead { pages_id: 7 };
        let entry = PagemapEntry {
            vaddr: 0x7f00_0000_0000,
            nr_pages: 3,
            in_parent: None,
            flags: Some(6),
        };
        write_image(&path, PAGEMAP_MAGIC, &[&head, &entry, &entry]).unwrap();
        let (read_head, entries): (PagemapHead, Vec<PagemapEntry>) =
            read_head_and_entries(&path, PAGEMAP_MAGIC).unwrap();
        assert_eq!(read_head, head);
        assert_eq!(entries, vec![entry.clone(), entry]);

        let data = std::fs::read(&path).unwrap();
        std::fs::write(&path, &data[..data.len() - 2]).unwrap();
        let err = read_entries::<PagemapEntry>(&path, PAGEMAP_MAGIC).unwrap_err();
        assert!(err.to_string().contains("runs past the end"), "{err}");
        assert!(read_entries::<PagemapEntry>(&path, MM_MAGIC).is_err());
    }
}
