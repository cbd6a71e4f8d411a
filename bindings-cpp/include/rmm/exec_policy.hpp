/**
 * @file exec_policy.hpp
 * @brief rmm::exec_policy and rmm::exec_policy_nosync: Thrust CUDA execution policies whose
 * temporary memory comes from an rmm resource on the algorithm's stream.
 *
 * Needs Thrust and the CUDA runtime (compile with nvcc); without them this header does not compile,
 * as RMM's does not.
 */
#pragma once

#include <rmm/cuda_stream_view.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/mr/thrust_allocator_adaptor.hpp>
#include <rmm/resource_ref.hpp>

#include <thrust/system/cuda/execution_policy.h>

#include <utility>

namespace rmm {

/** @brief The Thrust policy type exec_policy derives from (par with an allocator, on a stream). */
using thrust_exec_policy_t =
  thrust::detail::execute_with_allocator<mr::thrust_allocator<char>, thrust::cuda_cub::execute_on_stream_base>;

/**
 * @brief `thrust::cuda::par(allocator).on(stream)`: runs Thrust algorithms on @p stream and takes
 * their temporary memory from @p mr on that stream.
 */
class exec_policy : public thrust_exec_policy_t {
 public:
  /**
   * @brief A policy on @p stream allocating temporaries from @p mr (default: the current device
   * resource, not owned).
   */
  explicit exec_policy(cuda_stream_view stream  = cuda_stream_default,
                       mr::device_any_resource mr = mr::get_current_device_resource_ref())
    : thrust_exec_policy_t(thrust::cuda::par(mr::thrust_allocator<char>(stream, std::move(mr))).on(stream.value()))
  {
  }
};

/** @brief The Thrust policy type exec_policy_nosync derives from (par_nosync with an allocator). */
using thrust_exec_policy_nosync_t =
  thrust::detail::execute_with_allocator<mr::thrust_allocator<char>, thrust::cuda_cub::execute_on_stream_nosync_base>;

/**
 * @brief `thrust::cuda::par_nosync(allocator).on(stream)`: as exec_policy, but Thrust may skip
 * stream synchronizations that correctness does not need (algorithms may return before their
 * kernels finish: synchronize the stream before reading results on the host).
 */
class exec_policy_nosync : public thrust_exec_policy_nosync_t {
 public:
  /** @brief A policy on @p stream allocating temporaries from @p mr (default: the current device resource). */
  explicit exec_policy_nosync(cuda_stream_view stream  = cuda_stream_default,
                              mr::device_any_resource mr = mr::get_current_device_resource_ref())
    : thrust_exec_policy_nosync_t(
        thrust::cuda::par_nosync(mr::thrust_allocator<char>(stream, std::move(mr))).on(stream.value()))
  {
  }
};

}  // namespace rmm
