/**
 * @file cuda_stream_view.hpp
 * @brief rmm::cuda_stream_view: a non-owning view of a CUDA stream (RMM 26.x names).
 *
 * Left out compared with RMM: synchronize() and synchronize_no_throw(), which need the CUDA runtime
 * (librmm's C ABI does not offer stream synchronization).
 */
#pragma once

#include <cuda/stream_ref>
#include <cuda_runtime_api.h>

#include <cstddef>
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
