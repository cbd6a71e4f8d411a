// C++ in the shape of libcudf's: functions that take an rmm::device_async_resource_ref (what
// cuDF's Cython passes as `mr.get_mr()`) and a stream, and know nothing of which resource is behind
// the ref. Built against RAPIDS RMM 26.10's headers only; used by cudf_style.pyx.
#pragma once

#include <rmm/device_buffer.hpp>
#include <rmm/resource_ref.hpp>

#include <cuda/stream>
#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace cudf_style {

/** A libcudf-style factory: a new device_buffer of @p size bytes from @p mr, ordered on @p stream. */
inline std::unique_ptr<rmm::device_buffer> make_buffer(std::size_t size,
                                                       cuda::stream_ref stream,
                                                       rmm::device_async_resource_ref mr)
{
  return std::make_unique<rmm::device_buffer>(size, stream, mr);
}

/** The sizes of the temporaries: 1, 1.5, 2 and 2.5 KiB, as a libcudf kernel's scratch space. */
inline constexpr std::array<std::size_t, 4> temporary_sizes{1024, 1536, 2048, 2560};

/**
 * A libcudf-style function body: @p pairs small temporaries allocated and freed on @p mr on the
 * default stream, one after another. Returns the wall time per allocate/free pair in nanoseconds.
 */
inline double temporaries_ns_per_pair(rmm::device_async_resource_ref mr, std::size_t pairs)
{
  cuda::stream_ref stream{cudaStream_t{}};
  for (std::size_t i = 0; i < 1000; ++i) {  // warm-up: the pool's first blocks, caches
    auto size = temporary_sizes[i % temporary_sizes.size()];
    mr.deallocate(stream, mr.allocate(stream, size, 256), size, 256);
  }
  auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < pairs; ++i) {
    auto size = temporary_sizes[i % temporary_sizes.size()];
    void* p   = mr.allocate(stream, size, 256);
    mr.deallocate(stream, p, size, 256);
  }
  auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(stop - start).count() / static_cast<double>(pairs);
}

/**
 * @p threads threads at once, each doing @p pairs_per_thread allocate/free pairs of 256 bytes on
 * @p mr, each on a non-blocking stream it created (the default stream with @p own_streams false).
 * Returns the wall time over all threads' pairs in nanoseconds per pair (the inverse of the
 * aggregate throughput), as docs/benchmarks.md measures the pool pair.
 */
inline double threaded_pairs_ns_per_pair(rmm::device_async_resource_ref mr,
                                         int threads,
                                         std::size_t pairs_per_thread,
                                         bool own_streams)
{
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  std::chrono::steady_clock::time_point start{};
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      cudaStream_t s{};
      if (own_streams && cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        failures.fetch_add(1);
        s = cudaStream_t{};
      }
      cuda::stream_ref stream{s};
      try {
        for (int i = 0; i < 100; ++i) { mr.deallocate(stream, mr.allocate(stream, 256, 256), 256, 256); }
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) { std::this_thread::yield(); }
        for (std::size_t i = 0; i < pairs_per_thread; ++i) {
          void* p = mr.allocate(stream, 256, 256);
          mr.deallocate(stream, p, 256, 256);
        }
      } catch (...) {
        failures.fetch_add(1);
        ready.fetch_add(1);
      }
      if (own_streams && s != cudaStream_t{}) {
        cudaStreamSynchronize(s);
        cudaStreamDestroy(s);
      }
    });
  }
  while (ready.load() < threads) { std::this_thread::yield(); }
  start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  for (auto& w : workers) { w.join(); }
  auto stop = std::chrono::steady_clock::now();
  if (failures.load() != 0) { throw std::runtime_error{"threaded_pairs: a thread failed"}; }
  return std::chrono::duration<double, std::nano>(stop - start).count() /
         static_cast<double>(pairs_per_thread * static_cast<std::size_t>(threads));
}

}  // namespace cudf_style
