//! The operation-sequence driver shared by the fuzz targets.
//!
//! Input bytes are read 4 at a time as one operation: `(kind, stream, size, extra)`. Allocations
//! (any size up to 4 MiB, alignments up to 4 KiB, on one of several streams), valid frees (on any
//! stream), invalid frees (a pointer into a live allocation, a wrong size, a double free, a pointer
//! never handed out) and resource-specific actions. After every step: live allocations never
//! overlap and are aligned, invalid frees are refused with `InvalidArgument`, and the caller's
//! accounting check holds. At the end everything is freed and the caller checks the resource is
//! empty. Any violation panics, which libFuzzer reports as a crash.

use std::collections::BTreeMap;

use rmm_core::cuda::{self, Stream};
use rmm_core::{Error, MemoryResource};

/// One live allocation.
#[derive(Clone, Copy, Debug)]
pub struct Live {
    /// The pointer handed out.
    pub ptr: usize,
    /// The bytes asked for.
    pub bytes: usize,
    /// The alignment asked for.
    pub alignment: usize,
}

/// What the driver needs besides the resource.
pub trait Hooks {
    /// Checks the resource's counters against the live allocations.
    fn check(&self, live: &BTreeMap<usize, Live>);
    /// A resource-specific action (trim, defragment, ...), chosen by `n`.
    fn action(&self, _n: u8) {}
    /// True when an allocation of this shape must fail with `InvalidArgument`.
    fn refuses(&self, _bytes: usize, _alignment: usize) -> bool {
        false
    }
}

/// Fake stream handles (host mode only: no handle ever reaches CUDA there).
fn streams() -> [Stream; 5] {
    // SAFETY: host mode makes no CUDA call (checked by `run`), so these handles are never used
    // as streams; the resources only compare them.
    unsafe { [Stream::DEFAULT, Stream::PER_THREAD, Stream::from_raw(0x5010), Stream::from_raw(0x5020), Stream::from_raw(0x5030)] }
}

fn overlaps(live: &BTreeMap<usize, Live>, addr: usize, len: usize) -> bool {
    if let Some((_, prev)) = live.range(..addr).next_back() {
        if prev.ptr + prev.bytes.max(1) > addr {
            return true;
        }
    }
    live.range(addr..addr + len.max(1)).next().is_some()
}

/// Runs the operations encoded in `data` against `mr`.
pub fn run(mr: &dyn MemoryResource, hooks: &dyn Hooks, data: &[u8]) {
    assert!(cuda::is_host_mode(), "the fuzz targets use fake stream handles: run them without a GPU");
    let streams = streams();
    let mut live: BTreeMap<usize, Live> = BTreeMap::new();
    let mut freed: Vec<Live> = Vec::new();
    for op in data.chunks_exact(4) {
        let (kind, s, size, extra) = (op[0], op[1], op[2], op[3]);
        let stream = streams[s as usize % streams.len()];
        let pick = || live.values().nth((size as usize * 256 + extra as usize) % live.len().max(1)).copied();
        match kind % 8 {
            0..=2 => {
                // Sizes from 1 byte to 4 MiB on a log scale; alignments 1 to 4 KiB.
                let bytes = 1 + ((extra as usize) << (size % 23)) % (4 << 20);
                let alignment = 1usize << (s % 13);
                match mr.allocate(stream, bytes, alignment) {
                    Ok(p) => {
                        assert!(!hooks.refuses(bytes, alignment), "{bytes} bytes aligned to {alignment} should fail");
                        let ptr = p as usize;
                        assert!(!p.is_null());
                        assert_eq!(ptr % alignment, 0, "{ptr:#x} is not aligned to {alignment}");
                        assert!(!overlaps(&live, ptr, bytes), "{ptr:#x}+{bytes} overlaps a live allocation");
                        live.insert(ptr, Live { ptr, bytes, alignment });
                    }
                    Err(Error::InvalidArgument(_)) if hooks.refuses(bytes, alignment) => {}
                    Err(e) => assert!(e.is_out_of_memory(), "{bytes} bytes aligned to {alignment}: {e}"),
                }
            }
            3 | 4 => {
                if let Some(b) = pick() {
                    live.remove(&b.ptr);
                    // SAFETY: a live allocation of `mr` with its arguments; host mode queues no work.
                    unsafe { mr.deallocate(stream, b.ptr as *mut u8, b.bytes, b.alignment) }
                        .unwrap_or_else(|e| panic!("a valid free of {:#x}+{}: {e}", b.ptr, b.bytes));
                    freed.push(b);
                    if freed.len() > 32 {
                        freed.remove(0);
                    }
                }
            }
            5 | 6 => {
                let target = match extra % 4 {
                    0 => pick().filter(|b| b.bytes > 256).map(|b| (b.ptr + 256, 256, b.alignment)),
                    1 => pick().map(|b| (b.ptr, if b.bytes > 256 { 1 } else { b.bytes + 256 }, b.alignment)),
                    2 => freed.last().copied().map(|b| (b.ptr, b.bytes, b.alignment)),
                    _ => Some((0x10 + ((size as usize) << 32), 256, 256)),
                };
                if let Some((ptr, bytes, alignment)) = target {
                    if !live.contains_key(&ptr) {
                        // SAFETY: deliberately invalid: a checked resource refuses it before
                        // touching memory.
                        let r = unsafe { mr.deallocate(stream, ptr as *mut u8, bytes, alignment) };
                        assert!(matches!(r, Err(Error::InvalidArgument(_))), "an invalid free of {ptr:#x}+{bytes}: {r:?}");
                    }
                }
            }
            _ => hooks.action(size),
        }
        hooks.check(&live);
    }
    for b in std::mem::take(&mut live).into_values() {
        // SAFETY: as above.
        unsafe { mr.deallocate(Stream::DEFAULT, b.ptr as *mut u8, b.bytes, b.alignment) }
            .unwrap_or_else(|e| panic!("a final free of {:#x}+{}: {e}", b.ptr, b.bytes));
    }
    hooks.check(&live);
}

/// The bytes a 256-byte-granular resource counts for the live allocations.
pub fn granules(live: &BTreeMap<usize, Live>) -> usize {
    live.values().map(|b| b.bytes.div_ceil(256) * 256).sum()
}
