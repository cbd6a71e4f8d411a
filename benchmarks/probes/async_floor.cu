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
// Build: nvcc -std=c++20 -O2 async_floor.cu -o async_floor -lcuda
// Run:   async_floor [rounds=7] [max MiB...=1 4 64]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
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

struct allocator {
  char const* name;
  bool driver;
  bool hw_decompress;
  cudaMemPool_t pool{};

  void make_pool()
  {
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
    if (driver) {
      CUdeviceptr p{};
      check(cuMemAllocFromPoolAsync(&p, bytes, reinterpret_cast<CUmemoryPool>(pool), nullptr),
            "cuMemAllocFromPoolAsync");
      ptr = reinterpret_cast<void*>(p);
    } else {
      check(cudaMallocFromPoolAsync(&ptr, bytes, pool, nullptr), "cudaMallocFromPoolAsync");
    }
    return ptr;
  }

  void deallocate(void* ptr) const
  {
    if (driver) {
      check(cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(ptr), nullptr), "cuMemFreeAsync");
    } else {
      check(cudaFreeAsync(ptr, nullptr), "cudaFreeAsync");
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
      a.deallocate(allocations.back().ptr);
      allocation_size -= allocations.back().size;
      allocations.pop_back();
    }
  }
  for (auto const& l : allocations) { a.deallocate(l.ptr); }
}
}  // namespace

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
      std::printf("max %4zu MiB  %-11s  median %8.3f ms  range %8.3f-%8.3f\n", max_mib, allocators[k].name,
                  v[v.size() / 2], v.front(), v.back());
    }
  }
  for (auto& a : allocators) { check(cudaMemPoolDestroy(a.pool), "cudaMemPoolDestroy"); }
  return 0;
}
