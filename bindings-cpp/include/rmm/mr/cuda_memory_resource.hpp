/**
 * @file cuda_memory_resource.hpp
 * @brief rmm::mr::cuda_memory_resource (cuMemAlloc / cuMemFree, in librmm).
 */
#pragma once

#include <rmm/error.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/rmm_c.h>

#include <utility>

namespace rmm::mr {

/**
 * @brief Device memory from cuMemAlloc, freed with cuMemFree; the stream is not used.
 *
 * A value type: copies share one librmm resource, and all compare equal to each other. Constructing
 * one succeeds without a GPU (host mode); allocating from it then throws rmm::cuda_error.
 *
 * Satisfies `cuda::mr::resource_with<cuda_memory_resource, cuda::mr::device_accessible>`.
 */
class cuda_memory_resource : public detail::c_resource {
 public:
  /** @brief A new cuda_memory_resource (rmm_cuda_memory_resource_new). */
  cuda_memory_resource() : detail::c_resource{make()} {}

  /** @brief Takes over @p owned, which must hold a librmm cuda_memory_resource (used by the registry functions). */
  cuda_memory_resource(detail::adopt_handle_t, detail::c_resource owned) noexcept : detail::c_resource{std::move(owned)} {}

 private:
  static rmm_resource make()
  {
    rmm_resource handle{nullptr, nullptr};
    rmm_error err{};
    rmm::detail::check(rmm_cuda_memory_resource_new(&handle, &err), err, "cuda_memory_resource");
    return handle;
  }
};

static_assert(cuda::mr::resource_with<cuda_memory_resource, cuda::mr::device_accessible>);

}  // namespace rmm::mr
