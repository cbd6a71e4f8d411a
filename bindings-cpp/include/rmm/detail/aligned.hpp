/**
 * @file detail/aligned.hpp
 * @brief RMM's over-aligned host allocation helpers (RMM 26.x names): aligned_host_allocate and
 * aligned_host_deallocate, header-only as in RMM.
 */
#pragma once

#include <rmm/aligned.hpp>

#include <cassert>
#include <cstddef>
#include <memory>

namespace rmm::detail {

/**
 * @brief Allocates @p bytes aligned to @p alignment with the plain allocator @p alloc (a callable
 * `void*(std::size_t)`), by over-allocating and storing the offset to the original pointer just
 * before the aligned one.
 *
 * @param bytes the size wanted
 * @param alignment a power of two (checked by `assert`)
 * @param alloc the underlying allocation function
 * @return the aligned pointer; free it with aligned_host_deallocate()
 */
template <typename Alloc>
void* aligned_host_allocate(std::size_t bytes, std::size_t alignment, Alloc alloc)
{
  assert(rmm::is_supported_alignment(alignment));
  std::size_t padded_allocation_size{bytes + alignment + sizeof(std::ptrdiff_t)};
  char* const original = static_cast<char*>(alloc(padded_allocation_size));
  void* aligned{original + sizeof(std::ptrdiff_t)};  // room for the offset before the aligned pointer
  std::align(alignment, bytes, aligned, padded_allocation_size);
  std::ptrdiff_t const offset = static_cast<char*>(aligned) - original;
  *(static_cast<std::ptrdiff_t*>(aligned) - 1) = offset;
  return aligned;
}

/**
 * @brief Frees memory from aligned_host_allocate() with the plain deallocator @p dealloc (a callable
 * `void(void*)` given the original pointer). A null @p ptr does nothing.
 */
template <typename Dealloc>
void aligned_host_deallocate(void* ptr, [[maybe_unused]] std::size_t bytes,
                             [[maybe_unused]] std::size_t alignment, Dealloc dealloc) noexcept
{
  assert(rmm::is_supported_alignment(alignment));
  if (ptr != nullptr) {
    std::ptrdiff_t const offset = *(static_cast<std::ptrdiff_t*>(ptr) - 1);
    void* const original = static_cast<char*>(ptr) - offset;
    dealloc(original);
  }
}

}  // namespace rmm::detail
