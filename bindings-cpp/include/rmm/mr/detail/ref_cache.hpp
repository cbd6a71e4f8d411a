/**
 * @file ref_cache.hpp
 * @brief The process-lifetime cache of this binary behind get_*_resource_ref(): see
 * per_device_resource.hpp for how long the references it hands out stay valid.
 */
#pragma once

#include <rmm/detail/runtime_shutdown.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/detail/cpp_resource_box.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <map>
#include <mutex>
#include <utility>

namespace rmm::mr::detail {

/** @brief The process-lifetime cache behind get_*_resource_ref (see per_device_resource.hpp). */
class ref_cache {
 public:
  /**
   * @brief The cache of this binary; never destroyed, so references stay valid during exit. Its
   * first use registers the process-exit hook (as RMM does right after building its map), so
   * rmm::process_is_exiting() is true in atexit handlers registered before that.
   */
  static ref_cache& instance()
  {
    static auto* cache = new ref_cache{};
    rmm::detail::register_process_exit_hook();  // once per process; cheap after the first call
    return *cache;
  }

  /** @brief A reference to the resource of the OWNING handle @p handle, cached (the cache keeps it). */
  device_async_resource_ref get(rmm_resource handle)
  {
    std::lock_guard<std::mutex> lock{mutex_};
    auto it = entries_.find(key(handle));
    if (it == entries_.end()) {
      it = entries_.emplace(key(handle), c_resource::adopt(handle)).first;
    } else {
      rmm_resource_release(handle);  // the cache already holds a reference
    }
    if (is_cpp_box(handle)) { return device_async_resource_ref{as_box(handle.self)->resource}; }
    return device_async_resource_ref{it->second};
  }

  /** @brief Drops the cache's reference to @p handle, if any. */
  void drop(rmm_resource handle)
  {
    c_resource dropped = c_resource::adopt(rmm_resource{nullptr, nullptr});
    std::lock_guard<std::mutex> lock{mutex_};
    auto it = entries_.find(key(handle));
    if (it != entries_.end()) {
      dropped = std::move(it->second);  // released after the lock, in case release re-enters
      entries_.erase(it);
    }
  }

 private:
  using key_type = std::pair<void*, const void*>;
  static key_type key(rmm_resource handle) noexcept { return {handle.self, handle.vtable}; }

  std::mutex mutex_;
  std::map<key_type, c_resource> entries_;
};

}  // namespace rmm::mr::detail
