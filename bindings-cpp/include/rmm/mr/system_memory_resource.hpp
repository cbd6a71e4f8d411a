/**
 * @file system_memory_resource.hpp
 * @brief rmm::mr::system_memory_resource (host malloc, in librmm).
 */
#pragma once

#include <rmm/cuda_device.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/rmm_c.h>

#include <utility>

namespace rmm::mr {

class system_memory_resource;

namespace detail {
/**
 * @brief A system_memory_resource even where the GPU cannot access system memory (the checked
 * constructor throws there): host-only memory, for the capability probe and for tests that only
 * touch the memory from the host.
 */
inline system_memory_resource unchecked_system_memory_resource();
}  // namespace detail

/**
 * @brief System (malloc) memory: host-accessible, and device-accessible on systems with HMM or ATS.
 * It is the initial per-device resource in host mode (no CUDA driver or device).
 *
 * A value type: copies share one librmm resource, and all compare equal to each other.
 *
 * Satisfies `cuda::mr::resource_with<system_memory_resource, cuda::mr::device_accessible,
 * cuda::mr::host_accessible>`.
 */
class system_memory_resource : public detail::c_resource {
 public:
  /**
   * @brief A new system_memory_resource (rmm_system_memory_resource_new).
   * @throws rmm::logic_error on a GPU that cannot access system memory (no HMM or ATS), as RMM:
   * device code could not use its memory. In host mode (no GPU) it is the process's memory.
   */
  system_memory_resource() : detail::c_resource{make_supported()} {}

  /** @brief Takes over @p owned, which must hold a librmm system_memory_resource (used by the registry functions). */
  system_memory_resource(detail::adopt_handle_t, detail::c_resource owned) noexcept : detail::c_resource{std::move(owned)} {}

  /** @brief System memory is host-accessible. */
  friend void get_property(system_memory_resource const&, cuda::mr::host_accessible) noexcept {}

 private:
  friend system_memory_resource detail::unchecked_system_memory_resource();

  static rmm_resource make()
  {
    rmm_resource handle{nullptr, nullptr};
    rmm_error err{};
    rmm::detail::check(rmm_system_memory_resource_new(&handle, &err), err, "system_memory_resource");
    return handle;
  }

  static rmm_resource make_supported()
  {
    rmm_resource handle = make();
    if (rmm_is_host_mode() == 0 && (rmm_resource_access(handle) & RMM_ACCESS_DEVICE) == 0U) {
      rmm_resource_release(handle);
      throw rmm::logic_error{"System memory allocator is not supported with this hardware/software version."};
    }
    return handle;
  }
};

namespace detail {

inline system_memory_resource unchecked_system_memory_resource()
{
  return system_memory_resource{adopt_handle_t{}, c_resource::adopt(system_memory_resource::make())};
}

/**
 * @brief Whether device @p device_id can access system (pageable) memory, i.e. has HMM or ATS
 * (RMM's `is_system_memory_supported`). Asked of librmm: a system_memory_resource made with the
 * device current reports device access exactly then. False in host mode.
 * @throws rmm::logic_error for a device that does not exist, rmm::cuda_error when CUDA fails
 */
inline bool is_system_memory_supported(cuda_device_id device_id)
{
  cuda_set_device_raii const on_device{device_id};
  system_memory_resource const probe = unchecked_system_memory_resource();
  return (rmm_resource_access(probe.handle()) & RMM_ACCESS_DEVICE) != 0U;
}

}  // namespace detail

static_assert(cuda::mr::resource_with<system_memory_resource, cuda::mr::device_accessible>);
static_assert(cuda::mr::resource_with<system_memory_resource, cuda::mr::host_accessible>);
static_assert(
  cuda::mr::resource_with<system_memory_resource, cuda::mr::device_accessible, cuda::mr::host_accessible>);

}  // namespace rmm::mr
