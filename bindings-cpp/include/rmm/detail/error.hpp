/**
 * @file detail/error.hpp
 * @brief RMM's error-checking macros (RMM 26.x names and semantics): RMM_EXPECTS, RMM_FAIL,
 * RMM_CUDA_TRY, RMM_CUDA_TRY_ALLOC, RMM_ASSERT_CUDA_SUCCESS and RMM_ASSERT_CUDA_SUCCESS_SAFE_SHUTDOWN.
 *
 * Despite the `detail/` path this is where RMM documents these macros, and downstream code (cuDF,
 * cuML, RMM's own README) includes it for them. As in RMM, `<rmm/resource_ref.hpp>`,
 * `<rmm/device_buffer.hpp>`, `<rmm/device_uvector.hpp>`, `<rmm/prefetch.hpp>` and
 * `<rmm/mr/failure_callback_resource_adaptor.hpp>` include it.
 *
 * The CUDA macros take a CUDA runtime call and name its error with `cudaGetErrorName` and
 * `cudaGetErrorString`: code that uses them calls the CUDA runtime and links it (libcudart), as with
 * RMM. Including this header links nothing; librmm itself does not use libcudart.
 *
 * The macros follow RMM's `cpp/include/rmm/detail/error.hpp` (Apache-2.0, NVIDIA) word for word:
 * their messages and exception types are part of the behaviour code relies on.
 */
#pragma once

#include <rmm/error.hpp>

#include <cuda_runtime_api.h>

#include <cassert>
#include <exception>
#include <iostream>
#include <string>
#include <type_traits>

/** @brief Expands @p x, then makes a string literal of it. */
#define RMM_STRINGIFY(x) STRINGIFY_DETAIL(x)
/** @brief Makes a string literal of @p x (unexpanded). */
#define STRINGIFY_DETAIL(x) #x

/**
 * @brief Checks a condition and throws when it is false.
 *
 * `RMM_EXPECTS(condition, reason)` throws rmm::logic_error; `RMM_EXPECTS(condition, reason,
 * exception_type)` throws `exception_type` (a std::exception constructible from a std::string). The
 * message is "RMM failure at: FILE:LINE: reason".
 */
#define RMM_EXPECTS(...)                                           \
  GET_RMM_EXPECTS_MACRO(__VA_ARGS__, RMM_EXPECTS_3, RMM_EXPECTS_2) \
  (__VA_ARGS__)
/** @brief Picks RMM_EXPECTS_2 or RMM_EXPECTS_3 by the number of arguments. */
#define GET_RMM_EXPECTS_MACRO(_1, _2, _3, NAME, ...) NAME
/** @brief RMM_EXPECTS with an exception type. */
#define RMM_EXPECTS_3(_condition, _reason, _exception_type)                                     \
  do {                                                                                          \
    static_assert(std::is_base_of_v<std::exception, _exception_type>);                          \
    /*NOLINTNEXTLINE(bugprone-macro-parentheses)*/                                              \
    (!!(_condition)) ? static_cast<void>(0)                                                     \
                     : throw _exception_type{std::string{"RMM failure at: "} + __FILE__ + ":" + \
                                             RMM_STRINGIFY(__LINE__) + ": " + _reason};         \
  } while (0)
/** @brief RMM_EXPECTS throwing rmm::logic_error. */
#define RMM_EXPECTS_2(_condition, _reason) RMM_EXPECTS_3(_condition, _reason, rmm::logic_error)

/**
 * @brief Throws unconditionally: `RMM_FAIL(what)` throws rmm::logic_error, `RMM_FAIL(what,
 * exception_type)` throws `exception_type`, with "RMM failure at:FILE:LINE: what".
 */
#define RMM_FAIL(...)                                     \
  GET_RMM_FAIL_MACRO(__VA_ARGS__, RMM_FAIL_2, RMM_FAIL_1) \
  (__VA_ARGS__)
/** @brief Picks RMM_FAIL_1 or RMM_FAIL_2 by the number of arguments. */
#define GET_RMM_FAIL_MACRO(_1, _2, NAME, ...) NAME
/** @brief RMM_FAIL with an exception type. */
#define RMM_FAIL_2(_what, _exception_type)                                                   \
  /*NOLINTNEXTLINE(bugprone-macro-parentheses)*/                                             \
  throw _exception_type                                                                      \
  {                                                                                          \
    std::string{"RMM failure at:"} + __FILE__ + ":" + RMM_STRINGIFY(__LINE__) + ": " + _what \
  }
/** @brief RMM_FAIL throwing rmm::logic_error. */
#define RMM_FAIL_1(_what) RMM_FAIL_2(_what, rmm::logic_error)

/**
 * @brief Calls a CUDA runtime function and throws when it does not return cudaSuccess.
 *
 * `RMM_CUDA_TRY(call)` throws rmm::cuda_error, `RMM_CUDA_TRY(call, exception_type)` throws
 * `exception_type`; the message names the file, line and CUDA error. The runtime's last error is
 * cleared (`cudaGetLastError()`) before throwing, as in RMM.
 */
#define RMM_CUDA_TRY(...)                                             \
  GET_RMM_CUDA_TRY_MACRO(__VA_ARGS__, RMM_CUDA_TRY_2, RMM_CUDA_TRY_1) \
  (__VA_ARGS__)
/** @brief Picks RMM_CUDA_TRY_1 or RMM_CUDA_TRY_2 by the number of arguments. */
#define GET_RMM_CUDA_TRY_MACRO(_1, _2, NAME, ...) NAME
/** @brief RMM_CUDA_TRY with an exception type. */
#define RMM_CUDA_TRY_2(_call, _exception_type)                                               \
  do {                                                                                       \
    cudaError_t const error = (_call);                                                       \
    if (cudaSuccess != error) {                                                              \
      cudaGetLastError();                                                                    \
      /*NOLINTNEXTLINE(bugprone-macro-parentheses)*/                                         \
      throw _exception_type{std::string{"CUDA error at: "} + __FILE__ + ":" +                \
                            RMM_STRINGIFY(__LINE__) + ": " + cudaGetErrorName(error) + " " + \
                            cudaGetErrorString(error)};                                      \
    }                                                                                        \
  } while (0)
/** @brief RMM_CUDA_TRY throwing rmm::cuda_error. */
#define RMM_CUDA_TRY_1(_call) RMM_CUDA_TRY_2(_call, rmm::cuda_error)

/**
 * @brief Calls a CUDA allocation function and throws when it fails: rmm::out_of_memory for
 * cudaErrorMemoryAllocation, rmm::bad_alloc for any other error. `RMM_CUDA_TRY_ALLOC(call,
 * num_bytes)` names the requested size in the message.
 */
#define RMM_CUDA_TRY_ALLOC(...)                                                         \
  GET_RMM_CUDA_TRY_ALLOC_MACRO(__VA_ARGS__, RMM_CUDA_TRY_ALLOC_2, RMM_CUDA_TRY_ALLOC_1) \
  (__VA_ARGS__)
/** @brief Picks RMM_CUDA_TRY_ALLOC_1 or RMM_CUDA_TRY_ALLOC_2 by the number of arguments. */
#define GET_RMM_CUDA_TRY_ALLOC_MACRO(_1, _2, NAME, ...) NAME
/** @brief RMM_CUDA_TRY_ALLOC naming the requested size. */
#define RMM_CUDA_TRY_ALLOC_2(_call, num_bytes)                                          \
  do {                                                                                  \
    cudaError_t const error = (_call);                                                  \
    if (cudaSuccess != error) {                                                         \
      cudaGetLastError();                                                               \
      auto const msg = std::string{"CUDA error (failed to allocate "} +                 \
                       std::to_string(num_bytes) + " bytes) at: " + __FILE__ + ":" +    \
                       RMM_STRINGIFY(__LINE__) + ": " + cudaGetErrorName(error) + " " + \
                       cudaGetErrorString(error);                                       \
      if (cudaErrorMemoryAllocation == error) { throw rmm::out_of_memory{msg}; }        \
      throw rmm::bad_alloc{msg};                                                        \
    }                                                                                   \
  } while (0)
/** @brief RMM_CUDA_TRY_ALLOC without the size. */
#define RMM_CUDA_TRY_ALLOC_1(_call)                                                                \
  do {                                                                                             \
    cudaError_t const error = (_call);                                                             \
    if (cudaSuccess != error) {                                                                    \
      cudaGetLastError();                                                                          \
      auto const msg = std::string{"CUDA error at: "} + __FILE__ + ":" + RMM_STRINGIFY(__LINE__) + \
                       ": " + cudaGetErrorName(error) + " " + cudaGetErrorString(error);           \
      if (cudaErrorMemoryAllocation == error) { throw rmm::out_of_memory{msg}; }                   \
      throw rmm::bad_alloc{msg};                                                                   \
    }                                                                                              \
  } while (0)

/**
 * @brief For calls that must not throw (destructors): with NDEBUG the call is only made; otherwise
 * a failure is printed to std::cerr and `assert`ed.
 */
#ifdef NDEBUG
#define RMM_ASSERT_CUDA_SUCCESS(_call) \
  do {                                 \
    (_call);                           \
  } while (0);
#else
#define RMM_ASSERT_CUDA_SUCCESS(_call)                                          \
  do {                                                                          \
    cudaError_t const status__ = (_call);                                       \
    if (status__ != cudaSuccess) {                                              \
      std::cerr << "CUDA Error detected. " << cudaGetErrorName(status__) << " " \
                << cudaGetErrorString(status__) << std::endl;                   \
    }                                                                           \
    /* NOLINTNEXTLINE(cppcoreguidelines-pro-bounds-array-to-pointer-decay) */   \
    assert(status__ == cudaSuccess);                                            \
  } while (0)
#endif

/**
 * @brief RMM_ASSERT_CUDA_SUCCESS that also accepts cudaErrorCudartUnloading, for calls made while
 * the process exits (destructors of static objects).
 */
#ifdef NDEBUG
#define RMM_ASSERT_CUDA_SUCCESS_SAFE_SHUTDOWN(_call) \
  do {                                               \
    (_call);                                         \
  } while (0);
#else
#define RMM_ASSERT_CUDA_SUCCESS_SAFE_SHUTDOWN(_call)                            \
  do {                                                                          \
    cudaError_t const status__ = (_call);                                       \
    if (status__ != cudaSuccess && status__ != cudaErrorCudartUnloading) {      \
      std::cerr << "CUDA Error detected. " << cudaGetErrorName(status__) << " " \
                << cudaGetErrorString(status__) << std::endl;                   \
    }                                                                           \
    /* NOLINTNEXTLINE(cppcoreguidelines-pro-bounds-array-to-pointer-decay) */   \
    assert(status__ == cudaSuccess || status__ == cudaErrorCudartUnloading);    \
  } while (0)
#endif
