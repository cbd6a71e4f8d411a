/**
 * @file cuda_stream_view.hpp
 * @brief rmm::cuda_stream_view: a non-owning view of a CUDA stream (RMM 26.x names).
 *
 * synchronize() goes through librmm's C ABI (rmm_stream_synchronize), so no CUDA runtime is linked.
 * In host mode (no GPU) the default streams have nothing to wait for and synchronize at once.
 */
#pragma once

#include <rmm/error.hpp>
#include <rmm/rmm_c.h>

#include <cuda/stream_ref>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <ostream>

namespace rmm {

/** @brief A non-owning, copyable view of a cudaStream_t. The default is stream 0. */
class cuda_stream_view {
 public:
  constexpr cuda_stream_view()                                   = default;
  constexpr cuda_stream_view(cuda_stream_view const&)            = default;
  constexpr cuda_stream_view(cuda_stream_view&&)                 = default;
  constexpr cuda_stream_view& operator=(cuda_stream_view const&) = default;
  constexpr cuda_stream_view& operator=(cuda_stream_view&&)      = default;
  ~cuda_stream_view()                                            = default;

  cuda_stream_view(int)            = delete;  //!< Prevents converting from 0 or NULL.
  cuda_stream_view(std::nullptr_t) = delete;  //!< Prevents converting from nullptr.

  /** @brief A view of @p stream. */
  constexpr cuda_stream_view(cudaStream_t stream) noexcept : stream_{stream} {}

  /** @brief A view of the stream @p stream refers to. */
  cuda_stream_view(cuda::stream_ref stream) noexcept : stream_{stream.get()} {}

  /** @brief The stream. */
  [[nodiscard]] constexpr cudaStream_t value() const noexcept { return stream_; }

  /** @brief The stream. */
  constexpr operator cudaStream_t() const noexcept { return value(); }

  /** @brief The stream as a CCCL stream_ref. */
  operator cuda::stream_ref() const noexcept { return cuda::stream_ref{value()}; }

  /** @brief Whether this is the per-thread default stream. */
  [[nodiscard]] bool is_per_thread_default() const noexcept
  {
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
    return value() == cudaStreamPerThread || value() == nullptr;
#else
    return value() == cudaStreamPerThread;
#endif
  }

  /** @brief Whether this is the default stream (the legacy one, or 0 without per-thread default). */
  [[nodiscard]] bool is_default() const noexcept
  {
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
    return value() == cudaStreamLegacy;
#else
    return value() == cudaStreamLegacy || value() == nullptr;
#endif
  }

  /**
   * @brief Blocks until all work queued on the stream has finished.
   * @throws rmm::cuda_error when CUDA reports an error, or the stream is not a default stream in host mode
   */
  void synchronize() const
  {
    rmm_error err{};
    rmm::detail::check(rmm_stream_synchronize(static_cast<void*>(value()), &err), err,
                       "cuda_stream_view::synchronize");
  }

  /**
   * @brief As synchronize(), for destructors and other places that cannot throw: a failure is
   * printed to stderr instead.
   */
  void synchronize_no_throw() const noexcept
  {
    rmm_error err{};
    if (int const status = rmm_stream_synchronize(static_cast<void*>(value()), &err); status != RMM_OK) {
      std::fprintf(stderr, "rmm::cuda_stream_view::synchronize_no_throw failed: %s: %s\n",
                   rmm_error_kind_name(status), err.message);
    }
  }

 private:
  cudaStream_t stream_{};
};

/** @brief The default stream (0). */
static constexpr cuda_stream_view cuda_stream_default{};

/** @brief The legacy default stream (cudaStreamLegacy). */
static const cuda_stream_view cuda_stream_legacy{cudaStreamLegacy};

/** @brief The per-thread default stream (cudaStreamPerThread). */
static const cuda_stream_view cuda_stream_per_thread{cudaStreamPerThread};

/** @brief Whether two views are of the same stream. */
[[nodiscard]] inline bool operator==(cuda_stream_view lhs, cuda_stream_view rhs)
{
  return lhs.value() == rhs.value();
}

/** @brief Whether two views are of different streams. */
[[nodiscard]] inline bool operator!=(cuda_stream_view lhs, cuda_stream_view rhs)
{
  return not(lhs == rhs);
}

/** @brief Prints the stream's address. */
inline std::ostream& operator<<(std::ostream& os, cuda_stream_view stream)
{
  os << static_cast<void const*>(stream.value());
  return os;
}

}  // namespace rmm
