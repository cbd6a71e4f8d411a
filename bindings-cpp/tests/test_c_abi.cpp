// GoogleTest suite of the C ABI (rmm_c.h) as C++ code sees it: the registry, allocation, reference
// counting, error kinds, and a resource implemented in C++ that rmm (Rust) holds and calls.

#include <rmm/rmm_c.h>

#include <gtest/gtest.h>

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

/// Owns one reference of a handle (released on destruction), like a minimal any_resource.
class Owned {
 public:
  Owned() = default;
  explicit Owned(rmm_resource h) : h_{h} {}
  Owned(Owned&& other) noexcept : h_{other.h_} { other.h_ = rmm_resource{nullptr, nullptr}; }
  Owned(Owned const&) = delete;
  Owned& operator=(Owned const&) = delete;
  ~Owned() { rmm_resource_release(h_); }
  rmm_resource* out() { return &h_; }
  rmm_resource get() const { return h_; }
  std::string name() const
  {
    char const* n = rmm_resource_name(h_);
    return n ? n : "<null>";
  }

 private:
  rmm_resource h_{nullptr, nullptr};
};

bool same(rmm_resource a, rmm_resource b) { return a.self == b.self && a.vtable == b.vtable; }

std::string initial_name()
{
  return rmm_is_host_mode() ? "system_memory_resource" : "cuda_memory_resource";
}

/// A resource that the registry accepts in either mode: the current device's base resource.
Owned make_base_resource()
{
  Owned r;
  rmm_error err{};
  int status = rmm_is_host_mode() ? rmm_system_memory_resource_new(r.out(), &err)
                                  : rmm_cuda_memory_resource_new(r.out(), &err);
  EXPECT_EQ(status, RMM_OK) << err.message;
  return r;
}

// --- a resource implemented in C++ -------------------------------------------------------------

int cpp_owner_tag;  // its address identifies this binary's handles

struct CountingResource {
  std::atomic<int> refs{1};
  std::atomic<int> allocations{0};
  std::atomic<int> deallocations{0};
  std::atomic<int> access_calls{0};
  std::atomic<bool>* destroyed;

  explicit CountingResource(std::atomic<bool>* d) : destroyed{d} {}
  ~CountingResource() { destroyed->store(true); }

  static CountingResource* of(void* self) { return static_cast<CountingResource*>(self); }
  rmm_resource handle();
};

extern "C" {
void cr_retain(void* self) { CountingResource::of(self)->refs.fetch_add(1); }
void cr_release(void* self)
{
  if (CountingResource::of(self)->refs.fetch_sub(1) == 1) { delete CountingResource::of(self); }
}
int cr_allocate_sync(void* self, size_t bytes, size_t alignment, void** out, rmm_error* err)
{
  if (out == nullptr) { return RMM_ERROR_INVALID_ARGUMENT; }
  if (bytes == 0) {
    *out = nullptr;
    return RMM_OK;
  }
  if (bytes > (std::size_t{1} << 40)) {
    if (err != nullptr) {
      err->kind      = RMM_ERROR_OUT_OF_MEMORY;
      err->cuda_code = 0;
      err->bytes     = bytes;
      std::snprintf(err->message, sizeof(err->message), "counting_resource: %zu bytes is too much", bytes);
    }
    return RMM_ERROR_OUT_OF_MEMORY;
  }
  void* p = nullptr;
  if (posix_memalign(&p, alignment < sizeof(void*) ? sizeof(void*) : alignment, bytes) != 0) {
    return RMM_ERROR_OUT_OF_MEMORY;
  }
  CountingResource::of(self)->allocations.fetch_add(1);
  *out = p;
  return RMM_OK;
}
int cr_allocate(void* self, void*, size_t bytes, size_t alignment, void** out, rmm_error* err)
{
  return cr_allocate_sync(self, bytes, alignment, out, err);
}
int cr_deallocate_sync(void* self, void* ptr, size_t, size_t, rmm_error*)
{
  if (ptr != nullptr) { CountingResource::of(self)->deallocations.fetch_add(1); }
  std::free(ptr);
  return RMM_OK;
}
int cr_deallocate(void* self, void*, void* ptr, size_t bytes, size_t alignment, rmm_error* err)
{
  return cr_deallocate_sync(self, ptr, bytes, alignment, err);
}
uint32_t cr_access(void* self)
{
  CountingResource::of(self)->access_calls.fetch_add(1);
  return RMM_ACCESS_HOST | RMM_ACCESS_DEVICE;  // host memory; claims device access to be accepted with a GPU too
}
char const* cr_name(void*) { return "counting_resource"; }
int cr_is_equal(void* self, void* other_self, rmm_resource_vtable const*) { return self == other_self; }
}

rmm_resource_vtable const counting_vtable = {
  RMM_ABI_VERSION,
  sizeof(rmm_resource_vtable),
  &cpp_owner_tag,
  cr_retain,
  cr_release,
  cr_allocate,
  cr_deallocate,
  cr_allocate_sync,
  cr_deallocate_sync,
  cr_access,
  cr_name,
  cr_is_equal,
};

rmm_resource CountingResource::handle() { return rmm_resource{this, &counting_vtable}; }

/// Leaves the current device's resource as it found it.
class RegistryTest : public ::testing::Test {
 protected:
  void TearDown() override
  {
    rmm_error err{};
    ASSERT_EQ(rmm_reset_current_device_resource(nullptr, &err), RMM_OK) << err.message;
  }
};

}  // namespace

// --- library ------------------------------------------------------------------------------------

TEST(Library, VersionOwnerAndKindNames)
{
  EXPECT_EQ(rmm_abi_version(), RMM_ABI_VERSION);
  EXPECT_NE(rmm_abi_owner(), nullptr);
  EXPECT_STREQ(rmm_error_kind_name(RMM_OK), "RMM_OK");
  EXPECT_STREQ(rmm_error_kind_name(RMM_ERROR_OUT_OF_MEMORY), "RMM_ERROR_OUT_OF_MEMORY");
  EXPECT_STREQ(rmm_error_kind_name(12345), "RMM_ERROR_UNKNOWN");
  static_assert(sizeof(rmm_error) == 528, "rmm_error layout");
  static_assert(offsetof(rmm_error, message) == 16, "rmm_error layout");
  static_assert(sizeof(rmm_resource_vtable) == 8 + 10 * sizeof(void*), "vtable layout");
}

TEST(Library, OwnResourcesCarryTheLibrarysOwnerTag)
{
  Owned r = make_base_resource();
  EXPECT_EQ(r.get().vtable->owner, rmm_abi_owner());
  EXPECT_EQ(r.get().vtable->abi_version, RMM_ABI_VERSION);
  EXPECT_EQ(r.get().vtable->size, sizeof(rmm_resource_vtable));
}

// --- registry -----------------------------------------------------------------------------------

TEST_F(RegistryTest, GetSetReset)
{
  rmm_error err{};
  Owned initial;
  ASSERT_EQ(rmm_get_current_device_resource(initial.out(), &err), RMM_OK) << err.message;
  EXPECT_EQ(initial.name(), initial_name());

  Owned mine = make_base_resource();
  Owned previous;
  ASSERT_EQ(rmm_set_current_device_resource(mine.get(), previous.out(), &err), RMM_OK) << err.message;
  EXPECT_TRUE(same(previous.get(), initial.get())) << "set returns the previous resource";

  Owned current;
  ASSERT_EQ(rmm_get_current_device_resource(current.out(), &err), RMM_OK);
  EXPECT_TRUE(same(current.get(), mine.get())) << "the registry holds our object, not a copy";

  Owned back;
  ASSERT_EQ(rmm_reset_current_device_resource(back.out(), &err), RMM_OK);
  EXPECT_TRUE(same(back.get(), mine.get()));
  Owned after;
  ASSERT_EQ(rmm_get_current_device_resource(after.out(), &err), RMM_OK);
  EXPECT_TRUE(same(after.get(), initial.get())) << "reset restores the initial resource";
}

TEST_F(RegistryTest, PerDeviceMatchesCurrentOnDeviceZeroInHostMode)
{
  if (!rmm_is_host_mode()) { GTEST_SKIP() << "host-mode behaviour (a GPU is present)"; }
  rmm_error err{};
  Owned mine = make_base_resource();
  ASSERT_EQ(rmm_set_per_device_resource(0, mine.get(), nullptr, &err), RMM_OK) << err.message;
  Owned current;
  ASSERT_EQ(rmm_get_current_device_resource(current.out(), &err), RMM_OK);
  EXPECT_TRUE(same(current.get(), mine.get()));
  Owned device1;
  EXPECT_EQ(rmm_get_per_device_resource(1, device1.out(), &err), RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(err.message, "host mode"), nullptr) << err.message;
  EXPECT_EQ(device1.get().vtable, nullptr) << "out is the empty handle on failure";
}

TEST_F(RegistryTest, InvalidDevicesAreInvalidArguments)
{
  rmm_error err{};
  Owned r;
  EXPECT_EQ(rmm_get_per_device_resource(-1, r.out(), &err), RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(err.kind, RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(rmm_get_per_device_resource(4096, r.out(), &err), RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(err.message, "4096"), nullptr) << err.message;
  EXPECT_EQ(rmm_reset_per_device_resource(4096, nullptr, &err), RMM_ERROR_INVALID_ARGUMENT);
}

TEST_F(RegistryTest, DeviceOnlyResourceIsRejectedInHostMode)
{
  if (!rmm_is_host_mode()) { GTEST_SKIP() << "host-mode behaviour (a GPU is present)"; }
  rmm_error err{};
  Owned cuda;
  ASSERT_EQ(rmm_cuda_memory_resource_new(cuda.out(), &err), RMM_OK);
  EXPECT_EQ(rmm_resource_access(cuda.get()), RMM_ACCESS_DEVICE);
  EXPECT_EQ(rmm_set_current_device_resource(cuda.get(), nullptr, &err), RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(err.message, "cuda_memory_resource"), nullptr) << err.message;
  void* p = nullptr;
  int status = rmm_resource_allocate(cuda.get(), nullptr, 64, 256, &p, &err);
  EXPECT_TRUE(status == RMM_ERROR_NO_DRIVER || status == RMM_ERROR_NO_DEVICE) << err.message;
}

TEST_F(RegistryTest, ConcurrentGetsAndAllocations)
{
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        rmm_error err{};
        Owned mr;
        void* p = nullptr;
        if (rmm_get_current_device_resource(mr.out(), &err) != RMM_OK ||
            rmm_resource_allocate(mr.get(), nullptr, 256, 256, &p, &err) != RMM_OK ||
            rmm_resource_deallocate(mr.get(), nullptr, p, 256, 256, &err) != RMM_OK) {
          failures.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) { th.join(); }
  EXPECT_EQ(failures.load(), 0);
}

// --- allocation and errors ----------------------------------------------------------------------

TEST(HostMode, AllocateWriteReadOnTheCurrentResource)
{
  if (!rmm_is_host_mode()) { GTEST_SKIP() << "host-mode behaviour (a GPU is present)"; }
  rmm_error err{};
  Owned mr;
  ASSERT_EQ(rmm_get_current_device_resource(mr.out(), &err), RMM_OK);
  ASSERT_EQ(mr.name(), "system_memory_resource");
  ASSERT_TRUE(rmm_resource_access(mr.get()) & RMM_ACCESS_HOST);
  void* p = nullptr;
  ASSERT_EQ(rmm_resource_allocate(mr.get(), nullptr, 1 << 20, 4096, &p, &err), RMM_OK) << err.message;
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % 4096, 0u);
  auto* bytes = static_cast<unsigned char*>(p);
  for (int i = 0; i < (1 << 20); ++i) { bytes[i] = static_cast<unsigned char>(i * 7); }
  for (int i = 0; i < (1 << 20); i += 4093) { ASSERT_EQ(bytes[i], static_cast<unsigned char>(i * 7)); }
  EXPECT_EQ(rmm_resource_deallocate(mr.get(), nullptr, p, 1 << 20, 4096, &err), RMM_OK);
  ASSERT_EQ(rmm_resource_allocate_sync(mr.get(), 100, 8, &p, &err), RMM_OK);
  std::memset(p, 1, 100);
  EXPECT_EQ(rmm_resource_deallocate_sync(mr.get(), p, 100, 8, &err), RMM_OK);
  ASSERT_EQ(rmm_resource_allocate(mr.get(), nullptr, 0, 256, &p, &err), RMM_OK);
  EXPECT_EQ(p, nullptr) << "0 bytes gives NULL";
}

TEST(Errors, KindsAndMessages)
{
  Owned mr = make_base_resource();
  rmm_error err{};
  void* p = nullptr;
  EXPECT_EQ(rmm_resource_allocate(mr.get(), nullptr, 64, 3, &p, &err), RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(err.kind, RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(err.message, "power of two"), nullptr) << err.message;

  std::size_t const pib = std::size_t{1} << 50;
  EXPECT_EQ(rmm_resource_allocate(mr.get(), nullptr, pib, 256, &p, &err), RMM_ERROR_OUT_OF_MEMORY) << err.message;
  EXPECT_EQ(err.kind, RMM_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(err.bytes, pib);
  EXPECT_NE(std::strstr(err.message, "out of memory"), nullptr) << err.message;

  // A NULL error out-parameter is allowed; NULL required out-pointers are errors, not crashes.
  EXPECT_EQ(rmm_resource_allocate(mr.get(), nullptr, 64, 3, &p, nullptr), RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(rmm_resource_allocate(mr.get(), nullptr, 64, 256, nullptr, &err), RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(rmm_get_current_device_resource(nullptr, &err), RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(rmm_system_memory_resource_new(nullptr, nullptr), RMM_ERROR_INVALID_ARGUMENT);

  // The empty handle: rejected by operations, ignored by retain/release.
  rmm_resource empty{nullptr, nullptr};
  EXPECT_EQ(rmm_resource_allocate(empty, nullptr, 64, 256, &p, &err), RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(rmm_set_current_device_resource(empty, nullptr, &err), RMM_ERROR_INVALID_ARGUMENT);
  rmm_resource_retain(empty);
  rmm_resource_release(empty);
  EXPECT_EQ(rmm_resource_name(empty), nullptr);

  // A vtable of another ABI version is refused.
  rmm_resource_vtable future = counting_vtable;
  future.abi_version     = RMM_ABI_VERSION + 1;
  std::atomic<bool> destroyed{false};
  auto* r = new CountingResource(&destroyed);
  EXPECT_EQ(rmm_set_current_device_resource(rmm_resource{r, &future}, nullptr, &err), RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(err.message, "ABI version"), nullptr) << err.message;
  EXPECT_EQ(r->refs.load(), 1) << "a refused handle is not retained";
  cr_release(r);
  EXPECT_TRUE(destroyed.load());
}

// Issue 12: sub-allocators refuse frees that do not match a live allocation (an interior pointer,
// a wrong size, a double free) with RMM_ERROR_INVALID_ARGUMENT and stay intact; the tracking
// adaptor refuses frees it never tracked instead of forwarding them to its upstream.
TEST(CheckedFrees, PoolArenaAndTrackingRefuseWrongFrees)
{
  Owned base = make_base_resource();
  rmm_error err{};
  Owned pool;
  ASSERT_EQ(rmm_pool_memory_resource_new(base.get(), 1 << 20, 1 << 20, pool.out(), &err), RMM_OK) << err.message;
  Owned arena;
  ASSERT_EQ(rmm_arena_memory_resource_new(base.get(), 4 << 20, 0, arena.out(), &err), RMM_OK) << err.message;
  for (rmm_resource mr : {pool.get(), arena.get()}) {
    void* p = nullptr;
    ASSERT_EQ(rmm_resource_allocate(mr, nullptr, 4096, 256, &p, &err), RMM_OK) << err.message;
    char* c = static_cast<char*>(p);
    EXPECT_EQ(rmm_resource_deallocate(mr, nullptr, c + 256, 256, 256, &err), RMM_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(err.message, "not a live allocation"), nullptr) << err.message;
    EXPECT_EQ(rmm_resource_deallocate(mr, nullptr, p, 256, 256, &err), RMM_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(err.message, "allocated with 4096 bytes"), nullptr) << err.message;
    // The live block is not handed out again.
    std::vector<void*> others;
    for (int i = 0; i < 32; ++i) {
      void* q = nullptr;
      ASSERT_EQ(rmm_resource_allocate(mr, nullptr, 256, 256, &q, &err), RMM_OK) << err.message;
      EXPECT_FALSE(q >= p && q < static_cast<void*>(c + 4096)) << "handed out inside the live block";
      others.push_back(q);
    }
    for (void* q : others) { EXPECT_EQ(rmm_resource_deallocate(mr, nullptr, q, 256, 256, &err), RMM_OK); }
    EXPECT_EQ(rmm_resource_deallocate(mr, nullptr, p, 4096, 256, &err), RMM_OK) << err.message;
    EXPECT_EQ(rmm_resource_deallocate(mr, nullptr, p, 4096, 256, &err), RMM_ERROR_INVALID_ARGUMENT) << "double free";
  }
  Owned tracking;
  ASSERT_EQ(rmm_tracking_resource_adaptor_new(base.get(), 0, tracking.out(), &err), RMM_OK) << err.message;
  void* behind = nullptr;
  ASSERT_EQ(rmm_resource_allocate(base.get(), nullptr, 512, 256, &behind, &err), RMM_OK);
  EXPECT_EQ(rmm_resource_deallocate(tracking.get(), nullptr, behind, 512, 256, &err), RMM_ERROR_INVALID_ARGUMENT)
    << "a pointer the adaptor never tracked is refused, not forwarded";
  EXPECT_EQ(rmm_resource_deallocate(base.get(), nullptr, behind, 512, 256, &err), RMM_OK) << "and still live";
}

TEST(RefCounts, RetainAndReleaseKeepARustResourceAlive)
{
  rmm_resource h{nullptr, nullptr};
  rmm_error err{};
  ASSERT_EQ(rmm_system_memory_resource_new(&h, &err), RMM_OK);
  rmm_resource_retain(h);
  rmm_resource_retain(h);
  rmm_resource_release(h);
  rmm_resource_release(h);
  // Still one reference: still usable.
  void* p = nullptr;
  ASSERT_EQ(rmm_resource_allocate(h, nullptr, 64, 64, &p, &err), RMM_OK);
  EXPECT_EQ(rmm_resource_deallocate(h, nullptr, p, 64, 64, &err), RMM_OK);
  Owned other;
  ASSERT_EQ(rmm_system_memory_resource_new(other.out(), &err), RMM_OK);
  EXPECT_EQ(rmm_resource_is_equal(h, other.get()), 1) << "system resources are all equal";
  rmm_resource_release(h);
}

// Issue 12: a released handle, or a buffer freed before, is a clear error code, never a hang, a
// crash or a read of freed memory (see rmm_c.h, "Misuse of handles").
namespace {
rmm_resource new_pool()
{
  Owned base = make_base_resource();
  rmm_resource pool{nullptr, nullptr};
  rmm_error err{};
  EXPECT_EQ(rmm_pool_memory_resource_new(base.get(), 1u << 20, RMM_SIZE_NONE, &pool, &err), RMM_OK) << err.message;
  return pool;
}
}  // namespace

TEST(HandleMisuse, ReleasingAPoolTwiceIsAnError)
{
  rmm_resource pool = new_pool();
  rmm_error err{};
  EXPECT_EQ(rmm_resource_release_checked(pool, &err), RMM_OK) << err.message;
  EXPECT_EQ(rmm_resource_release_checked(pool, &err), RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(err.message, "release"), nullptr) << err.message;
  rmm_resource_release(pool);  // the void form: a logged no-op, not an invalid read
  EXPECT_EQ(rmm_resource_release_checked(rmm_resource{nullptr, nullptr}, &err), RMM_OK);
}

TEST(HandleMisuse, UsingAReleasedPoolIsAnErrorNotAHang)
{
  rmm_resource pool = new_pool();
  rmm_error err{};
  void* p = nullptr;
  ASSERT_EQ(rmm_resource_allocate(pool, nullptr, 256, 256, &p, &err), RMM_OK) << err.message;
  ASSERT_EQ(rmm_resource_deallocate(pool, nullptr, p, 256, 256, &err), RMM_OK) << err.message;
  rmm_resource_release(pool);
  EXPECT_EQ(rmm_resource_allocate(pool, nullptr, 256, 256, &p, &err), RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(err.message, "after its last release"), nullptr) << err.message;
  EXPECT_EQ(rmm_resource_deallocate(pool, nullptr, p, 256, 256, &err), RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(pool.vtable->allocate(pool.self, nullptr, 256, 256, &p, &err), RMM_ERROR_INVALID_ARGUMENT)
    << "the vtable's own entries check too";
  std::uint64_t size = 0;
  EXPECT_EQ(rmm_pool_memory_resource_pool_size(pool, &size, &err), RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(rmm_resource_name(pool), nullptr);
  EXPECT_EQ(rmm_resource_access(pool), 0u);
  EXPECT_EQ(rmm_set_current_device_resource(pool, nullptr, &err), RMM_ERROR_INVALID_ARGUMENT);
  rmm_resource_retain(pool);  // logged no-ops
  rmm_resource_release(pool);
}

TEST(HandleMisuse, FreeingADeviceBufferTwiceIsAnError)
{
  Owned base = make_base_resource();
  rmm_error err{};
  rmm_device_buffer* buf = nullptr;
  ASSERT_EQ(rmm_device_buffer_new(1024, 256, nullptr, base.get(), &buf, &err), RMM_OK) << err.message;
  EXPECT_EQ(rmm_device_buffer_free_checked(buf, &err), RMM_OK) << err.message;
  EXPECT_EQ(rmm_device_buffer_free_checked(buf, &err), RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(err.message, "already freed"), nullptr) << err.message;
  rmm_device_buffer_free(buf);  // the void form: logged, no crash
  EXPECT_EQ(rmm_device_buffer_size(buf), 0u);
  EXPECT_EQ(rmm_device_buffer_data(buf), nullptr);
  EXPECT_EQ(rmm_device_buffer_resize(buf, 64, nullptr, &err), RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(rmm_device_buffer_free_checked(nullptr, &err), RMM_OK);
}

// --- a C++ resource held and used by rmm ----------------------------------------------------------

TEST_F(RegistryTest, CppResourceBecomesTheCurrentResourceAndIsReleasedWhenReplaced)
{
  std::atomic<bool> destroyed{false};
  auto* cr = new CountingResource(&destroyed);  // refs = 1, ours
  rmm_error err{};

  ASSERT_EQ(rmm_set_current_device_resource(cr->handle(), nullptr, &err), RMM_OK) << err.message;
  EXPECT_EQ(cr->refs.load(), 2) << "the registry retained the borrowed handle";
  EXPECT_GE(cr->access_calls.load(), 1) << "rmm checked its access property";
  cr_release(cr);  // give up ours: the registry keeps it alive
  EXPECT_FALSE(destroyed.load());

  {
    Owned current;
    ASSERT_EQ(rmm_get_current_device_resource(current.out(), &err), RMM_OK);
    EXPECT_TRUE(same(current.get(), cr->handle())) << "handed back as itself, not wrapped by Rust";
    EXPECT_EQ(current.name(), "counting_resource");
    void* p = nullptr;
    ASSERT_EQ(rmm_resource_allocate(current.get(), nullptr, 128, 64, &p, &err), RMM_OK);
    std::memset(p, 3, 128);
    ASSERT_EQ(rmm_resource_deallocate(current.get(), nullptr, p, 128, 64, &err), RMM_OK);
    EXPECT_EQ(cr->allocations.load(), 1) << "the allocation went through the C++ code";
    EXPECT_EQ(cr->deallocations.load(), 1);

    // Its errors come back through the ABI unchanged.
    EXPECT_EQ(rmm_resource_allocate(current.get(), nullptr, std::size_t{1} << 50, 64, &p, &err),
              RMM_ERROR_OUT_OF_MEMORY);
    EXPECT_NE(std::strstr(err.message, "too much"), nullptr) << err.message;

    // A Rust resource compares it through the ABI (Rust wraps it for the call and lets go).
    Owned sys;
    ASSERT_EQ(rmm_system_memory_resource_new(sys.out(), &err), RMM_OK);
    EXPECT_EQ(rmm_resource_is_equal(sys.get(), current.get()), 0);
    EXPECT_EQ(cr->refs.load(), 2) << "the registry's and `current`'s";
  }
  EXPECT_EQ(cr->refs.load(), 1);

  // Replacing it (previous_out NULL) releases the registry's reference: the resource is destroyed.
  Owned base = make_base_resource();
  ASSERT_EQ(rmm_set_current_device_resource(base.get(), nullptr, &err), RMM_OK) << err.message;
  EXPECT_TRUE(destroyed.load()) << "release was called when it was replaced";
}

TEST_F(RegistryTest, CppResourceReturnedByResetIsOwnedByTheCaller)
{
  std::atomic<bool> destroyed{false};
  auto* cr = new CountingResource(&destroyed);
  rmm_error err{};
  ASSERT_EQ(rmm_set_current_device_resource(cr->handle(), nullptr, &err), RMM_OK);
  cr_release(cr);
  rmm_resource previous{nullptr, nullptr};
  ASSERT_EQ(rmm_reset_current_device_resource(&previous, &err), RMM_OK);
  EXPECT_TRUE(same(previous, cr->handle()));
  EXPECT_FALSE(destroyed.load()) << "the caller now owns the last reference";
  rmm_resource_release(previous);
  EXPECT_TRUE(destroyed.load());
}

// --- GPU ----------------------------------------------------------------------------------------

TEST(Gpu, CudaResourceAllocatesDeviceMemory)
{
  if (rmm_is_host_mode()) { GTEST_SKIP() << "needs a CUDA GPU (host mode: no driver or no device)"; }
  rmm_error err{};
  Owned cuda;
  ASSERT_EQ(rmm_cuda_memory_resource_new(cuda.out(), &err), RMM_OK);
  EXPECT_EQ(rmm_resource_access(cuda.get()), RMM_ACCESS_DEVICE);
  void* p = nullptr;
  ASSERT_EQ(rmm_resource_allocate(cuda.get(), nullptr, 1 << 20, 256, &p, &err), RMM_OK) << err.message;
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(rmm_resource_deallocate(cuda.get(), nullptr, p, 1 << 20, 256, &err), RMM_OK) << err.message;
}

TEST_F(RegistryTest, GpuRejectsHostOnlyResources)
{
  if (rmm_is_host_mode()) { GTEST_SKIP() << "needs a CUDA GPU (host mode: no driver or no device)"; }
  rmm_error err{};
  Owned initial;
  ASSERT_EQ(rmm_get_current_device_resource(initial.out(), &err), RMM_OK);
  EXPECT_EQ(initial.name(), "cuda_memory_resource");
  Owned sys;
  ASSERT_EQ(rmm_system_memory_resource_new(sys.out(), &err), RMM_OK);
  int status = rmm_set_current_device_resource(sys.get(), nullptr, &err);
  if (rmm_resource_access(sys.get()) & RMM_ACCESS_DEVICE) {
    EXPECT_EQ(status, RMM_OK) << "HMM/ATS: system memory is device-accessible here";
  } else {
    EXPECT_EQ(status, RMM_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(err.message, "device-accessible"), nullptr) << err.message;
  }
}

// --- Issue 30: failures somebody hears, host memory exhaustion ----------------------------------

// librmm installs rmm's debug log when it is loaded (bindings-cpp/src/debug_log.rs): what the C
// signatures cannot return is heard on stderr, in RMM's line pattern.
TEST(DebugLog, ARefusedReleaseIsHeardOnStderr)
{
  rmm_resource pool = new_pool();
  rmm_resource_release(pool);
  testing::internal::CaptureStderr();
  rmm_resource_release(pool);  // refused: the handle was released
  std::string const heard = testing::internal::GetCapturedStderr();
  EXPECT_NE(heard.find("[error ] rmm_resource_release: invalid argument: resource handle used after its last release"),
            std::string::npos)
    << heard;
}

namespace {
extern "C" int failing_write(char const*, std::size_t, void*) { return -1; }
}  // namespace

TEST(DebugLog, AnAllocationLogThatCannotWriteIsHeardOnStderr)
{
  Owned base = make_base_resource();
  Owned logging;
  rmm_error err{};
  testing::internal::CaptureStderr();
  ASSERT_EQ(rmm_logging_resource_adaptor_new_with_sink(base.get(), failing_write, nullptr, nullptr, nullptr, 0,
                                                       logging.out(), &err),
            RMM_OK)
    << err.message;
  void* p = nullptr;
  ASSERT_EQ(rmm_resource_allocate(logging.get(), nullptr, 256, 256, &p, &err), RMM_OK) << err.message;
  EXPECT_EQ(rmm_resource_deallocate(logging.get(), nullptr, p, 256, 256, &err), RMM_OK) << err.message;
  std::string const heard = testing::internal::GetCapturedStderr();
  EXPECT_NE(heard.find("events are being lost"), std::string::npos) << heard;
}

// Allocating 256 bytes until the host has no memory left (the address space capped a few MiB above
// what the pool reserved) gives RMM_ERROR_OUT_OF_MEMORY, never an abort, and everything allocated
// can be freed. In a child process (a death test that must exit 0).
TEST(HostExhaustion, AllocatingUntilTheHostIsExhaustedIsOutOfMemory)
{
  if (!rmm_is_host_mode()) { GTEST_SKIP() << "host memory only (the pool's upstream is system memory)"; }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto run = [] {
    constexpr std::size_t reserved = std::size_t{128} << 20;
    Owned base = make_base_resource();
    rmm_resource pool{nullptr, nullptr};
    rmm_error err{};
    if (rmm_pool_memory_resource_new(base.get(), reserved, reserved, &pool, &err) != RMM_OK) { std::exit(10); }
    std::vector<void*> held;
    held.reserve(reserved / 256 + 1);
    mallopt(M_MMAP_THRESHOLD, 128 << 10);  // large tables from mmap: the cap counts them
    rlimit old{};
    getrlimit(RLIMIT_AS, &old);
    std::FILE* statm = std::fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (statm == nullptr || std::fscanf(statm, "%lu", &pages) != 1) { std::exit(11); }
    std::fclose(statm);
    rlimit cap{pages * static_cast<unsigned long>(sysconf(_SC_PAGESIZE)) + (4ul << 20), old.rlim_max};
    if (setrlimit(RLIMIT_AS, &cap) != 0) { std::exit(12); }
    int status = RMM_OK;
    while (held.size() < held.capacity()) {
      void* p = nullptr;
      status = rmm_resource_allocate(pool, nullptr, 256, 256, &p, &err);
      if (status != RMM_OK) { break; }
      held.push_back(p);
    }
    for (void* p : held) {
      if (rmm_resource_deallocate(pool, nullptr, p, 256, 256, &err) != RMM_OK) { std::exit(13); }
    }
    setrlimit(RLIMIT_AS, &old);
    rmm_resource_release(pool);
    std::fprintf(stderr, "%zu allocations, then %s: %s\n", held.size(), rmm_error_kind_name(status), err.message);
    std::exit(status == RMM_ERROR_OUT_OF_MEMORY ? 0 : 14);
  };
  EXPECT_EXIT(run(), testing::ExitedWithCode(0), "allocations, then RMM_ERROR_OUT_OF_MEMORY");
}
