// A user's program written against RMM 26.x's C++ API, built against the installed rmm package:
// a pool (over CUDA memory, or over system memory in host mode) under a statistics adaptor becomes the
// current device resource; code that only sees a device_async_resource_ref allocates through it.
#include <rmm/cuda_stream_view.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>
#include <rmm/mr/system_memory_resource.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <utility>

namespace {

// Library code in RMM's style: it takes whatever resource the caller hands it.
void allocate_all(rmm::device_async_resource_ref mr,
                   rmm::cuda_stream_view stream,
                   std::array<std::size_t, 3> const& sizes,
                   std::array<void*, 3>& out)
{
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    out[i] = mr.allocate(stream, sizes[i], rmm::CUDA_ALLOCATION_ALIGNMENT);
  }
}

void print(char const* when, rmm::mr::statistics_resource_adaptor const& stats)
{
  auto const bytes = stats.get_bytes_counter();
  auto const count = stats.get_allocations_counter();
  std::printf("%-22s bytes: value %lld peak %lld total %lld | allocations: value %lld peak %lld total %lld\n", when,
              static_cast<long long>(bytes.value), static_cast<long long>(bytes.peak),
              static_cast<long long>(bytes.total), static_cast<long long>(count.value),
              static_cast<long long>(count.peak), static_cast<long long>(count.total));
}

template <class Upstream>
int run(Upstream upstream, char const* upstream_name)
{
  rmm::mr::pool_memory_resource pool{upstream, std::size_t{1} << 20, std::size_t{16} << 20};
  rmm::mr::statistics_resource_adaptor stats{pool};
  auto previous = rmm::mr::set_current_device_resource(stats);
  std::printf("pool over %s, %zu bytes held at first\n", upstream_name, pool.pool_size());

  rmm::cuda_stream_view const stream = rmm::cuda_stream_default;
  std::array<std::size_t, 3> const sizes{1000, 4096, std::size_t{2} << 20};
  std::array<void*, 3> ptrs{};
  allocate_all(rmm::mr::get_current_device_resource_ref(), stream, sizes, ptrs);
  print("after 3 allocations:", stats);

  auto mr = rmm::mr::get_current_device_resource_ref();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    mr.deallocate(stream, ptrs[i], sizes[i], rmm::CUDA_ALLOCATION_ALIGNMENT);
  }
  print("after deallocating:", stats);
  std::printf("pool now holds %zu bytes\n", pool.pool_size());

  rmm::mr::set_current_device_resource(std::move(previous));

  auto const bytes = stats.get_bytes_counter();
  auto const sum   = static_cast<std::int64_t>(sizes[0] + sizes[1] + sizes[2]);
  if (bytes.value != 0 || bytes.peak != sum || stats.get_allocations_counter().total != 3) {
    std::fprintf(stderr, "unexpected statistics\n");
    return 1;
  }
  return 0;
}

}  // namespace

int main()
{
  try {
    // Without a GPU librmm runs in host mode, where only host memory can be the device resource.
    if (rmm_is_host_mode() != 0) { return run(rmm::mr::system_memory_resource{}, "system memory (host mode)"); }
    return run(rmm::mr::cuda_memory_resource{}, "cuda_memory_resource");
  } catch (std::exception const& e) {
    std::fprintf(stderr, "example failed: %s\n", e.what());
    return 1;
  }
}
