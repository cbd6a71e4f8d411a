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
 * in a reference-counted box behind a C vtable, which the registry holds; exceptions thrown by the
 * resource are caught there and reported through rmm_error (std::bad_alloc -> OUT_OF_MEMORY,
 * rmm::cuda_error -> CUDA, CCCL's cuda::cuda_error -> OUT_OF_MEMORY for cudaErrorMemoryAllocation, else
 * CUDA, std::logic_error -> INVALID_ARGUMENT, anything else -> PANIC).
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
 * cache of this binary, which holds one reference to each resource that get_* returned. It stays
 * valid until that resource is replaced on its device by set_* or reset_* from C++ (the cache entry
 * is then dropped, and the returned previous any_resource is what keeps the resource alive), the
 * same rule as in RMM. A resource replaced from another language (Python, C, Rust) stays in the
 * cache, alive, until a C++ set_/reset_ returns it as previous or the process ends. If one resource
 * is current on several devices, replacing it on any of them ends the validity of references to it.
 */
#pragma once

#include <rmm/cuda_device.hpp>
#include <rmm/detail/runtime_shutdown.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/system_memory_resource.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>
#include <cuda/std/__exception/cuda_error.h>  // cuda::cuda_error (no public header of its own)
#include <cuda/stream_ref>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace rmm::mr {

/** @brief The owning type-erased resource that the registry functions take and return. */
using device_any_resource = cuda::mr::any_resource<cuda::mr::device_accessible>;

namespace detail {

/** @brief A C++ any_resource behind librmm's C vtable (see the file comment). */
struct cpp_resource_box {
  std::atomic<std::size_t> refs{1};
  device_any_resource resource;
  std::uint32_t access;
};

/** @brief Fills the optional @p err and returns @p kind. */
inline int set_error(rmm_error* err, int kind, std::size_t bytes, const char* message) noexcept
{
  if (err != nullptr) {
    err->kind      = kind;
    err->cuda_code = 0;
    err->bytes     = kind == RMM_ERROR_OUT_OF_MEMORY ? bytes : 0;
    std::strncpy(err->message, message, RMM_ERROR_MESSAGE_SIZE - 1);
    err->message[RMM_ERROR_MESSAGE_SIZE - 1] = '\0';
  }
  return kind;
}

/** @brief Runs @p op, turning every C++ exception into an rmm_error (nothing escapes). */
template <class Op>
int guarded(rmm_error* err, std::size_t bytes, Op&& op) noexcept
{
  try {
    op();
    if (err != nullptr) { *err = rmm_error{}; }
    return RMM_OK;
  } catch (std::bad_alloc const& e) {
    return set_error(err, RMM_ERROR_OUT_OF_MEMORY, bytes, e.what());
  } catch (rmm::cuda_error const& e) {
    return set_error(err, RMM_ERROR_CUDA, bytes, e.what());
  } catch (cuda::cuda_error const& e) {
    // CCCL's own resources (cuda::device_memory_pool, ...) report an exhausted device as a
    // cuda::cuda_error, not std::bad_alloc: librmm's pools must see that as out of memory (RMM's
    // pool turns an upstream failure into rmm::out_of_memory), not as an internal failure.
    return set_error(err, e.status() == cudaErrorMemoryAllocation ? RMM_ERROR_OUT_OF_MEMORY : RMM_ERROR_CUDA, bytes,
                     e.what());
  } catch (std::logic_error const& e) {
    return set_error(err, RMM_ERROR_INVALID_ARGUMENT, bytes, e.what());
  } catch (std::exception const& e) {
    return set_error(err, RMM_ERROR_PANIC, bytes, e.what());
  } catch (...) {
    return set_error(err, RMM_ERROR_PANIC, bytes, "unknown C++ exception");
  }
}

inline cpp_resource_box* as_box(void* self) noexcept { return static_cast<cpp_resource_box*>(self); }

inline void box_retain(void* self) { as_box(self)->refs.fetch_add(1, std::memory_order_relaxed); }

inline void box_release(void* self)
{
  auto* box = as_box(self);
  if (box->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) { delete box; }
}

inline int box_check_alignment(std::size_t alignment, rmm_error* err) noexcept
{
  return rmm::is_pow2(alignment)
           ? RMM_OK
           : set_error(err, RMM_ERROR_INVALID_ARGUMENT, 0, "alignment must be a power of two");
}

inline int box_allocate(void* self, void* stream, std::size_t bytes, std::size_t alignment, void** out, rmm_error* err)
{
  if (out == nullptr) { return set_error(err, RMM_ERROR_INVALID_ARGUMENT, 0, "out is NULL"); }
  *out = nullptr;
  if (int s = box_check_alignment(alignment, err); s != RMM_OK) { return s; }
  // Zero bytes and null frees reach the resource too, as RMM passes them on (a resource may
  // count them: BinningTest.ZeroByteAllocationsUseBinResource).
  return guarded(err, bytes, [&] {
    *out = as_box(self)->resource.allocate(cuda::stream_ref{static_cast<cudaStream_t>(stream)}, bytes, alignment);
  });
}

inline int box_deallocate(void* self, void* stream, void* ptr, std::size_t bytes, std::size_t alignment, rmm_error* err)
{
  return guarded(err, 0, [&] {
    as_box(self)->resource.deallocate(cuda::stream_ref{static_cast<cudaStream_t>(stream)}, ptr, bytes, alignment);
  });
}

inline int box_allocate_sync(void* self, std::size_t bytes, std::size_t alignment, void** out, rmm_error* err)
{
  if (out == nullptr) { return set_error(err, RMM_ERROR_INVALID_ARGUMENT, 0, "out is NULL"); }
  *out = nullptr;
  if (int s = box_check_alignment(alignment, err); s != RMM_OK) { return s; }
  // Zero bytes and null frees reach the resource too, as RMM passes them on (a resource may
  // count them: BinningTest.ZeroByteAllocationsUseBinResource).
  return guarded(err, bytes, [&] { *out = as_box(self)->resource.allocate_sync(bytes, alignment); });
}

inline int box_deallocate_sync(void* self, void* ptr, std::size_t bytes, std::size_t alignment, rmm_error* err)
{
  return guarded(err, 0, [&] { as_box(self)->resource.deallocate_sync(ptr, bytes, alignment); });
}

inline std::uint32_t box_access(void* self) { return as_box(self)->access; }

inline const char* box_name(void*) { return "cpp_resource"; }

int box_is_equal(void* self, void* other_self, const rmm_resource_vtable* other_vtable);

/** @brief Its address is the owner tag of the boxes made by this binary (distinct from librmm's). */
inline const char cpp_owner_tag = 0;

/** @brief The vtable of the boxes made by this binary. */
inline const rmm_resource_vtable cpp_box_vtable{RMM_ABI_VERSION,
                                                sizeof(rmm_resource_vtable),
                                                &cpp_owner_tag,
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
  if (other_vtable != &cpp_box_vtable) { return 0; }
  if (self == other_self) { return 1; }
  try {
    return as_box(self)->resource == as_box(other_self)->resource ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

/** @brief Whether @p handle is a box made by this binary. */
inline bool is_cpp_box(rmm_resource handle) noexcept { return handle.vtable == &cpp_box_vtable; }

// g++ -O2/-O3 warns (-Wmaybe-uninitialized, an error under RMM's -Werror) inside CCCL's basic_any when
// resource_cast looks into an any_resource made from a resource_ref at the call site; the buffer it
// reads is initialised by that any_resource's constructor. Silenced here, where it is inlined from.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
/** @brief An rmm_resource for @p res, as a c_resource that owns one reference: see the file comment. */
inline c_resource to_c_resource(device_any_resource const& res)
{
  if (auto const* r = cuda::mr::resource_cast<c_resource>(&res)) { return *r; }
  if (auto const* r = cuda::mr::resource_cast<cuda_memory_resource>(&res)) { return *r; }
  if (auto const* r = cuda::mr::resource_cast<system_memory_resource>(&res)) { return *r; }
  std::uint32_t access = RMM_ACCESS_DEVICE;
  if (try_get_property(res, cuda::mr::host_accessible{})) { access |= RMM_ACCESS_HOST; }
  auto* box = new cpp_resource_box{{1}, res, access};
  return c_resource::adopt(rmm_resource{box, &cpp_box_vtable});
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/** @brief The owning any_resource for the OWNING handle @p handle: see the file comment. */
inline device_any_resource from_owning_handle(rmm_resource handle)
{
  auto owned = c_resource::adopt(handle);
  if (is_cpp_box(handle)) { return as_box(handle.self)->resource; }
  if (handle.vtable != nullptr && handle.vtable->owner == rmm_abi_owner()) {
    const char* name = rmm_resource_name(handle);
    if (name != nullptr && std::strcmp(name, "cuda_memory_resource") == 0) {
      return device_any_resource{cuda_memory_resource{adopt_handle_t{}, std::move(owned)}};
    }
    if (name != nullptr && std::strcmp(name, "system_memory_resource") == 0) {
      return device_any_resource{system_memory_resource{adopt_handle_t{}, std::move(owned)}};
    }
  }
  return device_any_resource{std::move(owned)};
}

/** @brief The process-lifetime cache behind get_*_resource_ref (see the file comment). */
class ref_cache {
 public:
  /**
   * @brief The cache of this binary; never destroyed, so references stay valid during exit. Its
   * first use registers the process-exit hook (as RMM does right after building its map), so
   * rmm::process_is_exiting() is true in atexit handlers registered before that.
   */
  static ref_cache& instance()
  {
    static auto* cache = new ref_cache{};
    rmm::detail::register_process_exit_hook();  // once per process; cheap after the first call
    return *cache;
  }

  /** @brief A reference to the resource of the OWNING handle @p handle, cached (the cache keeps it). */
  device_async_resource_ref get(rmm_resource handle)
  {
    std::lock_guard<std::mutex> lock{mutex_};
    auto it = entries_.find(key(handle));
    if (it == entries_.end()) {
      it = entries_.emplace(key(handle), c_resource::adopt(handle)).first;
    } else {
      rmm_resource_release(handle);  // the cache already holds a reference
    }
    if (is_cpp_box(handle)) { return device_async_resource_ref{as_box(handle.self)->resource}; }
    return device_async_resource_ref{it->second};
  }

  /** @brief Drops the cache's reference to @p handle, if any. */
  void drop(rmm_resource handle)
  {
    c_resource dropped = c_resource::adopt(rmm_resource{nullptr, nullptr});
    std::lock_guard<std::mutex> lock{mutex_};
    auto it = entries_.find(key(handle));
    if (it != entries_.end()) {
      dropped = std::move(it->second);  // released after the lock, in case release re-enters
      entries_.erase(it);
    }
  }

 private:
  using key_type = std::pair<void*, const void*>;
  static key_type key(rmm_resource handle) noexcept { return {handle.self, handle.vtable}; }

  std::mutex mutex_;
  std::map<key_type, c_resource> entries_;
};

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
