/**
 * @file prefetch.hpp
 * @brief rmm::prefetch: migrate managed memory to a device ahead of use (RMM 26.x names), through
 * librmm's C ABI (rmm_prefetch).
 */
#pragma once

#include <rmm/cuda_device.hpp>
#include <rmm/cuda_stream_view.hpp>
#include <rmm/detail/error.hpp>
#include <rmm/error.hpp>
#include <rmm/rmm_c.h>

#include <cuda/std/span>

#include <cstddef>

namespace rmm {

/**
 * @brief Prefetches @p size bytes at @p ptr to @p device, ordered on @p stream. A no-op for memory
 * that is not managed (device, pinned or pageable host memory), and so always in host mode.
 * @throws rmm::cuda_error when the prefetch fails
 */
inline void prefetch(void const* ptr, std::size_t size, rmm::cuda_device_id device, rmm::cuda_stream_view stream)
{
  rmm_error err{};
  rmm::detail::check(rmm_prefetch(ptr, size, device.value(), static_cast<void*>(stream.value()), &err), err,
                     "prefetch");
}

/** @brief Prefetches the elements of @p data to @p device, ordered on @p stream (see above). */
template <typename T>
void prefetch(cuda::std::span<T const> data, rmm::cuda_device_id device, rmm::cuda_stream_view stream)
{
  prefetch(data.data(), data.size_bytes(), device, stream);
}

}  // namespace rmm
