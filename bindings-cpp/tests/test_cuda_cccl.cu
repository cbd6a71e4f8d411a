// CCCL's own resources as upstreams of ours, compiled by nvcc and run on a GPU: a
// cuda::shared_device_memory_pool (CCCL's stream-ordered pool, an owning value type) and the
// device's default cuda::device_memory_pool_ref under our pool_memory_resource and
// statistics_resource_adaptor, with kernels writing and reading memory from our pool. Every test
// skips in host mode.

#include <rmm/cuda_stream.hpp>
#include <rmm/cuda_stream_view.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/limiting_resource_adaptor.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_pool>
#include <cuda/memory_resource>
#include <cuda/stream_ref>
#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

using device_any = cuda::mr::any_resource<cuda::mr::device_accessible>;

constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t PiB = std::size_t{1} << 50;

static_assert(cuda::mr::resource_with<cuda::shared_device_memory_pool, cuda::mr::device_accessible>);
static_assert(cuda::mr::resource_with<cuda::device_memory_pool_ref, cuda::mr::device_accessible>);

bool host_mode() { return rmm_is_host_mode() != 0; }

int current_device()
{
  int device = 0;
  EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
  return device;
}

__global__ void fill(int* out, int n)
{
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) { out[i] = 3 * i + 1; }
}

__global__ void count_mismatches(int const* in, int n, unsigned int* mismatches)
{
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n && in[i] != 3 * i + 1) { atomicAdd(mismatches, 1U); }
}

/// Writes n ints with one kernel, checks them with another on the device and copies them back:
/// the memory comes from @p mr, on @p stream.
void kernels_round_trip(rmm::device_async_resource_ref mr, rmm::cuda_stream_view stream, int n)
{
  auto const bytes = static_cast<std::size_t>(n) * sizeof(int);
  auto* data       = static_cast<int*>(mr.allocate(stream, bytes, 256));
  auto* mismatches = static_cast<unsigned int*>(mr.allocate(stream, sizeof(unsigned int), 256));
  ASSERT_EQ(cudaMemsetAsync(mismatches, 0, sizeof(unsigned int), stream.value()), cudaSuccess);
  int const threads = 256;
  int const blocks  = (n + threads - 1) / threads;
  fill<<<blocks, threads, 0, stream.value()>>>(data, n);
  count_mismatches<<<blocks, threads, 0, stream.value()>>>(data, n, mismatches);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<int> host(static_cast<std::size_t>(n));
  unsigned int bad = ~0U;
  ASSERT_EQ(cudaMemcpyAsync(host.data(), data, bytes, cudaMemcpyDeviceToHost, stream.value()), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(&bad, mismatches, sizeof bad, cudaMemcpyDeviceToHost, stream.value()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream.value()), cudaSuccess);
  EXPECT_EQ(bad, 0U);
  EXPECT_EQ(host[0], 1);
  EXPECT_EQ(host[n / 2], 3 * (n / 2) + 1);
  EXPECT_EQ(host[n - 1], 3 * (n - 1) + 1);
  mr.deallocate(stream, mismatches, sizeof(unsigned int), 256);
  mr.deallocate(stream, data, bytes, 256);
}

/// Bytes of @p pool handed out to its users (our pool, here); the driver may round allocations up.
std::uint64_t used_bytes(cudaMemPool_t pool)
{
  std::uint64_t used = 0;
  EXPECT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used), cudaSuccess);
  return used;
}

}  // namespace

TEST(CcclUpstream, SharedDeviceMemoryPoolUnderOurPoolAndStatistics)
{
  if (host_mode()) { GTEST_SKIP() << "needs a CUDA GPU (host mode)"; }
  cuda::shared_device_memory_pool cccl_pool{cuda::device_ref{current_device()}};
  cudaMemPool_t const native = cccl_pool.get();
  {
    rmm::mr::pool_memory_resource pool{device_any{cccl_pool}, 16 * MiB};
    EXPECT_GE(used_bytes(native), 16 * MiB) << "the initial pool came from CCCL's pool";
    rmm::mr::statistics_resource_adaptor stats{pool};
    rmm::cuda_stream stream{rmm::cuda_stream::flags::non_blocking};

    kernels_round_trip(stats, stream.view(), 1 << 20);
    EXPECT_EQ(stats.get_allocations_counter().total, 2);
    EXPECT_EQ(stats.get_bytes_counter().value, 0);

    // Larger than the pool holds: ours grows from CCCL's.
    void* big = stats.allocate(stream.view(), 64 * MiB, 256);
    EXPECT_GE(pool.pool_size(), 80 * MiB);
    EXPECT_GE(used_bytes(native), pool.pool_size());
    stats.deallocate(stream.view(), big, 64 * MiB, 256);

    // CCCL's pool fails with cuda::cuda_error(cudaErrorMemoryAllocation); our pool, like RMM's, then
    // throws rmm::out_of_memory.
    EXPECT_THROW(stats.allocate_sync(PiB), rmm::out_of_memory);
    kernels_round_trip(stats, stream.view(), 1000);
    stream.synchronize();
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(used_bytes(native), 0U) << "our pool gave everything back to CCCL's when it was destroyed";
}

TEST(CcclUpstream, DefaultDevicePoolRefUnderStatisticsAndLimiting)
{
  if (host_mode()) { GTEST_SKIP() << "needs a CUDA GPU (host mode)"; }
  cuda::device_memory_pool_ref cccl_ref = cuda::device_default_memory_pool(cuda::device_ref{current_device()});
  rmm::mr::statistics_resource_adaptor stats{device_any{cccl_ref}};
  rmm::mr::limiting_resource_adaptor limited{stats, 8 * MiB};
  rmm::cuda_stream stream{rmm::cuda_stream::flags::non_blocking};

  kernels_round_trip(limited, stream.view(), 1 << 20);  // 4 MiB: within the limit
  EXPECT_EQ(stats.get_allocations_counter().total, 2);
  EXPECT_EQ(limited.get_allocated_bytes(), 0U);
  EXPECT_THROW(limited.allocate(stream.view(), 16 * MiB, 256), rmm::out_of_memory);  // the limit, not CCCL
  EXPECT_EQ(stats.get_allocations_counter().total, 2);
  // CCCL's own failure, a cuda::cuda_error(cudaErrorMemoryAllocation). RMM's adaptors would let that
  // type through; it cannot cross librmm's C ABI as itself, and arrives as rmm::out_of_memory.
  EXPECT_THROW(stats.allocate(stream.view(), PiB, 256), rmm::out_of_memory);
  stream.synchronize();
}

// Our pool, type-erased by CCCL and used through CCCL's interfaces only, for a kernel's memory.
TEST(CcclUpstream, OurPoolThroughCcclAnyResource)
{
  if (host_mode()) { GTEST_SKIP() << "needs a CUDA GPU (host mode)"; }
  cuda::shared_device_memory_pool cccl_pool{cuda::device_ref{current_device()}};
  rmm::mr::pool_memory_resource pool{device_any{cccl_pool}, 16 * MiB};
  device_any erased{pool};
  cuda::mr::resource_ref<cuda::mr::device_accessible> ref{erased};
  rmm::cuda_stream stream{rmm::cuda_stream::flags::non_blocking};
  kernels_round_trip(ref, stream.view(), 1 << 16);
  stream.synchronize();
}
