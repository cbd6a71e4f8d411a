/**
 * @file rmm_rs/resource.hpp
 * @brief rmm-rs resources beside RAPIDS RMM: a resource of librmm_rs.so as a CCCL resource that RMM's
 * own code (rmm::device_async_resource_ref, cuda::mr::any_resource<cuda::mr::device_accessible>,
 * rmm::device_buffer, RMM's adaptors, libcudf, ...) can use, and any CCCL resource (RMM's included)
 * as a handle that our resources can use as their upstream.
 *
 * Include it next to RMM 26.x's headers, in the same translation unit, and link RMM's librmm.so and
 * our librmm_rs.so:
 *
 *   #include <rmm/resource_ref.hpp>
 *   #include <rmm_rs/resource.hpp>
 *
 *   auto system = rmm_rs::make([](rmm_resource* out, rmm_error* err) {
 *     return rmm_system_memory_resource_new(out, err); });
 *   auto pool = rmm_rs::make([&](rmm_resource* out, rmm_error* err) {
 *     return rmm_pool_memory_resource_new(system.handle(), 1 << 30, RMM_SIZE_NONE, out, err); });
 *   rmm::device_async_resource_ref ref{pool};
 *
 * Nothing here is in namespace rmm: RMM's own names stay RMM's. Failures of our resources are thrown
 * as RMM's exception types (rmm::out_of_memory, rmm::bad_alloc, rmm::logic_error), so code written
 * against RMM (and Cython's `except +`, which turns std::bad_alloc into MemoryError) sees what RMM
 * itself would throw.
 */
#pragma once

#include <rmm_rs/rmm_c.h>

#include <rmm/error.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm_rs/detail/guarded.hpp>  // after RMM's <rmm/error.hpp>: its rmm::cuda_error

#include <cuda/memory_resource>
#include <cuda/stream>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

namespace rmm_rs {

/** @brief RMM's default alignment (rmm::CUDA_ALLOCATION_ALIGNMENT), which every resource of ours gives. */
inline constexpr std::size_t default_alignment = 256;

/** @brief The message of @p err (at most its buffer, NUL or not). */
inline std::string message_of(rmm_error const& err)
{
  std::size_t len = 0;
  while (len < RMM_ERROR_MESSAGE_SIZE && err.message[len] != '\0') { ++len; }
  return std::string{err.message, len};
}

/**
 * @brief Throws the RMM exception for a failed call of ours (@p status is not RMM_OK):
 * RMM_ERROR_OUT_OF_MEMORY -> rmm::out_of_memory; every other kind -> rmm::logic_error, as RMM's
 * RMM_EXPECTS does (Python: RuntimeError).
 */
[[noreturn]] inline void throw_error(int status, rmm_error const& err, const char* what)
{
  if (status == RMM_ERROR_OUT_OF_MEMORY) { throw rmm::out_of_memory{message_of(err)}; }
  throw rmm::logic_error{std::string{what} + ": " + rmm_error_kind_name(status) + ": " + message_of(err)};
}

/**
 * @brief Throws the RMM exception for a failed allocation, as RMM's own resources do: out of memory
 * is rmm::out_of_memory; a CUDA failure, a missing driver or device and an alignment the resource
 * cannot give are rmm::bad_alloc (RMM_CUDA_TRY_ALLOC); anything else as throw_error().
 */
[[noreturn]] inline void throw_allocation_error(int status, rmm_error const& err, std::size_t alignment)
{
  switch (status) {
    case RMM_ERROR_CUDA:
    case RMM_ERROR_NO_DRIVER:
    case RMM_ERROR_NO_DEVICE: {
      throw rmm::bad_alloc{std::string{"rmm_rs allocate: "} + rmm_error_kind_name(status) + ": " + message_of(err)};
    }
    case RMM_ERROR_INVALID_ARGUMENT:
      if (alignment > default_alignment && (alignment & (alignment - 1)) == 0) {
        throw rmm::bad_alloc{std::string{"rmm_rs allocate: "} + message_of(err)};
      }
      break;
    default: break;
  }
  throw_error(status, err, "rmm_rs allocate");
}

/**
 * @brief One reference to a resource handle of librmm_rs.so, as a copyable CCCL resource.
 *
 * Copies share the resource (copying retains the handle, destruction releases it), as RMM's own
 * resources share their state. The hot calls go straight to the handle's vtable. Satisfies
 * `cuda::mr::resource_with<resource, cuda::mr::device_accessible>`, so
 * `rmm::device_async_resource_ref{r}` and `cuda::mr::any_resource<cuda::mr::device_accessible>{r}`
 * work. A moved-from resource holds the empty handle: only destruction and assignment are valid.
 */
class resource {
 public:
  /** @brief Takes over the OWNING handle @p handle (no retain). */
  static resource adopt(rmm_resource handle) noexcept { return resource{handle}; }

  /** @brief Retains the BORROWED handle @p handle and owns that new reference. */
  static resource retain(rmm_resource handle) noexcept
  {
    rmm_resource_retain(handle);
    return resource{handle};
  }

  resource(resource const& other) noexcept : handle_{other.handle_} { rmm_resource_retain(handle_); }
  resource(resource&& other) noexcept : handle_{std::exchange(other.handle_, rmm_resource{nullptr, nullptr})} {}
  resource& operator=(resource const& other) noexcept
  {
    if (this != &other) {
      rmm_resource_retain(other.handle_);
      rmm_resource_release(std::exchange(handle_, other.handle_));
    }
    return *this;
  }
  resource& operator=(resource&& other) noexcept
  {
    if (this != &other) {
      rmm_resource_release(std::exchange(handle_, std::exchange(other.handle_, rmm_resource{nullptr, nullptr})));
    }
    return *this;
  }
  ~resource() { rmm_resource_release(handle_); }

  /** @brief The handle, BORROWED: valid while this object (or a copy) lives. */
  [[nodiscard]] rmm_resource handle() const noexcept { return handle_; }

  /**
   * @brief Allocates @p bytes aligned to @p alignment, ordered on @p stream.
   * @throws rmm::out_of_memory, rmm::bad_alloc or rmm::logic_error (see throw_allocation_error)
   */
  void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment = default_alignment)
  {
    void* ptr = nullptr;
    rmm_error err;  // not zeroed (512 bytes, every call): written whenever a failure is reported
    err.message[0] = '\0';
    int status = handle_.vtable != nullptr
                   ? handle_.vtable->allocate(handle_.self, stream.get(), bytes, alignment, &ptr, &err)
                   : rmm_resource_allocate(handle_, stream.get(), bytes, alignment, &ptr, &err);
    if (status != RMM_OK) { throw_allocation_error(status, err, alignment); }
    return ptr;
  }

  /** @brief Returns @p ptr, ordered on @p stream. A refused free is printed to stderr (it cannot throw). */
  void deallocate(cuda::stream_ref stream, void* ptr, std::size_t bytes, std::size_t alignment = default_alignment) noexcept
  {
    rmm_error err;  // not zeroed: see allocate
    err.message[0] = '\0';
    int status = handle_.vtable != nullptr
                   ? handle_.vtable->deallocate(handle_.self, stream.get(), ptr, bytes, alignment, &err)
                   : rmm_resource_deallocate(handle_, stream.get(), ptr, bytes, alignment, &err);
    report(status, err, "deallocate");
  }

  /**
   * @brief Allocates memory usable on every stream as soon as this returns.
   * @throws as allocate()
   */
  void* allocate_sync(std::size_t bytes, std::size_t alignment = default_alignment)
  {
    void* ptr = nullptr;
    rmm_error err{};
    int status = rmm_resource_allocate_sync(handle_, bytes, alignment, &ptr, &err);
    if (status != RMM_OK) { throw_allocation_error(status, err, alignment); }
    return ptr;
  }

  /** @brief Returns memory no pending work uses. A refused free is printed to stderr. */
  void deallocate_sync(void* ptr, std::size_t bytes, std::size_t alignment = default_alignment) noexcept
  {
    rmm_error err{};
    report(rmm_resource_deallocate_sync(handle_, ptr, bytes, alignment, &err), err, "deallocate_sync");
  }

  /** @brief Whether memory from @p lhs may be returned to @p rhs (rmm_resource_is_equal). */
  [[nodiscard]] friend bool operator==(resource const& lhs, resource const& rhs) noexcept
  {
    return rmm_resource_is_equal(lhs.handle_, rhs.handle_) != 0;
  }
  /** @brief The negation of ==. */
  [[nodiscard]] friend bool operator!=(resource const& lhs, resource const& rhs) noexcept { return !(lhs == rhs); }

  /** @brief Our resources are device-accessible (RMM's refs ask for nothing else). */
  friend void get_property(resource const&, cuda::mr::device_accessible) noexcept {}

 private:
  explicit resource(rmm_resource handle) noexcept : handle_{handle} {}

  static void report(int status, rmm_error const& err, const char* what) noexcept
  {
    if (status != RMM_OK) {
      std::fprintf(stderr, "rmm_rs %s failed: %s: %s\n", what, rmm_error_kind_name(status), err.message);
    }
  }

  rmm_resource handle_{nullptr, nullptr};
};

static_assert(cuda::mr::resource_with<resource, cuda::mr::device_accessible>);

/**
 * @brief Calls the C constructor @p make (`int(rmm_resource* out, rmm_error* err)`) and returns the
 * new resource; throws as throw_error() when it fails.
 */
template <class Make>
resource make(Make&& make)
{
  rmm_resource handle{nullptr, nullptr};
  rmm_error err{};
  int status = make(&handle, &err);
  if (status != RMM_OK) { throw_error(status, err, "rmm_rs constructor"); }
  return resource::adopt(handle);
}

namespace detail {

/**
 * @brief A resource of someone else's (RMM's, or any CCCL resource) behind our C vtable: an owning
 * any_resource, or a ref whose referent a `keeper` keeps alive (released with the last handle).
 */
struct foreign_box {
  /** @brief Owns a copy of @p upstream. */
  explicit foreign_box(cuda::mr::any_resource<cuda::mr::device_accessible> upstream)
    : owned{std::move(upstream)}, ref{owned}
  {
  }
  /** @brief Refers to what @p r refers to; `release(keeper)` runs after the last release. */
  foreign_box(rmm::device_async_resource_ref r, void* keeper, void (*release)(void*))
    : ref{r}, keeper{keeper}, release_keeper{release}
  {
  }

  std::atomic<std::size_t> refs{1};
  cuda::mr::any_resource<cuda::mr::device_accessible> owned;  // empty when `ref` refers to the keeper's
  rmm::device_async_resource_ref ref;
  void* keeper                  = nullptr;
  void (*release_keeper)(void*) = nullptr;
};

inline foreign_box* as_box(void* self) noexcept { return static_cast<foreign_box*>(self); }

inline void box_retain(void* self) { as_box(self)->refs.fetch_add(1, std::memory_order_relaxed); }

inline void box_release(void* self)
{
  auto* box = as_box(self);
  if (box->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    void* keeper                 = box->keeper;
    void (*release_keeper)(void*) = box->release_keeper;
    delete box;
    if (release_keeper != nullptr) { release_keeper(keeper); }
  }
}

inline bool is_pow2(std::size_t n) noexcept { return n != 0 && (n & (n - 1)) == 0; }

inline int box_allocate(void* self, void* stream, std::size_t bytes, std::size_t alignment, void** out, rmm_error* err)
{
  if (out == nullptr) { return set_error(err, RMM_ERROR_INVALID_ARGUMENT, 0, "out is NULL"); }
  *out = nullptr;
  if (!is_pow2(alignment)) { return set_error(err, RMM_ERROR_INVALID_ARGUMENT, 0, "alignment must be a power of two"); }
  return guarded(err, bytes, [&] {
    *out = as_box(self)->ref.allocate(cuda::stream_ref{static_cast<cudaStream_t>(stream)}, bytes, alignment);
  });
}

inline int box_deallocate(void* self, void* stream, void* ptr, std::size_t bytes, std::size_t alignment, rmm_error* err)
{
  return guarded(err, 0, [&] {
    as_box(self)->ref.deallocate(cuda::stream_ref{static_cast<cudaStream_t>(stream)}, ptr, bytes, alignment);
  });
}

inline int box_allocate_sync(void* self, std::size_t bytes, std::size_t alignment, void** out, rmm_error* err)
{
  if (out == nullptr) { return set_error(err, RMM_ERROR_INVALID_ARGUMENT, 0, "out is NULL"); }
  *out = nullptr;
  if (!is_pow2(alignment)) { return set_error(err, RMM_ERROR_INVALID_ARGUMENT, 0, "alignment must be a power of two"); }
  return guarded(err, bytes, [&] { *out = as_box(self)->ref.allocate_sync(bytes, alignment); });
}

inline int box_deallocate_sync(void* self, void* ptr, std::size_t bytes, std::size_t alignment, rmm_error* err)
{
  return guarded(err, 0, [&] { as_box(self)->ref.deallocate_sync(ptr, bytes, alignment); });
}

inline std::uint32_t box_access(void*) { return RMM_ACCESS_DEVICE; }

inline const char* box_name(void*) { return "foreign_resource"; }

int box_is_equal(void* self, void* other_self, const rmm_resource_vtable* other_vtable);

/** @brief Its address tags the boxes of this binary (any address distinct from librmm_rs's). */
inline const char foreign_owner_tag = 0;

/** @brief The vtable of the boxes made by this binary. */
inline const rmm_resource_vtable foreign_vtable{RMM_ABI_VERSION,
                                                sizeof(rmm_resource_vtable),
                                                &foreign_owner_tag,
                                                &box_retain,
                                                &box_release,
                                                &box_allocate,
                                                &box_deallocate,
                                                &box_allocate_sync,
                                                &box_deallocate_sync,
                                                &box_access,
                                                &box_name,
                                                &box_is_equal};

inline int box_is_equal(void* self, void* other_self, const rmm_resource_vtable* other_vtable)
{
  if (other_vtable != &foreign_vtable) { return 0; }
  if (self == other_self) { return 1; }
  try {
    return as_box(self)->ref == as_box(other_self)->ref ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

}  // namespace detail

/**
 * @brief An OWNING handle over @p upstream (a copy of it, shared as any_resource shares), for use as
 * the upstream of our resources. When @p upstream holds one of ours, its own handle is returned
 * (retained): our resources then call each other directly, with no C++ in between.
 */
inline rmm_resource to_handle(cuda::mr::any_resource<cuda::mr::device_accessible> upstream)
{
  if (auto const* ours = cuda::mr::resource_cast<resource>(&upstream)) {
    rmm_resource handle = ours->handle();
    rmm_resource_retain(handle);
    return handle;
  }
  return rmm_resource{new detail::foreign_box{std::move(upstream)}, &detail::foreign_vtable};
}

/**
 * @brief An OWNING handle over the resource @p ref refers to, kept alive by @p keeper: the handle
 * calls @p ref, and when its last reference is gone `release_keeper(keeper)` runs (on whatever
 * thread released it; may be NULL). For resources whose owner is not C++ (a Python object holding
 * RMM's resource, say).
 */
inline rmm_resource to_handle(rmm::device_async_resource_ref ref, void* keeper, void (*release_keeper)(void*))
{
  return rmm_resource{new detail::foreign_box{ref, keeper, release_keeper}, &detail::foreign_vtable};
}

/** @brief Whether @p handle is a box of this binary (a foreign resource behind our vtable). */
inline bool is_foreign(rmm_resource handle) noexcept { return handle.vtable == &detail::foreign_vtable; }

}  // namespace rmm_rs
