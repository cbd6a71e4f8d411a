// Probe for issue 27's RANDOM_ALLOCATIONS `cuda_async_mr` cells (1.59-1.67 of RMM 26.08 at 1, 4
// and 64 MiB on one H200 at fc2b89a, 1.01-1.12 at 6f0eb26 with the same code): is the driver's
// pool slower through the driver API (rmm-rs: cuMemAllocFromPoolAsync / cuMemFreeAsync) than
// through the runtime (RMM: cudaMallocFromPoolAsync / cudaFreeAsync), or with the pool's hardware
// decompression usage (both make their pools with it where the driver is CUDA 12.8 or newer)?
//
// Replays RMM's `random_allocation_free` (random_allocations.cpp: 1000 allocations, 73 % chance to
// allocate while under the cap, sizes uniform in [1 B, max MiB], std::default_random_engine, the
// legacy default stream) through four allocators in one process, round robin, each on a fresh
// pool made as RMM makes it (pinned, current device, release threshold UINT64_MAX):
//   runtime+hw   cudaMallocFromPoolAsync on a pool with cudaMemPoolCreateUsageHwDecompress (RMM)
//   driver+hw    cuMemAllocFromPoolAsync on such a pool (rmm-rs)
//   runtime      the same without the usage flag
//   driver       the same without the usage flag
// and prints each one's median and range of ms per run, as RANDOM_ALLOCATIONS_BENCH reports.
//
// With RMM_RS_LIBRARY=path/to/librmm_rs.so it then loads rmm-rs (dlopen, its C ABI), runs one
// churn through an rmm-rs pool of half the free memory and drops it (RANDOM_ALLOCATIONS_BENCH runs
// pool, binning and arena before cuda_async), adds rmm-rs's cuda_async_memory_resource as a fifth
// allocator (`rmm-rs`, rmm_resource_allocate on the default stream) and measures all five again:
// the four floors before and after show whether a process with rmm-rs loaded and active makes the
// driver's pool slower (the Python end-to-end run saw the driver's own cuMemAllocAsync pair take
// 3.32 us in our process against 2.04 in RMM's), `rmm-rs` against `driver+hw` whether our call
// path adds to it.
//
// Build: nvcc -std=c++20 -O2 -I bindings-cpp/include async_floor.cu -o async_floor -lcuda -ldl
// Run:   [RMM_RS_LIBRARY=...] async_floor [rounds=7] [max MiB...=1 4 64]
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <rmm_rs/rmm_c.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

namespace {
constexpr std::size_t mib = std::size_t{1} << 20;

void check(cudaError_t status, char const* what)
{
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

void check(CUresult status, char const* what)
{
  if (status != CUDA_SUCCESS) {
    char const* name = nullptr;
    cuGetErrorName(status, &name);
    std::fprintf(stderr, "%s: %s\n", what, name != nullptr ? name : "?");
    std::exit(1);
  }
}

// rmm-rs's C ABI, loaded at run time (so that the floors are first measured without it).
struct rmm_rs_abi {
  decltype(&rmm_cuda_async_memory_resource_new) make_cuda_async;
  decltype(&rmm_cuda_memory_resource_new) make_cuda;
  decltype(&rmm_pool_memory_resource_new) make_pool;
  decltype(&rmm_resource_allocate) allocate;
  decltype(&rmm_resource_deallocate) deallocate;
  decltype(&rmm_resource_release) release;

  static rmm_rs_abi load(char const* path)
  {
    void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      std::fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
      std::exit(1);
    }
    auto sym = [&](auto& fn, char const* name) {
      void* f = dlsym(lib, name);
      if (f == nullptr) {
        std::fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
        std::exit(1);
      }
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(f);
    };
    rmm_rs_abi abi{};
    sym(abi.make_cuda_async, "rmm_cuda_async_memory_resource_new");
    sym(abi.make_cuda, "rmm_cuda_memory_resource_new");
    sym(abi.make_pool, "rmm_pool_memory_resource_new");
    sym(abi.allocate, "rmm_resource_allocate");
    sym(abi.deallocate, "rmm_resource_deallocate");
    sym(abi.release, "rmm_resource_release");
    return abi;
  }
};

void check_rmm(int status, rmm_error const& err, char const* what)
{
  if (status != RMM_OK) {
    std::fprintf(stderr, "%s: %s\n", what, err.message);
    std::exit(1);
  }
}

struct allocator {
  char const* name;
  bool driver;
  bool hw_decompress;
  cudaMemPool_t pool{};
  rmm_rs_abi const* rmm_rs = nullptr;  // set: allocate through rmm-rs's resource instead
  rmm_resource resource{};

  void make_pool()
  {
    if (rmm_rs != nullptr) {
      rmm_error err{};
      check_rmm(rmm_rs->make_cuda_async(RMM_SIZE_NONE, RMM_SIZE_NONE, 0, &resource, &err), err,
                "rmm_cuda_async_memory_resource_new");
      return;
    }
    cudaMemPoolProps props{};
    props.allocType     = cudaMemAllocationTypePinned;
    props.handleTypes   = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    check(cudaGetDevice(&props.location.id), "cudaGetDevice");
#if CUDART_VERSION >= 12080
    if (hw_decompress) { props.usage = cudaMemPoolCreateUsageHwDecompress; }
#endif
    check(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate");
    std::uint64_t threshold = std::numeric_limits<std::uint64_t>::max();
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold),
          "cudaMemPoolSetAttribute");
  }

  void* allocate(std::size_t bytes) const
  {
    void* ptr = nullptr;
    if (rmm_rs != nullptr) {
      rmm_error err{};
      check_rmm(rmm_rs->allocate(resource, nullptr, bytes, 256, &ptr, &err), err, "rmm_resource_allocate");
    } else if (driver) {
      CUdeviceptr p{};
      check(cuMemAllocFromPoolAsync(&p, bytes, reinterpret_cast<CUmemoryPool>(pool), nullptr),
            "cuMemAllocFromPoolAsync");
      ptr = reinterpret_cast<void*>(p);
    } else {
      check(cudaMallocFromPoolAsync(&ptr, bytes, pool, nullptr), "cudaMallocFromPoolAsync");
    }
    return ptr;
  }

  void deallocate(void* ptr, std::size_t bytes) const
  {
    if (rmm_rs != nullptr) {
      rmm_error err{};
      check_rmm(rmm_rs->deallocate(resource, nullptr, ptr, bytes, 256, &err), err, "rmm_resource_deallocate");
    } else if (driver) {
      check(cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(ptr), nullptr), "cuMemFreeAsync");
    } else {
      check(cudaFreeAsync(ptr, nullptr), "cudaFreeAsync");
    }
  }

  void destroy()
  {
    if (rmm_rs != nullptr) {
      rmm_rs->release(resource);
    } else {
      check(cudaMemPoolDestroy(pool), "cudaMemPoolDestroy");
    }
  }
};

// RMM's random_allocation_free, with its constants (max_usage 16000 MiB).
void random_allocation_free(allocator const& a, std::size_t max_mib)
{
  constexpr std::size_t num_allocations = 1000;
  constexpr std::size_t max_usage       = 16000 * mib;
  std::default_random_engine generator;
  std::uniform_int_distribution<std::size_t> size_distribution(1, max_mib * mib);
  std::uniform_int_distribution<int> op_distribution(0, 99);
  std::uniform_int_distribution<std::size_t> index_distribution(0, num_allocations - 1);
  struct live {
    void* ptr;
    std::size_t size;
  };
  std::vector<live> allocations;
  std::size_t allocation_count = 0;
  std::size_t allocation_size  = 0;
  for (std::size_t i = 0; i < num_allocations * 2; ++i) {
    bool do_alloc = true;
    auto size     = size_distribution(generator);
    if (!allocations.empty()) {
      int chance = op_distribution(generator);
      do_alloc   = chance < 73 && allocation_count < num_allocations && allocation_size + size < max_usage;
    }
    if (do_alloc) {
      allocations.push_back({a.allocate(size), size});
      ++allocation_count;
      allocation_size += size;
    } else if (!allocations.empty()) {
      std::size_t index = index_distribution(generator) % allocations.size();
      std::swap(allocations[index], allocations.back());
      a.deallocate(allocations.back().ptr, allocations.back().size);
      allocation_size -= allocations.back().size;
      allocations.pop_back();
    }
  }
  for (auto const& l : allocations) { a.deallocate(l.ptr, l.size); }
}
}  // namespace

void measure(std::vector<allocator> const& allocators, std::vector<std::size_t> const& sizes, int rounds,
             char const* phase)
{
  for (std::size_t max_mib : sizes) {
    std::vector<std::vector<double>> ms(allocators.size());
    for (int round = 0; round < rounds + 1; ++round) {  // round 0 warms each pool up
      for (std::size_t k = 0; k < allocators.size(); ++k) {
        auto start = std::chrono::steady_clock::now();
        random_allocation_free(allocators[k], max_mib);
        check(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
        double elapsed =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        if (round > 0) { ms[k].push_back(elapsed); }
      }
    }
    for (std::size_t k = 0; k < allocators.size(); ++k) {
      auto& v = ms[k];
      std::sort(v.begin(), v.end());
      std::printf("%-14s max %4zu MiB  %-11s  median %8.3f ms  range %8.3f-%8.3f\n", phase, max_mib,
                  allocators[k].name, v[v.size() / 2], v.front(), v.back());
    }
  }
}

int main(int argc, char** argv)
{
  int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
  std::vector<std::size_t> sizes;
  for (int i = 2; i < argc; ++i) { sizes.push_back(std::strtoull(argv[i], nullptr, 10)); }
  if (sizes.empty()) { sizes = {1, 4, 64}; }
  check(cudaFree(nullptr), "cudaFree(nullptr)");  // the runtime's context, current for the driver too
  int driver_version = 0;
  check(cudaDriverGetVersion(&driver_version), "cudaDriverGetVersion");
  std::printf("driver %d, runtime %d, %d rounds\n", driver_version, CUDART_VERSION, rounds);
  std::vector<allocator> allocators{{"runtime+hw", false, true},
                                    {"driver+hw", true, true},
                                    {"runtime", false, false},
                                    {"driver", true, false}};
  for (auto& a : allocators) { a.make_pool(); }
  measure(allocators, sizes, rounds, "without rmm-rs");
  if (char const* path = std::getenv("RMM_RS_LIBRARY"); path != nullptr && *path != '\0') {
    static rmm_rs_abi const abi = rmm_rs_abi::load(path);
    // As RANDOM_ALLOCATIONS_BENCH runs pool, binning and arena before cuda_async: rmm-rs's pool over
    // its cuda resource (half the free memory), one churn through it, dropped.
    {
      rmm_error err{};
      rmm_resource cuda{};
      rmm_resource pool{};
      std::size_t free_bytes = 0;
      std::size_t total      = 0;
      check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
      check_rmm(abi.make_cuda(&cuda, &err), err, "rmm_cuda_memory_resource_new");
      check_rmm(abi.make_pool(cuda, free_bytes / 2 / 256 * 256, RMM_SIZE_NONE, &pool, &err), err,
                "rmm_pool_memory_resource_new");
      allocator through_pool{"rmm-rs pool", true, true};
      through_pool.rmm_rs   = &abi;
      through_pool.resource = pool;
      random_allocation_free(through_pool, 64);
      check(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
      abi.release(pool);
      abi.release(cuda);
    }
    allocators.push_back({"rmm-rs", true, true});
    allocators.back().rmm_rs = &abi;
    allocators.back().make_pool();
    measure(allocators, sizes, rounds, "with rmm-rs");
  }
  for (auto& a : allocators) { a.destroy(); }
  return 0;
}
