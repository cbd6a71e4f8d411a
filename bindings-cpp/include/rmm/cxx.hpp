/**
 * @file cxx.hpp
 * @brief The C++ side of the `rmm` crate's `cxx` feature: how a Rust crate's own `#[cxx::bridge]`
 * passes our resources to C++ code that takes `rmm::device_async_resource_ref` (an rmm-rs extension).
 *
 * `rmm::rs::resource_handle` is the Rust type `rmm::cxx::ResourceHandle<'a>` (a `cxx::ExternType`,
 * kind Trivial): a BORROWED `rmm_resource` handle { self, vtable }, trivially copyable, valid while
 * the Rust resource it came from lives (the bridge call). It is itself a CCCL resource (device
 * accessible), so it converts to `rmm::device_async_resource_ref` where a C++ function takes one:
 *
 * ```cpp
 * std::size_t my_fn(rmm::rs::resource_handle mr, std::size_t n) {   // declared in the bridge
 *   return library_function(rmm::device_async_resource_ref{mr}, n);  // C++ code that takes a ref
 * }
 * ```
 *
 * Allocation goes straight through the handle's vtable (the Rust resource's own functions): no
 * librmm is needed, and a failure is thrown as rmm::out_of_memory / rmm::bad_alloc with the Rust
 * error's message (cxx passes it back to Rust as an `Err` when the bridge function returns
 * `Result`). Needs only <rmm/rmm_c.h>, <rmm/error.hpp> and CCCL's <cuda/memory_resource>.
 */
#pragma once

#include <rmm/error.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>
#include <cuda/stream_ref>

#include <cstddef>
#include <string>
#include <type_traits>

namespace rmm::rs {

/** @brief A borrowed rmm_resource handle that is a CCCL resource (see the file comment). */
struct resource_handle {
  void* self;                         ///< the resource (Rust: the Arc's data pointer)
  rmm_resource_vtable const* vtable;  ///< its operations

  /** @brief Stream-ordered allocation through the vtable; throws rmm::out_of_memory / bad_alloc. */
  void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment)
  {
    void* out = nullptr;
    rmm_error err{};
    check(vtable->allocate(self, static_cast<void*>(stream.get()), bytes, alignment, &out, &err), err);
    return out;
  }
  /** @brief Stream-ordered deallocation through the vtable (errors are the resource's to log). */
  void deallocate(cuda::stream_ref stream, void* ptr, std::size_t bytes, std::size_t alignment) noexcept
  {
    rmm_error err{};
    (void)vtable->deallocate(self, static_cast<void*>(stream.get()), ptr, bytes, alignment, &err);
  }
  /** @brief Allocation usable on every stream once it returns. */
  void* allocate_sync(std::size_t bytes, std::size_t alignment)
  {
    void* out = nullptr;
    rmm_error err{};
    check(vtable->allocate_sync(self, bytes, alignment, &out, &err), err);
    return out;
  }
  /** @brief Deallocation of memory no pending work uses. */
  void deallocate_sync(void* ptr, std::size_t bytes, std::size_t alignment) noexcept
  {
    rmm_error err{};
    (void)vtable->deallocate_sync(self, ptr, bytes, alignment, &err);
  }
  /** @brief The resource's name (e.g. "statistics_resource_adaptor"). */
  [[nodiscard]] char const* name() const noexcept { return vtable->name(self); }

  /** @brief Equal when memory from one may be freed by the other. */
  friend bool operator==(resource_handle const& a, resource_handle const& b) noexcept
  {
    return (a.self == b.self && a.vtable == b.vtable) || a.vtable->is_equal(a.self, b.self, b.vtable) != 0;
  }
  /** @brief Not equal. */
  friend bool operator!=(resource_handle const& a, resource_handle const& b) noexcept { return !(a == b); }
  /** @brief Device accessible. */
  friend void get_property(resource_handle const&, cuda::mr::device_accessible) noexcept {}

 private:
  static void check(int status, rmm_error const& err)
  {
    if (status == RMM_OK) { return; }
    if (status == RMM_ERROR_OUT_OF_MEMORY) { throw rmm::out_of_memory{err.message}; }
    throw rmm::bad_alloc{err.message};
  }
};

static_assert(std::is_trivially_copyable_v<resource_handle> && std::is_standard_layout_v<resource_handle>,
              "cxx passes it by value (kind Trivial)");
static_assert(sizeof(resource_handle) == sizeof(rmm_resource), "the layout of rmm_resource");
static_assert(cuda::mr::resource_with<resource_handle, cuda::mr::device_accessible>);

}  // namespace rmm::rs
