// GoogleTest suite of the header-only C++ API (<rmm/...>) over librmm's C ABI: CCCL concepts,
// allocation through resource_ref and any_resource, shared copies, error mapping, and the registry
// (get/set/reset) with a user-written CCCL resource. GPU-only tests skip themselves in host mode.

#include "counting_resource.hpp"

#include <rmm/aligned.hpp>
#include <rmm/cuda_device.hpp>
#include <rmm/cuda_stream_view.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/mr/system_memory_resource.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>
#include <cuda/stream_ref>

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace {

using device_any = cuda::mr::any_resource<cuda::mr::device_accessible>;

// The user's resource of these tests (counting_resource.hpp).
using rmm_test::counting_resource;
using rmm_test::counts;

// The concepts, checked where they matter to users.
static_assert(cuda::mr::resource_with<rmm::mr::detail::c_resource, cuda::mr::device_accessible>);
static_assert(!cuda::mr::resource_with<rmm::mr::detail::c_resource, cuda::mr::host_accessible>);
static_assert(cuda::mr::resource_with<rmm::mr::cuda_memory_resource, cuda::mr::device_accessible>);
static_assert(!cuda::mr::resource_with<rmm::mr::cuda_memory_resource, cuda::mr::host_accessible>);
static_assert(cuda::mr::resource_with<rmm::mr::system_memory_resource,
                                      cuda::mr::device_accessible,
                                      cuda::mr::host_accessible>);
static_assert(std::is_copy_constructible_v<rmm::mr::system_memory_resource>);
static_assert(std::is_constructible_v<rmm::device_async_resource_ref, rmm::mr::cuda_memory_resource&>);
static_assert(std::is_constructible_v<rmm::host_device_async_resource_ref, rmm::mr::system_memory_resource&>);
static_assert(!std::is_constructible_v<rmm::host_async_resource_ref, rmm::mr::cuda_memory_resource&>);
static_assert(std::is_constructible_v<device_any, rmm::mr::system_memory_resource>);

bool same(rmm_resource a, rmm_resource b) { return a.self == b.self && a.vtable == b.vtable; }

/// Puts the registry's initial resource back when a test ends, whatever it did.
class Registry : public ::testing::Test {
 protected:
  void TearDown() override { rmm::mr::reset_current_device_resource(); }
};

void write_read(void* ptr, std::size_t bytes)
{
  ASSERT_NE(ptr, nullptr);
  auto* p = static_cast<unsigned char*>(ptr);
  for (std::size_t i = 0; i < bytes; ++i) { p[i] = static_cast<unsigned char>(i * 7); }
  for (std::size_t i = 0; i < bytes; ++i) { ASSERT_EQ(p[i], static_cast<unsigned char>(i * 7)); }
}

}  // namespace

TEST(Aligned, Helpers)
{
  EXPECT_EQ(rmm::CUDA_ALLOCATION_ALIGNMENT, 256U);
  EXPECT_TRUE(rmm::is_pow2(1));
  EXPECT_TRUE(rmm::is_pow2(256));
  EXPECT_FALSE(rmm::is_pow2(0));
  EXPECT_FALSE(rmm::is_pow2(3));
  EXPECT_EQ(rmm::align_up(1, 256), 256U);
  EXPECT_EQ(rmm::align_up(256, 256), 256U);
  EXPECT_EQ(rmm::align_down(511, 256), 256U);
  EXPECT_TRUE(rmm::is_aligned(512, 256));
  EXPECT_FALSE(rmm::is_aligned(100, 64));
  EXPECT_TRUE(rmm::is_supported_base_resource_alignment(256));
  EXPECT_FALSE(rmm::is_supported_base_resource_alignment(512));
}

TEST(CudaStreamView, DefaultsAndConversions)
{
  rmm::cuda_stream_view s;
  EXPECT_EQ(s.value(), nullptr);
  EXPECT_TRUE(s.is_default());
  EXPECT_FALSE(s.is_per_thread_default());
  EXPECT_EQ(s, rmm::cuda_stream_default);
  EXPECT_TRUE(rmm::cuda_stream_legacy.is_default());
  EXPECT_TRUE(rmm::cuda_stream_per_thread.is_per_thread_default());
  EXPECT_NE(rmm::cuda_stream_legacy, rmm::cuda_stream_per_thread);
  cuda::stream_ref ref = rmm::cuda_stream_per_thread;
  EXPECT_EQ(ref.get(), cudaStreamPerThread);
  EXPECT_EQ(rmm::cuda_stream_view{ref}, rmm::cuda_stream_per_thread);
  static_assert(!std::is_constructible_v<rmm::cuda_stream_view, int>);
  static_assert(!std::is_constructible_v<rmm::cuda_stream_view, std::nullptr_t>);
}

// RMM's SystemMRSimpleTest.ThrowIfNotSupported: on a GPU without HMM/ATS the device could not use
// system memory, so the constructor refuses; in host mode it is the process's memory.
TEST(SystemMemoryResource, ConstructorThrowsWhereTheDeviceCannotUseSystemMemory)
{
  bool const host_mode = rmm_is_host_mode() != 0;
  bool const supported = !host_mode && rmm::mr::detail::is_system_memory_supported(rmm::get_current_cuda_device());
  if (host_mode || supported) {
    EXPECT_NO_THROW(rmm::mr::system_memory_resource{});
  } else {
    EXPECT_THROW(rmm::mr::system_memory_resource{}, rmm::logic_error);
    // The unchecked one (host-only memory) still works from the host.
    auto host_only = rmm::mr::detail::unchecked_system_memory_resource();
    void* p = host_only.allocate_sync(64);
    host_only.deallocate_sync(p, 64);
  }
}

TEST(SystemMemoryResource, AllocateThroughResourceRef)
{
  rmm::mr::system_memory_resource mr = rmm::mr::detail::unchecked_system_memory_resource();
  rmm::device_async_resource_ref ref{mr};
  void* p = ref.allocate(rmm::cuda_stream_default, 1000, 256);
  EXPECT_TRUE(rmm::is_pointer_aligned(p, 256));
  write_read(p, 1000);
  ref.deallocate(rmm::cuda_stream_default, p, 1000, 256);

  rmm::host_resource_ref host_ref{mr};
  void* q = host_ref.allocate_sync(64, 64);
  write_read(q, 64);
  host_ref.deallocate_sync(q, 64, 64);
}

TEST(SystemMemoryResource, AllocateThroughAnyResource)
{
  device_any any{rmm::mr::detail::unchecked_system_memory_resource()};
  void* p = any.allocate(rmm::cuda_stream_per_thread, 4096, 512);
  EXPECT_TRUE(rmm::is_pointer_aligned(p, 512));
  write_read(p, 4096);
  any.deallocate(rmm::cuda_stream_per_thread, p, 4096, 512);
  EXPECT_NE(cuda::mr::resource_cast<rmm::mr::system_memory_resource>(&any), nullptr);
  EXPECT_EQ(cuda::mr::resource_cast<rmm::mr::cuda_memory_resource>(&any), nullptr);
}

TEST(CResource, CopiesShareOneResource)
{
  rmm::mr::system_memory_resource a = rmm::mr::detail::unchecked_system_memory_resource();
  rmm::mr::system_memory_resource b = a;
  EXPECT_TRUE(same(a.handle(), b.handle()));
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a != b);
  EXPECT_TRUE(a == rmm::mr::detail::unchecked_system_memory_resource());  // stateless: every one is equal
  void* p = a.allocate_sync(128);
  b.deallocate_sync(p, 128);  // memory from a returns to its copy
  rmm::mr::system_memory_resource moved = std::move(b);
  EXPECT_TRUE(same(moved.handle(), a.handle()));
  EXPECT_EQ(b.handle().vtable, nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
}

TEST(CResource, CopyRetainsAndDestructionReleases)
{
  // A C++ resource behind the C vtable: its box counts the handle's references.
  auto c = std::make_shared<counts>();
  auto first = rmm::mr::detail::to_c_resource(device_any{counting_resource{c}});
  auto* box  = static_cast<rmm::mr::detail::cpp_resource_box*>(first.handle().self);
  EXPECT_EQ(box->refs.load(), 1U);
  {
    auto copy = first;
    EXPECT_EQ(box->refs.load(), 2U);
    EXPECT_TRUE(copy == first);
    auto assigned = rmm::mr::detail::c_resource{copy};
    EXPECT_EQ(box->refs.load(), 3U);
    auto moved = std::move(assigned);
    EXPECT_EQ(box->refs.load(), 3U);
  }
  EXPECT_EQ(box->refs.load(), 1U);
  EXPECT_EQ(c->live.load(), 1);
  first = rmm::mr::detail::c_resource::adopt(rmm_resource{nullptr, nullptr});
  EXPECT_EQ(c->live.load(), 0);  // the last reference freed the box and the resource in it
}

TEST(CResource, UnwrapsRmmResources)
{
  rmm::mr::system_memory_resource sys = rmm::mr::detail::unchecked_system_memory_resource();
  auto handle = rmm::mr::detail::to_c_resource(device_any{sys});
  EXPECT_TRUE(same(handle.handle(), sys.handle()));  // passed through, no box
  EXPECT_EQ(handle.handle().vtable->owner, rmm_abi_owner());
}

// Issue 12: a C++ wrapper around a handle that was released elsewhere throws rmm::logic_error (the
// handle is checked), instead of hanging or reading freed memory.
TEST(CResource, AReleasedHandleThrowsLogicError)
{
  rmm_resource h{nullptr, nullptr};
  rmm_error err{};
  ASSERT_EQ(rmm_system_memory_resource_new(&h, &err), RMM_OK) << err.message;
  rmm_resource_retain(h);
  auto mr = rmm::mr::detail::c_resource::adopt(h);  // owns one of the two references
  rmm_resource_release(h);
  rmm_resource_release(h);  // one release too many: the resource is gone, mr's handle is stale
  EXPECT_THROW(mr.allocate(rmm::cuda_stream_default, 64), rmm::logic_error);
  EXPECT_THROW(mr.allocate_sync(64), rmm::logic_error);
  // mr's destructor releases the stale handle once more: a logged no-op.
}

TEST(Errors, MappedFromCAbi)
{
  rmm::mr::system_memory_resource mr = rmm::mr::detail::unchecked_system_memory_resource();
  EXPECT_THROW((void)mr.allocate_sync(64, 3), rmm::logic_error);
  EXPECT_THROW((void)mr.allocate(rmm::cuda_stream_default, std::size_t{1} << 50, 256), rmm::out_of_memory);
  try {
    (void)mr.allocate_sync(std::size_t{1} << 50, 256);
    FAIL() << "1 PiB was allocated";
  } catch (rmm::bad_alloc const& e) {
    EXPECT_NE(std::strstr(e.what(), "RMM_ERROR_OUT_OF_MEMORY"), nullptr) << e.what();
  }
  // deallocate cannot throw: a bad alignment is reported, not thrown.
  mr.deallocate_sync(nullptr, 64, 3);
}

TEST(Errors, KindToException)
{
  rmm_error err{};
  std::strcpy(err.message, "details");
  EXPECT_THROW(rmm::detail::throw_rmm_error(RMM_ERROR_OUT_OF_MEMORY, &err, "x"), rmm::out_of_memory);
  EXPECT_THROW(rmm::detail::throw_rmm_error(RMM_ERROR_CUDA, &err, "x"), rmm::cuda_error);
  EXPECT_THROW(rmm::detail::throw_rmm_error(RMM_ERROR_NO_DRIVER, &err, "x"), rmm::cuda_error);
  EXPECT_THROW(rmm::detail::throw_rmm_error(RMM_ERROR_NO_DEVICE, nullptr, "x"), rmm::cuda_error);
  EXPECT_THROW(rmm::detail::throw_rmm_error(RMM_ERROR_INVALID_ARGUMENT, &err, "x"), rmm::logic_error);
  EXPECT_THROW(rmm::detail::throw_rmm_error(RMM_ERROR_UNSUPPORTED, &err, "x"), rmm::logic_error);
  EXPECT_THROW(rmm::detail::throw_rmm_error(RMM_ERROR_PANIC, &err, "x"), rmm::logic_error);
  try {
    rmm::detail::throw_rmm_error(RMM_ERROR_CUDA, &err, "what");
  } catch (rmm::cuda_error const& e) {
    EXPECT_STREQ(e.what(), "what: RMM_ERROR_CUDA: details");
  }
}

TEST(CudaMemoryResource, HostModeAllocationIsCudaError)
{
  if (!rmm_is_host_mode()) { GTEST_SKIP() << "needs host mode (no CUDA GPU)"; }
  rmm::mr::cuda_memory_resource mr;  // constructing one works without a GPU
  EXPECT_THROW((void)mr.allocate_sync(256), rmm::cuda_error);
  EXPECT_THROW((void)mr.allocate(rmm::cuda_stream_default, 256), rmm::cuda_error);
}

TEST(CudaMemoryResource, AllocatesOnGpu)
{
  if (rmm_is_host_mode()) { GTEST_SKIP() << "needs a CUDA GPU"; }
  rmm::mr::cuda_memory_resource mr;
  rmm::device_async_resource_ref ref{mr};
  void* p = ref.allocate(rmm::cuda_stream_default, 1 << 20, 256);
  EXPECT_NE(p, nullptr);
  EXPECT_TRUE(rmm::is_pointer_aligned(p, 256));
  ref.deallocate(rmm::cuda_stream_default, p, 1 << 20, 256);
}

TEST_F(Registry, InitialResource)
{
  auto ref = rmm::mr::get_current_device_resource_ref();
  void* p  = ref.allocate_sync(100, 256);
  EXPECT_NE(p, nullptr);
  ref.deallocate_sync(p, 100, 256);
  EXPECT_TRUE(ref == rmm::mr::get_per_device_resource_ref(rmm::cuda_device_id{0}));
  if (rmm_is_host_mode()) {
    auto previous = rmm::mr::reset_current_device_resource();
    EXPECT_NE(cuda::mr::resource_cast<rmm::mr::system_memory_resource>(&previous), nullptr);
  }
}

TEST_F(Registry, InvalidDeviceIsLogicError)
{
  EXPECT_THROW((void)rmm::mr::get_per_device_resource_ref(rmm::cuda_device_id{4096}), rmm::logic_error);
  EXPECT_THROW((void)rmm::mr::get_per_device_resource_ref(rmm::cuda_device_id{-1}), rmm::logic_error);
}

TEST_F(Registry, UserResourceAsCurrent)
{
  auto c = std::make_shared<counts>();
  {
    auto previous = rmm::mr::set_current_device_resource(counting_resource{c});
    if (rmm_is_host_mode()) {
      EXPECT_NE(cuda::mr::resource_cast<rmm::mr::system_memory_resource>(&previous), nullptr);
    } else {
      EXPECT_NE(cuda::mr::resource_cast<rmm::mr::cuda_memory_resource>(&previous), nullptr);
    }

    // From the C side: a C++ box (not a librmm handle) that calls the user's resource.
    rmm_resource handle{nullptr, nullptr};
    rmm_error err{};
    ASSERT_EQ(rmm_get_current_device_resource(&handle, &err), RMM_OK) << err.message;
    EXPECT_NE(handle.vtable->owner, rmm_abi_owner());
    EXPECT_EQ(rmm_resource_access(handle), RMM_ACCESS_DEVICE | RMM_ACCESS_HOST);
    void* p = nullptr;
    ASSERT_EQ(rmm_resource_allocate(handle, nullptr, 512, 256, &p, &err), RMM_OK) << err.message;
    write_read(p, 512);
    ASSERT_EQ(rmm_resource_deallocate(handle, nullptr, p, 512, 256, &err), RMM_OK) << err.message;
    EXPECT_EQ(c->allocs.load(), 1);
    EXPECT_EQ(c->deallocs.load(), 1);
    // An exception of the user's resource comes back as an error kind.
    EXPECT_EQ(rmm_resource_allocate(handle, nullptr, std::size_t{1} << 40, 256, &p, &err), RMM_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(err.bytes, std::uint64_t{1} << 40);
    rmm_resource_release(handle);

    // From C++: the reference reaches the user's resource itself.
    auto ref = rmm::mr::get_current_device_resource_ref();
    void* q  = ref.allocate(rmm::cuda_stream_default, 256, 256);
    write_read(q, 256);
    ref.deallocate(rmm::cuda_stream_default, q, 256, 256);
    EXPECT_EQ(c->allocs.load(), 2);
    EXPECT_EQ(c->deallocs.load(), 2);
    EXPECT_TRUE(ref == rmm::mr::get_current_device_resource_ref());

    // Reset: the previous resource comes back as the user's type, and is the only owner left.
    auto mine = rmm::mr::reset_current_device_resource();
    auto* back = cuda::mr::resource_cast<counting_resource>(&mine);
    ASSERT_NE(back, nullptr);
    EXPECT_TRUE(*back == counting_resource{c});
    EXPECT_EQ(c->live.load(), 1);
  }
  EXPECT_EQ(c->live.load(), 0);  // released: nothing (registry, cache, box) kept it
}

TEST_F(Registry, SetReturnsPrevious)
{
  auto c1 = std::make_shared<counts>();
  auto c2 = std::make_shared<counts>();
  (void)rmm::mr::set_per_device_resource(rmm::cuda_device_id{0}, counting_resource{c1});
  (void)rmm::mr::get_per_device_resource_ref(rmm::cuda_device_id{0});  // cached
  {
    auto previous = rmm::mr::set_per_device_resource(rmm::cuda_device_id{0}, counting_resource{c2});
    auto* first   = cuda::mr::resource_cast<counting_resource>(&previous);
    ASSERT_NE(first, nullptr);
    EXPECT_TRUE(*first == counting_resource{c1});
    EXPECT_EQ(c1->live.load(), 1);  // only `previous` holds it
  }
  EXPECT_EQ(c1->live.load(), 0);
  auto second = rmm::mr::reset_per_device_resource(rmm::cuda_device_id{0});
  ASSERT_NE(cuda::mr::resource_cast<counting_resource>(&second), nullptr);
  EXPECT_TRUE(*cuda::mr::resource_cast<counting_resource>(&second) == counting_resource{c2});
}

TEST_F(Registry, RmmResourcesArePassedThrough)
{
  if (!rmm_is_host_mode()) { GTEST_SKIP() << "sets a system_memory_resource: host mode only"; }
  rmm::mr::system_memory_resource sys = rmm::mr::detail::unchecked_system_memory_resource();
  (void)rmm::mr::set_current_device_resource(device_any{sys});
  rmm_resource handle{nullptr, nullptr};
  ASSERT_EQ(rmm_get_current_device_resource(&handle, nullptr), RMM_OK);
  EXPECT_TRUE(same(handle, sys.handle()));  // the librmm handle itself, no C++ box around it
  rmm_resource_release(handle);
}

TEST_F(Registry, HostModeRejectsDeviceOnlyResource)
{
  if (!rmm_is_host_mode()) { GTEST_SKIP() << "host mode only"; }
  auto c = std::make_shared<counts>();
  // Erased without host_accessible: the box reports device access only, which host mode refuses.
  EXPECT_THROW((void)rmm::mr::set_current_device_resource(device_any{counting_resource{c}}), rmm::logic_error);
  EXPECT_EQ(c->live.load(), 0);
}

TEST_F(Registry, CudaResourceOnGpu)
{
  if (rmm_is_host_mode()) { GTEST_SKIP() << "needs a CUDA GPU"; }
  (void)rmm::mr::set_current_device_resource(rmm::mr::cuda_memory_resource{});
  auto ref = rmm::mr::get_current_device_resource_ref();
  void* p  = ref.allocate(rmm::cuda_stream_default, 4096, 256);
  EXPECT_NE(p, nullptr);
  ref.deallocate(rmm::cuda_stream_default, p, 4096, 256);
}

// ---- cuda_device.hpp: current device, device count, memory, cuda_set_device_raii ------------------

TEST(CudaDevice, HostModeHasDeviceZeroAndNoDeviceMemory)
{
  if (!rmm_is_host_mode()) { GTEST_SKIP() << "host mode only (a GPU is present)"; }
  EXPECT_EQ(rmm::cuda_device_id{}.value(), 0);
  EXPECT_EQ(rmm::get_current_cuda_device(), rmm::cuda_device_id{0});
  EXPECT_THROW((void)rmm::get_num_cuda_devices(), rmm::cuda_error);
  EXPECT_THROW((void)rmm::available_device_memory(), rmm::cuda_error);
  EXPECT_THROW((void)rmm::percent_of_free_device_memory(50), rmm::cuda_error);
  {
    rmm::cuda_set_device_raii same{rmm::cuda_device_id{0}};  // already current: nothing to do
    EXPECT_EQ(rmm::get_current_cuda_device().value(), 0);
  }
  EXPECT_THROW(rmm::cuda_set_device_raii{rmm::cuda_device_id{1}}, rmm::cuda_error);
}

TEST(CudaDevice, IdsCompareAsOrdinals)
{
  EXPECT_LT(rmm::cuda_device_id{0}, rmm::cuda_device_id{1});
  EXPECT_GE(rmm::cuda_device_id{2}, rmm::cuda_device_id{2});
  EXPECT_NE(rmm::cuda_device_id{2}, rmm::cuda_device_id{3});
}

TEST(CudaDevice, GpuDevicesAreCountedMeasuredAndSwitched)
{
  if (rmm_is_host_mode()) { GTEST_SKIP() << "needs a CUDA GPU (host mode)"; }
  int const count = rmm::get_num_cuda_devices();
  ASSERT_GE(count, 1);
  auto const [free, total] = rmm::available_device_memory();
  EXPECT_GT(free, 0U);
  EXPECT_LE(free, total);
  auto const half = rmm::percent_of_free_device_memory(50);
  EXPECT_TRUE(rmm::is_aligned(half, rmm::CUDA_ALLOCATION_ALIGNMENT));
  EXPECT_LE(half, free);
  auto const before = rmm::get_current_cuda_device();
  for (int d = 0; d < count; ++d) {
    rmm::cuda_set_device_raii guard{rmm::cuda_device_id{d}};
    EXPECT_EQ(rmm::get_current_cuda_device().value(), d);
    EXPECT_EQ(rmm::cuda_device_id{}.value(), d);
  }
  EXPECT_EQ(rmm::get_current_cuda_device(), before);
  EXPECT_THROW(rmm::cuda_set_device_raii{rmm::cuda_device_id{count}}, rmm::logic_error);
  EXPECT_EQ(rmm::get_current_cuda_device(), before);
}
