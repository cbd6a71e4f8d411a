//! What the resources over a stream-ordered [`Core`] (the pool, the expandable pool) do around it
//! on every call: checked frees (the live set) and NVTX bounds checking.

use crate::aligned::{align_up, DEFAULT_ALIGNMENT};
use crate::cuda::Stream;
use crate::error::{Error, Result};
use crate::mr::detail::live_set::{FreeCheck, FreeChecks};
use crate::mr::detail::nvtx_bounds::NvtxBounds;
use crate::mr::detail::stream_ordered::Core;

/// Hands out `size` bytes of `core` (`bytes` rounded up to 256) at an `alignment`-aligned address,
/// usable on `stream`: recorded as live (an out-of-memory error when the host has no room to record
/// it), and announced to NVTX as `bytes` long when `nvtx` is on.
#[inline]
#[allow(clippy::too_many_arguments)]
pub(crate) fn allocate(
    core: &Core,
    live: &FreeCheck,
    nvtx: Option<&NvtxBounds>,
    name: &str,
    stream: Stream,
    bytes: usize,
    size: usize,
    alignment: usize,
) -> Result<*mut u8> {
    let block = core.allocate(stream, size, alignment.max(DEFAULT_ALIGNMENT))?;
    let ptr = live
        .allocated(name, block as *mut u8, size, |block| {
            // The block was never handed out: back to the engine at once (checked: `allocated`
            // only fails when frees are checked).
            let _ = core.deallocate(stream, block as usize, size, true);
        })
        .map_err(|e| e.error(name, size))?;
    if let Some(nvtx) = nvtx {
        nvtx.sync_heaps(core.regions_generation(), || core.regions());
        nvtx.allocated(ptr, bytes);
    }
    Ok(ptr)
}

/// Frees `ptr` of `bytes` into `core` in `stream` order, after checking it against the live
/// allocations (when frees are checked: a refused free changes nothing) and NVTX.
#[inline]
pub(crate) fn deallocate(
    core: &Core,
    live: &FreeCheck,
    nvtx: Option<&NvtxBounds>,
    name: &str,
    stream: Stream,
    ptr: *mut u8,
    bytes: usize,
) -> Result<()> {
    if ptr.is_null() {
        return Ok(());
    }
    let size = align_up(bytes, DEFAULT_ALIGNMENT).ok_or_else(|| {
        Error::invalid(format!("{bytes} bytes cannot have come from this {name}"))
    })?;
    let verified = live.mode() == FreeChecks::Checked;
    let free = || {
        live.free(name, ptr, size, || {
            core.deallocate(stream, ptr as usize, size, verified)
        })
    };
    match nvtx {
        None => free(),
        Some(nvtx) => nvtx.free(ptr, free),
    }
}
