// Diagnostic for issue 12's NVTX bounds (run by `scripts/gpu-run.sh nvtx-bounds`): the same NVTX
// memory-API calls as core/src/mr/detail/nvtx_shim.c, from a plain CUDA program, so a failure of the
// Rust probes can be split into "the tool ignores these calls here" and "our pool makes them wrong".
//
//   nvtx_probe <alloc> <bounds> <access>
//     alloc:  runtime (cudaMalloc) | driver (cuMemAlloc)
//     bounds: on (heap over the allocation, a 100-byte region at its start) | off
//     access: overrun (byte 100 of the region) | freed (byte 8 after unregistering) | inside (byte 99)
// Under `compute-sanitizer --tool memcheck --nvtx yes`, "on" with overrun/freed must report an
// invalid read; "off" and "inside" must report none.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExtMem.h>

__global__ void read_one(const unsigned char* src, unsigned char* dst) { *dst = *src; }

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: nvtx_probe runtime|driver on|off overrun|freed|inside\n");
        return 2;
    }
    const bool driver = std::strcmp(argv[1], "driver") == 0;
    const bool on = std::strcmp(argv[2], "on") == 0;
    const char* access = argv[3];
    const size_t heap_bytes = 1 << 20;

    cudaFree(nullptr);  // a context
    unsigned char* base = nullptr;
    if (driver) {
        CUdeviceptr p = 0;
        if (cuMemAlloc(&p, heap_bytes) != CUDA_SUCCESS) return 3;
        base = reinterpret_cast<unsigned char*>(p);
    } else if (cudaMalloc(&base, heap_bytes) != cudaSuccess) {
        return 3;
    }
    unsigned char* out = nullptr;
    cudaMalloc(&out, 1);

    nvtxDomainHandle_t domain = nvtxDomainCreateA("rmm-rs-probe");
    nvtxMemHeapHandle_t heap = nullptr;
    if (on) {
        nvtxMemVirtualRangeDesc_t range{};
        range.ptr = base;
        range.size = heap_bytes;
        nvtxMemHeapDesc_t desc{};
        desc.extCompatID = NVTX_EXT_COMPATID_MEM;
        desc.structSize = sizeof desc;
        desc.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
        desc.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
        desc.typeSpecificDescSize = sizeof range;
        desc.typeSpecificDesc = &range;
        heap = nvtxMemHeapRegister(domain, &desc);

        nvtxMemVirtualRangeDesc_t region{};
        region.ptr = base;
        region.size = 100;
        nvtxMemRegionsRegisterBatch_t batch{};
        batch.extCompatID = NVTX_EXT_COMPATID_MEM;
        batch.structSize = sizeof batch;
        batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
        batch.heap = heap;
        batch.regionCount = 1;
        batch.regionDescElementSize = sizeof region;
        batch.regionDescElements = &region;
        nvtxMemRegionsRegister(domain, &batch);
    }
    std::printf("nvtx_probe %s %s %s: heap handle %p, NVTX_INJECTION64_PATH=%s\n", argv[1], argv[2], access,
                static_cast<void*>(heap), std::getenv("NVTX_INJECTION64_PATH") ? std::getenv("NVTX_INJECTION64_PATH") : "(unset)");

    size_t offset = 99;
    if (std::strcmp(access, "overrun") == 0) offset = 100;
    if (std::strcmp(access, "freed") == 0) {
        offset = 8;
        if (on) {
            nvtxMemRegionRef_t ref{};
            ref.pointer = base;
            nvtxMemRegionsUnregisterBatch_t batch{};
            batch.extCompatID = NVTX_EXT_COMPATID_MEM;
            batch.structSize = sizeof batch;
            batch.refType = NVTX_MEM_REGION_REF_TYPE_POINTER;
            batch.refCount = 1;
            batch.refElementSize = sizeof ref;
            batch.refElements = &ref;
            nvtxMemRegionsUnregister(domain, &batch);
        }
    }
    read_one<<<1, 1>>>(base + offset, out);
    cudaError_t synced = cudaDeviceSynchronize();
    std::printf("nvtx_probe: kernel read byte %zu: %s\n", offset, cudaGetErrorString(synced));
    if (on) nvtxMemHeapUnregister(domain, heap);
    return 0;
}
