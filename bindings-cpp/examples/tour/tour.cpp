// The C++ part of the tour's shared stop, written against RMM 26.x's C++ API only (<rmm/...>).
//
// Python loads librmm_rs.so first, then this library (ctypes), then the Rust part. C++ makes a pool
// (over CUDA memory, or over system memory in host mode) under a statistics adaptor and sets it as the
// current device resource of the process's one registry, which librmm owns; Rust and Python then
// allocate from "the current device resource" and the counters printed here include their allocations.
//
// C interface: every function returns 0 on success; a C++ exception is caught at the boundary,
// printed, and returns non-zero (nothing unwinds into C or Python).
#include <rmm/cuda_stream_view.hpp>
#include <rmm/device_buffer.hpp>
#include <rmm/device_uvector.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>
#include <rmm/mr/system_memory_resource.hpp>
#include <rmm/rmm_c.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#define RMM_TOUR_API extern "C" __attribute__((visibility("default")))

namespace {

constexpr std::size_t initial_pool = std::size_t{1} << 20;
constexpr std::size_t maximum_pool = std::size_t{64} << 20;

// What the C++ part made, between rmm_tour_cpp_setup and rmm_tour_cpp_teardown.
struct state {
  rmm::mr::pool_memory_resource pool;
  rmm::mr::statistics_resource_adaptor stats;
  std::optional<rmm::mr::device_any_resource> previous;  // the current resource before setup
};
std::optional<state> tour;

// The containers of rmm_tour_cpp_allocate, until rmm_tour_cpp_free.
std::vector<rmm::device_buffer> buffers;
std::optional<rmm::device_uvector<int>> ints;

// Runs one entry point: exceptions become a printed message and status 1. stdout is flushed every
// time, so that this library's lines interleave in order with Python's and Rust's on a pipe.
template <class F>
int guarded(char const* what, F&& f)
{
  int status = 1;
  try {
    f();
    status = 0;
  } catch (std::exception const& e) {
    std::printf("  [C++] %s failed: %s\n", what, e.what());
  } catch (...) {
    std::printf("  [C++] %s failed: unknown exception\n", what);
  }
  std::fflush(stdout);
  return status;
}

state& current_state(char const* what)
{
  if (!tour) { throw std::logic_error(std::string{what} + ": call rmm_tour_cpp_setup first"); }
  return *tour;
}

template <class Upstream>
state make_state(Upstream upstream)
{
  rmm::mr::pool_memory_resource pool{upstream, initial_pool, maximum_pool};
  rmm::mr::statistics_resource_adaptor stats{pool};
  return state{pool, stats, std::nullopt};
}

}  // namespace

/// Makes pool + statistics adaptor and sets it as the current device resource (the previous one is
/// kept for rmm_tour_cpp_teardown).
RMM_TOUR_API int rmm_tour_cpp_setup(void)
{
  return guarded("setup", [] {
    if (tour) { throw std::logic_error("setup: already set up"); }
    bool const host = rmm_is_host_mode() != 0;
    // Only host memory can be the device resource in host mode (no GPU).
    tour.emplace(host ? make_state(rmm::mr::system_memory_resource{}) : make_state(rmm::mr::cuda_memory_resource{}));
    tour->previous = rmm::mr::set_current_device_resource(tour->stats);
    std::printf("  [C++] pool_memory_resource over %s (%zu bytes held, at most %zu), under a "
                "statistics_resource_adaptor: set as the current device resource\n",
                host ? "system_memory_resource (host mode)" : "cuda_memory_resource", tour->pool.pool_size(),
                maximum_pool);
  });
}

/// Allocates a device_buffer and a device_uvector<int> from the current device resource.
RMM_TOUR_API int rmm_tour_cpp_allocate(void)
{
  return guarded("allocate", [] {
    rmm::cuda_stream_view const stream = rmm::cuda_stream_default;
    buffers.emplace_back(std::size_t{1000}, stream);  // the current device resource, as in RMM
    buffers.emplace_back(std::size_t{256} << 10, stream);
    ints.emplace(std::size_t{4096}, stream);
    ints->set_element(0, 42, stream);
    int const back = ints->element(0, stream);
    for (auto const& b : buffers) {
      std::printf("  [C++] rmm::device_buffer of %zu bytes at %p\n", b.size(), b.data());
    }
    std::printf("  [C++] rmm::device_uvector<int> of %zu elements (%zu bytes) at %p, element 0 = %d\n", ints->size(),
                ints->size() * sizeof(int), static_cast<void*>(ints->data()), back);
  });
}

/// Frees what rmm_tour_cpp_allocate made.
RMM_TOUR_API int rmm_tour_cpp_free(void)
{
  return guarded("free", [] {
    std::size_t bytes = ints ? ints->size() * sizeof(int) : 0;
    for (auto const& b : buffers) {
      bytes += b.size();
    }
    buffers.clear();
    ints.reset();
    std::printf("  [C++] freed its device_buffers and device_uvector (%zu bytes)\n", bytes);
  });
}

/// The counters of the statistics adaptor: out[0..6] = bytes value, peak, total, allocations value,
/// peak, total.
RMM_TOUR_API int rmm_tour_cpp_statistics(std::int64_t* out)
{
  return guarded("statistics", [out] {
    auto& s     = current_state("statistics");
    auto bytes  = s.stats.get_bytes_counter();
    auto counts = s.stats.get_allocations_counter();
    std::int64_t const values[6]{bytes.value, bytes.peak, bytes.total, counts.value, counts.peak, counts.total};
    for (int i = 0; i < 6; ++i) {
      out[i] = values[i];
    }
  });
}

/// Prints the statistics adaptor's counters and the pool's size.
RMM_TOUR_API int rmm_tour_cpp_print_statistics(char const* when)
{
  return guarded("print_statistics", [when] {
    auto& s     = current_state("print_statistics");
    auto bytes  = s.stats.get_bytes_counter();
    auto counts = s.stats.get_allocations_counter();
    std::printf("  [C++] statistics_resource_adaptor %s: bytes %lld live, %lld peak, %lld total; "
                "allocations %lld live, %lld peak, %lld total; pool holds %zu bytes\n",
                when, static_cast<long long>(bytes.value), static_cast<long long>(bytes.peak),
                static_cast<long long>(bytes.total), static_cast<long long>(counts.value),
                static_cast<long long>(counts.peak), static_cast<long long>(counts.total), s.pool.pool_size());
  });
}

/// Puts the previous current device resource back and drops the pool and the adaptor (they live on
/// while anyone else still holds them).
RMM_TOUR_API int rmm_tour_cpp_teardown(void)
{
  return guarded("teardown", [] {
    auto& s = current_state("teardown");
    if (s.previous) { rmm::mr::set_current_device_resource(std::move(*s.previous)); }
    tour.reset();
    std::printf("  [C++] previous current device resource restored\n");
  });
}
