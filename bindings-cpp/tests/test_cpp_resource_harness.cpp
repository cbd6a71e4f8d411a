// One test harness instantiated per resource, in the style of RMM's mr_ref_test.hpp: every test of
// ResourceTest runs against every named factory. The CPU set (system memory and everything built on
// it) runs in host mode; the GPU set skips there. UserUpstreamTest puts a user-written CCCL resource
// under each sub-allocator and adaptor, and cccl_only_consumer.cpp is code compiled without rmm's
// headers that gets our resources through CCCL's resource_ref / any_resource.

#include "counting_resource.hpp"

#include <rmm/aligned.hpp>
#include <rmm/cuda_stream.hpp>
#include <rmm/cuda_stream_view.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/aligned_resource_adaptor.hpp>
#include <rmm/mr/arena_memory_resource.hpp>
#include <rmm/mr/binning_memory_resource.hpp>
#include <rmm/mr/callback_memory_resource.hpp>
#include <rmm/mr/cuda_async_memory_resource.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/failure_callback_resource_adaptor.hpp>
#include <rmm/mr/fixed_size_memory_resource.hpp>
#include <rmm/mr/limiting_resource_adaptor.hpp>
#include <rmm/mr/logging_resource_adaptor.hpp>
#include <rmm/mr/managed_memory_resource.hpp>
#include <rmm/mr/pinned_host_memory_resource.hpp>
#include <rmm/mr/experimental/expandable_pool_memory_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/mr/prefetch_resource_adaptor.hpp>
#include <rmm/mr/recording_resource_adaptor.hpp>
#include <rmm/mr/sam_headroom_memory_resource.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>
#include <rmm/mr/system_memory_resource.hpp>
#include <rmm/mr/thread_safe_resource_adaptor.hpp>
#include <rmm/mr/tracking_resource_adaptor.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>
#include <cuda/stream_ref>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

// The functions of cccl_only_consumer.cpp (declared here because that file may include nothing of ours).
namespace cccl_only {
int allocate_and_free(cuda::mr::resource_ref<cuda::mr::device_accessible> mr,
                      cuda::stream_ref stream,
                      cuda::std::size_t bytes,
                      int count);
int copy_allocate_free_through_original(cuda::mr::any_resource<cuda::mr::device_accessible> mr,
                                        cuda::stream_ref stream,
                                        cuda::std::size_t bytes);
bool allocation_throws(cuda::mr::resource_ref<cuda::mr::device_accessible> mr, cuda::std::size_t bytes);
}  // namespace cccl_only

namespace {

using device_any = cuda::mr::any_resource<cuda::mr::device_accessible>;
using rmm::mr::detail::c_resource;

constexpr std::size_t KiB = std::size_t{1} << 10;
constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t PiB = std::size_t{1} << 50;

bool host_mode() { return rmm_is_host_mode() != 0; }

/// Whether the device can use system (malloc) memory (HMM/ATS): librmm's system_memory_resource
/// reports device access exactly then, as RegistryTest.GpuRejectsHostOnlyResources relies on.
bool system_memory_on_device()
{
  return (rmm_resource_access(rmm::mr::detail::unchecked_system_memory_resource().handle()) & RMM_ACCESS_DEVICE) != 0;
}

/// A log file of one logging adaptor, removed once the adaptor is gone.
struct temp_file {
  std::string path;
  explicit temp_file(std::string const& tag)
  {
    static std::atomic<int> next{0};
    path = "rmm_harness_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(next++) + ".csv";
  }
  temp_file(temp_file const&)            = delete;
  temp_file& operator=(temp_file const&) = delete;
  ~temp_file() { std::remove(path.c_str()); }
};

/// What a factory made: the resource, and what the tests may expect of it.
struct resource_case {
  // Declared before `mr`, so they outlive it (members die in reverse order).
  std::shared_ptr<temp_file> log_file;
  std::shared_ptr<std::atomic<int>> failure_calls;  ///< calls of a failure callback, when there is one
  device_any mr;
  bool host_accessible = false;  ///< the memory may be read and written by the CPU
  std::size_t max_bytes = std::numeric_limits<std::size_t>::max();  ///< fixed_size: its block size
  bool distinct_equal = false;  ///< two separately made resources compare equal (stateless ones)
  /// The adaptor lets its upstream's own exceptions through (failure_callback, as RMM's): over a
  /// user's upstream that throws std::bad_alloc, the caller gets that std::bad_alloc.
  bool passes_upstream_exceptions = false;
};

enum class needs {
  system_memory,  ///< host mode, or a GPU that can use system memory (HMM/ATS)
  gpu,            ///< a CUDA GPU
  gpu_and_system_memory,
};

struct factory {
  std::string name;
  needs need;
  std::function<resource_case()> make;
};

void PrintTo(factory const& f, std::ostream* os) { *os << f.name; }

/// The reason a factory cannot run here, or nullopt when it can.
std::optional<std::string> skip_reason(needs need)
{
  if (need != needs::system_memory && host_mode()) { return "needs a CUDA GPU (host mode)"; }
  if (need != needs::gpu && !host_mode() && !system_memory_on_device()) {
    return "System memory not supported (this GPU cannot access pageable memory: no HMM/ATS)";
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Factories. Sub-allocators and adaptors take their upstream as the concrete rmm type, as user code
// does: its librmm handle is then passed through (no C++ box in between).

constexpr std::size_t fixed_block = MiB;  // fixed_size_memory_resource's default block size

resource_case plain(device_any mr, bool host, bool distinct_equal = false)
{
  resource_case rc{nullptr, nullptr, std::move(mr), host};
  rc.distinct_equal = distinct_equal;
  return rc;
}

rmm::mr::pool_memory_resource pool_over(c_resource const& up)
{
  return rmm::mr::pool_memory_resource{up, 16 * MiB};
}

/// Every adaptor over an upstream of type Up: an rmm resource (c_resource: its handle is passed
/// through) or any other CCCL resource (device_any: librmm calls back into it).
template <class Up>
using adaptor_maker = std::function<resource_case(Up const& upstream, bool host)>;

template <class Up>
std::vector<std::pair<std::string, adaptor_maker<Up>>> adaptors()
{
  return {
    {"statistics",
     [](Up const& up, bool host) {
       return plain(device_any{rmm::mr::statistics_resource_adaptor{up}}, host);
     }},
    {"tracking",
     [](Up const& up, bool host) {
       return plain(device_any{rmm::mr::tracking_resource_adaptor{up}}, host);
     }},
    {"limiting",
     [](Up const& up, bool host) {
       // A limit far above what the tests use, far below 1 PiB.
       return plain(device_any{rmm::mr::limiting_resource_adaptor{up, std::size_t{1} << 40}}, host);
     }},
    {"aligned",
     [](Up const& up, bool host) {
       return plain(device_any{rmm::mr::aligned_resource_adaptor{up, 4096}}, host);
     }},
    {"logging",
     [](Up const& up, bool host) {
       auto file = std::make_shared<temp_file>("logging");
       resource_case rc = plain(device_any{rmm::mr::logging_resource_adaptor{up, file->path}}, host);
       rc.log_file      = std::move(file);
       return rc;
     }},
    {"thread_safe",
     [](Up const& up, bool host) {
       return plain(device_any{rmm::mr::thread_safe_resource_adaptor{up}}, host);
     }},
    {"prefetch",
     [](Up const& up, bool host) {
       return plain(device_any{rmm::mr::prefetch_resource_adaptor{up}}, host);
     }},
    {"recording",
     [](Up const& up, bool host) {
       return plain(device_any{rmm::mr::recording_resource_adaptor{up}}, host);
     }},
    {"failure_callback",
     [](Up const& up, bool host) {
       auto calls = std::make_shared<std::atomic<int>>(0);
       rmm::mr::failure_callback_resource_adaptor<> fc{
         up,
         [calls](std::size_t, void*) {
           ++*calls;
           return false;  // no retry: the failure reaches the caller
         },
         nullptr};
       resource_case rc              = plain(device_any{fc}, host);
       rc.failure_calls              = std::move(calls);
       rc.passes_upstream_exceptions = true;
       return rc;
     }},
    {"callback",
     [](Up const& up, bool host) {
       rmm::mr::callback_memory_resource cb{
         [up = Up{up}](std::size_t bytes, rmm::cuda_stream_view stream, void*) mutable {
           return up.allocate(stream, bytes, rmm::CUDA_ALLOCATION_ALIGNMENT);
         },
         [up = Up{up}](void* ptr, std::size_t bytes, rmm::cuda_stream_view stream, void*) mutable {
           up.deallocate(stream, ptr, bytes, rmm::CUDA_ALLOCATION_ALIGNMENT);
         }};
       return plain(device_any{cb}, host);
     }},
  };
}

std::vector<factory> cpu_factories()
{
  using rmm::mr::system_memory_resource;
  auto const sys = needs::system_memory;
  std::vector<factory> f{
    {"system", sys, [] { return plain(device_any{rmm::mr::detail::unchecked_system_memory_resource()}, true, true); }},
    {"pool_system", sys, [] { return plain(device_any{pool_over(rmm::mr::detail::unchecked_system_memory_resource())}, true); }},
    {"arena_system", sys,
     [] { return plain(device_any{rmm::mr::arena_memory_resource{rmm::mr::detail::unchecked_system_memory_resource(), 128 * MiB}}, true); }},
    {"fixed_size_system", sys,
     [] {
       resource_case rc =
         plain(device_any{rmm::mr::fixed_size_memory_resource{rmm::mr::detail::unchecked_system_memory_resource(), fixed_block, 16}}, true);
       rc.max_bytes = fixed_block;
       return rc;
     }},
    // Host memory standing in for the device in host mode; device memory (not host-accessible) on a GPU.
    {"expandable_pool", sys,
     [] { return plain(device_any{rmm::mr::experimental::expandable_pool_memory_resource{std::nullopt, 256 * MiB}}, host_mode()); }},
    {"binning_pool_system", sys,
     [] {
       return plain(device_any{rmm::mr::binning_memory_resource{pool_over(rmm::mr::detail::unchecked_system_memory_resource()), 10, 16}}, true);
     }},
  };
  for (auto const& [name, make] : adaptors<c_resource>()) {
    f.push_back({name + "_pool_system", sys, [make = make] { return make(pool_over(rmm::mr::detail::unchecked_system_memory_resource()), true); }});
  }
  return f;
}

std::vector<factory> gpu_factories()
{
  using rmm::mr::cuda_memory_resource;
  auto const gpu = needs::gpu;
  std::vector<factory> f{
    {"cuda", gpu, [] { return plain(device_any{cuda_memory_resource{}}, false, true); }},
    {"managed", gpu, [] { return plain(device_any{rmm::mr::managed_memory_resource{}}, true, true); }},
    {"pinned_host", gpu, [] { return plain(device_any{rmm::mr::pinned_host_memory_resource{}}, true, true); }},
    {"cuda_async", gpu, [] { return plain(device_any{rmm::mr::cuda_async_memory_resource{}}, false); }},
    // Equal headroom compares equal, as in RMM. Host-accessible: it is system memory.
    {"sam_headroom", needs::gpu_and_system_memory,
     [] { return plain(device_any{rmm::mr::sam_headroom_memory_resource{std::size_t{1} << 30}}, true, true); }},
    {"pool_cuda", gpu, [] { return plain(device_any{pool_over(cuda_memory_resource{})}, false); }},
    {"arena_cuda", gpu,
     [] { return plain(device_any{rmm::mr::arena_memory_resource{cuda_memory_resource{}, 256 * MiB}}, false); }},
    {"fixed_size_cuda", gpu,
     [] {
       resource_case rc =
         plain(device_any{rmm::mr::fixed_size_memory_resource{cuda_memory_resource{}, fixed_block, 16}}, false);
       rc.max_bytes = fixed_block;
       return rc;
     }},
    {"binning_pool_cuda", gpu,
     [] {
       return plain(device_any{rmm::mr::binning_memory_resource{pool_over(cuda_memory_resource{}), 10, 16}}, false);
     }},
  };
  for (auto const& [name, make] : adaptors<c_resource>()) {
    f.push_back({name + "_cuda", gpu, [make = make] { return make(cuda_memory_resource{}, false); }});
    f.push_back({name + "_pool_cuda", gpu, [make = make] { return make(pool_over(cuda_memory_resource{}), false); }});
  }
  return f;
}

// ---------------------------------------------------------------------------------------------
// Checks shared by the suites.

/// The ladder of sizes every resource must serve: 64 MiB only on a GPU, which has the memory to spare.
std::vector<std::size_t> ladder(std::size_t max_bytes)
{
  std::vector<std::size_t> sizes{1, 255, 256, 4 * KiB, MiB};
  if (!host_mode()) { sizes.push_back(64 * MiB); }
  sizes.erase(std::remove_if(sizes.begin(), sizes.end(), [&](std::size_t s) { return s > max_bytes; }), sizes.end());
  return sizes;
}

/// Writes a pattern into @p ptr and reads it back through the stream (works for every kind of
/// memory); for host-accessible memory also writes and reads it from the CPU.
void check_memory(void* ptr, std::size_t bytes, rmm::cuda_stream_view stream, bool host, unsigned seed)
{
  ASSERT_NE(ptr, nullptr);
  EXPECT_TRUE(rmm::is_pointer_aligned(ptr, 256)) << ptr;
  std::vector<unsigned char> src(bytes);
  std::vector<unsigned char> back(bytes, 0);
  for (std::size_t i = 0; i < bytes; ++i) { src[i] = static_cast<unsigned char>(i * 131 + seed); }
  rmm_error err{};
  ASSERT_EQ(rmm_memset_async(ptr, 0xa5, bytes, stream.value(), &err), RMM_OK) << err.message;
  ASSERT_EQ(rmm_memcpy_async(back.data(), ptr, bytes, stream.value(), &err), RMM_OK) << err.message;
  ASSERT_EQ(rmm_stream_synchronize(stream.value(), &err), RMM_OK) << err.message;
  EXPECT_TRUE(std::all_of(back.begin(), back.end(), [](unsigned char c) { return c == 0xa5; }));
  ASSERT_EQ(rmm_memcpy_async(ptr, src.data(), bytes, stream.value(), &err), RMM_OK) << err.message;
  ASSERT_EQ(rmm_memcpy_async(back.data(), ptr, bytes, stream.value(), &err), RMM_OK) << err.message;
  ASSERT_EQ(rmm_stream_synchronize(stream.value(), &err), RMM_OK) << err.message;
  EXPECT_TRUE(src == back) << bytes << " bytes did not read back";
  if (host) {
    auto* c = static_cast<unsigned char*>(ptr);
    EXPECT_EQ(c[0], src[0]);
    EXPECT_EQ(c[bytes - 1], src[bytes - 1]);
    std::memset(ptr, 0x3c, bytes);
    EXPECT_EQ(c[bytes / 2], 0x3c);
  }
}

/// Every size of the ladder, stream-ordered on @p stream.
void ladder_on_stream(device_any& mr, rmm::cuda_stream_view stream, std::size_t max_bytes, bool host)
{
  for (std::size_t bytes : ladder(max_bytes)) {
    SCOPED_TRACE(bytes);
    void* p = mr.allocate(stream, bytes, 256);
    check_memory(p, bytes, stream, host, static_cast<unsigned>(bytes));
    mr.deallocate(stream, p, bytes, 256);
  }
  rmm_error err{};
  EXPECT_EQ(rmm_stream_synchronize(stream.value(), &err), RMM_OK) << err.message;
}

void ladder_sync(device_any& mr, std::size_t max_bytes, bool host)
{
  for (std::size_t bytes : ladder(max_bytes)) {
    SCOPED_TRACE(bytes);
    void* p = mr.allocate_sync(bytes, 256);
    check_memory(p, bytes, rmm::cuda_stream_default, host, static_cast<unsigned>(bytes) + 7);
    mr.deallocate_sync(p, bytes, 256);
  }
}

/// 0 bytes: the C ABI's contract is NULL, and freeing it (or what came back) must be harmless.
void zero_bytes(device_any& mr)
{
  void* p = mr.allocate(rmm::cuda_stream_default, 0, 256);
  EXPECT_EQ(p, nullptr);
  mr.deallocate(rmm::cuda_stream_default, p, 0, 256);
  void* q = mr.allocate_sync(0, 256);
  EXPECT_EQ(q, nullptr);
  mr.deallocate_sync(q, 0, 256);
}

/// An impossible request fails with rmm::out_of_memory (stream-ordered and sync; with
/// @p upstream_exception, with the upstream's own std::bad_alloc), and the resource still works
/// afterwards.
void impossible_request(device_any& mr, std::size_t max_bytes, bool host, bool upstream_exception = false)
{
  if (upstream_exception) {
    EXPECT_THROW(mr.allocate_sync(PiB, 256), std::bad_alloc);
    EXPECT_THROW(mr.allocate(rmm::cuda_stream_default, PiB, 256), std::bad_alloc);
  } else {
    EXPECT_THROW(mr.allocate_sync(PiB, 256), rmm::out_of_memory);
    EXPECT_THROW(mr.allocate(rmm::cuda_stream_default, PiB, 256), rmm::out_of_memory);
  }
  if (max_bytes < PiB) {
    // fixed_size: anything over the block size is out_of_memory, as in RMM.
    EXPECT_THROW(mr.allocate_sync(max_bytes + 1, 256), rmm::out_of_memory);
  }
  void* p = mr.allocate_sync(4 * KiB, 256);
  check_memory(p, 4 * KiB, rmm::cuda_stream_default, host, 3);
  mr.deallocate_sync(p, 4 * KiB, 256);
}

/// Many live allocations of varied sizes, freed in a shuffled order.
void random_order_frees(device_any& mr, std::size_t max_bytes, bool host)
{
  std::mt19937 rng{42};
  std::uniform_int_distribution<std::size_t> size{1, std::min<std::size_t>(64 * KiB, max_bytes)};
  int const count = max_bytes < PiB ? 48 : 200;  // fixed_size spends a whole block per allocation
  std::vector<std::pair<void*, std::size_t>> live;
  for (int i = 0; i < count; ++i) {
    std::size_t const bytes = size(rng);
    void* p                 = mr.allocate(rmm::cuda_stream_default, bytes, 256);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(rmm::is_pointer_aligned(p, 256));
    live.emplace_back(p, bytes);
  }
  std::vector<void*> sorted;
  for (auto const& [p, bytes] : live) { sorted.push_back(p); }
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "a pointer was handed out twice";
  // Distinct blocks must not overlap: write each with its own byte, then read all back.
  for (std::size_t i = 0; i < live.size(); ++i) {
    rmm_error err{};
    ASSERT_EQ(rmm_memset_async(live[i].first, static_cast<int>(i & 0xff), live[i].second, nullptr, &err), RMM_OK);
  }
  for (std::size_t i = 0; i < live.size(); ++i) {
    unsigned char first = 0;
    unsigned char last  = 0;
    rmm_error err{};
    auto* base = static_cast<unsigned char*>(live[i].first);
    ASSERT_EQ(rmm_memcpy_async(&first, base, 1, nullptr, &err), RMM_OK);
    ASSERT_EQ(rmm_memcpy_async(&last, base + live[i].second - 1, 1, nullptr, &err), RMM_OK);
    ASSERT_EQ(rmm_stream_synchronize(nullptr, &err), RMM_OK);
    EXPECT_EQ(first, static_cast<unsigned char>(i & 0xff)) << i;
    EXPECT_EQ(last, static_cast<unsigned char>(i & 0xff)) << i;
  }
  std::shuffle(live.begin(), live.end(), rng);
  for (auto const& [p, bytes] : live) { mr.deallocate(rmm::cuda_stream_default, p, bytes, 256); }
  void* again = mr.allocate_sync(1000, 256);
  check_memory(again, 1000, rmm::cuda_stream_default, host, 9);
  mr.deallocate_sync(again, 1000, 256);
}

/// 8 threads allocating and freeing at once, each on its own stream on a GPU (the default stream
/// in host mode, where no stream can be created). The streams outlive the threads' allocations.
void eight_threads(device_any& mr, std::size_t max_bytes, bool host)
{
  constexpr int threads = 8;
  std::vector<std::optional<rmm::cuda_stream>> streams(threads);
  if (!host_mode()) {
    for (auto& s : streams) { s.emplace(rmm::cuda_stream::flags::non_blocking); }
  }
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    rmm::cuda_stream_view const stream = streams[t] ? streams[t]->view() : rmm::cuda_stream_default;
    workers.emplace_back([&mr, stream, t, max_bytes, host] {
      device_any local = mr;  // copies share the resource: what one allocates, the other may free
      for (int i = 0; i < 50; ++i) {
        std::size_t const bytes = std::min<std::size_t>(max_bytes, 256 * static_cast<std::size_t>(1 + (i * 7 + t) % 64));
        void* a                 = local.allocate(stream, bytes, 256);
        void* b                 = mr.allocate(stream, bytes, 256);
        EXPECT_NE(a, b);
        if (i % 10 == 0) { check_memory(a, bytes, stream, host, static_cast<unsigned>(t)); }
        mr.deallocate(stream, a, bytes, 256);
        local.deallocate(stream, b, bytes, 256);
      }
      rmm_error err{};
      EXPECT_EQ(rmm_stream_synchronize(stream.value(), &err), RMM_OK) << err.message;
    });
  }
  for (auto& w : workers) { w.join(); }
}

// ---------------------------------------------------------------------------------------------

class ResourceTest : public ::testing::TestWithParam<factory> {
 protected:
  void SetUp() override
  {
    if (auto why = skip_reason(GetParam().need)) { GTEST_SKIP() << *why; }
    rc_.emplace(GetParam().make());
  }

  device_any& mr() { return rc_->mr; }
  resource_case& rc() { return *rc_; }

 private:
  std::optional<resource_case> rc_;
};

TEST_P(ResourceTest, SizeLadderOnDefaultStream)
{
  ladder_on_stream(mr(), rmm::cuda_stream_default, rc().max_bytes, rc().host_accessible);
}

TEST_P(ResourceTest, SizeLadderSync) { ladder_sync(mr(), rc().max_bytes, rc().host_accessible); }

TEST_P(ResourceTest, SizeLadderOnOwnStream)
{
  if (host_mode()) { GTEST_SKIP() << "needs a CUDA GPU (host mode: no stream can be created)"; }
  rmm::cuda_stream stream{rmm::cuda_stream::flags::non_blocking};
  ladder_on_stream(mr(), stream.view(), rc().max_bytes, rc().host_accessible);
}

TEST_P(ResourceTest, ZeroBytes) { zero_bytes(mr()); }

TEST_P(ResourceTest, OnePebibyteThrowsOutOfMemoryAndStaysUsable)
{
  impossible_request(mr(), rc().max_bytes, rc().host_accessible);
  if (rc().failure_calls) { EXPECT_GE(rc().failure_calls->load(), 2) << "the failure callback saw both failures"; }
}

TEST_P(ResourceTest, ManyAllocationsFreedInRandomOrder)
{
  random_order_frees(mr(), rc().max_bytes, rc().host_accessible);
}

TEST_P(ResourceTest, EightThreads) { eight_threads(mr(), rc().max_bytes, rc().host_accessible); }

TEST_P(ResourceTest, Equality)
{
  device_any copy = mr();
  EXPECT_TRUE(copy == mr());
  EXPECT_FALSE(copy != mr());
  // Memory from one copy goes back through the other.
  void* p = copy.allocate_sync(512, 256);
  mr().deallocate_sync(p, 512, 256);

  resource_case other = GetParam().make();
  EXPECT_EQ(other.mr == mr(), rc().distinct_equal);
  EXPECT_EQ(mr() == other.mr, rc().distinct_equal);
}

TEST_P(ResourceTest, ResourceRef)
{
  rmm::device_async_resource_ref ref{mr()};
  void* p = ref.allocate(rmm::cuda_stream_default, 3000, 256);
  check_memory(p, 3000, rmm::cuda_stream_default, rc().host_accessible, 11);
  ref.deallocate(rmm::cuda_stream_default, p, 3000, 256);
  cuda::mr::synchronous_resource_ref<cuda::mr::device_accessible> sync_ref{mr()};
  void* q = sync_ref.allocate_sync(3000, 256);
  check_memory(q, 3000, rmm::cuda_stream_default, rc().host_accessible, 12);
  sync_ref.deallocate_sync(q, 3000, 256);
  EXPECT_THROW(ref.allocate(rmm::cuda_stream_default, PiB, 256), rmm::out_of_memory);
}

// Our resource handed to code compiled without rmm's headers.
TEST_P(ResourceTest, CcclOnlyConsumer)
{
  std::size_t const bytes = std::min<std::size_t>(rc().max_bytes, 5000);
  EXPECT_EQ(cccl_only::allocate_and_free(cuda::mr::resource_ref<cuda::mr::device_accessible>{mr()},
                                         rmm::cuda_stream_default, bytes, 32),
            0);
  EXPECT_EQ(cccl_only::copy_allocate_free_through_original(mr(), rmm::cuda_stream_default, bytes), 0);
  EXPECT_TRUE(cccl_only::allocation_throws(cuda::mr::resource_ref<cuda::mr::device_accessible>{mr()}, PiB));
  if (!host_mode()) {
    rmm::cuda_stream stream{rmm::cuda_stream::flags::non_blocking};
    EXPECT_EQ(cccl_only::allocate_and_free(cuda::mr::resource_ref<cuda::mr::device_accessible>{mr()},
                                           stream.view(), bytes, 32),
              0);
    EXPECT_EQ(cccl_only::copy_allocate_free_through_original(mr(), stream.view(), bytes), 0);
    stream.synchronize();
  }
}

std::string factory_name(::testing::TestParamInfo<factory> const& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Cpu, ResourceTest, ::testing::ValuesIn(cpu_factories()), factory_name);
INSTANTIATE_TEST_SUITE_P(Gpu, ResourceTest, ::testing::ValuesIn(gpu_factories()), factory_name);

// ---------------------------------------------------------------------------------------------
// A user-written CCCL resource under our sub-allocators and adaptors.

// The user's resource of these tests (counting_resource.hpp).
using user_counts   = rmm_test::counts;
using user_resource = rmm_test::counting_resource;

struct user_factory {
  std::string name;
  std::function<resource_case(device_any const& upstream)> make;
  std::size_t max_bytes = std::numeric_limits<std::size_t>::max();
};

void PrintTo(user_factory const& f, std::ostream* os) { *os << f.name; }

std::vector<user_factory> user_factories()
{
  std::vector<user_factory> f{
    {"pool", [](device_any const& up) { return plain(device_any{rmm::mr::pool_memory_resource{up, 16 * MiB}}, true); }},
    {"arena",
     [](device_any const& up) { return plain(device_any{rmm::mr::arena_memory_resource{up, 64 * MiB}}, true); }},
    {"binning",
     [](device_any const& up) { return plain(device_any{rmm::mr::binning_memory_resource{up, 10, 16}}, true); }},
    {"fixed_size",
     [](device_any const& up) {
       return plain(device_any{rmm::mr::fixed_size_memory_resource{up, fixed_block, 16}}, true);
     },
     fixed_block},
  };
  // Each adaptor straight over the user's resource: the boxed upstream is reached on every call.
  for (auto const& [name, make] : adaptors<device_any>()) {
    f.push_back({name, [make = make](device_any const& up) { return make(up, true); }});
  }
  return f;
}

class UserUpstreamTest : public ::testing::TestWithParam<user_factory> {
 protected:
  void SetUp() override
  {
    if (!host_mode() && !system_memory_on_device()) {
      // A malloc resource claims device access only where the device can use system memory.
      GTEST_SKIP() << "System memory not supported (this GPU cannot access pageable memory: no HMM/ATS)";
    }
  }

  /// Runs @p body against the factory's resource over a fresh user_resource, then checks that the
  /// user's resource was used and got everything back once our resource was destroyed.
  template <class Body>
  void with_resource(Body&& body)
  {
    auto c = std::make_shared<user_counts>();
    {
      resource_case rc = GetParam().make(device_any{user_resource{c}});
      rc.max_bytes     = GetParam().max_bytes;
      body(rc);
      EXPECT_GT(c->allocs.load(), 0) << "the calls never reached the user's resource";
    }
    EXPECT_EQ(c->deallocs.load(), c->allocs.load()) << "memory was not given back to the user's resource";
    EXPECT_EQ(c->live_bytes.load(), 0);
    EXPECT_EQ(c->live.load(), 0) << "our resource kept the user's resource alive";
  }
};

TEST_P(UserUpstreamTest, SizeLadder)
{
  with_resource([](resource_case& rc) {
    ladder_on_stream(rc.mr, rmm::cuda_stream_default, rc.max_bytes, true);
    ladder_sync(rc.mr, rc.max_bytes, true);
  });
}

TEST_P(UserUpstreamTest, OnePebibyteThrowsOutOfMemoryAndStaysUsable)
{
  with_resource(
    [](resource_case& rc) { impossible_request(rc.mr, rc.max_bytes, true, rc.passes_upstream_exceptions); });
}

TEST_P(UserUpstreamTest, ManyAllocationsFreedInRandomOrder)
{
  with_resource([](resource_case& rc) { random_order_frees(rc.mr, rc.max_bytes, true); });
}

TEST_P(UserUpstreamTest, EightThreads)
{
  with_resource([](resource_case& rc) { eight_threads(rc.mr, rc.max_bytes, true); });
}

TEST_P(UserUpstreamTest, CcclOnlyConsumer)
{
  with_resource([](resource_case& rc) {
    EXPECT_EQ(cccl_only::allocate_and_free(cuda::mr::resource_ref<cuda::mr::device_accessible>{rc.mr},
                                           rmm::cuda_stream_default, 4000, 16),
              0);
    EXPECT_EQ(cccl_only::copy_allocate_free_through_original(rc.mr, rmm::cuda_stream_default, 4000), 0);
  });
}

std::string user_factory_name(::testing::TestParamInfo<user_factory> const& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(User, UserUpstreamTest, ::testing::ValuesIn(user_factories()), user_factory_name);

// The pool returns everything to the user's resource when the pool (and its last copy) is destroyed,
// even with live allocations from it at the time the user's other handles are gone.
TEST(UserUpstream, PoolGivesEverythingBackOnDestruction)
{
  if (!host_mode() && !system_memory_on_device()) {
    GTEST_SKIP() << "System memory not supported (this GPU cannot access pageable memory: no HMM/ATS)";
  }
  auto c = std::make_shared<user_counts>();
  {
    rmm::mr::pool_memory_resource pool{device_any{user_resource{c}}, 4 * MiB};
    EXPECT_EQ(c->allocs.load(), 1);
    std::vector<void*> blocks;
    for (int i = 0; i < 8; ++i) { blocks.push_back(pool.allocate_sync(3 * MiB)); }
    EXPECT_GT(c->allocs.load(), 1) << "the pool grew from the user's resource";
    EXPECT_EQ(c->deallocs.load(), 0) << "a pool keeps its memory while it lives";
    EXPECT_EQ(static_cast<long long>(pool.pool_size()), c->live_bytes.load());
    for (void* p : blocks) { pool.deallocate_sync(p, 3 * MiB); }
  }
  EXPECT_EQ(c->deallocs.load(), c->allocs.load());
  EXPECT_EQ(c->live_bytes.load(), 0);
  EXPECT_EQ(c->live.load(), 0);
}

}  // namespace
