/**
 * @file device_vector.hpp
 * @brief rmm::device_vector: thrust::device_vector allocating through rmm::mr::thrust_allocator.
 *
 * Needs Thrust and the CUDA runtime (compile with nvcc); without them this header does not compile,
 * as RMM's does not.
 */
#pragma once

#include <rmm/mr/thrust_allocator_adaptor.hpp>

#include <thrust/device_vector.h>

namespace rmm {

/** @brief A thrust::device_vector whose memory comes from an rmm resource (see thrust_allocator). */
template <typename T>
using device_vector = thrust::device_vector<T, rmm::mr::thrust_allocator<T>>;

}  // namespace rmm
