// A user-written CCCL resource for the C++ tests: host malloc, counting its calls, its live bytes
// and its live copies, so a test sees what our resources did with it and that nothing kept it.
#pragma once

#include <rmm/aligned.hpp>

#include <cuda/memory_resource>
#include <cuda/stream_ref>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <utility>

namespace rmm_test {

/// Counters shared by the copies of one counting_resource.
struct counts {
  std::atomic<int> allocs{0};
  std::atomic<int> deallocs{0};
  std::atomic<long long> live_bytes{0};
  std::atomic<int> live{0};  ///< counting_resource objects alive (copies included)
};

/// Host malloc announcing host and device access, as a CCCL resource on an HMM/ATS system would.
/// Throws std::bad_alloc past `limit` bytes (1 GiB unless given: a deterministic failure, where
/// malloc with overcommit might not fail) or when malloc fails, as a CCCL resource must.
class counting_resource {
 public:
  explicit counting_resource(std::shared_ptr<counts> c, std::size_t limit = std::size_t{1} << 30)
    : c_{std::move(c)}, limit_{limit}
  {
    ++c_->live;
  }
  counting_resource(counting_resource const& o) : c_{o.c_}, limit_{o.limit_} { ++c_->live; }
  counting_resource& operator=(counting_resource const&) = default;
  ~counting_resource() { --c_->live; }

  void* allocate(cuda::stream_ref, std::size_t bytes, std::size_t alignment) { return allocate_sync(bytes, alignment); }
  void deallocate(cuda::stream_ref, void* ptr, std::size_t bytes, std::size_t alignment) noexcept
  {
    deallocate_sync(ptr, bytes, alignment);
  }
  void* allocate_sync(std::size_t bytes, std::size_t alignment)
  {
    if (bytes > limit_) { throw std::bad_alloc{}; }
    void* p = std::aligned_alloc(alignment, rmm::align_up(bytes, alignment));
    if (p == nullptr) { throw std::bad_alloc{}; }
    ++c_->allocs;
    c_->live_bytes += static_cast<long long>(bytes);
    return p;
  }
  void deallocate_sync(void* ptr, std::size_t bytes, std::size_t) noexcept
  {
    ++c_->deallocs;
    c_->live_bytes -= static_cast<long long>(bytes);
    std::free(ptr);
  }
  friend bool operator==(counting_resource const& a, counting_resource const& b) { return a.c_ == b.c_; }
  friend bool operator!=(counting_resource const& a, counting_resource const& b) { return a.c_ != b.c_; }
  friend void get_property(counting_resource const&, cuda::mr::device_accessible) noexcept {}
  friend void get_property(counting_resource const&, cuda::mr::host_accessible) noexcept {}

 private:
  std::shared_ptr<counts> c_;
  std::size_t limit_;
};

static_assert(cuda::mr::resource_with<counting_resource, cuda::mr::device_accessible, cuda::mr::host_accessible>);

}  // namespace rmm_test
