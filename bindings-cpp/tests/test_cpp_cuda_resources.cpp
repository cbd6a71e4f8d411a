// GoogleTest suite of the C++ value types of librmm's CUDA resources (managed, pinned host,
// cuda_async, sam_headroom). In host mode (no GPU) they are checked to fail as RMM's do, with
// rmm::cuda_error; the tests that allocate skip themselves.

#include <rmm/cuda_stream_view.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/cuda_async_memory_resource.hpp>
#include <rmm/mr/managed_memory_resource.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/mr/pinned_host_memory_resource.hpp>
#include <rmm/mr/sam_headroom_memory_resource.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>

namespace {

using device_any = cuda::mr::any_resource<cuda::mr::device_accessible>;
using host_device_any = cuda::mr::any_resource<cuda::mr::device_accessible, cuda::mr::host_accessible>;
using rmm::mr::cuda_async_memory_resource;
using rmm::mr::managed_memory_resource;
using rmm::mr::pinned_host_memory_resource;
using rmm::mr::sam_headroom_memory_resource;

template <class R>
constexpr bool value_type_v = std::is_copy_constructible_v<R> && std::is_copy_assignable_v<R> &&
                              cuda::mr::resource_with<R, cuda::mr::device_accessible> &&
                              std::is_constructible_v<rmm::device_async_resource_ref, R&> &&
                              std::is_constructible_v<device_any, R>;
static_assert(value_type_v<managed_memory_resource>);
static_assert(value_type_v<pinned_host_memory_resource>);
static_assert(value_type_v<cuda_async_memory_resource>);
static_assert(value_type_v<sam_headroom_memory_resource>);
static_assert(cuda::mr::resource_with<managed_memory_resource, cuda::mr::host_accessible>);
static_assert(cuda::mr::resource_with<pinned_host_memory_resource, cuda::mr::host_accessible>);
static_assert(std::is_constructible_v<host_device_any, pinned_host_memory_resource>);
static_assert(!cuda::mr::resource_with<cuda_async_memory_resource, cuda::mr::host_accessible>);
static_assert(std::is_same_v<std::underlying_type_t<cuda_async_memory_resource::allocation_handle_type>, std::int32_t>);
static_assert(static_cast<int>(cuda_async_memory_resource::allocation_handle_type::fabric) == 8);
// As in RMM: the one-argument constructors are explicit.
static_assert(!std::is_convertible_v<std::size_t, sam_headroom_memory_resource>);

bool host_mode() { return rmm_is_host_mode() != 0; }

/// Allocates, writes from the host when @p host, and frees.
void round_trip(rmm::device_async_resource_ref ref, std::size_t bytes, bool host)
{
  void* p = ref.allocate(rmm::cuda_stream_default, bytes, 256);
  ASSERT_NE(p, nullptr);
  if (host) { std::memset(p, 0x5a, bytes); }
  ref.deallocate(rmm::cuda_stream_default, p, bytes, 256);
}

}  // namespace

TEST(ManagedMemoryResource, HostModeAllocationThrowsCudaError)
{
  if (!host_mode()) { GTEST_SKIP() << "host mode only"; }
  managed_memory_resource mr;  // constructing needs no GPU, as in RMM
  EXPECT_EQ(rmm_resource_access(mr.handle()), RMM_ACCESS_DEVICE | RMM_ACCESS_HOST);
  EXPECT_THROW(mr.allocate_sync(1024), rmm::cuda_error);
}

TEST(PinnedHostMemoryResource, HostModeAllocationThrowsCudaError)
{
  if (!host_mode()) { GTEST_SKIP() << "host mode only"; }
  pinned_host_memory_resource mr;
  pinned_host_memory_resource copy = mr;
  EXPECT_TRUE(copy == mr);
  EXPECT_EQ(rmm_resource_access(mr.handle()), RMM_ACCESS_DEVICE | RMM_ACCESS_HOST);
  EXPECT_THROW(copy.allocate(rmm::cuda_stream_default, 1024), rmm::cuda_error);
}

TEST(CudaAsyncMemoryResource, HostModeConstructionThrowsCudaError)
{
  if (!host_mode()) { GTEST_SKIP() << "host mode only"; }
  EXPECT_THROW(cuda_async_memory_resource{}, rmm::cuda_error);
  EXPECT_THROW((cuda_async_memory_resource{std::size_t{1} << 20, std::size_t{1} << 30}), rmm::cuda_error);
}

TEST(CudaAsyncMemoryResource, UnsupportedHandleTypeThrowsLogicError)
{
  try {
    cuda_async_memory_resource mr{std::nullopt, std::nullopt, cuda_async_memory_resource::allocation_handle_type::win32};
    FAIL() << "win32 handles are not supported on Linux";
  } catch (rmm::logic_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("Requested IPC memory handle type not supported"), std::string::npos)
      << e.what();
  }
}

TEST(SamHeadroomMemoryResource, HostModeConstructionThrowsCudaError)
{
  if (!host_mode()) { GTEST_SKIP() << "host mode only"; }
  EXPECT_THROW(sam_headroom_memory_resource{std::size_t{1} << 20}, rmm::cuda_error);
}

TEST(ManagedMemoryResource, AllocatesOnGpu)
{
  if (host_mode()) { GTEST_SKIP() << "needs a CUDA GPU"; }
  managed_memory_resource mr;
  round_trip(mr, 1 << 20, true);
}

TEST(PinnedHostMemoryResource, AllocatesOnGpu)
{
  if (host_mode()) { GTEST_SKIP() << "needs a CUDA GPU"; }
  pinned_host_memory_resource mr;
  round_trip(mr, 1 << 20, true);
  host_device_any any{mr};
  void* p = any.allocate_sync(4096, 256);
  std::memset(p, 1, 4096);
  any.deallocate_sync(p, 4096, 256);
}

TEST(CudaAsyncMemoryResource, AllocatesOnGpuAndSharesItsPool)
{
  if (host_mode()) { GTEST_SKIP() << "needs a CUDA GPU"; }
  cuda_async_memory_resource mr{std::size_t{4} << 20};
  EXPECT_NE(mr.pool_handle(), nullptr);
  cuda_async_memory_resource copy = mr;
  EXPECT_EQ(copy.pool_handle(), mr.pool_handle());
  EXPECT_TRUE(copy == mr);
  cuda_async_memory_resource other;
  EXPECT_NE(other.pool_handle(), mr.pool_handle());
  EXPECT_FALSE(other == mr);
  round_trip(mr, 1 << 20, false);
}

TEST(SamHeadroomMemoryResource, AllocatesOnGpu)
{
  if (host_mode()) { GTEST_SKIP() << "needs a CUDA GPU"; }
  try {
    sam_headroom_memory_resource mr{std::size_t{1} << 20};
    round_trip(mr, 1 << 20, true);
  } catch (rmm::logic_error const& e) {
    GTEST_SKIP() << "system memory is not device-accessible here: " << e.what();
  }
}
