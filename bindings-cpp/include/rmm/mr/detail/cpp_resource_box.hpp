/**
 * @file cpp_resource_box.hpp
 * @brief A C++ resource behind librmm's C vtable (the box), and the way back from a handle to an
 * owning any_resource.
 *
 * to_c_resource: if the any_resource holds one of rmm's own resource types (detail::c_resource,
 * cuda_memory_resource, system_memory_resource; found with `cuda::mr::resource_cast`, an exact type
 * match) its librmm handle is passed through unchanged. Otherwise (a user's C++ resource, an adaptor
 * from another library) a copy of the any_resource is put in a reference-counted box behind a C
 * vtable, whose functions catch every exception (detail::guarded). The box reports device access,
 * plus host access when `try_get_property(res, host_accessible)` is true, which holds when the
 * resource was first type-erased with host_accessible among its properties (detail::erase in
 * per_device_resource.hpp does that).
 *
 * from_owning_handle: a box made here gives back a copy of the any_resource that was boxed (so
 * `resource_cast<YourType>` works); a librmm cuda_memory_resource or system_memory_resource (told
 * apart by rmm_resource_kind, by number) comes back as that type; any other handle as a
 * detail::c_resource.
 */
#pragma once

#include <rmm/aligned.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/detail/guarded.hpp>
#include <rmm/mr/system_memory_resource.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>
#include <cuda/stream_ref>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
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
  int kind = RMM_RESOURCE_KIND_OTHER;
  if (handle.vtable != nullptr && handle.vtable->owner == rmm_abi_owner() &&
      rmm_resource_kind(handle, &kind, nullptr, nullptr) == RMM_OK) {
    switch (kind) {
      case RMM_RESOURCE_KIND_CUDA:
        return device_any_resource{cuda_memory_resource{adopt_handle_t{}, std::move(owned)}};
      case RMM_RESOURCE_KIND_SYSTEM:
        return device_any_resource{system_memory_resource{adopt_handle_t{}, std::move(owned)}};
      default: break;
    }
  }
  return device_any_resource{std::move(owned)};
}

}  // namespace detail
}  // namespace rmm::mr
