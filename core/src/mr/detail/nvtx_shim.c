/*
 * NVTX3 memory API shim for rmm-rs's bounds checking inside pools (core/src/mr/detail/nvtx_bounds.rs).
 * NVTX3 is header-only (core/third_party/nvtx3, Apache-2.0 WITH LLVM-exception): every call is a
 * no-op until a tool (compute-sanitizer, Nsight Systems) injects itself, so this costs nothing
 * without one. Handles are passed to Rust as opaque pointers.
 */
#include <stddef.h>
#include <string.h>

#include "nvtx3/nvToolsExtMem.h"

void *rmm_nvtx_domain_create(const char *name) {
    return (void *)nvtxDomainCreateA(name);
}

/* A heap for a sub-allocator over [ptr, ptr + size) (one upstream region of a pool or arena). */
void *rmm_nvtx_heap_register(void *domain, void *ptr, size_t size) {
    nvtxMemVirtualRangeDesc_t range;
    memset(&range, 0, sizeof range);
    range.ptr = ptr;
    range.size = size;
    nvtxMemHeapDesc_t desc;
    memset(&desc, 0, sizeof desc);
    desc.extCompatID = NVTX_EXT_COMPATID_MEM;
    desc.structSize = sizeof desc;
    desc.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
    desc.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    desc.typeSpecificDescSize = sizeof range;
    desc.typeSpecificDesc = &range;
    return (void *)nvtxMemHeapRegister((nvtxDomainHandle_t)domain, &desc);
}

/* Forgets a heap and every region registered in it. */
void rmm_nvtx_heap_unregister(void *domain, void *heap) {
    nvtxMemHeapUnregister((nvtxDomainHandle_t)domain, (nvtxMemHeapHandle_t)heap);
}

/* [ptr, ptr + size) of `heap` is handed out: accesses to it are valid. */
void rmm_nvtx_region_register(void *domain, void *heap, void *ptr, size_t size) {
    nvtxMemVirtualRangeDesc_t range;
    memset(&range, 0, sizeof range);
    range.ptr = ptr;
    range.size = size;
    nvtxMemRegionsRegisterBatch_t batch;
    memset(&batch, 0, sizeof batch);
    batch.extCompatID = NVTX_EXT_COMPATID_MEM;
    batch.structSize = sizeof batch;
    batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    batch.heap = (nvtxMemHeapHandle_t)heap;
    batch.regionCount = 1;
    batch.regionDescElementSize = sizeof range;
    batch.regionDescElements = &range;
    nvtxMemRegionsRegister((nvtxDomainHandle_t)domain, &batch);
}

/* The region starting at `ptr` is freed: accesses to it are errors again. */
void rmm_nvtx_region_unregister(void *domain, void *ptr) {
    nvtxMemRegionRef_t ref;
    memset(&ref, 0, sizeof ref);
    ref.pointer = ptr;
    nvtxMemRegionsUnregisterBatch_t batch;
    memset(&batch, 0, sizeof batch);
    batch.extCompatID = NVTX_EXT_COMPATID_MEM;
    batch.structSize = sizeof batch;
    batch.refType = NVTX_MEM_REGION_REF_TYPE_POINTER;
    batch.refCount = 1;
    batch.refElementSize = sizeof ref;
    batch.refElements = &ref;
    nvtxMemRegionsUnregister((nvtxDomainHandle_t)domain, &batch);
}
