/**
 * @file strided_memory_view.hpp
 * @brief rmm::strided_memory_view: an owner of one acquired `rmm_strided_view` (rmm_c.h), released
 * exactly once by its destructor (RAII), move-only, with std::span accessors (C++20; pointer + size
 * accessors under C++17).
 *
 * @code
 * DLManagedTensorVersioned* t = producer();                  // any DLPack 1.x producer
 * auto v = rmm::strided_memory_view::from_dlpack(t);        // takes t over (its deleter runs later)
 * for (auto extent : v.shape()) { ... }                      // std::span<const int64_t>
 * auto on_device = v.to_device(resource, stream);           // v.c_view().device_copy: a kernel argument
 * @endcode
 *
 * Errors are thrown as rmm::logic_error (bad input, a released view) or rmm::cuda_error, with the C
 * ABI's message. Using a moved-from or released view throws, never crashes.
 */
#pragma once

#include <rmm/error.hpp>
#include <rmm/rmm_c.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#if __cplusplus >= 202002L && __has_include(<span>)
#include <span>
#define RMM_STRIDED_VIEW_HAS_SPAN 1
#endif

namespace rmm {

/** @brief A typed strided view of memory its producer owns; the producer lives until destruction. */
class strided_memory_view {
 public:
  /** @brief A view of a DLPack 1.x tensor, which it takes over (the caller keeps it on error). */
  static strided_memory_view from_dlpack(DLManagedTensorVersioned* tensor)
  {
    strided_memory_view v;
    rmm_error err{};
    check(rmm_strided_view_from_dlpack_versioned(tensor, &v.view_, &err), err);
    return v;
  }

  /** @brief A view of a legacy (unversioned) DLPack tensor, which it takes over. */
  static strided_memory_view from_dlpack(DLManagedTensor* tensor)
  {
    strided_memory_view v;
    rmm_error err{};
    check(rmm_strided_view_from_dlpack(tensor, &v.view_, &err), err);
    return v;
  }

  /** @brief A view of memory described by parts (no owner: the caller keeps `data` alive).
   *  `strides` in items, or nullptr for C-contiguous; `format` e.g. "<f4". */
  static strided_memory_view from_parts(void const* data,
                                        int ndim,
                                        int64_t const* shape,
                                        int64_t const* strides,
                                        char const* format,
                                        int device_type = 1,
                                        int device_id   = 0,
                                        bool readonly   = false)
  {
    strided_memory_view v;
    rmm_error err{};
    check(rmm_strided_view_from_parts(
            data, ndim, shape, strides, format, device_type, device_id, readonly, &v.view_, &err),
          err);
    return v;
  }

  strided_memory_view(strided_memory_view const&)            = delete;
  strided_memory_view& operator=(strided_memory_view const&) = delete;

  /** @brief Moves the view; `other` becomes released (generation 0). */
  strided_memory_view(strided_memory_view&& other) noexcept : view_{other.view_}
  {
    other.view_ = released_view();
  }

  /** @brief Releases this view, then takes `other`'s. */
  strided_memory_view& operator=(strided_memory_view&& other) noexcept
  {
    if (this != &other) {
      reset();
      view_       = other.view_;
      other.view_ = released_view();
    }
    return *this;
  }

  /** @brief Releases the view (lets go of the producer). */
  ~strided_memory_view() { reset(); }

  /** @brief Releases now; a later reset() does nothing. */
  void reset() noexcept
  {
    if (view_.generation != 0) { rmm_strided_view_release(&view_, nullptr); }
  }

  /** @brief True while the view is acquired (not released, not moved from). */
  [[nodiscard]] bool valid() const noexcept { return view_.generation != 0; }

  /** @brief The C struct (for C code and kernels); throws when released. */
  [[nodiscard]] rmm_strided_view const& c_view() const { return live(); }

  /** @brief Address of element [0,...,0]. */
  [[nodiscard]] std::uintptr_t ptr() const { return live().ptr; }
  /** @brief Typed pointer to element [0,...,0]. */
  template <typename T>
  [[nodiscard]] T const* data() const
  {
    return reinterpret_cast<T const*>(live().ptr);
  }
  /** @brief Number of dimensions. */
  [[nodiscard]] int ndim() const { return live().ndim; }
  /** @brief Bytes per item. */
  [[nodiscard]] int64_t itemsize() const { return live().itemsize; }
  /** @brief The DLPack dtype (code, bits, lanes). */
  [[nodiscard]] rmm_dl_data_type dtype() const { return live().dtype; }
  /** @brief The "<f4"-style format string. */
  [[nodiscard]] std::string_view format() const { return live().format; }
  /** @brief DLPack device type (1 CPU, 2 CUDA, 3 CUDA host, 13 CUDA managed). */
  [[nodiscard]] int device_type() const { return live().device_type; }
  /** @brief Device ordinal. */
  [[nodiscard]] int device_id() const { return live().device_id; }
  /** @brief True when CUDA kernels can read the data. */
  [[nodiscard]] bool device_accessible() const { return live().device_accessible; }
  /** @brief True when the data must not be written through this view. */
  [[nodiscard]] bool readonly() const { return live().readonly; }
  /** @brief Number of items (1 for a 0-d view). */
  [[nodiscard]] int64_t size() const
  {
    int64_t n = 1;
    for (int i = 0; i < live().ndim; ++i) {
      n *= view_.shape[i];
    }
    return n;
  }

#ifdef RMM_STRIDED_VIEW_HAS_SPAN
  /** @brief Extents. */
  [[nodiscard]] std::span<int64_t const> shape() const { return words(live().shape); }
  /** @brief Strides in items. */
  [[nodiscard]] std::span<int64_t const> strides() const { return words(live().strides); }
  /** @brief Strides in bytes. */
  [[nodiscard]] std::span<int64_t const> byte_strides() const { return words(live().byte_strides); }
#else
  /** @brief Extents (ndim() items). */
  [[nodiscard]] int64_t const* shape() const { return live().shape; }
  /** @brief Strides in items (ndim() items). */
  [[nodiscard]] int64_t const* strides() const { return live().strides; }
  /** @brief Strides in bytes (ndim() items). */
  [[nodiscard]] int64_t const* byte_strides() const { return live().byte_strides; }
#endif

  /** @brief Row-major contiguity. */
  [[nodiscard]] bool is_c_contiguous() const { return contiguity().first; }
  /** @brief Column-major contiguity. */
  [[nodiscard]] bool is_f_contiguous() const { return contiguity().second; }

  /** @brief A view of the same memory whose struct, shape, strides and format are also in memory
   *  from `resource` (empty handle: the current device's resource), uploaded on `stream`:
   *  `c_view().device_copy` is the struct there. */
  [[nodiscard]] strided_memory_view to_device(rmm_resource resource = rmm_resource{nullptr, nullptr},
                                              void* stream              = nullptr) const
  {
    strided_memory_view v;
    rmm_error err{};
    check(rmm_strided_view_to_device(&live(), resource, stream, &v.view_, &err), err);
    return v;
  }

  /** @brief A new DLPack 1.1 tensor of the view that keeps the producer alive; call its deleter. */
  [[nodiscard]] DLManagedTensorVersioned* to_dlpack() const
  {
    DLManagedTensorVersioned* out = nullptr;
    rmm_error err{};
    check(rmm_strided_view_to_dlpack_versioned(&live(), &out, &err), err);
    return out;
  }

 private:
  strided_memory_view() : view_{released_view()} {}

  static rmm_strided_view released_view() noexcept
  {
    rmm_strided_view v{};
    return v;
  }

  static void check(int status, rmm_error const& err)
  {
    if (status == RMM_OK) { return; }
    std::string what{"rmm::strided_memory_view: "};
    what += err.message;
    if (status == RMM_ERROR_CUDA || status == RMM_ERROR_NO_DRIVER || status == RMM_ERROR_NO_DEVICE) {
      throw rmm::cuda_error{what};
    }
    throw rmm::logic_error{what};
  }

  [[nodiscard]] rmm_strided_view const& live() const
  {
    if (view_.generation == 0) {
      throw rmm::logic_error{"rmm::strided_memory_view: the view was released or moved from"};
    }
    return view_;
  }

  [[nodiscard]] std::pair<bool, bool> contiguity() const
  {
    bool c = false;
    bool f = false;
    rmm_error err{};
    check(rmm_strided_view_contiguity(&live(), &c, &f, &err), err);
    return {c, f};
  }

#ifdef RMM_STRIDED_VIEW_HAS_SPAN
  [[nodiscard]] std::span<int64_t const> words(int64_t const* p) const
  {
    return {p, static_cast<std::size_t>(view_.ndim)};
  }
#endif

  rmm_strided_view view_;
};

}  // namespace rmm
