// Two GPUs (issue 13), through the C++ API: a resource per device in the one registry, the current
// resource following the current device, cuda_set_device_raii, and a device_buffer of device 1 that
// grows, copies and frees on device 1 while device 0 is current. Every test skips with "needs a
// CUDA GPU" in host mode and "needs 2 devices" on one GPU.

#include <rmm/cuda_device.hpp>
#include <rmm/cuda_stream.hpp>
#include <rmm/cuda_stream_view.hpp>
#include <rmm/device_buffer.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

bool host_mode() { return rmm_is_host_mode() != 0; }

#define SKIP_UNLESS_TWO_DEVICES()                                            \
  do {                                                                       \
    if (host_mode()) { GTEST_SKIP() << "needs a CUDA GPU"; }                 \
    if (rmm::get_num_cuda_devices() < 2) { GTEST_SKIP() << "needs 2 devices"; } \
  } while (0)

/**
 * The reference the registry hands back for a librmm resource set per device: the registry keeps
 * the resource's C handle, so get_*_resource_ref() refers to its detail::c_resource, and CCCL's
 * resource_ref == compares objects only when the referenced types match. RMM keeps the
 * pool_memory_resource itself and compares equal to device_async_resource_ref{pool}; here the
 * comparison is made with the c_resource (docs/testing.md, "Deliberate differences").
 */
rmm::device_async_resource_ref as_registered(rmm::mr::pool_memory_resource& mr)
{
  return rmm::device_async_resource_ref{static_cast<rmm::mr::detail::c_resource&>(mr)};
}

rmm::mr::pool_memory_resource pool_on(int device)
{
  rmm::cuda_set_device_raii on{rmm::cuda_device_id{device}};
  return rmm::mr::pool_memory_resource{rmm::mr::cuda_memory_resource{}, 64 * MiB};
}

TEST(TwoDevices, SetDeviceRaiiRestoresTheDevice)
{
  SKIP_UNLESS_TWO_DEVICES();
  rmm::cuda_set_device_raii zero{rmm::cuda_device_id{0}};
  {
    rmm::cuda_set_device_raii one{rmm::cuda_device_id{1}};
    EXPECT_EQ(rmm::get_current_cuda_device().value(), 1);
  }
  EXPECT_EQ(rmm::get_current_cuda_device().value(), 0);
}

TEST(TwoDevices, PerDeviceResourcesFollowTheCurrentDevice)
{
  SKIP_UNLESS_TWO_DEVICES();
  rmm::cuda_set_device_raii zero{rmm::cuda_device_id{0}};
  auto pool0 = pool_on(0);
  auto pool1 = pool_on(1);
  auto old0  = rmm::mr::set_per_device_resource(rmm::cuda_device_id{0}, pool0);
  auto old1  = rmm::mr::set_per_device_resource(rmm::cuda_device_id{1}, pool1);
  EXPECT_TRUE(rmm::mr::get_per_device_resource_ref(rmm::cuda_device_id{0}) == as_registered(pool0));
  EXPECT_TRUE(rmm::mr::get_per_device_resource_ref(rmm::cuda_device_id{1}) == as_registered(pool1));
  EXPECT_FALSE(as_registered(pool0) == as_registered(pool1));
  {
    rmm::cuda_set_device_raii one{rmm::cuda_device_id{1}};
    EXPECT_TRUE(rmm::mr::get_current_device_resource_ref() == as_registered(pool1));
    rmm::device_buffer buf{MiB, rmm::cuda_stream_view{}};
    EXPECT_TRUE(buf.memory_resource() == as_registered(pool1));
  }
  EXPECT_TRUE(rmm::mr::get_current_device_resource_ref() == as_registered(pool0));
  rmm::mr::set_per_device_resource(rmm::cuda_device_id{0}, old0);
  rmm::mr::set_per_device_resource(rmm::cuda_device_id{1}, old1);
}

TEST(TwoDevices, ABufferOfDevice1GrowsCopiesAndFreesThereWithDevice0Current)
{
  SKIP_UNLESS_TWO_DEVICES();
  rmm::cuda_set_device_raii zero{rmm::cuda_device_id{0}};
  auto pool1 = pool_on(1);
  std::vector<std::uint8_t> data(MiB);
  for (std::size_t i = 0; i < data.size(); ++i) { data[i] = static_cast<std::uint8_t>(i % 251); }
  rmm::device_buffer buf = [&] {
    rmm::cuda_set_device_raii one{rmm::cuda_device_id{1}};
    return rmm::device_buffer{data.data(), data.size(), rmm::cuda_stream_view{}, pool1};
  }();
  EXPECT_EQ(rmm::get_current_cuda_device().value(), 0);
  buf.resize(2 * MiB, rmm::cuda_stream_view{});
  EXPECT_EQ(rmm::get_current_cuda_device().value(), 0) << "resize restores the current device";
  rmm::device_buffer copy{buf, rmm::cuda_stream_view{}, pool1};
  EXPECT_EQ(rmm::get_current_cuda_device().value(), 0) << "copying restores the current device";
  std::vector<std::uint8_t> back(MiB);
  rmm_error err{};
  ASSERT_EQ(rmm_memcpy_async(back.data(), copy.data(), MiB, nullptr, &err), RMM_OK) << err.message;
  rmm::cuda_stream_view{}.synchronize();
  EXPECT_EQ(back, data);
}

TEST(TwoDevices, SixteenThreadsOnBothDevicesReturnToZero)
{
  SKIP_UNLESS_TWO_DEVICES();
  auto pool0 = pool_on(0);
  auto pool1 = pool_on(1);
  rmm::mr::statistics_resource_adaptor stats0{pool0};
  rmm::mr::statistics_resource_adaptor stats1{pool1};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      int const device = t % 2;
      rmm::cuda_set_device_raii on{rmm::cuda_device_id{device}};
      rmm::cuda_stream stream{};
      rmm::device_async_resource_ref mr = device == 0 ? rmm::device_async_resource_ref{stats0}
                                                      : rmm::device_async_resource_ref{stats1};
      std::vector<rmm::device_buffer> live;
      std::uint64_t x = 0x9e3779b97f4a7c15ULL ^ static_cast<std::uint64_t>(t);
      for (int i = 0; i < 5000; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if (!live.empty() && x % 2 == 0) {
          live[(x / 2) % live.size()] = std::move(live.back());
          live.pop_back();
        } else {
          live.emplace_back(1 + (x >> 8) % (64 * 1024), rmm::cuda_stream_view{stream}, mr);
        }
      }
      live.clear();
      stream.synchronize();
    });
  }
  for (auto& t : threads) { t.join(); }
  EXPECT_EQ(stats0.get_bytes_counter().value, 0);
  EXPECT_EQ(stats1.get_bytes_counter().value, 0);
  EXPECT_GT(stats0.get_allocations_counter().total, 0);
  EXPECT_GT(stats1.get_allocations_counter().total, 0);
}

}  // namespace
