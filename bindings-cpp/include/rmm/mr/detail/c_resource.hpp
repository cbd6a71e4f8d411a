/**
 * @file c_resource.hpp
 * @brief rmm::mr::detail::c_resource: a copyable CCCL resource over a librmm rmm_resource handle.
 */
#pragma once

#include <rmm/aligned.hpp>
#include <rmm/cuda_stream_view.hpp>  // RMM's resource headers expose it (through their impl headers)
#include <rmm/error.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>
#include <cuda/stream_ref>

#include <cstddef>
#include <cstdio>
#include <string>
#include <utility>

namespace rmm::mr::detail {

/**
 * @brief rmm::detail::check() for an allocation of @p bytes aligned to @p alignment: a refused
 * alignment above CUDA_ALLOCATION_ALIGNMENT (RMM_ERROR_INVALID_ARGUMENT; librmm's base resources
 * guarantee 256 bytes) throws rmm::bad_alloc, as RMM's base resources do
 * (`is_supported_base_resource_alignment`); every other failure throws as check() does.
 */
inline void check_allocation(int status, rmm_error const& err, std::size_t bytes, std::size_t alignment,
                             const char* what)
{
  if (status == RMM_ERROR_INVALID_ARGUMENT && bytes > 0 && is_pow2(alignment) &&
      alignment > CUDA_ALLOCATION_ALIGNMENT) {
    std::size_t len = 0;
    while (len < RMM_ERROR_MESSAGE_SIZE && err.message[len] != '\0') { ++len; }
    throw rmm::bad_alloc{std::string{what} + ": " + rmm_error_kind_name(status) + ": " + std::string{err.message, len}};
  }
  rmm::detail::check(status, err, what);
}

/** @brief Tag of the constructors that take over a handle librmm made for that resource type. */
struct adopt_handle_t {};

/**
 * @brief A value type that owns one reference of an rmm_resource handle (a resource of rmm-rs, or one
 * written in C or C++ behind the C ABI).
 *
 * Copies share the resource: copying retains the handle, destruction releases it. Every operation
 * goes through librmm's C ABI (rmm_resource_*), so this works for any valid handle. A moved-from
 * c_resource holds the empty handle; only destruction and assignment are valid on it.
 *
 * Satisfies `cuda::mr::resource_with<c_resource, cuda::mr::device_accessible>`.
 */
class c_resource {
 public:
  /** @brief Takes over the OWNING handle @p handle (no retain). */
  static c_resource adopt(rmm_resource handle) noexcept { return c_resource{handle}; }

  /** @brief Retains the BORROWED handle @p handle and owns that new reference. */
  static c_resource retain(rmm_resource handle) noexcept
  {
    rmm_resource_retain(handle);
    return c_resource{handle};
  }

  c_resource(c_resource const& other) noexcept : handle_{other.handle_} { rmm_resource_retain(handle_); }
  c_resource(c_resource&& other) noexcept : handle_{std::exchange(other.handle_, rmm_resource{nullptr, nullptr})}
  {
  }
  c_resource& operator=(c_resource const& other) noexcept
  {
    if (this != &other) {
      rmm_resource_retain(other.handle_);
      rmm_resource_release(std::exchange(handle_, other.handle_));
    }
    return *this;
  }
  c_resource& operator=(c_resource&& other) noexcept
  {
    if (this != &other) {
      rmm_resource_release(std::exchange(handle_, std::exchange(other.handle_, rmm_resource{nullptr, nullptr})));
    }
    return *this;
  }
  ~c_resource() { rmm_resource_release(handle_); }

  /** @brief The handle, BORROWED: valid while this object (or a copy) lives. */
  [[nodiscard]] rmm_resource handle() const noexcept { return handle_; }

  /**
   * @brief Allocates @p bytes aligned to @p alignment, ordered on @p stream.
   * @throws rmm::out_of_memory, rmm::bad_alloc (an alignment the resource cannot give), rmm::cuda_error
   * or rmm::logic_error (see check_allocation)
   */
  void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment = CUDA_ALLOCATION_ALIGNMENT)
  {
    void* ptr = nullptr;
    // Not zeroed (512 bytes, on every call): librmm writes it whenever it reports a failure.
    rmm_error err;
    err.message[0] = '\0';
    check_allocation(call_allocate(stream, bytes, alignment, &ptr, &err), err, bytes, alignment, "rmm::mr allocate");
    return ptr;
  }

  /** @brief Returns @p ptr, ordered on @p stream. Failures are printed to stderr (it cannot throw). */
  void deallocate(cuda::stream_ref stream,
                  void* ptr,
                  std::size_t bytes,
                  std::size_t alignment = CUDA_ALLOCATION_ALIGNMENT) noexcept
  {
    rmm_error err;  // not zeroed: see allocate
    err.message[0] = '\0';
    report(call_deallocate(stream, ptr, bytes, alignment, &err), err, "deallocate");
  }

  /**
   * @brief Allocates memory usable on every stream as soon as this returns.
   * @throws rmm::out_of_memory, rmm::cuda_error or rmm::logic_error
   */
  void* allocate_sync(std::size_t bytes, std::size_t alignment = CUDA_ALLOCATION_ALIGNMENT)
  {
    void* ptr = nullptr;
    rmm_error err{};
    check_allocation(rmm_resource_allocate_sync(handle_, bytes, alignment, &ptr, &err), err, bytes, alignment,
                     "rmm::mr allocate_sync");
    return ptr;
  }

  /** @brief Returns memory no pending work uses. Failures are printed to stderr (it cannot throw). */
  void deallocate_sync(void* ptr, std::size_t bytes, std::size_t alignment = CUDA_ALLOCATION_ALIGNMENT) noexcept
  {
    rmm_error err{};
    report(rmm_resource_deallocate_sync(handle_, ptr, bytes, alignment, &err), err, "deallocate_sync");
  }

  /** @brief Whether memory from @p lhs may be returned to @p rhs (rmm_resource_is_equal). */
  [[nodiscard]] friend bool operator==(c_resource const& lhs, c_resource const& rhs) noexcept
  {
    return rmm_resource_is_equal(lhs.handle_, rhs.handle_) != 0;
  }
  /** @brief The negation of ==. */
  [[nodiscard]] friend bool operator!=(c_resource const& lhs, c_resource const& rhs) noexcept
  {
    return !(lhs == rhs);
  }

  /** @brief Memory of every rmm resource is device-accessible. */
  friend void get_property(c_resource const&, cuda::mr::device_accessible) noexcept {}

 protected:
  explicit c_resource(rmm_resource handle) noexcept : handle_{handle} {}

 private:
  // The hot calls go straight through the handle's vtable: every handle a c_resource holds came
  // from librmm or from detail::to_c_resource, whose vtables are complete and catch their own
  // errors, so the checks of rmm_resource_allocate() (and a call into librmm) are not needed. A
  // moved-from (empty) handle still goes through librmm, which reports it as an error.
  int call_allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment, void** out, rmm_error* err)
  {
    if (handle_.vtable != nullptr) {
      return handle_.vtable->allocate(handle_.self, stream.get(), bytes, alignment, out, err);
    }
    return rmm_resource_allocate(handle_, stream.get(), bytes, alignment, out, err);
  }
  int call_deallocate(cuda::stream_ref stream, void* ptr, std::size_t bytes, std::size_t alignment, rmm_error* err) noexcept
  {
    if (handle_.vtable != nullptr) {
      return handle_.vtable->deallocate(handle_.self, stream.get(), ptr, bytes, alignment, err);
    }
    return rmm_resource_deallocate(handle_, stream.get(), ptr, bytes, alignment, err);
  }

  static void report(int status, rmm_error const& err, const char* what) noexcept
  {
    if (status != RMM_OK) {
      std::fprintf(stderr, "rmm::mr %s failed: %s: %s\n", what, rmm_error_kind_name(status), err.message);
    }
  }

  rmm_resource handle_{nullptr, nullptr};
};

static_assert(cuda::mr::resource_with<c_resource, cuda::mr::device_accessible>);

}  // namespace rmm::mr::detail
