//! The CRIU image messages icebox reads and writes, with the field numbers of CRIU's
//! `images/*.proto` (proto2). Only the fields icebox needs are declared: prost keeps unknown
//! fields out, so these structs are for reading everywhere except `pagemap`, which icebox
//! rewrites and which has no other fields.

/// `pstree_entry` (pstree.img): one task of the dumped tree, pids as seen in its namespace.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PstreeEntry {
    #[prost(uint32, required, tag = "1")]
    pub pid: u32,
    #[prost(uint32, required, tag = "2")]
    pub ppid: u32,
    #[prost(uint32, required, tag = "3")]
    pub pgid: u32,
    #[prost(uint32, required, tag = "4")]
    pub sid: u32,
    #[prost(uint32, repeated, packed = "false", tag = "5")]
    pub threads: Vec<u32>,
}

/// `vma_entry`: one mapping of a task.
#[derive(Clone, PartialEq, prost::Message)]
pub struct VmaEntry {
    #[prost(uint64, required, tag = "1")]
    pub start: u64,
    #[prost(uint64, required, tag = "2")]
    pub end: u64,
    #[prost(uint64, required, tag = "3")]
    pub pgoff: u64,
    #[prost(uint64, required, tag = "4")]
    pub shmid: u64,
    #[prost(uint32, required, tag = "5")]
    pub prot: u32,
    #[prost(uint32, required, tag = "6")]
    pub flags: u32,
    #[prost(uint32, required, tag = "7")]
    pub status: u32,
    #[prost(sint64, required, tag = "8")]
    pub fd: i64,
}

/// `mm_entry` (mm-PID.img): a task's address space; only its VMAs matter here.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MmEntry {
    #[prost(message, repeated, tag = "14")]
    pub vmas: Vec<VmaEntry>,
}

/// `pagemap_head`: the first entry of pagemap-PID.img, naming its pages-ID.img.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PagemapHead {
    #[prost(uint32, required, tag = "1")]
    pub pages_id: u32,
}

/// `pagemap_entry`: `nr_pages` pages from `vaddr`; with `PE_PRESENT` their data follow in the
/// pages file, in pagemap order.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PagemapEntry {
    #[prost(uint64, required, tag = "1")]
    pub vaddr: u64,
    #[prost(uint32, required, tag = "2")]
    pub nr_pages: u32,
    #[prost(bool, optional, tag = "3")]
    pub in_parent: Option<bool>,
    #[prost(uint32, optional, tag = "4")]
    pub flags: Option<u32>,
}

/// Pagemap entry flags (criu/include/pagemap.h).
pub const PE_PARENT: u32 = 1 << 0;
pub const PE_LAZY: u32 = 1 << 1;
pub const PE_PRESENT: u32 = 1 << 2;

/// VMA status bits (criu/include/image.h).
pub const VMA_AREA_REGULAR: u32 = 1 << 0;
pub const VMA_AREA_VSYSCALL: u32 = 1 << 2;
pub const VMA_AREA_VDSO: u32 = 1 << 3;
pub const VMA_ANON_PRIVATE: u32 = 1 << 9;
pub const VMA_AREA_VVAR: u32 = 1 << 12;

impl VmaEntry {
    /// Anonymous private memory: a page missing here reads as zeros (not so in a file-backed
    /// private mapping, where it would show the file).
    pub fn is_anon_private(&self) -> bool {
        self.status & VMA_AREA_REGULAR != 0
            && self.status & VMA_ANON_PRIVATE != 0
            && self.flags & libc::MAP_ANONYMOUS as u32 != 0
            && self.flags & libc::MAP_PRIVATE as u32 != 0
    }

    /// What `criu restore --lazy-pages` registers with userfaultfd (criu's
    /// vma_entry_can_be_lazy): anonymous private, not locked, not a kernel-provided area.
    pub fn can_be_lazy(&self) -> bool {
        self.flags & libc::MAP_ANONYMOUS as u32 != 0
            && self.flags & libc::MAP_PRIVATE as u32 != 0
            && self.flags & (libc::MAP_LOCKED | libc::MAP_HUGETLB) as u32 == 0
            && self.status & (VMA_AREA_VDSO | VMA_AREA_VVAR | VMA_AREA_VSYSCALL) == 0
    }
}

impl PagemapEntry {
    /// Whether this entry's pages are stored in the pages file (not in a parent snapshot,
    /// and not left to a remote page server).
    pub fn is_present(&self) -> bool {
        let flags = self.flags();
        flags & PE_PRESENT != 0 && flags & PE_PARENT == 0 && !self.in_parent()
    }

    pub fn is_lazy(&self) -> bool {
        self.flags() & PE_LAZY != 0
    }

    pub fn end(&self) -> u64 {
        self.vaddr + u64::from(self.nr_pages) * crate::PAGE_SIZE
    }
}
