// One thread's 256-byte allocate + free pairs through our C++ API, on one resource, stream kind after
// stream kind (legacy, ptds, own, foreign by default): a thread that moves from one stream to
// another, as programs do, rather than a fresh thread per kind (rmm_peer_bench.cpp). Until
// 2026-11-26 a thread's front kept the block of its first stream for good, and the pairs on every
// later stream took the slow path (2-3x the time).
//
// usage: stream_switch_pair [PAIRS=2000000] [pool|binning] [KINDS=legacy,ptds,own,foreign]
// Prints min/median/max ns per pair over 7 runs per kind. Built by scripts/bench-stage.sh (g++,
// against our headers and librmm_rs.so) and run by scripts/bench-one-thread.sh.
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/binning_memory_resource.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/cuda_stream.hpp>
#include <cuda_runtime_api.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>
int main(int argc, char** argv) {
  long n = argc > 1 ? std::atol(argv[1]) : 2000000;
  std::string which = argc > 2 ? argv[2] : "pool";
  std::string kinds = argc > 3 ? argv[3] : "legacy,ptds,own,foreign";
  rmm::mr::cuda_memory_resource cuda;
  auto pool = rmm::mr::pool_memory_resource{cuda, std::size_t{1} << 30};
  std::optional<rmm::mr::binning_memory_resource> bin;
  if (which == "binning") bin.emplace(pool, 18, 22);
  rmm::device_async_resource_ref mr = which == "pool" ? rmm::device_async_resource_ref{pool} : rmm::device_async_resource_ref{*bin};
  size_t pos = 0;
  while (pos < kinds.size()) {
    size_t comma = kinds.find(',', pos);
    std::string kind = kinds.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? kinds.size() : comma + 1;
    std::optional<rmm::cuda_stream> owned;
    cudaStream_t raw{};
    if (kind == "own") { owned.emplace(rmm::cuda_stream::flags::non_blocking); raw = owned->value(); }
    if (kind == "ptds") raw = cudaStreamPerThread;
    if (kind == "foreign" && cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking) != cudaSuccess) {
      std::fprintf(stderr, "cudaStreamCreateWithFlags failed\n");
      return 1;
    }
    cuda::stream_ref s{raw};
    std::vector<double> t;
    for (int rep = 0; rep < 7; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      for (long i = 0; i < n; ++i) { void* p = mr.allocate(s, 256, 256); mr.deallocate(s, p, 256, 256); }
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e9 / n);
    }
    std::sort(t.begin(), t.end());
    std::printf("%s %s pair: min %.1f median %.1f max %.1f ns\n", which.c_str(), kind.c_str(), t[0], t[3], t[6]);
    std::fflush(stdout);
    cudaStreamSynchronize(raw);
    if (kind == "foreign") cudaStreamDestroy(raw);
  }
}
