//! Two processes share a sub-allocation of an expandable pool: the parent fills it, exports it and
//! sends the handles over a Unix socket; the child (this test executable run again for the same
//! test) imports it, checks every byte where it lies and writes its answer into the same bytes,
//! which the parent then reads through its own pointer (see the virtual range's `ipc_tests.rs`).

use super::*;
use crate::mr::detail::virtual_range::ipc_tests::{
    child, child_socket, hand_to_a_child, pattern, put, test_path,
};
use crate::mr::detail::virtual_range::MemoryKind;
use crate::testing::{require_gpu, skip};

/// Fills a sub-allocation that starts inside a granule and crosses two more, exports it and hands
/// it to the child of test `name`.
fn share_a_sub_allocation(name: &str, mr: &ExpandablePoolMemoryResource, memory: MemoryKind) {
    let g = mr.granularity();
    let pad = mr.allocate(Stream::DEFAULT, g / 2 + 100, 256).unwrap();
    let len = 2 * g;
    let p = mr.allocate(Stream::DEFAULT, len, 256).unwrap();
    put(memory, p, &(0..len).map(pattern).collect::<Vec<_>>());
    let span = mr.export(p, len, Stream::DEFAULT).unwrap();
    assert_eq!(span.handles.len(), 3);
    hand_to_a_child(&test_path(module_path!(), name), memory, p, span);
    // SAFETY: from allocate above; the child is done with the bytes.
    unsafe {
        mr.deallocate(Stream::DEFAULT, p, len, 256).unwrap();
        mr.deallocate(Stream::DEFAULT, pad, g / 2 + 100, 256)
            .unwrap();
    }
}

#[test]
fn a_second_process_reads_a_sub_allocation_of_a_host_pool() {
    if let Some(path) = child_socket() {
        return child(&path);
    }
    let mr = pool(16 * MIB, MIB);
    share_a_sub_allocation(
        "a_second_process_reads_a_sub_allocation_of_a_host_pool",
        &mr,
        MemoryKind::Host,
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn on_a_gpu_a_second_process_reads_a_sub_allocation() {
    const NAME: &str = "on_a_gpu_a_second_process_reads_a_sub_allocation";
    if let Some(path) = child_socket() {
        return child(&path);
    }
    require_gpu();
    let mr = ExpandablePoolMemoryResource::new(
        ExpandablePoolOptions::default().range(VirtualRangeOptions::default().reserve(1 << 30)),
    )
    .unwrap();
    if mr.shareable().is_none() {
        skip(
            NAME,
            "the device's memory cannot be exported (neither POSIX fd nor fabric handles)",
        );
        return;
    }
    share_a_sub_allocation(NAME, &mr, MemoryKind::Device);
}
