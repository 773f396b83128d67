//! A real process with anonymous memory the tests control: a Python child that maps, writes
//! and frees anonymous regions on commands over its stdin.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

const SCRIPT: &str = r#"
import ctypes, mmap, sys
regions = []
for line in sys.stdin:
    cmd, *args = line.split()
    if cmd == "alloc":
        size = int(args[0])
        m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        m.madvise(mmap.MADV_NOHUGEPAGE)
        m[:] = b"\x01" * size
        regions.append(m)
        print(ctypes.addressof(ctypes.c_char.from_buffer(m)), flush=True)
    elif cmd == "touch":
        m, off, size = regions[int(args[0])], int(args[1]), int(args[2])
        m[off:off + size] = b"\x02" * size
        print("ok", flush=True)
    elif cmd == "free":
        m, off, size = regions[int(args[0])], int(args[1]), int(args[2])
        m.madvise(mmap.MADV_DONTNEED, off, size)
        print("ok", flush=True)
    elif cmd == "verify":
        data = regions[int(args[0])][:]
        print("ok" if data.count(b"\x01") + data.count(b"\x02") == len(data) else "bad", flush=True)
    elif cmd == "free-every-other":
        m = regions[int(args[0])]
        for off in range(0, len(m), 2 * mmap.PAGESIZE):
            m.madvise(mmap.MADV_DONTNEED, off, mmap.PAGESIZE)
        print("ok", flush=True)
"#;

/// The Python child; killed and reaped on drop.
pub(crate) struct TestChild {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    regions: usize,
}

/// An anonymous region of the child, every page written once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Region {
    pub id: usize,
    pub addr: u64,
    pub len: u64,
}

impl Region {
    pub fn range(&self, off: u64, len: u64) -> (u64, u64) {
        (self.addr + off, self.addr + off + len)
    }
}

impl TestChild {
    pub fn spawn() -> TestChild {
        let mut child = Command::new("python3")
            .args(["-c", SCRIPT])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        TestChild {
            child,
            stdin,
            stdout,
            regions: 0,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn command(&mut self, line: &str) -> String {
        writeln!(self.stdin, "{line}").unwrap();
        let mut reply = String::new();
        self.stdout.read_line(&mut reply).unwrap();
        assert!(!reply.is_empty(), "the child exited on {line:?}");
        reply.trim().to_string()
    }

    /// Maps `len` bytes of anonymous memory and writes every page.
    pub fn alloc(&mut self, len: u64) -> Region {
        let addr = self.command(&format!("alloc {len}")).parse().unwrap();
        self.regions += 1;
        Region {
            id: self.regions - 1,
            addr,
            len,
        }
    }

    /// Writes every page of `[off, off + len)` of `region`.
    pub fn touch(&mut self, region: Region, off: u64, len: u64) {
        assert_eq!(
            self.command(&format!("touch {} {off} {len}", region.id)),
            "ok"
        );
    }

    /// Frees `[off, off + len)` of `region` (MADV_DONTNEED).
    pub fn free(&mut self, region: Region, off: u64, len: u64) {
        assert_eq!(
            self.command(&format!("free {} {off} {len}", region.id)),
            "ok"
        );
    }

    /// Whether every byte of `region` still holds what alloc or touch wrote (read through the
    /// child, so pages in swap come back).
    pub fn intact(&mut self, region: Region) -> bool {
        self.command(&format!("verify {}", region.id)) == "ok"
    }

    /// Frees every other page of `region`, starting with the first.
    pub fn free_every_other_page(&mut self, region: Region) {
        assert_eq!(
            self.command(&format!("free-every-other {}", region.id)),
            "ok"
        );
    }

    /// Ends the child and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for TestChild {
    fn drop(&mut self) {
        self.kill();
    }
}
