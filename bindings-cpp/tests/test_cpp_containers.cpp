// GoogleTest suite of the C++ containers and streams over librmm's C ABI: device_buffer,
// device_uvector, device_scalar, cuda_stream(_view), cuda_stream_pool and prefetch.
// CPU part: host memory (system_memory_resource and a pool over it, in host mode) and a user-written
// CCCL resource (host malloc, any mode). GPU part (skipped in host mode): cuda_memory_resource and a
// pool over it on real streams, from several streams and threads.

#include "counting_resource.hpp"

#include <rmm/aligned.hpp>
#include <rmm/cuda_device.hpp>
#include <rmm/cuda_stream.hpp>
#include <rmm/cuda_stream_pool.hpp>
#include <rmm/cuda_stream_view.hpp>
#include <rmm/device_buffer.hpp>
#include <rmm/device_scalar.hpp>
#include <rmm/device_uvector.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/managed_memory_resource.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/mr/system_memory_resource.hpp>
#include <rmm/prefetch.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>
#include <cuda/std/span>
#include <cuda/stream_ref>

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <limits>
#include <memory>
#include <new>
#include <numeric>
#include <set>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using device_any = cuda::mr::any_resource<cuda::mr::device_accessible>;

bool host_mode() { return rmm_is_host_mode() != 0; }

constexpr std::size_t PiB = std::size_t{1} << 50;

// The user's resource of these tests (counting_resource.hpp).
using rmm_test::counting_resource;
using rmm_test::counts;

std::vector<unsigned char> pattern(std::size_t n, unsigned seed = 1)
{
  std::vector<unsigned char> v(n);
  for (std::size_t i = 0; i < n; ++i) { v[i] = static_cast<unsigned char>(i * 7 + seed); }
  return v;
}

/// The bytes of @p buf, copied to the host on its stream (works for any memory with a GPU, and for
/// host-accessible memory in host mode).
std::vector<unsigned char> contents(rmm::device_buffer const& buf)
{
  std::vector<unsigned char> out(buf.size());
  rmm_error err{};
  rmm::detail::check(rmm_memcpy_async(out.data(), buf.data(), buf.size(), static_cast<void*>(buf.stream().value()), &err),
                     err, "test copy");
  buf.stream().synchronize();
  return out;
}

// --- compile-time properties ---------------------------------------------------------------------

template <class V, class = void>
struct can_set_element_from_rvalue : std::false_type {};
template <class V>
struct can_set_element_from_rvalue<
  V,
  std::void_t<decltype(std::declval<V&>().set_element_async(0, typename V::value_type{}, rmm::cuda_stream_view{}))>>
  : std::true_type {};

template <class S, class = void>
struct can_set_value_from_rvalue : std::false_type {};
template <class S>
struct can_set_value_from_rvalue<
  S,
  std::void_t<decltype(std::declval<S&>().set_value_async(typename S::value_type{}, rmm::cuda_stream_view{}))>>
  : std::true_type {};

template <class S, class = void>
struct can_set_value_from_lvalue : std::false_type {};
template <class S>
struct can_set_value_from_lvalue<
  S,
  std::void_t<decltype(std::declval<S&>().set_value_async(std::declval<typename S::value_type const&>(),
                                                          rmm::cuda_stream_view{}))>> : std::true_type {};

static_assert(!can_set_element_from_rvalue<rmm::device_uvector<int>>::value, "rvalue overload is deleted");
static_assert(!can_set_value_from_rvalue<rmm::device_scalar<int>>::value, "rvalue overload is deleted");
static_assert(can_set_value_from_lvalue<rmm::device_scalar<int>>::value);

static_assert(!std::is_copy_constructible_v<rmm::device_buffer> && std::is_nothrow_move_constructible_v<rmm::device_buffer>);
static_assert(!std::is_copy_constructible_v<rmm::device_uvector<int>> &&
              std::is_nothrow_move_constructible_v<rmm::device_uvector<int>>);
static_assert(!std::is_default_constructible_v<rmm::device_uvector<int>>);
static_assert(!std::is_copy_constructible_v<rmm::device_scalar<int>> && !std::is_default_constructible_v<rmm::device_scalar<int>>);
static_assert(!std::is_copy_constructible_v<rmm::cuda_stream> && std::is_nothrow_move_constructible_v<rmm::cuda_stream>);
static_assert(!std::is_copy_constructible_v<rmm::cuda_stream_pool> && !std::is_move_constructible_v<rmm::cuda_stream_pool>);
static_assert(std::is_convertible_v<rmm::cuda_stream const&, rmm::cuda_stream_view>);
static_assert(std::is_convertible_v<rmm::cuda_stream const&, cuda::stream_ref>);
static_assert(std::is_convertible_v<rmm::device_uvector<int>&, cuda::std::span<int>>);
static_assert(std::is_convertible_v<rmm::device_uvector<int> const&, cuda::std::span<int const>>);
static_assert(!std::is_convertible_v<rmm::device_uvector<int> const&, cuda::std::span<int>>);
static_assert(static_cast<unsigned>(rmm::cuda_stream::flags::sync_default) == cudaStreamDefault);
static_assert(static_cast<unsigned>(rmm::cuda_stream::flags::non_blocking) == cudaStreamNonBlocking);

// --- streams ---------------------------------------------------------------------------------------

TEST(CudaStreamView, DefaultStreamsSynchronize)
{
  for (auto s : {rmm::cuda_stream_default, rmm::cuda_stream_legacy, rmm::cuda_stream_per_thread}) {
    EXPECT_NO_THROW(s.synchronize());
    s.synchronize_no_throw();
  }
}

TEST(CudaStream, HostModeCreationThrowsCudaError)
{
  if (!host_mode()) { GTEST_SKIP() << "host mode only (a GPU is present)"; }
  EXPECT_THROW(rmm::cuda_stream{}, rmm::cuda_error);
  EXPECT_THROW(rmm::cuda_stream{rmm::cuda_stream::flags::non_blocking}, rmm::cuda_error);
  EXPECT_THROW(rmm::cuda_stream_pool{4}, rmm::cuda_error);
}

TEST(CudaStreamPool, SizeZeroThrowsLogicError)
{
  EXPECT_THROW(rmm::cuda_stream_pool{0}, rmm::logic_error);
  EXPECT_THROW((rmm::cuda_stream_pool{0, rmm::cuda_stream::flags::non_blocking}), rmm::logic_error);
  EXPECT_EQ(rmm::cuda_stream_pool::default_size, 16u);
}

// --- device_buffer over host memory ----------------------------------------------------------------

/// Tests over system_memory_resource, which is host mode's memory (RMM's GPU machines report system
/// memory as unsupported, and the GPU tests below cover device memory).
class HostBuffers : public ::testing::Test {
 protected:
  void SetUp() override
  {
    if (!host_mode()) { GTEST_SKIP() << "system-memory containers are host-mode tests; GPU tests use device memory"; }
  }
  rmm::mr::system_memory_resource sys = rmm::mr::detail::unchecked_system_memory_resource();
};

TEST_F(HostBuffers, ConstructsWithSizeAlignmentAndStream)
{
  rmm::device_buffer buf{1000, rmm::cuda_stream_per_thread, sys};
  EXPECT_EQ(buf.size(), 1000u);
  EXPECT_EQ(buf.ssize(), 1000);
  EXPECT_EQ(buf.capacity(), 1000u);
  EXPECT_EQ(buf.alignment(), rmm::CUDA_ALLOCATION_ALIGNMENT);
  EXPECT_FALSE(buf.is_empty());
  EXPECT_TRUE(rmm::is_pointer_aligned(buf.data(), 256));
  EXPECT_EQ(buf.stream(), rmm::cuda_stream_per_thread);
  rmm::device_buffer aligned{64, 4096, rmm::cuda_stream_default, sys};
  EXPECT_EQ(aligned.alignment(), 4096u);
  EXPECT_TRUE(rmm::is_pointer_aligned(aligned.data(), 4096));
  rmm::device_buffer empty{0, rmm::cuda_stream_default, sys};
  EXPECT_TRUE(empty.is_empty());
  EXPECT_EQ(empty.data(), nullptr);
  rmm::device_buffer dflt;
  EXPECT_EQ(dflt.size(), 0u);
  EXPECT_EQ(dflt.data(), nullptr);
  EXPECT_EQ(dflt.alignment(), rmm::CUDA_ALLOCATION_ALIGNMENT);
  EXPECT_EQ(dflt.stream(), rmm::cuda_stream_default);
}

TEST_F(HostBuffers, CopiesFromAHostPointer)
{
  auto const data = pattern(5000);
  rmm::device_buffer buf{data.data(), data.size(), rmm::cuda_stream_default, sys};
  buf.stream().synchronize();
  EXPECT_EQ(contents(buf), data);
  rmm::device_buffer aligned{data.data(), 100, 1024, rmm::cuda_stream_default, sys};
  EXPECT_EQ(aligned.alignment(), 1024u);
  EXPECT_EQ(std::memcmp(aligned.data(), data.data(), 100), 0);
  EXPECT_THROW((rmm::device_buffer{nullptr, 10, rmm::cuda_stream_default, sys}), rmm::logic_error);
  rmm::device_buffer none{nullptr, 0, rmm::cuda_stream_default, sys};
  EXPECT_TRUE(none.is_empty());
}

TEST_F(HostBuffers, DeepCopyOntoAnotherResourceAndStream)
{
  auto const data = pattern(3000, 3);
  rmm::device_buffer a{data.data(), data.size(), 64, rmm::cuda_stream_default, sys};
  rmm::mr::pool_memory_resource pool{sys, 1 << 20};
  rmm::device_buffer b{a, rmm::cuda_stream_per_thread, pool};
  EXPECT_NE(a.data(), b.data());
  EXPECT_EQ(b.size(), a.size());
  EXPECT_EQ(b.capacity(), a.size());
  EXPECT_EQ(b.alignment(), 64u);
  EXPECT_EQ(b.stream(), rmm::cuda_stream_per_thread);
  EXPECT_EQ(contents(b), data);
  EXPECT_TRUE(b.memory_resource() == rmm::device_async_resource_ref{pool});
  EXPECT_FALSE(a.memory_resource() == b.memory_resource());
  rmm::device_buffer c{b, rmm::cuda_stream_default};  // current device resource
  EXPECT_EQ(contents(c), data);
}

TEST_F(HostBuffers, ResizeInPlaceAndReallocating)
{
  auto const data = pattern(1000, 5);
  rmm::device_buffer buf{data.data(), data.size(), rmm::cuda_stream_default, sys};
  void const* const ptr = buf.data();
  buf.resize(400, rmm::cuda_stream_default);
  EXPECT_EQ(buf.size(), 400u);
  EXPECT_EQ(buf.capacity(), 1000u);
  EXPECT_EQ(buf.data(), ptr) << "shrinking the size is in place";
  buf.resize(900, rmm::cuda_stream_default);
  EXPECT_EQ(buf.data(), ptr) << "growing within the capacity is in place";
  buf.resize(4000, rmm::cuda_stream_per_thread);
  EXPECT_EQ(buf.capacity(), 4000u);
  EXPECT_EQ(buf.stream(), rmm::cuda_stream_per_thread);
  EXPECT_EQ(std::memcmp(buf.data(), data.data(), 900), 0) << "contents kept";
  buf.reserve(10000, rmm::cuda_stream_default);
  EXPECT_EQ(buf.size(), 4000u);
  EXPECT_EQ(buf.capacity(), 10000u);
  EXPECT_EQ(std::memcmp(buf.data(), data.data(), 900), 0);
  buf.resize(100, rmm::cuda_stream_default);
  buf.shrink_to_fit(rmm::cuda_stream_default);
  EXPECT_EQ(buf.capacity(), 100u);
  EXPECT_EQ(std::memcmp(buf.data(), data.data(), 100), 0);
  buf.set_stream(rmm::cuda_stream_legacy);
  EXPECT_EQ(buf.stream(), rmm::cuda_stream_legacy);
}

TEST_F(HostBuffers, MoveLeavesTheSourceEmptyAndUsable)
{
  auto const data = pattern(256);
  rmm::device_buffer a{data.data(), data.size(), rmm::cuda_stream_per_thread, sys};
  void const* const ptr = a.data();
  rmm::device_buffer b{std::move(a)};
  EXPECT_EQ(b.data(), ptr);
  EXPECT_EQ(b.size(), 256u);
  EXPECT_EQ(b.stream(), rmm::cuda_stream_per_thread);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.capacity(), 0u);
  EXPECT_EQ(a.stream(), rmm::cuda_stream_default);
  a.resize(10, rmm::cuda_stream_default);  // a moved-from buffer is an empty buffer over the same resource
  EXPECT_EQ(a.size(), 10u);
  rmm::device_buffer c{32, rmm::cuda_stream_default, sys};
  c = std::move(b);
  EXPECT_EQ(c.data(), ptr);
  EXPECT_EQ(contents(c), data);
  EXPECT_TRUE(b.is_empty());  // NOLINT(bugprone-use-after-move)
  auto& same = c;  // through a reference: GCC 13's -Wself-move rejects the spelled-out self-move
  c = std::move(same);  // self-move changes nothing
  EXPECT_EQ(c.size(), 256u);
}

TEST_F(HostBuffers, DefaultResourceIsTheCurrentDeviceResource)
{
  rmm::device_buffer buf{128, rmm::cuda_stream_default};
  auto const data = pattern(128);
  std::memcpy(buf.data(), data.data(), data.size());
  EXPECT_EQ(contents(buf), data);
  EXPECT_TRUE(buf.memory_resource() == rmm::mr::get_current_device_resource_ref());
  // memory_resource() is usable as a resource.
  void* p = buf.memory_resource().allocate(rmm::cuda_stream_default, 64, 256);
  buf.memory_resource().deallocate(rmm::cuda_stream_default, p, 64, 256);
}

TEST_F(HostBuffers, OnePebibyteIsOutOfMemory)
{
  EXPECT_THROW((rmm::device_buffer{PiB, rmm::cuda_stream_default, sys}), rmm::out_of_memory);
  rmm::mr::pool_memory_resource pool{sys, 1 << 20};
  EXPECT_THROW((rmm::device_buffer{PiB, rmm::cuda_stream_default, pool}), rmm::out_of_memory);
  EXPECT_THROW((rmm::device_uvector<double>{PiB, rmm::cuda_stream_default, sys}), rmm::out_of_memory);
  EXPECT_THROW((rmm::device_uvector<double>{std::numeric_limits<std::size_t>::max() / 4, rmm::cuda_stream_default, sys}),
               rmm::invalid_argument)
    << "the byte size overflows: invalid_argument, as RMM";
  rmm::device_buffer buf{16, rmm::cuda_stream_default, sys};
  EXPECT_THROW(buf.resize(PiB, rmm::cuda_stream_default), rmm::bad_alloc);
  EXPECT_EQ(buf.size(), 16u) << "unchanged after a failed resize";
  EXPECT_THROW((rmm::device_buffer{64, 100, rmm::cuda_stream_default, sys}), rmm::invalid_argument) << "alignment, as RMM";
}

TEST_F(HostBuffers, UvectorKeepsTheSignOfNegativeZero)
{
  // RMM's NegativeZeroTest: -0.0 == 0.0, but writing it with a zero memset would lose its sign bit.
  rmm::device_uvector<double> d{1, rmm::cuda_stream_default, sys};
  double const minus_zero = -0.0;
  d.set_element(0, minus_zero, rmm::cuda_stream_default);
  EXPECT_TRUE(std::signbit(d.element(0, rmm::cuda_stream_default)));
  rmm::device_uvector<float> f{1, rmm::cuda_stream_default, sys};
  float const minus_zero_f = -0.0f;
  f.set_element(0, minus_zero_f, rmm::cuda_stream_default);
  EXPECT_TRUE(std::signbit(f.element(0, rmm::cuda_stream_default)));
  int const zero = 0;
  rmm::device_uvector<int> i{1, rmm::cuda_stream_default, sys};
  i.set_element(0, zero, rmm::cuda_stream_default);
  EXPECT_EQ(i.element(0, rmm::cuda_stream_default), 0);
}

TEST_F(HostBuffers, UvectorElementAccess)
{
  rmm::mr::pool_memory_resource pool{sys, 1 << 20};
  rmm::device_uvector<int> v{100, rmm::cuda_stream_default, pool};
  EXPECT_EQ(v.size(), 100u);
  EXPECT_EQ(v.ssize(), 100);
  EXPECT_FALSE(v.is_empty());
  EXPECT_GE(v.capacity(), 100u);
  EXPECT_EQ(v.end() - v.begin(), 100);
  EXPECT_EQ(v.rend() - v.rbegin(), 100);
  EXPECT_EQ(v.element_ptr(3), v.data() + 3);
  for (int i = 0; i < 100; ++i) { v.set_element(static_cast<std::size_t>(i), i * i, rmm::cuda_stream_default); }
  EXPECT_EQ(v.element(7, rmm::cuda_stream_default), 49);
  EXPECT_EQ(v.front_element(rmm::cuda_stream_default), 0);
  EXPECT_EQ(v.back_element(rmm::cuda_stream_default), 99 * 99);
  int const value = 12345;
  v.set_element_async(10, value, rmm::cuda_stream_default);
  int const zero = 0;
  v.set_element_async(11, zero, rmm::cuda_stream_default);
  v.set_element_to_zero_async(12, rmm::cuda_stream_default);
  rmm::cuda_stream_default.synchronize();
  EXPECT_EQ(v.element(10, rmm::cuda_stream_default), 12345);
  EXPECT_EQ(v.element(11, rmm::cuda_stream_default), 0);
  EXPECT_EQ(v.element(12, rmm::cuda_stream_default), 0);
  EXPECT_EQ(v.element(13, rmm::cuda_stream_default), 169);
  cuda::std::span<int const> cspan = static_cast<rmm::device_uvector<int> const&>(v);
  cuda::std::span<int> span = v;
  EXPECT_EQ(cspan.data(), v.data());
  EXPECT_EQ(span.size(), 100u);
  EXPECT_EQ(span[13], 169) << "host memory in host mode: the span is readable here";
}

TEST_F(HostBuffers, UvectorOutOfRangeThrows)
{
  rmm::device_uvector<int> v{3, rmm::cuda_stream_default, sys};
  int const one = 1;
  EXPECT_THROW((void)v.element(3, rmm::cuda_stream_default), rmm::out_of_range);
  EXPECT_THROW(v.set_element(3, one, rmm::cuda_stream_default), rmm::out_of_range);
  EXPECT_THROW(v.set_element_async(100, one, rmm::cuda_stream_default), rmm::out_of_range);
  EXPECT_THROW(v.set_element_to_zero_async(3, rmm::cuda_stream_default), rmm::out_of_range);
  rmm::device_uvector<int> empty{rmm::cuda_stream_default, sys};
  EXPECT_TRUE(empty.is_empty());
  EXPECT_THROW((void)empty.front_element(rmm::cuda_stream_default), rmm::out_of_range);
  EXPECT_THROW((void)empty.back_element(rmm::cuda_stream_default), rmm::out_of_range);
}

TEST_F(HostBuffers, UvectorResizeReserveShrinkCopyAndRelease)
{
  rmm::device_uvector<std::int64_t> v{10, rmm::cuda_stream_default, sys};
  for (std::size_t i = 0; i < 10; ++i) { v.set_element(i, static_cast<std::int64_t>(i) - 5, rmm::cuda_stream_default); }
  v.reserve(1000, rmm::cuda_stream_default);
  EXPECT_EQ(v.capacity(), 1000u);
  EXPECT_EQ(v.size(), 10u);
  v.resize(500, rmm::cuda_stream_default);
  EXPECT_EQ(v.size(), 500u);
  v.resize(2000, rmm::cuda_stream_default);
  EXPECT_EQ(v.capacity(), 2000u);
  for (std::size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(v.element(i, rmm::cuda_stream_default), static_cast<std::int64_t>(i) - 5) << i;
  }
  v.resize(10, rmm::cuda_stream_default);
  v.shrink_to_fit(rmm::cuda_stream_default);
  EXPECT_EQ(v.capacity(), 10u);
  rmm::mr::pool_memory_resource pool{sys, 1 << 20};
  rmm::device_uvector<std::int64_t> copy{v, rmm::cuda_stream_per_thread, pool};
  EXPECT_EQ(copy.stream(), rmm::cuda_stream_per_thread);
  EXPECT_EQ(copy.back_element(rmm::cuda_stream_per_thread), 4);
  EXPECT_TRUE(copy.memory_resource() == rmm::device_async_resource_ref{pool});
  void const* const ptr = v.data();
  rmm::device_buffer released = v.release();
  EXPECT_EQ(released.data(), ptr);
  EXPECT_EQ(released.size(), 10 * sizeof(std::int64_t));
  EXPECT_TRUE(v.is_empty());  // NOLINT(bugprone-use-after-move)
  rmm::device_uvector<std::int64_t> moved{std::move(copy)};
  EXPECT_EQ(moved.size(), 10u);
  EXPECT_TRUE(copy.is_empty());  // NOLINT(bugprone-use-after-move)
  v.set_stream(rmm::cuda_stream_legacy);
  EXPECT_EQ(v.stream(), rmm::cuda_stream_legacy);
}

TEST_F(HostBuffers, ScalarValueRoundTrip)
{
  rmm::device_scalar<double> s{2.5, rmm::cuda_stream_default, sys};
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.value(rmm::cuda_stream_default), 2.5);
  double const v = -7.25;
  s.set_value_async(v, rmm::cuda_stream_default);
  EXPECT_EQ(s.value(rmm::cuda_stream_default), -7.25);
  rmm::device_scalar<double> copy{s, rmm::cuda_stream_per_thread};
  EXPECT_EQ(copy.value(rmm::cuda_stream_per_thread), -7.25);
  EXPECT_NE(copy.data(), s.data());
  s.set_value_to_zero_async(rmm::cuda_stream_default);
  EXPECT_EQ(s.value(rmm::cuda_stream_default), 0.0);
  struct pair {
    int a;
    float b;
  };
  rmm::device_scalar<pair> p{pair{3, 1.5F}, rmm::cuda_stream_default, sys};
  auto const got = p.value(rmm::cuda_stream_default);
  EXPECT_EQ(got.a, 3);
  EXPECT_EQ(got.b, 1.5F);
  rmm::device_scalar<int> uninit{rmm::cuda_stream_default};
  EXPECT_NE(uninit.data(), nullptr);
  uninit.set_stream(rmm::cuda_stream_per_thread);
  EXPECT_EQ(uninit.stream(), rmm::cuda_stream_per_thread);
}

TEST_F(HostBuffers, ManyThreadsMakeAndFreeBuffers)
{
  rmm::mr::pool_memory_resource pool{sys, 1 << 20};
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        auto const data = pattern(static_cast<std::size_t>(1 + i * 13), static_cast<unsigned>(t));
        rmm::device_buffer buf{data.data(), data.size(), rmm::cuda_stream_per_thread, pool};
        buf.resize(data.size() * 3, rmm::cuda_stream_per_thread);
        rmm::device_buffer copy{buf, rmm::cuda_stream_per_thread, sys};
        copy.stream().synchronize();
        if (std::memcmp(copy.data(), data.data(), data.size()) != 0) { ++failures; }
      }
    });
  }
  for (auto& th : threads) { th.join(); }
  EXPECT_EQ(failures.load(), 0);
}

// --- containers over a user-written CCCL resource (host memory; runs with or without a GPU) ------------

TEST(UserResourceContainers, BufferAllocatesAndFreesThroughTheUserResource)
{
  auto c = std::make_shared<counts>();
  {
    counting_resource user{c};
    auto const data = pattern(777);
    rmm::device_buffer buf{data.data(), data.size(), rmm::cuda_stream_default, user};
    EXPECT_EQ(c->allocs.load(), 1);
    EXPECT_EQ(c->live_bytes.load(), 777);
    EXPECT_EQ(contents(buf), data);
    buf.resize(2000, rmm::cuda_stream_default);
    EXPECT_EQ(c->allocs.load(), 2);
    EXPECT_EQ(c->deallocs.load(), 1) << "the old allocation went back to the user resource";
    EXPECT_EQ(std::memcmp(contents(buf).data(), data.data(), data.size()), 0);
    rmm::device_buffer copy{buf, rmm::cuda_stream_default, user};
    EXPECT_EQ(c->allocs.load(), 3);
    buf.shrink_to_fit(rmm::cuda_stream_default);
    EXPECT_TRUE(buf.memory_resource() == rmm::device_async_resource_ref{user})
      << "memory_resource() is the user's resource itself";
    EXPECT_THROW((rmm::device_buffer{PiB, rmm::cuda_stream_default, user}), rmm::out_of_memory);
  }
  EXPECT_EQ(c->allocs.load(), c->deallocs.load());
  EXPECT_EQ(c->live_bytes.load(), 0);
  EXPECT_EQ(c->live.load(), 0) << "every copy of the user resource was released with the buffers";
}

TEST(UserResourceContainers, BufferKeepsATypeErasedResourceAlive)
{
  auto c = std::make_shared<counts>();
  std::unique_ptr<rmm::device_buffer> buf;
  {
    device_any any{counting_resource{c}};
    buf = std::make_unique<rmm::device_buffer>(100, rmm::cuda_stream_default, any);
  }
  EXPECT_GE(c->live.load(), 1) << "the buffer owns a copy";
  EXPECT_EQ(c->allocs.load(), 1);
  buf.reset();
  EXPECT_EQ(c->deallocs.load(), 1);
  EXPECT_EQ(c->live.load(), 0);
}

TEST(UserResourceContainers, UvectorAndScalarOverAPoolOverTheUserResource)
{
  auto c = std::make_shared<counts>();
  {
    // Erased with host_accessible first, so that the pool (and librmm's copies in host mode) know
    // its memory is host memory.
    device_any host_and_device{cuda::mr::any_resource<cuda::mr::device_accessible, cuda::mr::host_accessible>{
      counting_resource{c}}};
    rmm::mr::pool_memory_resource pool{host_and_device, 1 << 20};
    rmm::device_uvector<float> v{1000, rmm::cuda_stream_default, pool};
    for (std::size_t i = 0; i < 1000; i += 100) { v.set_element(i, static_cast<float>(i) / 2, rmm::cuda_stream_default); }
    v.resize(5000, rmm::cuda_stream_default);
    EXPECT_EQ(v.element(900, rmm::cuda_stream_default), 450.0F);
    rmm::device_scalar<std::uint64_t> s{std::uint64_t{0xdeadbeef}, rmm::cuda_stream_default, pool};
    EXPECT_EQ(s.value(rmm::cuda_stream_default), 0xdeadbeefu);
    rmm::device_uvector<float> direct{10, rmm::cuda_stream_default, counting_resource{c}};
    direct.set_element_to_zero_async(9, rmm::cuda_stream_default);
    EXPECT_EQ(direct.element(9, rmm::cuda_stream_default), 0.0F);
    EXPECT_GE(c->allocs.load(), 2);
  }
  EXPECT_EQ(c->allocs.load(), c->deallocs.load());
  EXPECT_EQ(c->live.load(), 0);
}

// --- device_buffer alignments, as RMM's DeviceBufferAlignmentTest -----------------------------------

TEST(DeviceBufferAlignment, InvalidAndUnsupportedAlignmentsThrowAsInRmm)
{
  // cuda_memory_resource refuses alignments above 256 before it needs a GPU, so this runs anywhere.
  rmm::mr::cuda_memory_resource cuda;
  std::vector<char> const host(100, 42);
  for (std::size_t const bad : {std::size_t{0}, std::size_t{3}, std::size_t{384}}) {
    EXPECT_THROW((rmm::device_buffer{100, bad, rmm::cuda_stream_default, cuda}), rmm::invalid_argument) << bad;
    EXPECT_THROW((rmm::device_buffer{host.data(), host.size(), bad, rmm::cuda_stream_default, cuda}),
                 rmm::invalid_argument)
      << bad;
  }
  auto const too_large = rmm::CUDA_ALLOCATION_ALIGNMENT * 2;
  EXPECT_THROW((rmm::device_buffer{100, too_large, rmm::cuda_stream_default, cuda}), rmm::bad_alloc);
  EXPECT_THROW((rmm::device_buffer{host.data(), host.size(), too_large, rmm::cuda_stream_default, cuda}),
               rmm::bad_alloc);
  EXPECT_THROW((void)cuda.allocate_sync(100, too_large), rmm::bad_alloc) << "the resource itself, as RMM's";
  rmm::device_buffer empty{std::size_t{0}, too_large, rmm::cuda_stream_default, cuda};  // nothing to allocate
  EXPECT_EQ(empty.alignment(), too_large);
  EXPECT_TRUE(empty.is_empty());
}

TEST(DeviceBufferAlignment, MovedFromBuffersHaveAlignmentOne)
{
  rmm::mr::cuda_memory_resource cuda;
  rmm::device_buffer src{std::size_t{0}, 128, rmm::cuda_stream_default, cuda};
  rmm::device_buffer moved{std::move(src)};
  EXPECT_EQ(moved.alignment(), 128u);
  EXPECT_EQ(src.alignment(), 1u);  // NOLINT(bugprone-use-after-move): RMM's moved-from state
  rmm::device_buffer dest;
  EXPECT_EQ(dest.alignment(), rmm::CUDA_ALLOCATION_ALIGNMENT);
  dest = std::move(moved);
  EXPECT_EQ(dest.alignment(), 128u);
  EXPECT_EQ(moved.alignment(), 1u);  // NOLINT(bugprone-use-after-move)
  rmm::device_buffer copy{src, rmm::cuda_stream_default, cuda};  // a copy of a moved-from buffer
  EXPECT_EQ(copy.alignment(), 1u);
  EXPECT_TRUE(copy.is_empty());
}

TEST(Prefetch, HostMemoryIsANoOp)
{
  std::vector<int> host(100, 1);
  EXPECT_NO_THROW(rmm::prefetch(host.data(), host.size() * sizeof(int), rmm::cuda_device_id{0}, rmm::cuda_stream_default));
  cuda::std::span<int const> span{host.data(), host.size()};
  EXPECT_NO_THROW(rmm::prefetch(span, rmm::cuda_device_id{0}, rmm::cuda_stream_default));
}

// --- GPU ---------------------------------------------------------------------------------------------

class GpuContainers : public ::testing::Test {
 protected:
  void SetUp() override
  {
    if (host_mode()) { GTEST_SKIP() << "needs a CUDA GPU (host mode)"; }
  }
};

TEST_F(GpuContainers, CudaStreamLifecycle)
{
  rmm::cuda_stream s{rmm::cuda_stream::flags::non_blocking};
  EXPECT_TRUE(s.is_valid());
  EXPECT_NE(s.value(), nullptr);
  rmm::cuda_stream_view view = s;
  EXPECT_EQ(view.value(), s.value());
  EXPECT_FALSE(view.is_default());
  cuda::stream_ref ref = s;
  EXPECT_EQ(ref.get(), s.value());
  s.synchronize();
  s.synchronize_no_throw();
  rmm::cuda_stream t{std::move(s)};
  EXPECT_TRUE(t.is_valid());
  EXPECT_FALSE(s.is_valid());  // NOLINT(bugprone-use-after-move)
  EXPECT_THROW((void)s.value(), rmm::logic_error);
  rmm::cuda_stream u;
  u = std::move(t);
  EXPECT_TRUE(u.is_valid());
  EXPECT_NO_THROW(u.view().synchronize());
}

TEST_F(GpuContainers, BufferOverCudaMemoryOnAStream)
{
  rmm::mr::cuda_memory_resource cuda_mr;
  rmm::cuda_stream stream;
  auto const data = pattern(1 << 20, 9);
  rmm::device_buffer buf{data.data(), data.size(), stream, cuda_mr};
  EXPECT_EQ(buf.stream(), stream.view());
  EXPECT_EQ(contents(buf), data);
  void const* const ptr = buf.data();
  buf.resize(1000, stream);
  EXPECT_EQ(buf.data(), ptr);
  buf.resize(3 << 20, stream);
  EXPECT_EQ(std::memcmp(contents(buf).data(), data.data(), 1000), 0);
  rmm::device_buffer copy{buf, stream, cuda_mr};
  EXPECT_EQ(std::memcmp(contents(copy).data(), data.data(), 1000), 0);
  buf.shrink_to_fit(stream);
  EXPECT_THROW((rmm::device_buffer{PiB, stream, cuda_mr}), rmm::out_of_memory);
  stream.synchronize();
}

TEST_F(GpuContainers, UvectorAndScalarOverAPoolOverCudaMemory)
{
  rmm::mr::pool_memory_resource pool{rmm::mr::cuda_memory_resource{}, 1 << 24};
  rmm::cuda_stream stream;
  rmm::device_uvector<int> v{1 << 16, stream, pool};
  for (std::size_t i = 0; i < v.size(); i += 4096) { v.set_element(i, static_cast<int>(i), stream); }
  v.set_element_to_zero_async(1, stream);
  EXPECT_EQ(v.element(4096, stream), 4096);
  EXPECT_EQ(v.element(1, stream), 0);
  EXPECT_THROW((void)v.element(v.size(), stream), rmm::out_of_range);
  v.resize(1 << 18, stream);
  EXPECT_EQ(v.element(8192, stream), 8192);
  rmm::device_uvector<int> copy{v, stream, pool};
  EXPECT_EQ(copy.element(4096 * 3, stream), 4096 * 3);
  rmm::device_scalar<double> s{3.75, stream, pool};
  EXPECT_EQ(s.value(stream), 3.75);
  s.set_value_to_zero_async(stream);
  EXPECT_EQ(s.value(stream), 0.0);
  rmm::device_buffer released = copy.release();
  EXPECT_EQ(released.size(), (std::size_t{1} << 18) * sizeof(int));
  stream.synchronize();
}

TEST_F(GpuContainers, MultipleStreams)
{
  rmm::mr::cuda_memory_resource cuda_mr;
  std::vector<rmm::cuda_stream> streams(4);
  std::vector<rmm::device_uvector<std::int64_t>> vectors;
  for (std::size_t i = 0; i < streams.size(); ++i) {
    vectors.emplace_back(1024, streams[i], cuda_mr);
    for (std::size_t j = 0; j < 1024; j += 128) {
      vectors.back().set_element(j, static_cast<std::int64_t>(i * 10000 + j), streams[i]);
    }
  }
  for (std::size_t i = 0; i < streams.size(); ++i) {
    EXPECT_EQ(vectors[i].element(512, streams[i]), static_cast<std::int64_t>(i * 10000 + 512));
    // Hand the vector to the next stream: synchronize the old one first.
    streams[i].synchronize();
    vectors[i].set_stream(streams[(i + 1) % streams.size()]);
    vectors[i].resize(4096, vectors[i].stream());
    EXPECT_EQ(vectors[i].element(128, vectors[i].stream()), static_cast<std::int64_t>(i * 10000 + 128));
  }
  for (auto& s : streams) { s.synchronize(); }
}

TEST_F(GpuContainers, ThreadsEachWithTheirOwnStream)
{
  rmm::mr::pool_memory_resource pool{rmm::mr::cuda_memory_resource{}, 1 << 24};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      rmm::cuda_stream stream{rmm::cuda_stream::flags::non_blocking};
      for (int i = 0; i < 50; ++i) {
        auto const data = pattern(static_cast<std::size_t>(1000 + i * 100), static_cast<unsigned>(t));
        rmm::device_buffer buf{data.data(), data.size(), stream, pool};
        buf.resize(data.size() * 2, stream);
        rmm::device_scalar<int> s{t * 1000 + i, stream, pool};
        if (std::memcmp(contents(buf).data(), data.data(), data.size()) != 0) { ++failures; }
        if (s.value(stream) != t * 1000 + i) { ++failures; }
      }
      stream.synchronize();
    });
  }
  for (auto& th : threads) { th.join(); }
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(GpuContainers, SixteenStreamPool)
{
  rmm::cuda_stream_pool pool{};
  EXPECT_EQ(pool.get_pool_size(), 16u);
  std::set<cudaStream_t> seen;
  for (std::size_t i = 0; i < 16; ++i) { seen.insert(pool.get_stream().value()); }
  EXPECT_EQ(seen.size(), 16u) << "round robin hands out every stream once per turn";
  EXPECT_EQ(pool.get_stream(3), pool.get_stream(3 + 16)) << "ids wrap modulo the pool size";
  EXPECT_NE(pool.get_stream(3), pool.get_stream(4));
  rmm::mr::cuda_memory_resource cuda_mr;
  std::vector<rmm::device_scalar<int>> scalars;
  for (int i = 0; i < 32; ++i) { scalars.emplace_back(i, pool.get_stream(static_cast<std::size_t>(i)), cuda_mr); }
  for (int i = 0; i < 32; ++i) { EXPECT_EQ(scalars[static_cast<std::size_t>(i)].value(scalars[static_cast<std::size_t>(i)].stream()), i); }
  rmm::cuda_stream_pool nonblocking{2, rmm::cuda_stream::flags::non_blocking};
  EXPECT_EQ(nonblocking.get_pool_size(), 2u);
  EXPECT_NO_THROW(nonblocking.get_stream(1000).synchronize());
}

TEST_F(GpuContainers, PrefetchManagedMemory)
{
  rmm::mr::managed_memory_resource managed;
  rmm::cuda_stream stream;
  rmm::device_uvector<int> v{1 << 20, stream, managed};
  EXPECT_NO_THROW(rmm::prefetch(v.data(), v.size() * sizeof(int), rmm::cuda_device_id{0}, stream));
  EXPECT_NO_THROW(rmm::prefetch(cuda::std::span<int const>{v}, rmm::cuda_device_id{0}, stream));
  stream.synchronize();
}

}  // namespace
