/**
 * @file aligned.hpp
 * @brief Alignment helpers (RMM 26.x names).
 */
#pragma once

#include <cstddef>
#include <cstdint>

namespace rmm {

/** @brief The alignment every rmm allocation has by default (bytes). */
static constexpr std::size_t CUDA_ALLOCATION_ALIGNMENT{256};

/** @brief Whether @p value is a non-zero power of two. */
[[nodiscard]] constexpr bool is_pow2(std::size_t value) noexcept
{
  return (value != 0U) && ((value & (value - 1)) == 0U);
}

/** @brief Whether @p alignment is a valid alignment (a power of two). */
[[nodiscard]] constexpr bool is_supported_alignment(std::size_t alignment) noexcept
{
  return is_pow2(alignment);
}

/** @brief Whether a base resource (cuda, system) supports @p alignment: a power of two, at most 256. */
[[nodiscard]] constexpr bool is_supported_base_resource_alignment(std::size_t alignment) noexcept
{
  return is_pow2(alignment) && alignment <= CUDA_ALLOCATION_ALIGNMENT;
}

/** @brief @p value rounded up to a multiple of @p alignment (a power of two). */
[[nodiscard]] constexpr std::size_t align_up(std::size_t value, std::size_t alignment) noexcept
{
  return (value + (alignment - 1)) & ~(alignment - 1);
}

/** @brief @p value rounded down to a multiple of @p alignment (a power of two). */
[[nodiscard]] constexpr std::size_t align_down(std::size_t value, std::size_t alignment) noexcept
{
  return value & ~(alignment - 1);
}

/** @brief Whether @p value is a multiple of @p alignment (a power of two). */
[[nodiscard]] constexpr bool is_aligned(std::size_t value, std::size_t alignment) noexcept
{
  return value == align_down(value, alignment);
}

/** @brief Whether @p ptr is aligned to @p alignment (a power of two). */
[[nodiscard]] inline bool is_pointer_aligned(void const* ptr,
                                             std::size_t alignment = CUDA_ALLOCATION_ALIGNMENT) noexcept
{
  return is_aligned(reinterpret_cast<std::uintptr_t>(ptr), alignment);
}

}  // namespace rmm
