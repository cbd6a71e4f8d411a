/**
 * @file guarded.hpp
 * @brief How C++ code that librmm calls back (a C++ resource behind librmm's C vtable, the functions of
 * a callback_memory_resource) reports failure: every exception becomes an rmm_error, none escapes.
 *
 * std::bad_alloc -> OUT_OF_MEMORY, rmm::cuda_error -> CUDA, CCCL's cuda::cuda_error -> OUT_OF_MEMORY for
 * cudaErrorMemoryAllocation, else CUDA, std::logic_error -> INVALID_ARGUMENT, anything else -> PANIC.
 */
#pragma once

#include <rmm/error.hpp>
#include <rmm/rmm_c.h>

#include <rmm_rs/detail/guarded.hpp>

namespace rmm::mr::detail {

using rmm_rs::detail::guarded;
using rmm_rs::detail::set_error;

}  // namespace rmm::mr::detail
