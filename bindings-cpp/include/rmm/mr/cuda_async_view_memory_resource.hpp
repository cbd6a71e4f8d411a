/**
 * @file cuda_async_view_memory_resource.hpp
 * @brief rmm::mr::cuda_async_view_memory_resource: stream-ordered memory from a CUDA memory pool it
 * does not own (in librmm).
 */
#pragma once

#include <rmm/error.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/detail/upstream.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>
#include <cuda_runtime_api.h>

namespace rmm::mr {

/**
 * @brief Device memory from an existing CUDA memory pool (cudaMemPool_t), e.g. the pool_handle()
 * of a cuda_async_memory_resource; allocation and deallocation are ordered on the given stream.
 *
 * The resource never destroys the pool: the caller keeps it alive while the resource (or a copy)
 * or memory from it is in use. A value type: copies share one librmm resource (== compares
 * identity).
 */
class cuda_async_view_memory_resource : public detail::c_resource {
 public:
  /**
   * @brief A resource allocating from @p pool_handle.
   * @throws rmm::logic_error "Unexpected null pool handle." for nullptr
   * @throws rmm::cuda_error without a GPU
   */
  explicit cuda_async_view_memory_resource(cudaMemPool_t pool_handle)
    : detail::c_resource{detail::make_handle(
        [&](rmm_resource* out, rmm_error* err) {
          return rmm_cuda_async_view_memory_resource_new(static_cast<void*>(pool_handle), out, err);
        },
        "cuda_async_view_memory_resource")}
  {
  }

  /** @brief The pool this resource allocates from. */
  [[nodiscard]] cudaMemPool_t pool_handle() const
  {
    return static_cast<cudaMemPool_t>(detail::get_value<void*>(
      [&](void** out, rmm_error* err) { return rmm_cuda_async_view_memory_resource_pool_handle(handle(), out, err); },
      "cuda_async_view_memory_resource::pool_handle"));
  }
};

static_assert(cuda::mr::resource_with<cuda_async_view_memory_resource, cuda::mr::device_accessible>);

}  // namespace rmm::mr
