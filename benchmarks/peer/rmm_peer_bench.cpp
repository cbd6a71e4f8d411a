// The allocation workloads of docs/benchmarks.md, written once against RMM 26.x's public C++ API.
//
// Built twice on the GPU machine by nvcc (scripts/bench-gpu-run.sh): against RMM 26.10 from the
// librmm-cu13 wheel, and against rmm-rs's headers and librmm_rs.so, with RMM_BENCH_IMPL naming which.
// Prints one CSV row per configuration (flushed at once, so a crash keeps the rows before it):
//   impl,resource,workload,threads,ops,seconds,ns_per_op,stream
// where an op is one allocate+free pair (pair256, multistream, empty) or one step of the random
// workload, and ns_per_op is wall time over all threads' ops: the inverse of the aggregate
// throughput. --workload, --stream and --threads take comma lists; every configuration gets a
// fresh resource, one untimed warm-up run on one thread, then --repeat timed runs (default 3), of
// which the median is printed; --min-ms N first scales the pair and multistream runs' --iters up
// so that a timed run lasts about N ms (default 0: --iters as given).
//
// Workloads:
//   pair256      allocate + free of 256 bytes on the thread's stream, `--iters` times per thread;
//   random       RMM's RANDOM_ALLOCATIONS_BENCH: 73% chance to allocate (size uniform in [1, max])
//                while under the usage cap and the allocation count, else free a random live
//                allocation;
//   rmmrandom    the same shape as RMM's `random_allocations -n 1000 -m 4` runs it: rounds of 2000
//                steps (1000 allocations of [1 B, 4 MiB], everything freed by the end of a round),
//                about `--iters` steps per thread (whole rounds); an op is one step;
//   multistream  RMM's MULTI_STREAM_ALLOCATIONS shape reduced to the allocator: allocate 256 bytes on
//                one of the thread's two streams and free it on the other, `--iters` times;
//   empty        the same loop as pair256 through a resource that does nothing: the dispatch floor.
// Streams (--stream), as users pass them:
//   own      rmm::cuda_stream (non-blocking), made before the threads start;
//   foreign  cudaStreamCreateWithFlags(cudaStreamNonBlocking), made by each thread when it starts and
//            destroyed when it ends, as CuPy or PyTorch users' streams are;
//   legacy   the legacy default stream (0; multistream frees on cudaStreamLegacy, the same stream);
//   ptds     cudaStreamPerThread.
#include <rmm/cuda_stream.hpp>
#include <rmm/cuda_device.hpp>
#include <rmm/mr/arena_memory_resource.hpp>
#include <rmm/mr/binning_memory_resource.hpp>
#include <rmm/mr/cuda_async_memory_resource.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/resource_ref.hpp>

#include <cuda/memory_resource>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
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
  std::vector<std::string> workloads{"pair256"};
  std::vector<std::string> streams{"own"};
  std::vector<int> threads{1};
  long iters = 100000;
  /// Timed runs per configuration (after one warm-up); the median is printed.
  int repeat = 3;
  /// About how long a timed run of the pair and multistream workloads lasts, in milliseconds: a
  /// calibration run scales `iters` up to it (0: `iters` as given). A 1-thread cell of 60,000 pairs
  /// lasts a few milliseconds and moved by 30-50 % between calls.
  long min_ms = 0;
  long num_allocations = 10000;
  std::size_t max_size = 1 << 20;
  std::size_t max_usage = std::size_t{16000} << 20;
};

any_device_resource make_resource(std::string const& name) {
  if (name == "empty") { return empty_resource{}; }  // asks the device nothing: runs without a GPU
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

long multistream_loop(rmm::device_async_resource_ref mr, cuda::stream_ref alloc, cuda::stream_ref free, long iters) {
  for (long i = 0; i < iters; ++i) {
    void* p = mr.allocate(alloc, 256, kAlign);
    mr.deallocate(free, p, 256, kAlign);
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

long rmm_random_loop(rmm::device_async_resource_ref mr, cuda::stream_ref stream, std::uint64_t seed, long steps) {
  constexpr long allocations = 1000;
  constexpr std::size_t max_size = std::size_t{4} << 20;
  splitmix64 gen{seed};
  struct live_block {
    void* ptr;
    std::size_t size;
  };
  std::vector<live_block> live;
  live.reserve(allocations);
  long done = 0;
  while (done < steps) {
    long made = 0;
    for (long step = 0; step < 2 * allocations; ++step) {
      std::size_t size = 1 + gen.next() % max_size;
      if (live.empty() || (gen.next() % 100 < 73 && made < allocations)) {
        live.push_back({mr.allocate(stream, size, kAlign), size});
        ++made;
      } else {
        std::size_t i = gen.next() % live.size();
        mr.deallocate(stream, live[i].ptr, live[i].size, kAlign);
        live[i] = live.back();
        live.pop_back();
      }
    }
    for (auto const& b : live) { mr.deallocate(stream, b.ptr, b.size, kAlign); }
    live.clear();
    done += 2 * allocations;
  }
  return done;
}

std::vector<std::string> split(std::string const& list) {
  std::vector<std::string> out;
  std::stringstream in{list};
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) { out.push_back(item); }
  }
  return out;
}

options parse(int argc, char** argv) {
  options opt;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    std::string value = argv[i + 1];
    if (key == "--resource") { opt.resource = value; }
    else if (key == "--workload") { opt.workloads = split(value); }
    else if (key == "--stream") { opt.streams = split(value); }
    else if (key == "--threads") {
      opt.threads.clear();
      for (auto const& t : split(value)) { opt.threads.push_back(std::stoi(t)); }
    }
    else if (key == "--iters") { opt.iters = std::stol(value); }
    else if (key == "--repeat") { opt.repeat = std::max(1, std::stoi(value)); }
    else if (key == "--min-ms") { opt.min_ms = std::max(0L, std::stol(value)); }
    else if (key == "--num-allocations") { opt.num_allocations = std::stol(value); }
    else if (key == "--max-size") { opt.max_size = std::stoul(value); }
    else {
      std::fprintf(stderr, "unknown option %s\n", key.c_str());
      std::exit(2);
    }
  }
  return opt;
}

void check(cudaError_t status, char const* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

/// The two streams of one benchmark thread of kind `kind` (foreign ones are made here; the caller
/// destroys them with `release`).
std::pair<cudaStream_t, cudaStream_t> thread_streams(std::string const& kind,
                                                     std::vector<rmm::cuda_stream> const& own,
                                                     int t) {
  if (kind == "own") {
    return {own[2 * static_cast<std::size_t>(t)].value(), own[2 * static_cast<std::size_t>(t) + 1].value()};
  }
  if (kind == "foreign") {
    cudaStream_t a{};
    cudaStream_t b{};
    check(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    return {a, b};
  }
  if (kind == "legacy") { return {cudaStream_t{}, cudaStreamLegacy}; }
  if (kind == "ptds") { return {cudaStreamPerThread, cudaStreamPerThread}; }
  std::fprintf(stderr, "unknown stream kind %s\n", kind.c_str());
  std::exit(2);
}

/// Runs one configuration on a fresh resource and prints its row.
void run_one(options const& opt, std::string const& workload, std::string const& kind, int threads) {
  any_device_resource owner = make_resource(workload == "empty" ? "empty" : opt.resource);
  rmm::device_async_resource_ref mr{owner};
  std::vector<rmm::cuda_stream> own;
  if (kind == "own") {
    for (int t = 0; t < 2 * threads; ++t) { own.emplace_back(rmm::cuda_stream::flags::non_blocking); }
  }
  long iters = workload == "random" ? 0 : std::max(1000L, opt.iters / threads);
  auto work = [&](int t, cudaStream_t a, cudaStream_t b) -> long {
    if (workload == "random") {
      return random_loop(mr, cuda::stream_ref{a}, opt, 1234u + static_cast<std::uint64_t>(t), opt.max_usage / threads);
    }
    if (workload == "multistream") { return multistream_loop(mr, cuda::stream_ref{a}, cuda::stream_ref{b}, iters); }
    if (workload == "rmmrandom") { return rmm_random_loop(mr, cuda::stream_ref{a}, 4321u + static_cast<std::uint64_t>(t), iters); }
    return pair_loop(mr, cuda::stream_ref{a}, iters);
  };

  {  // warm-up on one thread: pools reach their working size, lazy initialisation is done
    auto [a, b] = thread_streams(kind, own, 0);
    work(0, a, b);
    if (kind == "foreign") {
      check(cudaStreamDestroy(a), "cudaStreamDestroy");
      check(cudaStreamDestroy(b), "cudaStreamDestroy");
    }
  }
  // One timed run: every thread on its streams, started together; returns (seconds, operations).
  auto timed = [&]() -> std::pair<double, long> {
    std::barrier start{threads + 1};
    std::barrier end{threads + 1};
    std::vector<long> ops(static_cast<std::size_t>(threads));
    // Each worker times its own work: with every thread pinned to one CPU, a worker may run its
    // whole loop before the main thread wakes from the start barrier, so a clock read there can
    // start after the work is done (cells of under 1 ns per operation).
    using clock = std::chrono::steady_clock;
    std::vector<clock::time_point> began(static_cast<std::size_t>(threads));
    std::vector<clock::time_point> ended(static_cast<std::size_t>(threads));
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        auto [a, b] = thread_streams(kind, own, t);
        start.arrive_and_wait();
        began[static_cast<std::size_t>(t)] = clock::now();
        ops[static_cast<std::size_t>(t)] = work(t, a, b);
        ended[static_cast<std::size_t>(t)] = clock::now();
        end.arrive_and_wait();
        if (kind == "foreign") {  // destroyed at the thread's end, as a user's stream would be
          check(cudaStreamSynchronize(a), "cudaStreamSynchronize");
          check(cudaStreamSynchronize(b), "cudaStreamSynchronize");
          check(cudaStreamDestroy(a), "cudaStreamDestroy");
          check(cudaStreamDestroy(b), "cudaStreamDestroy");
        }
      });
    }
    start.arrive_and_wait();
    end.arrive_and_wait();
    double seconds =
      std::chrono::duration<double>(*std::max_element(ended.begin(), ended.end()) -
                                    *std::min_element(began.begin(), began.end()))
        .count();
    for (auto& w : workers) { w.join(); }
    for (auto& s : own) { s.synchronize(); }
    long total = 0;
    for (long n : ops) { total += n; }
    return {seconds, total};
  };
  // The median of `repeat` runs: a single run of a 1-thread cell moved by 1.5-2x between calls.
  if (workload != "random" && opt.min_ms > 0) {
    double ms = timed().first * 1e3;
    if (ms < static_cast<double>(opt.min_ms)) {
      double scale = std::ceil(static_cast<double>(opt.min_ms) / std::max(ms, 1e-3));
      iters *= std::min(1000L, static_cast<long>(scale));
    }
  }
  std::vector<std::pair<double, long>> runs;
  for (int r = 0; r < opt.repeat; ++r) { runs.push_back(timed()); }
  std::sort(runs.begin(), runs.end());
  auto [seconds, total] = runs[runs.size() / 2];
  std::printf("%s,%s,%s,%d,%ld,%.6f,%.2f,%s\n",
              RMM_BENCH_IMPL,
              workload == "empty" ? "empty" : opt.resource.c_str(),
              workload.c_str(),
              threads,
              total,
              seconds,
              seconds * 1e9 / static_cast<double>(total),
              kind.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  options opt = parse(argc, argv);
  for (auto const& workload : opt.workloads) {
    for (auto const& kind : opt.streams) {
      for (int threads : opt.threads) { run_one(opt, workload, kind, threads); }
    }
  }
  return 0;
}
