/**
 * @file per_device_resource.hpp
 * @brief The per-device current resource (RMM 26.x names), kept by librmm's one process-wide registry.
 *
 * The registry lives in librmm_rs.so (shared with Python and Rust), not in this header: a resource set
 * here is the one `rmm.mr.get_current_device_resource()` sees in Python, and vice versa.
 *
 * Setting: any `cuda::mr::any_resource<device_accessible>` can be set. If it holds one of rmm's own
 * resource types (detail::c_resource, cuda_memory_resource, system_memory_resource; found with
 * `cuda::mr::resource_cast`, an exact type match) its librmm handle is passed through unchanged.
 * Otherwise (a user's C++ resource, an adaptor from another library) a copy of the any_resource is put
 * in a reference-counted box behind a C vtable (mr/detail/cpp_resource_box.hpp), which the registry
 * holds; exceptions thrown by the resource are caught there and reported through rmm_error
 * (std::bad_alloc -> OUT_OF_MEMORY, rmm::cuda_error -> CUDA, CCCL's cuda::cuda_error -> OUT_OF_MEMORY
 * for cudaErrorMemoryAllocation, else CUDA, std::logic_error -> INVALID_ARGUMENT, anything else ->
 * PANIC; mr/detail/guarded.hpp).
 * The box reports device access, plus host access when `try_get_property(res, host_accessible)` is
 * true, which holds when the resource was first type-erased with host_accessible among its
 * properties; the template overloads below do that for you. In host mode (no GPU) the registry only
 * accepts host-accessible resources.
 *
 * The previous resource returned by set_* and reset_* owns it: if it was set from C++ (a box made
 * here), it is a copy of the any_resource that was set (so `resource_cast<YourType>` works); a librmm
 * cuda_memory_resource or system_memory_resource comes back as that type; any other handle as a
 * detail::c_resource.
 *
 * Lifetime of get_*_resource_ref(): the returned reference refers to an object in a process-lifetime
 * cache of this binary (mr/detail/ref_cache.hpp), which holds one reference to each resource that
 * get_* returned. It stays valid until that resource is replaced on its device by set_* or reset_*
 * from C++ (the cache entry is then dropped, and the returned previous any_resource is what keeps the
 * resource alive), the same rule as in RMM. A resource replaced from another language (Python, C,
 * Rust) stays in the cache, alive, until a C++ set_/reset_ returns it as previous or the process
 * ends. If one resource is current on several devices, replacing it on any of them ends the validity
 * of references to it.
 */
#pragma once

#include <rmm/cuda_device.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/detail/cpp_resource_box.hpp>
#include <rmm/mr/detail/ref_cache.hpp>
#include <rmm/mr/system_memory_resource.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>

#include <type_traits>
#include <utility>

namespace rmm::mr {
namespace detail {

/**
 * @brief The resource every device starts with, and gets back on reset (RMM's name): librmm's
 * cuda_memory_resource, or its system_memory_resource in host mode. It compares equal to the
 * registry's initial resource (all cuda_memory_resources are equal, as are all
 * system_memory_resources), so `get_current_device_resource_ref() ==
 * device_async_resource_ref{initial_resource()}` holds until a resource is set. RMM returns a
 * cuda_memory_resource&; this is its detail::c_resource, since host mode starts with system memory.
 */
inline c_resource& initial_resource()
{
  static auto* mr = new c_resource{rmm_is_host_mode() != 0 ? c_resource{system_memory_resource{}}
                                                            : c_resource{cuda_memory_resource{}}};
  return *mr;
}

/**
 * @brief RMM's name for the per-device reference map behind get_*_resource_ref(): here the
 * process-lifetime cache of this binary (the resources themselves are in librmm's registry).
 * Building it registers the process-exit hook, as in RMM.
 */
inline ref_cache& get_ref_map() { return ref_cache::instance(); }

/**
 * @brief The owning previous resource of a set_/reset_ call, after dropping it from the cache unless
 * it is also the resource just set (@p current: setting the current resource again changes nothing).
 */
inline device_any_resource take_previous(rmm_resource previous, rmm_resource current = {nullptr, nullptr})
{
  if (previous.self != current.self || previous.vtable != current.vtable) { ref_cache::instance().drop(previous); }
  return from_owning_handle(previous);
}

/** @brief Whether R is one of CCCL's type-erased resource wrappers (taken by the non-template overloads). */
template <class R>
struct is_type_erased : std::false_type {};
template <class... Ps>
struct is_type_erased<cuda::mr::any_resource<Ps...>> : std::true_type {};
template <class... Ps>
struct is_type_erased<cuda::mr::resource_ref<Ps...>> : std::true_type {};

/**
 * @brief Erases @p res keeping host_accessible visible to try_get_property when R has it. A librmm
 * resource type other than the base ones (pool_memory_resource, statistics_resource_adaptor, ...: any
 * class derived from c_resource) is erased as its c_resource, so its handle passes through unchanged.
 */
template <class R>
device_any_resource erase(R res)
{
  if constexpr (std::is_base_of_v<c_resource, R> && !std::is_same_v<R, c_resource> &&
                !std::is_same_v<R, cuda_memory_resource> && !std::is_same_v<R, system_memory_resource>) {
    return device_any_resource{static_cast<c_resource const&>(res)};
  } else if constexpr (cuda::mr::resource_with<R, cuda::mr::device_accessible, cuda::mr::host_accessible>) {
    return device_any_resource{
      cuda::mr::any_resource<cuda::mr::device_accessible, cuda::mr::host_accessible>{std::move(res)}};
  } else {
    return device_any_resource{std::move(res)};
  }
}

/** @brief Enables the template overloads for concrete resource types. */
template <class R>
using enable_if_concrete_t =
  std::enable_if_t<!is_type_erased<std::decay_t<R>>::value &&
                   cuda::mr::resource_with<std::decay_t<R>, cuda::mr::device_accessible>>;

}  // namespace detail

/**
 * @brief The resource of device @p device_id (the registry's initial one if none was set).
 * @return a non-owning reference; see the file comment for how long it stays valid.
 * @throws rmm::logic_error for an invalid device, rmm::cuda_error when CUDA fails
 */
inline device_async_resource_ref get_per_device_resource_ref(cuda_device_id device_id)
{
  rmm_resource handle{nullptr, nullptr};
  rmm_error err{};
  rmm::detail::check(rmm_get_per_device_resource(device_id.value(), &handle, &err), err,
                     "get_per_device_resource_ref");
  return detail::ref_cache::instance().get(handle);
}

/** @brief get_per_device_resource_ref() on the calling thread's current device (device 0 in host mode). */
inline device_async_resource_ref get_current_device_resource_ref()
{
  rmm_resource handle{nullptr, nullptr};
  rmm_error err{};
  rmm::detail::check(rmm_get_current_device_resource(&handle, &err), err, "get_current_device_resource_ref");
  return detail::ref_cache::instance().get(handle);
}

/**
 * @brief Makes @p new_resource the resource of device @p device_id.
 * @return the previous resource (owning)
 * @throws rmm::logic_error when the registry rejects it (e.g. not host-accessible in host mode)
 */
inline device_any_resource set_per_device_resource(cuda_device_id device_id, device_any_resource new_resource)
{
  auto handle = detail::to_c_resource(new_resource);
  rmm_resource previous{nullptr, nullptr};
  rmm_error err{};
  rmm::detail::check(rmm_set_per_device_resource(device_id.value(), handle.handle(), &previous, &err), err,
                     "set_per_device_resource");
  return detail::take_previous(previous, handle.handle());
}

/** @brief set_per_device_resource() for a concrete resource type, keeping its host_accessible property. */
template <class R, class = detail::enable_if_concrete_t<R>>
device_any_resource set_per_device_resource(cuda_device_id device_id, R new_resource)
{
  return set_per_device_resource(device_id, detail::erase(std::move(new_resource)));
}

/** @brief set_per_device_resource() on the calling thread's current device. */
inline device_any_resource set_current_device_resource(device_any_resource new_resource)
{
  auto handle = detail::to_c_resource(new_resource);
  rmm_resource previous{nullptr, nullptr};
  rmm_error err{};
  rmm::detail::check(rmm_set_current_device_resource(handle.handle(), &previous, &err), err,
                     "set_current_device_resource");
  return detail::take_previous(previous, handle.handle());
}

/** @brief set_current_device_resource() for a concrete resource type, keeping its host_accessible property. */
template <class R, class = detail::enable_if_concrete_t<R>>
device_any_resource set_current_device_resource(R new_resource)
{
  return set_current_device_resource(detail::erase(std::move(new_resource)));
}

/** @brief Puts the initial resource of device @p device_id back. @return the previous resource (owning) */
inline device_any_resource reset_per_device_resource(cuda_device_id device_id)
{
  rmm_resource previous{nullptr, nullptr};
  rmm_error err{};
  rmm::detail::check(rmm_reset_per_device_resource(device_id.value(), &previous, &err), err,
                     "reset_per_device_resource");
  return detail::take_previous(previous);
}

/** @brief reset_per_device_resource() on the calling thread's current device. */
inline device_any_resource reset_current_device_resource()
{
  rmm_resource previous{nullptr, nullptr};
  rmm_error err{};
  rmm::detail::check(rmm_reset_current_device_resource(&previous, &err), err, "reset_current_device_resource");
  return detail::take_previous(previous);
}

}  // namespace rmm::mr
