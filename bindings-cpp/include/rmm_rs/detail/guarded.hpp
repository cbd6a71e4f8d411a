/**
 * @file guarded.hpp
 * @brief How C++ code that librmm_rs calls back (a C++ resource behind librmm_rs's C vtable) reports
 * failure: every exception becomes an rmm_error, none escapes.
 *
 * std::bad_alloc -> OUT_OF_MEMORY, rmm::cuda_error -> CUDA, CCCL's cuda::cuda_error -> OUT_OF_MEMORY for
 * cudaErrorMemoryAllocation, else CUDA, std::logic_error -> INVALID_ARGUMENT, anything else -> PANIC.
 *
 * One mapping for both C++ faces: our `rmm::` headers (<rmm/mr/detail/guarded.hpp>) and the header
 * used beside RAPIDS RMM (<rmm_rs/resource.hpp>). `rmm::cuda_error` is the includer's: include
 * <rmm/error.hpp> (ours, or RMM's beside RMM) before this header. Only `rmm_rs::` names are defined.
 */
#pragma once

#include <rmm_rs/rmm_c.h>

#include <cuda/std/__exception/cuda_error.h>  // cuda::cuda_error (no public header of its own)
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>

namespace rmm_rs::detail {

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
    // cuda::cuda_error, not std::bad_alloc: librmm_rs's pools must see that as out of memory (RMM's
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

}  // namespace rmm_rs::detail
