/**
 * @file cxx_device_buffer.hpp
 * @brief The C++ half of the `rmm` crate's `rmm::cxx::CxxDeviceBuffer`: `std::unique_ptr<rmm::device_buffer>`
 * in a Rust crate's own `#[cxx::bridge]`, and its moves to and from the crate's Rust `DeviceBuffer`
 * with no copy (an rmm-rs extension).
 *
 * Include it (`include!("rmm/cxx_device_buffer.hpp")` in the bridge, or from the header the bridge
 * includes) in the C++ that a bridge declaring `type device_buffer = rmm::cxx::CxxDeviceBuffer;`
 * compiles with. It defines three `extern "C"` functions the Rust side calls (the `delete` behind
 * `UniquePtr`'s drop, and the two moves), as `inline` functions that are always emitted, so every
 * translation unit may include it and the linker keeps one copy. Like `rmm::device_buffer` itself,
 * they call librmm's C ABI (`rmm_c.h`): the binary links librmm (examples/cxx-bridge links it as the
 * `rmm-c-abi` crate, librmm's sources as an rlib: bindings-cpp/rlib).
 *
 * The moves go through the owning buffer export of `rmm_c.h`: C++ → Rust is
 * `device_buffer::release_c_handle()` → `rmm_device_buffer_export` → the Rust side adopts the export;
 * Rust → C++ is the Rust export → `rmm_device_buffer_import` → `device_buffer::adopt_c_handle`. The
 * memory is never copied and is freed once, by its last owner, on its stream and device, through
 * the resource that made it.
 */
#pragma once

#include <rmm/cxx.hpp>
#include <rmm/device_buffer.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/rmm_c.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <new>

namespace rmm::rs {

/**
 * @brief The Rust resource behind the borrowed @p mr as an OWNING C++ resource (it retains the Rust
 * resource), for C++ that keeps the resource beyond the bridge call, such as a device_buffer made
 * from it. It is the Rust resource itself (no wrapper): its memory is host-accessible when the Rust
 * resource's is, and a buffer made from it goes back to Rust with that very resource.
 */
inline rmm::mr::device_any_resource share(resource_handle mr)
{
  rmm_resource handle{mr.self, mr.vtable};
  rmm_resource_retain(handle);
  return rmm::mr::detail::from_owning_handle(handle);
}

}  // namespace rmm::rs

namespace rmm::rs::detail {

/** @brief Fills @p err (when not null) with @p kind and @p message; returns @p kind. */
inline int cxx_buffer_error(rmm_error* err, int kind, char const* message) noexcept
{
  if (err != nullptr) {
    *err      = rmm_error{};
    err->kind = kind;
    std::snprintf(err->message, sizeof(err->message), "%s", message);
  }
  return kind;
}

}  // namespace rmm::rs::detail

extern "C" {

/** @brief `delete` of an owned rmm::device_buffer (the drop of the Rust `UniquePtr<CxxDeviceBuffer>`). */
[[gnu::used]] inline void rmm_cxx_device_buffer_delete(rmm::device_buffer* buf) noexcept { delete buf; }

/**
 * @brief Moves the memory of @p owned (CONSUMED, also on failure: then it is freed) into a new
 * owning export in `*out` (no copy). INVALID_ARGUMENT for a null @p owned or @p out.
 */
[[gnu::used]] inline int rmm_cxx_device_buffer_into_export(rmm::device_buffer* owned,
                                                           rmm_buffer_export** out,
                                                           rmm_error* err) noexcept
{
  std::unique_ptr<rmm::device_buffer> buf{owned};
  if (out == nullptr) {
    return rmm::rs::detail::cxx_buffer_error(err, RMM_ERROR_INVALID_ARGUMENT, "the export out-pointer is null");
  }
  *out = nullptr;
  if (!buf) {
    return rmm::rs::detail::cxx_buffer_error(
      err, RMM_ERROR_INVALID_ARGUMENT, "a null std::unique_ptr<rmm::device_buffer> has no memory to move");
  }
  rmm_device_buffer* handle = nullptr;
  try {
    handle = buf->release_c_handle();
  } catch (std::exception const& e) {
    return rmm::rs::detail::cxx_buffer_error(err, RMM_ERROR_INVALID_ARGUMENT, e.what());
  }
  int const status = rmm_device_buffer_export(handle, out, err);
  if (status != RMM_OK) { rmm_device_buffer_free(handle); }
  return status;
}

/**
 * @brief A new rmm::device_buffer in `*out` that adopts the OWNING export @p export_ (CONSUMED, also
 * on failure: then its memory is freed through its deleter), with no copy.
 */
[[gnu::used]] inline int rmm_cxx_device_buffer_from_export(rmm_buffer_export* export_,
                                                           rmm::device_buffer** out,
                                                           rmm_error* err) noexcept
{
  if (out == nullptr) {
    rmm_buffer_export_free(export_);
    return rmm::rs::detail::cxx_buffer_error(err, RMM_ERROR_INVALID_ARGUMENT, "the buffer out-pointer is null");
  }
  *out                      = nullptr;
  rmm_device_buffer* handle = nullptr;
  int const status          = rmm_device_buffer_import(export_, &handle, err);
  if (status != RMM_OK) {
    rmm_buffer_export_free(export_);  // a refused export is not consumed by the import
    return status;
  }
  try {
    *out = new rmm::device_buffer{rmm::device_buffer::adopt_c_handle(handle)};
  } catch (std::bad_alloc const&) {
    rmm_device_buffer_free(handle);
    return rmm::rs::detail::cxx_buffer_error(err, RMM_ERROR_OUT_OF_MEMORY, "rmm::device_buffer: out of host memory");
  } catch (std::exception const& e) {
    rmm_device_buffer_free(handle);
    return rmm::rs::detail::cxx_buffer_error(err, RMM_ERROR_INVALID_ARGUMENT, e.what());
  }
  return RMM_OK;
}

}  // extern "C"
