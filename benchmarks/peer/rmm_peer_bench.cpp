// The allocation workloads of docs/benchmarks.md, written once against RMM 26.x's public C++ API.
//
// Built twice on the GPU machine by nvcc (scripts/bench-gpu-run.sh): against RMM 26.10 from the
// librmm-cu13 wheel, and against rmm-rs's headers and librmm.so, with RMM_BENCH_IMPL naming which.
// Prints one CSV row per run:
//   impl,resource,workload,threads,ops,seconds,ns_per_op
// where an op is one allocate+free pair (pair256, empty) or one step of the random workload, and
// ns_per_op is wall time over all threads' ops: the inverse of the aggregate throughput.
//
// Workloads (each thread has its own stream):
//   pair256  allocate + free of 256 bytes, `--iters` times per thread;
//   random   RMM's RANDOM_ALLOCATIONS_BENCH: 73% chance to allocate (size uniform in [1, max]) while
//            under the usage cap and the allocation count, else free a random live allocation;
//   empty    the same loop as pair256 through a resource that does nothing: the dispatch floor.
#include <rmm/cuda_stream.hpp>
#include <rmm/cuda_device.hpp>
#include <rmm/mr/arena_memory_resource.hpp>
#include <rmm/mr/binning_memory_resource.hpp>
#include <rmm/mr/cuda_async_memory_resource.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/resource_ref.hpp>

#include <cuda/memory_resource>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#ifndef RMM_BENCH_IMPL
#define RMM_BENCH_IMPL "rmm-26.10"
#endif

namespace {

using any_device_resource = cuda::mr::any_resource<cuda::mr::device_accessible>;
constexpr std::size_t kAlign = rmm::CUDA_ALLOCATION_ALIGNMENT;

/// A resource that hands out one static address and frees nothing: measures dispatch alone.
struct empty_resource {
  static inline char slot[256];
  void* allocate(cuda::stream_ref, std::size_t, std::size_t = 256) { return slot; }
  void deallocate(cuda::stream_ref, void*, std::size_t, std::size_t = 256) noexcept {}
  void* allocate_sync(std::size_t, std::size_t = 256) { return slot; }
  void deallocate_sync(void*, std::size_t, std::size_t = 256) noexcept {}
  bool operator==(empty_resource const&) const { return true; }
  bool operator!=(empty_resource const&) const { return false; }
  friend void get_property(empty_resource const&, cuda::mr::device_accessible) noexcept {}
};

/// splitmix64: the generator the Rust benchmark uses too, so both replay the same workload.
struct splitmix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1).
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

struct options {
  std::string resource = "pool";
  std::string workload = "pair256";
  int threads = 1;
  long iters = 100000;
  long num_allocations = 10000;
  std::size_t max_size = 1 << 20;
  std::size_t max_usage = std::size_t{16000} << 20;
};

any_device_resource make_resource(std::string const& name) {
  auto [free, total] = rmm::available_device_memory();
  auto half = rmm::align_down(free / 2, rmm::CUDA_ALLOCATION_ALIGNMENT);
  if (name == "cuda") { return rmm::mr::cuda_memory_resource{}; }
  if (name == "cuda_async") { return rmm::mr::cuda_async_memory_resource{}; }
  if (name == "pool") { return rmm::mr::pool_memory_resource{rmm::mr::cuda_memory_resource{}, half}; }
  if (name == "arena") {
    return rmm::mr::arena_memory_resource{rmm::mr::cuda_memory_resource{}, free - (std::size_t{64} << 20)};
  }
  if (name == "binning") {
    auto pool = rmm::mr::pool_memory_resource{rmm::mr::cuda_memory_resource{}, half};
    return rmm::mr::binning_memory_resource{pool, 18, 22};
  }
  if (name == "empty") { return empty_resource{}; }
  std::fprintf(stderr, "unknown resource %s\n", name.c_str());
  std::exit(2);
}

long pair_loop(rmm::device_async_resource_ref mr, cuda::stream_ref stream, long iters) {
  for (long i = 0; i < iters; ++i) {
    void* p = mr.allocate(stream, 256, kAlign);
    mr.deallocate(stream, p, 256, kAlign);
  }
  return iters;
}

long random_loop(rmm::device_async_resource_ref mr,
                 cuda::stream_ref stream,
                 options const& opt,
                 std::uint64_t seed,
                 std::size_t usage_cap) {
  splitmix64 gen{seed};
  struct live_block {
    void* ptr;
    std::size_t size;
  };
  std::vector<live_block> live;
  live.reserve(static_cast<std::size_t>(opt.num_allocations));
  std::size_t usage = 0;
  long allocations = 0;
  long ops = 0;
  for (long step = 0; step < 2 * opt.num_allocations; ++step) {
    std::size_t size = 1 + gen.next() % opt.max_size;
    bool can_allocate = allocations < opt.num_allocations && usage + size <= usage_cap;
    bool heads = gen.unit() < 0.73;
    if (can_allocate && (live.empty() || heads)) {
      live.push_back({mr.allocate(stream, size, kAlign), size});
      usage += size;
      ++allocations;
    } else if (!live.empty()) {
      std::size_t i = gen.next() % live.size();
      mr.deallocate(stream, live[i].ptr, live[i].size, kAlign);
      usage -= live[i].size;
      live[i] = live.back();
      live.pop_back();
    }
    ++ops;
  }
  for (auto const& b : live) { mr.deallocate(stream, b.ptr, b.size, kAlign); }
  return ops + static_cast<long>(live.size());
}

options parse(int argc, char** argv) {
  options opt;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    std::string value = argv[i + 1];
    if (key == "--resource") { opt.resource = value; }
    else if (key == "--workload") { opt.workload = value; }
    else if (key == "--threads") { opt.threads = std::stoi(value); }
    else if (key == "--iters") { opt.iters = std::stol(value); }
    else if (key == "--num-allocations") { opt.num_allocations = std::stol(value); }
    else if (key == "--max-size") { opt.max_size = std::stoul(value); }
    else {
      std::fprintf(stderr, "unknown option %s\n", key.c_str());
      std::exit(2);
    }
  }
  return opt;
}

}  // namespace

int main(int argc, char** argv) {
  options opt = parse(argc, argv);
  any_device_resource owner = make_resource(opt.workload == "empty" ? "empty" : opt.resource);
  rmm::device_async_resource_ref mr{owner};
  std::vector<rmm::cuda_stream> streams;
  for (int t = 0; t < opt.threads; ++t) { streams.emplace_back(rmm::cuda_stream::flags::non_blocking); }

  auto run = [&](int t) -> long {
    cuda::stream_ref stream{streams[static_cast<std::size_t>(t)].value()};
    if (opt.workload == "random") {
      return random_loop(mr, stream, opt, 1234u + static_cast<std::uint64_t>(t), opt.max_usage / opt.threads);
    }
    return pair_loop(mr, stream, opt.iters);
  };

  run(0);  // warm-up: pools reach their working size, lazy initialisation is done
  std::barrier start{opt.threads + 1};
  std::vector<long> ops(static_cast<std::size_t>(opt.threads));
  std::vector<std::thread> workers;
  for (int t = 0; t < opt.threads; ++t) {
    workers.emplace_back([&, t] {
      start.arrive_and_wait();
      ops[static_cast<std::size_t>(t)] = run(t);
    });
  }
  auto begin = std::chrono::steady_clock::now();
  start.arrive_and_wait();
  for (auto& w : workers) { w.join(); }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  for (auto& s : streams) { s.synchronize(); }
  long total = 0;
  for (long n : ops) { total += n; }
  std::printf("%s,%s,%s,%d,%ld,%.6f,%.2f\n",
              RMM_BENCH_IMPL,
              opt.workload == "empty" ? "empty" : opt.resource.c_str(),
              opt.workload.c_str(),
              opt.threads,
              total,
              seconds,
              seconds * 1e9 / static_cast<double>(total));
  return 0;
}
