//! The expandable pool through its C entry points, in host mode (host memory stands in for the
//! device).

use std::os::fd::AsRawFd;
use std::ptr::null_mut;

use super::*;
use crate::resources::tests::{alloc, free, get_u64, made, Owned};
use crate::tests::prelude::{
    rmm_resource_kind, RMM_ERROR_INVALID_ARGUMENT, RMM_ERROR_OUT_OF_MEMORY, RMM_OK,
};
use rmm_core::mr::kind::ResourceKind;

const MIB: u64 = 1 << 20;

fn pool(initial: u64, maximum: u64, threshold: u64) -> Owned {
    // SAFETY: valid out-pointers; no peers.
    made(|o, e| unsafe {
        rmm_expandable_pool_memory_resource_new(
            initial,
            maximum,
            threshold,
            std::ptr::null(),
            0,
            o,
            e,
        )
    })
}

fn stats(p: &Owned) -> rmm_expandable_pool_statistics {
    let mut s = rmm_expandable_pool_statistics::default();
    let mut err = rmm_error::new();
    // SAFETY: live handle, valid out-pointers.
    let status = unsafe { rmm_expandable_pool_memory_resource_statistics(p.0, &mut s, &mut err) };
    assert_eq!(status, RMM_OK, "{err:?}");
    s
}

fn trim(p: &Owned) -> u64 {
    // SAFETY: live handle, valid out-pointers.
    get_u64(|o, e| unsafe { rmm_expandable_pool_memory_resource_trim(p.0, o, e) })
}

#[test]
fn grows_trims_between_live_blocks_and_reports_its_kind() {
    let p = pool(0, 64 * MIB, RMM_SIZE_NONE);
    let mut kind = -1;
    assert_eq!(
        // SAFETY: live handle, valid out-pointers.
        unsafe { rmm_resource_kind(p.0, &mut kind, null_mut(), null_mut()) },
        RMM_OK
    );
    assert_eq!(
        ResourceKind::from_code(kind),
        Some(ResourceKind::ExpandablePool)
    );
    let granule = stats(&p).granularity as usize;
    assert_eq!(stats(&p).reserved_bytes, 64 * MIB);
    let blocks: Vec<_> = (0..6).map(|_| alloc(&p, granule)).collect();
    // SAFETY: live handle, valid out-pointers.
    let mapped =
        || get_u64(|o, e| unsafe { rmm_expandable_pool_memory_resource_mapped_bytes(p.0, o, e) });
    // SAFETY: live handle, valid out-pointers.
    let used =
        || get_u64(|o, e| unsafe { rmm_expandable_pool_memory_resource_used_bytes(p.0, o, e) });
    assert_eq!((mapped(), used()), (6 * granule as u64, 6 * granule as u64));
    for &b in blocks.iter().skip(1).step_by(2) {
        free(&p, b, granule);
    }
    let s = stats(&p);
    assert_eq!(s.releasable_bytes, 3 * granule as u64, "{s:?}");
    assert_eq!(trim(&p), 3 * granule as u64);
    assert_eq!(
        mapped(),
        3 * granule as u64,
        "the live blocks' granules stay"
    );
    for &b in blocks.iter().step_by(2) {
        free(&p, b, granule);
    }
    assert_eq!(trim(&p), 3 * granule as u64);
    assert_eq!(stats(&p).granules_released, 6);
}

#[test]
fn initial_size_and_release_threshold() {
    let p = pool(8 * MIB, 64 * MIB, RMM_SIZE_NONE);
    assert_eq!(stats(&p).mapped_bytes, 8 * MIB);
    let threshold = || {
        // SAFETY: live handle, valid out-pointers.
        get_u64(|o, e| unsafe { rmm_expandable_pool_memory_resource_release_threshold(p.0, o, e) })
    };
    assert_eq!(threshold(), RMM_SIZE_NONE);
    let mut err = rmm_error::new();
    assert_eq!(
        // SAFETY: live handle.
        unsafe { rmm_expandable_pool_memory_resource_set_release_threshold(p.0, 0, &mut err) },
        RMM_OK
    );
    assert_eq!(threshold(), 0);
    // A block larger than the per-thread caches take: its free reaches the shared list.
    let b = alloc(&p, (12 * MIB) as usize);
    assert_eq!(stats(&p).mapped_bytes, 12 * MIB);
    free(&p, b, (12 * MIB) as usize);
    assert_eq!(
        stats(&p).mapped_bytes,
        0,
        "with a threshold of 0 a free gives every idle granule back"
    );
}

#[test]
fn out_of_memory_names_mapped_and_free_bytes_and_bad_input_is_refused() {
    let p = pool(0, 8 * MIB, RMM_SIZE_NONE);
    let live = alloc(&p, (4 * MIB) as usize);
    let mut out = null_mut();
    let mut err = rmm_error::new();
    // SAFETY: live handle, valid out-pointers.
    let status = unsafe {
        crate::tests::prelude::rmm_resource_allocate_sync(
            p.0,
            (16 * MIB) as usize,
            256,
            &mut out,
            &mut err,
        )
    };
    assert_eq!(status, RMM_ERROR_OUT_OF_MEMORY);
    assert!(
        err.message().contains("mapped") && err.message().contains("free"),
        "{}",
        err.message()
    );
    free(&p, live, (4 * MIB) as usize);

    let mut made = rmm_resource::NULL;
    // SAFETY: NULL peers with a count is refused before any read.
    let status = unsafe {
        rmm_expandable_pool_memory_resource_new(
            0,
            RMM_SIZE_NONE,
            RMM_SIZE_NONE,
            std::ptr::null(),
            2,
            &mut made,
            &mut err,
        )
    };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT, "{err:?}");
    let system = crate::resources::tests::system();
    // SAFETY: a live handle of another type is refused.
    let status =
        unsafe { rmm_expandable_pool_memory_resource_trim(system.0, null_mut(), &mut err) };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    assert!(err.message().contains(NAME), "{}", err.message());
}

#[test]
fn an_exported_allocation_is_received_and_reads_the_same_bytes() {
    if !rmm_core::cuda::is_host_mode() {
        // The bytes are written and read from the host; on a GPU the C++ test
        // ExpandablePoolIpc.AnotherProcessImportsASubAllocation moves device bytes instead.
        rmm_core::testing::skip(
            "experimental::tests::an_exported_allocation_is_received_and_reads_the_same_bytes",
            "host memory only (the GPU twin is the C++ IPC test)",
        );
        return;
    }
    let p = pool(0, 64 * MIB, RMM_SIZE_NONE);
    let bytes = 3 * MIB as usize + 100;
    let block = alloc(&p, bytes);
    // SAFETY: host mode: the block is host memory of `bytes`.
    unsafe { std::ptr::write_bytes(block.cast::<u8>(), 0x5a, bytes) };
    let (ours, theirs) = UnixStream::pair().unwrap();
    let mut err = rmm_error::new();
    // SAFETY: live handle and allocation; open socket.
    let status = unsafe {
        rmm_expandable_pool_memory_resource_export(
            p.0,
            block,
            bytes,
            null_mut(),
            ours.as_raw_fd(),
            &mut err,
        )
    };
    assert_eq!(status, RMM_OK, "{err:?}");
    let (mut span, mut ptr, mut size) = (null_mut(), null_mut(), 0usize);
    // SAFETY: open socket, valid out-pointers.
    let status = unsafe {
        rmm_imported_span_receive(theirs.as_raw_fd(), &mut span, &mut ptr, &mut size, &mut err)
    };
    assert_eq!(status, RMM_OK, "{err:?}");
    assert_eq!(size, bytes);
    assert_ne!(ptr, block, "mapped at other addresses");
    // SAFETY: the imported mapping is `size` readable bytes while `span` lives.
    let seen = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), size) };
    assert!(seen.iter().all(|&b| b == 0x5a));
    // SAFETY: from rmm_imported_span_receive, freed once.
    unsafe { rmm_imported_span_free(span) };
    free(&p, block, bytes);
    // SAFETY: a freed allocation cannot be exported.
    let status = unsafe {
        rmm_expandable_pool_memory_resource_export(
            p.0,
            block,
            bytes,
            null_mut(),
            ours.as_raw_fd(),
            &mut err,
        )
    };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT, "{err:?}");
}
