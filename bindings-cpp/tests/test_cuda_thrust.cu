// GoogleTest suite of the Thrust integration (rmm::mr::thrust_allocator, rmm::exec_policy,
// rmm::exec_policy_nosync, rmm::device_vector), compiled by nvcc and run on a GPU. Memory goes
// through a statistics_resource_adaptor over a pool, so the tests see that Thrust really allocated
// from our resource. Every test skips in host mode.

#include <rmm/cuda_stream_view.hpp>
#include <rmm/device_vector.hpp>
#include <rmm/exec_policy.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>
#include <rmm/mr/thrust_allocator_adaptor.hpp>
#include <rmm/rmm_c.h>

#include <cuda_runtime_api.h>
#include <thrust/fill.h>
#include <thrust/host_vector.h>
#include <thrust/reduce.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>

namespace {

bool host_mode() { return rmm_is_host_mode() != 0; }

/// A non-blocking stream, destroyed at the end of the test.
class owned_stream {
 public:
  owned_stream() { EXPECT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess); }
  ~owned_stream() { cudaStreamDestroy(stream_); }
  owned_stream(owned_stream const&)            = delete;
  owned_stream& operator=(owned_stream const&) = delete;
  [[nodiscard]] rmm::cuda_stream_view view() const { return rmm::cuda_stream_view{stream_}; }

 private:
  cudaStream_t stream_{};
};

/// statistics over a pool over cuda memory: what every test allocates from.
struct counted_pool {
  rmm::mr::cuda_memory_resource cuda{};
  rmm::mr::pool_memory_resource pool{cuda, std::size_t{16} << 20};
  rmm::mr::statistics_resource_adaptor stats{pool};
};

constexpr int n = 1 << 20;

}  // namespace

TEST(ThrustAllocator, RebindSharesResourceAndStream)
{
  if (host_mode()) { GTEST_SKIP() << "needs a CUDA GPU"; }
  counted_pool mr;
  owned_stream stream;
  rmm::mr::thrust_allocator<int> a{stream.view(), mr.stats};
  rmm::mr::thrust_allocator<char> c{a};
  EXPECT_EQ(c.stream(), stream.view());
  EXPECT_TRUE(c.get_upstream_resource() == a.get_upstream_resource());
  auto p = a.allocate(1000);
  EXPECT_EQ(mr.stats.get_bytes_counter().value, static_cast<std::int64_t>(1000 * sizeof(int)));
  a.deallocate(p, 1000);
  EXPECT_EQ(mr.stats.get_bytes_counter().value, 0);
}

TEST(ThrustAllocator, DeviceVectorSortAndReduceWithExecPolicy)
{
  if (host_mode()) { GTEST_SKIP() << "needs a CUDA GPU"; }
  counted_pool mr;
  owned_stream stream;
  {
    rmm::device_vector<int> v(n, rmm::mr::thrust_allocator<int>{stream.view(), mr.stats});
    EXPECT_GE(mr.stats.get_bytes_counter().value, static_cast<std::int64_t>(n * sizeof(int)));
    auto const before = mr.stats.get_allocations_counter().total;
    auto policy       = rmm::exec_policy(stream.view(), mr.stats);
    thrust::sequence(policy, v.begin(), v.end(), n, -1);  // n, n-1, ..., 1
    thrust::sort(policy, v.begin(), v.end());
    EXPECT_GT(mr.stats.get_allocations_counter().total, before) << "sort's temporary memory came from our resource";
    long long const sum = thrust::reduce(policy, v.begin(), v.end(), 0LL);
    EXPECT_EQ(sum, static_cast<long long>(n) * (n + 1) / 2);
    thrust::host_vector<int> h = v;
    EXPECT_EQ(h[0], 1);
    EXPECT_EQ(h[n / 2], n / 2 + 1);
    EXPECT_EQ(h[n - 1], n);
  }
  EXPECT_EQ(mr.stats.get_bytes_counter().value, 0) << "everything went back to our resource";
}

TEST(ExecPolicyNosync, SortsOnTheStream)
{
  if (host_mode()) { GTEST_SKIP() << "needs a CUDA GPU"; }
  counted_pool mr;
  owned_stream stream;
  {
    rmm::device_vector<int> v(n, rmm::mr::thrust_allocator<int>{stream.view(), mr.stats});
    auto const before = mr.stats.get_allocations_counter().total;
    auto policy       = rmm::exec_policy_nosync(stream.view(), mr.stats);
    thrust::sequence(policy, v.begin(), v.end(), n, -1);
    thrust::sort(policy, v.begin(), v.end());
    ASSERT_EQ(cudaStreamSynchronize(stream.view().value()), cudaSuccess);
    EXPECT_GT(mr.stats.get_allocations_counter().total, before);
    EXPECT_TRUE(thrust::is_sorted(policy, v.begin(), v.end()));
    EXPECT_EQ(thrust::reduce(policy, v.begin(), v.end(), 0LL), static_cast<long long>(n) * (n + 1) / 2);
  }
  EXPECT_EQ(mr.stats.get_bytes_counter().value, 0);
}

TEST(DeviceVector, DefaultAllocatorUsesTheCurrentDeviceResource)
{
  if (host_mode()) { GTEST_SKIP() << "needs a CUDA GPU"; }
  counted_pool mr;
  rmm::mr::set_current_device_resource(mr.stats);
  {
    rmm::device_vector<float> v(1000);
    EXPECT_EQ(mr.stats.get_bytes_counter().value, static_cast<std::int64_t>(1000 * sizeof(float)));
    thrust::fill(rmm::exec_policy{}, v.begin(), v.end(), 2.0F);
    v.resize(3000, 1.0F);
    EXPECT_GE(mr.stats.get_bytes_counter().value, static_cast<std::int64_t>(3000 * sizeof(float)));
    EXPECT_EQ(thrust::reduce(rmm::exec_policy{}, v.begin(), v.end(), 0.0), 4000.0);
    rmm::device_vector<float> copy = v;
    EXPECT_EQ(mr.stats.get_allocations_counter().value, 2);
  }
  EXPECT_EQ(mr.stats.get_bytes_counter().value, 0);
  rmm::mr::reset_current_device_resource();
}
