/**
 * @file upstream.hpp
 * @brief Helpers of the C++ value types of librmm's sub-allocators and adaptors: how an upstream
 * becomes a handle, how the new resource is made, and how accessors call the C ABI.
 */
#pragma once

#include <rmm/error.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/detail/cpp_resource_box.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace rmm::mr::detail {

/** @brief Enables the constructors of librmm's resources that take an rmm resource (any class derived from c_resource) as upstream. */
template <class Upstream>
using enable_if_rmm_upstream_t = std::enable_if_t<std::is_base_of_v<c_resource, Upstream>, int>;

/** @brief Enables upstream_holder's constructor for any other type an any_resource<device_accessible> is made from. */
template <class Upstream>
using enable_if_other_upstream_t =
  std::enable_if_t<!std::is_base_of_v<c_resource, Upstream> && !std::is_same_v<Upstream, device_any_resource> &&
                     std::is_convertible_v<Upstream const&, device_any_resource>,
                   int>;

/**
 * @brief The upstream of a librmm sub-allocator or adaptor, as its C++ value type keeps it: one
 * reference to the upstream's handle (librmm keeps its own), and the upstream as the user passed it,
 * for get_upstream_resource().
 *
 * An rmm resource (any detail::c_resource) passes its handle through unchanged; any other
 * `any_resource<device_accessible>` (a user's C++ resource) goes behind the C vtable of
 * cpp_resource_box.hpp (detail::to_c_resource), so the Rust resource calls back into it.
 *
 * Each resource's constructor takes its upstream as an upstream_holder, made implicitly from
 * whatever the user passes (hence the implicit constructors): one constructor per signature serves
 * an rmm resource, an any_resource and anything an any_resource is made from.
 *
 * get_upstream_resource() refers to an object of the type the user passed (a copy of it, sharing its
 * state as every rmm resource does), so it compares equal to `device_async_resource_ref{upstream}`:
 * CCCL's resource_ref compares the referenced objects when their types match, and is false when they
 * do not (as RMM's adaptors, which keep their upstream in an any_resource).
 */
class upstream_holder {
 public:
  /** @brief Holds the handle of @p upstream (see the class comment). */
  upstream_holder(device_any_resource const& upstream)  // NOLINT(google-explicit-constructor)
    : up_{to_c_resource(upstream)}
  {
    // A user's resource: the box of to_c_resource holds the copy the adaptor uses; refer to that one.
    if (!is_cpp_box(up_.handle())) { typed_.emplace(upstream); }
  }
  /** @brief As above, for another type an any_resource is made from (a user's resource, a resource_ref): converted once, implicitly. */
  template <class Upstream, enable_if_other_upstream_t<Upstream> = 0>
  upstream_holder(Upstream const& upstream)  // NOLINT(google-explicit-constructor)
    : upstream_holder{as_any(upstream)}
  {
  }
  /** @brief Tag of the constructor that keeps the handle only (ref() then refers to the handle's resource). */
  struct handle_only_t {};
  /** @brief Holds the handle of @p upstream only: for owners that keep @p upstream themselves (containers). */
  upstream_holder(device_any_resource const& upstream, handle_only_t) : up_{to_c_resource(upstream)} {}
  /** @brief Holds @p upstream's own handle (an rmm resource), and a copy of @p upstream as its type. */
  template <class Upstream, enable_if_rmm_upstream_t<Upstream> = 0>
  upstream_holder(Upstream const& upstream)  // NOLINT(google-explicit-constructor)
    : up_{static_cast<c_resource const&>(upstream)}
  {
    // A plain c_resource is its own type already: ref() refers to up_ (no second copy).
    if constexpr (!std::is_same_v<Upstream, c_resource>) { typed_.emplace(upstream); }
  }

  /** @brief The handle, BORROWED. */
  [[nodiscard]] rmm_resource handle() const noexcept { return up_.handle(); }

  /** @brief A reference to the upstream: the user's resource itself when it came from C++. */
  [[nodiscard]] device_async_resource_ref ref() const noexcept
  {
    if (typed_.has_value()) { return device_async_resource_ref{*typed_}; }
    if (is_cpp_box(up_.handle())) { return device_async_resource_ref{as_box(up_.handle().self)->resource}; }
    return device_async_resource_ref{up_};
  }

 private:
  /** @brief Its argument as an any_resource, converted implicitly (as a `device_any_resource const&` parameter converts it). */
  static device_any_resource as_any(device_any_resource any) { return any; }

  mutable c_resource up_;
  mutable std::optional<device_any_resource> typed_;
};

/** @brief Calls the C constructor @p make (`int(rmm_resource* out, rmm_error* err)`); throws on failure. */
template <class Make>
rmm_resource make_handle(Make&& make, const char* what)
{
  rmm_resource handle{nullptr, nullptr};
  rmm_error err{};
  rmm::detail::check(make(&handle, &err), err, what);
  return handle;
}

/**
 * @brief The base of librmm's sub-allocators and adaptors: the resource's handle, made by a C
 * constructor from the upstream's handle, and the upstream, for get_upstream_resource().
 */
class resource_over_upstream : public c_resource {
 public:
  /** @brief The upstream resource (a reference, valid while this resource or a copy lives). */
  [[nodiscard]] device_async_resource_ref get_upstream_resource() const noexcept { return upstream_.ref(); }

 protected:
  /**
   * @brief Calls the C constructor @p make (`int(rmm_resource upstream, rmm_resource* out, rmm_error*
   * err)`) with @p upstream's handle, and keeps @p upstream; throws on failure (naming @p what).
   */
  template <class Make>
  resource_over_upstream(upstream_holder upstream, Make&& make, const char* what)
    : c_resource{make_handle([&](rmm_resource* out, rmm_error* err) { return make(upstream.handle(), out, err); },
                             what)},
      upstream_{std::move(upstream)}
  {
  }

 private:
  upstream_holder upstream_;
};

/** @brief Calls the C accessor @p get (`int(T* out, rmm_error* err)`) and returns its value; throws on failure. */
template <class T, class Get>
T get_value(Get&& get, const char* what)
{
  T value{};
  rmm_error err{};
  rmm::detail::check(get(&value, &err), err, what);
  return value;
}

/**
 * @brief Calls the C string accessor @p get (`int(char* buf, size_t capacity, size_t* length_out,
 * rmm_error* err)`) until the whole text fits (it may grow between calls) and returns it; throws on
 * failure.
 */
template <class Get>
std::string get_string(Get&& get, const char* what)
{
  std::size_t length = 0;
  rmm_error err{};
  rmm::detail::check(get(nullptr, 0, &length, &err), err, what);
  std::string text;
  while (true) {
    text.assign(length + 1, '\0');
    std::size_t full = 0;
    rmm::detail::check(get(text.data(), text.size(), &full, &err), err, what);
    if (full <= length) {
      text.resize(full);
      return text;
    }
    length = full;
  }
}

/** @brief An optional size as the C ABI takes it (RMM_SIZE_NONE for none). */
inline std::uint64_t size_or_none(std::optional<std::size_t> size) noexcept
{
  return size.has_value() ? static_cast<std::uint64_t>(*size) : RMM_SIZE_NONE;
}

}  // namespace rmm::mr::detail
