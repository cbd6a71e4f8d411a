// <rmm_rs/resource.hpp> in a C++ program built against RAPIDS RMM 26.10 (its headers, its CCCL, its
// librmm.so), in the same translation unit as RMM's own headers: our resources as
// rmm::device_async_resource_ref and cuda::mr::any_resource<device_accessible>, RMM's adaptors and
// device_buffer over them, RMM's resources as their upstream, and RMM's exception types. The GPU
// tests skip themselves in host mode.
#include "check.hpp"

#include <rmm/device_buffer.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>
#include <rmm/resource_ref.hpp>

#include <rmm_rs/resource.hpp>

#include <cuda/memory_resource>
#include <cuda/stream>

#include <cstring>
#include <thread>
#include <vector>

namespace {

using any_device_resource = cuda::mr::any_resource<cuda::mr::device_accessible>;

cuda::stream_ref default_stream() { return cuda::stream_ref{cudaStream_t{}}; }

void require_gpu()
{
  if (rmm_is_host_mode() != 0) { SKIP("needs a CUDA GPU"); }
}

rmm_rs::resource system_memory()
{
  return rmm_rs::make([](rmm_resource* out, rmm_error* err) { return rmm_system_memory_resource_new(out, err); });
}

rmm_rs::resource pool_over(rmm_resource upstream, std::uint64_t initial, std::uint64_t maximum = RMM_SIZE_NONE)
{
  return rmm_rs::make([&](rmm_resource* out, rmm_error* err) {
    return rmm_pool_memory_resource_new(upstream, initial, maximum, out, err);
  });
}

rmm_rs::resource statistics_over(rmm_resource upstream)
{
  return rmm_rs::make(
    [&](rmm_resource* out, rmm_error* err) { return rmm_statistics_resource_adaptor_new(upstream, out, err); });
}

rmm_counter bytes_of(rmm_rs::resource const& stats)
{
  rmm_counter c{};
  rmm_statistics_resource_adaptor_get_bytes_counter(stats.handle(), &c, nullptr);
  return c;
}

bool upstream_is_foreign(rmm_rs::resource const& adaptor)
{
  int kind = 0;
  rmm_resource up{};
  if (rmm_resource_kind(adaptor.handle(), &kind, &up, nullptr) != RMM_OK) { return false; }
  bool foreign = rmm_rs::is_foreign(up);
  rmm_resource_release(up);
  return foreign;
}

}  // namespace

TEST(our_pool_is_an_rmm_device_async_resource_ref)
{
  auto pool = pool_over(system_memory().handle(), 1u << 20);
  rmm::device_async_resource_ref ref{pool};
  void* p = ref.allocate(default_stream(), 2000, 256);
  CHECK(p != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(p) % 256 == 0);
  if (rmm_is_host_mode() != 0) { std::memset(p, 0x5a, 2000); }
  ref.deallocate(default_stream(), p, 2000, 256);
  void* q = ref.allocate_sync(100, 256);
  ref.deallocate_sync(q, 100, 256);
  CHECK(ref == rmm::device_async_resource_ref{pool});
}

TEST(copies_share_the_resource_as_rmm_resources_do)
{
  auto stats = statistics_over(pool_over(system_memory().handle(), 1u << 20).handle());
  any_device_resource owning{stats};  // a copy: one more reference to the same handle
  rmm_rs::resource copy = stats;
  CHECK(copy == stats);
  void* p = owning.allocate(default_stream(), 4096, 256);
  CHECK(bytes_of(stats).value == 4096);  // counted by the one adaptor all copies share
  copy.deallocate(default_stream(), p, 4096, 256);
  CHECK(bytes_of(stats).value == 0);
  CHECK(cuda::mr::resource_cast<rmm_rs::resource>(&owning) != nullptr);
}

TEST(rmm_statistics_adaptor_over_our_pool)
{
  auto pool = pool_over(system_memory().handle(), 1u << 20);
  rmm::mr::statistics_resource_adaptor rmm_stats{pool};
  rmm::device_async_resource_ref ref{rmm_stats};
  std::vector<void*> ptrs;
  for (std::size_t n = 1000; n <= 2500; n += 500) {
    ptrs.push_back(ref.allocate(default_stream(), n, 256));
  }
  CHECK(rmm_stats.get_allocations_counter().value == 4);
  CHECK(rmm_stats.get_bytes_counter().value == 1000 + 1500 + 2000 + 2500);
  std::size_t n = 1000;
  for (void* p : ptrs) {
    ref.deallocate(default_stream(), p, n, 256);
    n += 500;
  }
  CHECK(rmm_stats.get_bytes_counter().value == 0);
}

TEST(rmm_device_buffer_from_our_pool)
{
  auto stats = statistics_over(pool_over(system_memory().handle(), 1u << 20).handle());
  {
    rmm::device_buffer buf{1u << 16, default_stream(), stats};
    CHECK(buf.size() == (1u << 16));
    CHECK(buf.data() != nullptr);
    CHECK(bytes_of(stats).value == (1 << 16));
  }
  CHECK(bytes_of(stats).value == 0);
  CHECK(bytes_of(stats).total == (1 << 16));
}

TEST(an_rmm_resource_upstream_of_ours_goes_through_rmms_ref)
{
  // RMM's statistics adaptor over our system memory, under our statistics adaptor.
  rmm::mr::statistics_resource_adaptor rmm_stats{system_memory()};
  rmm_resource up = rmm_rs::to_handle(any_device_resource{rmm_stats});
  CHECK(rmm_rs::is_foreign(up));
  auto ours = statistics_over(up);
  rmm_resource_release(up);  // our adaptor holds its own reference
  CHECK(upstream_is_foreign(ours));
  void* p = ours.allocate(default_stream(), 3000);
  CHECK(rmm_stats.get_bytes_counter().value == 3000);
  CHECK(bytes_of(ours).value == 3000);
  ours.deallocate(default_stream(), p, 3000);
  CHECK(rmm_stats.get_bytes_counter().value == 0);
}

TEST(an_upstream_of_ours_in_an_any_resource_is_passed_as_our_own_handle)
{
  auto pool = pool_over(system_memory().handle(), 1u << 20);
  rmm_resource up = rmm_rs::to_handle(any_device_resource{pool});
  CHECK(!rmm_rs::is_foreign(up));
  CHECK(up.self == pool.handle().self);
  auto stats = statistics_over(up);
  rmm_resource_release(up);
  CHECK(!upstream_is_foreign(stats));
}

TEST(failures_are_rmms_exception_types)
{
  auto small = pool_over(system_memory().handle(), 1u << 20, 1u << 20);
  rmm::device_async_resource_ref ref{small};
  CHECK_THROWS(rmm::out_of_memory, ref.allocate(default_stream(), 64u << 20, 256));
  CHECK_THROWS(rmm::out_of_memory, (rmm::device_buffer{64u << 20, default_stream(), small}));
  CHECK_THROWS(rmm::logic_error, rmm_rs::make([](rmm_resource* out, rmm_error* err) {
                 return rmm_pool_memory_resource_new(rmm_resource{nullptr, nullptr}, 0, 0, out, err);
               }));
  if (rmm_is_host_mode() != 0) {
    // RMM's own CUDA resources throw rmm::bad_alloc when the driver is missing; so do ours.
    auto cuda = rmm_rs::make([](rmm_resource* out, rmm_error* err) { return rmm_cuda_memory_resource_new(out, err); });
    CHECK_THROWS(rmm::bad_alloc, cuda.allocate(default_stream(), 256));
  }
}

TEST(a_foreign_upstream_may_be_released_on_another_thread)
{
  rmm::mr::statistics_resource_adaptor rmm_stats{system_memory()};
  rmm_resource up = rmm_rs::to_handle(any_device_resource{rmm_stats});
  auto ours = statistics_over(up);
  rmm_resource_release(up);
  std::thread([moved = std::move(ours)]() mutable {
    void* p = moved.allocate(default_stream(), 100);
    moved.deallocate(default_stream(), p, 100);
    rmm_rs::resource gone = std::move(moved);  // the last reference goes on this thread
  }).join();
  CHECK(rmm_stats.get_allocations_counter().total == 1);
  CHECK(rmm_stats.get_allocations_counter().value == 0);
}

TEST(gpu_our_pool_as_rmms_current_device_resource)
{
  require_gpu();
  auto cuda  = rmm_rs::make([](rmm_resource* out, rmm_error* err) { return rmm_cuda_memory_resource_new(out, err); });
  auto stats = statistics_over(pool_over(cuda.handle(), 1u << 26).handle());
  auto previous = rmm::mr::set_current_device_resource(stats);
  {
    rmm::device_buffer buf{1u << 20, default_stream()};  // RMM's default: the current device resource
    CHECK(bytes_of(stats).value == (1 << 20));
    rmm::device_buffer copy{buf, default_stream()};
    CHECK(bytes_of(stats).value == (2 << 20));
    CHECK(cudaStreamSynchronize(cudaStream_t{}) == cudaSuccess);
  }
  CHECK(bytes_of(stats).value == 0);
  rmm::mr::set_current_device_resource(std::move(previous));
}

TEST(gpu_rmm_pool_over_our_cuda_resource_and_our_pool_over_rmms)
{
  require_gpu();
  auto cuda = rmm_rs::make([](rmm_resource* out, rmm_error* err) { return rmm_cuda_memory_resource_new(out, err); });
  rmm::mr::pool_memory_resource rmm_pool{cuda, 1u << 24};
  void* p = rmm::device_async_resource_ref{rmm_pool}.allocate(default_stream(), 1000, 256);
  rmm::device_async_resource_ref{rmm_pool}.deallocate(default_stream(), p, 1000, 256);

  rmm::mr::cuda_memory_resource rmm_cuda;
  rmm_resource up = rmm_rs::to_handle(any_device_resource{rmm_cuda});
  auto ours = pool_over(up, 1u << 24);
  rmm_resource_release(up);
  rmm::device_buffer buf{1u << 20, default_stream(), ours};
  CHECK(buf.data() != nullptr);
}

int main() { return beside_test::run_all(); }
