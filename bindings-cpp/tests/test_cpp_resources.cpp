// GoogleTest suite of the C++ value types of librmm's sub-allocators and adaptors (CPU only: the
// upstreams are system memory, a simulated device, or a user-written C++ resource).

#include "counting_resource.hpp"

#include <rmm/aligned.hpp>
#include <rmm/cuda_stream_view.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/aligned_resource_adaptor.hpp>
#include <rmm/mr/arena_memory_resource.hpp>
#include <rmm/mr/binning_memory_resource.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/failure_callback_resource_adaptor.hpp>
#include <rmm/mr/fixed_size_memory_resource.hpp>
#include <rmm/mr/limiting_resource_adaptor.hpp>
#include <rmm/mr/logging_resource_adaptor.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/mr/prefetch_resource_adaptor.hpp>
#include <rmm/mr/recording_resource_adaptor.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>
#include <rmm/mr/system_memory_resource.hpp>
#include <rmm/mr/thread_safe_resource_adaptor.hpp>
#include <rmm/mr/tracking_resource_adaptor.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>
#include <rmm/timeline.hpp>

#include <cuda/memory_resource>
#include <cuda/stream_ref>

#include <gtest/gtest.h>

#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace {

using device_any = cuda::mr::any_resource<cuda::mr::device_accessible>;
using rmm::mr::statistics_resource_adaptor;
using counter = statistics_resource_adaptor::counter;

// The user's resource of these tests (counting_resource.hpp).
using rmm_test::counting_resource;
using rmm_test::counts;

/// A simulated device (fake addresses: allocate and free only, never dereference).
rmm::mr::detail::c_resource simulated(std::size_t capacity)
{
  rmm_resource handle{nullptr, nullptr};
  rmm_error err{};
  rmm::detail::check(rmm_simulated_memory_resource_new(capacity, &handle, &err), err, "simulated");
  return rmm::mr::detail::c_resource::adopt(handle);
}

/// Allocates and frees through a device_async_resource_ref, writing the memory when it is real.
void round_trip(rmm::device_async_resource_ref ref, std::size_t bytes, bool real = true)
{
  void* p = ref.allocate(rmm::cuda_stream_default, bytes, 256);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(rmm::is_pointer_aligned(p, 256));
  if (real) {
    auto* c = static_cast<unsigned char*>(p);
    for (std::size_t i = 0; i < bytes; ++i) { c[i] = static_cast<unsigned char>(i); }
    for (std::size_t i = 0; i < bytes; ++i) { ASSERT_EQ(c[i], static_cast<unsigned char>(i)); }
  }
  ref.deallocate(rmm::cuda_stream_default, p, bytes, 256);
}

template <class R>
constexpr bool value_type_v = std::is_copy_constructible_v<R> && std::is_copy_assignable_v<R> &&
                              cuda::mr::resource_with<R, cuda::mr::device_accessible> &&
                              std::is_constructible_v<rmm::device_async_resource_ref, R&> &&
                              std::is_constructible_v<device_any, R>;
static_assert(value_type_v<rmm::mr::pool_memory_resource>);
static_assert(value_type_v<rmm::mr::statistics_resource_adaptor>);
static_assert(value_type_v<rmm::mr::limiting_resource_adaptor>);
static_assert(value_type_v<rmm::mr::tracking_resource_adaptor>);
static_assert(value_type_v<rmm::mr::aligned_resource_adaptor>);
static_assert(value_type_v<rmm::mr::arena_memory_resource>);
static_assert(value_type_v<rmm::mr::fixed_size_memory_resource>);
static_assert(value_type_v<rmm::mr::binning_memory_resource>);
static_assert(value_type_v<rmm::mr::logging_resource_adaptor>);
static_assert(value_type_v<rmm::mr::failure_callback_resource_adaptor<>>);
static_assert(value_type_v<rmm::mr::prefetch_resource_adaptor>);
static_assert(value_type_v<rmm::mr::recording_resource_adaptor>);
static_assert(value_type_v<rmm::mr::thread_safe_resource_adaptor>);
static_assert(!std::is_convertible_v<rmm::mr::system_memory_resource, rmm::mr::prefetch_resource_adaptor>);
static_assert(!std::is_convertible_v<rmm::mr::system_memory_resource, rmm::mr::thread_safe_resource_adaptor>);
// One-argument constructors are explicit, as in RMM: no silent wrapping of an upstream.
static_assert(!std::is_convertible_v<rmm::mr::system_memory_resource, statistics_resource_adaptor>);
static_assert(!std::is_convertible_v<rmm::mr::system_memory_resource, rmm::mr::tracking_resource_adaptor>);

}  // namespace

TEST(PoolMemoryResource, AllocatesAndReportsPoolSize)
{
  rmm::mr::system_memory_resource sys = rmm::mr::detail::unchecked_system_memory_resource();
  rmm::mr::pool_memory_resource pool{sys, 1 << 20};
  EXPECT_EQ(pool.pool_size(), std::size_t{1} << 20);
  round_trip(pool, 1000);
  rmm::device_async_resource_ref ref{pool};
  void* big = ref.allocate(rmm::cuda_stream_default, 2 << 20, 256);
  EXPECT_GE(pool.pool_size(), std::size_t{3} << 20);  // grew from the upstream
  ref.deallocate(rmm::cuda_stream_default, big, 2 << 20, 256);
  auto up        = pool.get_upstream_resource();
  auto const* as = cuda::mr::resource_cast<rmm::mr::system_memory_resource>(&up);  // the type passed
  ASSERT_NE(as, nullptr);
  EXPECT_TRUE(*as == sys);  // the same librmm resource
  EXPECT_TRUE(up == rmm::device_async_resource_ref{sys});
  round_trip(up, 512);
}

TEST(PoolMemoryResource, CopiesShareState)
{
  rmm::mr::pool_memory_resource pool{rmm::mr::detail::unchecked_system_memory_resource(), 1 << 20};
  rmm::mr::pool_memory_resource copy = pool;
  EXPECT_TRUE(copy == pool);
  EXPECT_EQ(copy.handle().self, pool.handle().self);
  rmm::mr::pool_memory_resource other{rmm::mr::detail::unchecked_system_memory_resource(), 1 << 20};
  EXPECT_FALSE(other == pool);
  void* p = copy.allocate_sync(4 << 20);
  EXPECT_EQ(pool.pool_size(), copy.pool_size());
  EXPECT_GE(pool.pool_size(), std::size_t{5} << 20);
  pool.deallocate_sync(p, 4 << 20);  // memory of one copy is returned through the other
}

TEST(PoolMemoryResource, ErrorsMap)
{
  rmm::mr::system_memory_resource sys = rmm::mr::detail::unchecked_system_memory_resource();
  EXPECT_THROW((rmm::mr::pool_memory_resource{sys, 1000}), rmm::logic_error);  // not a multiple of 256
  rmm::mr::pool_memory_resource bounded{sys, 1 << 20, 1 << 20};
  EXPECT_THROW(bounded.allocate_sync(2 << 20), rmm::out_of_memory);
}

TEST(StatisticsResourceAdaptor, CountsAndFrames)
{
  statistics_resource_adaptor stats{rmm::mr::detail::unchecked_system_memory_resource()};
  rmm::device_async_resource_ref ref{stats};
  void* a = ref.allocate(rmm::cuda_stream_default, 100, 256);
  EXPECT_EQ(stats.get_bytes_counter(), (counter{100, 100, 100}));
  EXPECT_EQ(stats.get_allocations_counter(), (counter{1, 1, 1}));

  auto before = stats.push_counters();
  EXPECT_EQ(before.first, (counter{100, 100, 100}));
  EXPECT_EQ(before.second, (counter{1, 1, 1}));
  EXPECT_EQ(stats.get_bytes_counter(), (counter{0, 0, 0}));
  void* b = ref.allocate(rmm::cuda_stream_default, 50, 256);
  ref.deallocate(rmm::cuda_stream_default, b, 50, 256);
  auto popped = stats.pop_counters();
  EXPECT_EQ(popped.first, (counter{0, 50, 50}));
  EXPECT_EQ(popped.second, (counter{0, 1, 1}));
  EXPECT_EQ(stats.get_bytes_counter(), (counter{100, 150, 150}));

  // Popping the last frame: rmm::out_of_range (RMM: std::out_of_range; Python: IndexError).
  EXPECT_THROW(stats.pop_counters(), rmm::out_of_range);
  EXPECT_THROW(stats.pop_counters(), std::out_of_range);

  statistics_resource_adaptor copy = stats;  // copies share the counters
  copy.deallocate(rmm::cuda_stream_default, a, 100, 256);
  EXPECT_EQ(stats.get_bytes_counter().value, 0);
  EXPECT_EQ(stats.get_allocations_counter(), (counter{0, 2, 2}));
}

TEST(StatisticsResourceAdaptor, CounterArithmeticMatchesRmm)
{
  counter parent{100, 100, 100};
  parent.add_counters_from_tracked_sub_block(counter{-70, 80, 80});
  EXPECT_EQ(parent, (counter{30, 180, 180}));
  counter c;
  c += 10;
  c -= 4;
  c += 1;
  EXPECT_EQ(c, (counter{7, 10, 11}));
}

TEST(LimitingResourceAdaptor, LimitAndOutOfMemory)
{
  rmm::mr::limiting_resource_adaptor lim{rmm::mr::detail::unchecked_system_memory_resource(), 1024};
  EXPECT_EQ(lim.get_allocation_limit(), 1024u);
  rmm::device_async_resource_ref ref{lim};
  void* p = ref.allocate(rmm::cuda_stream_default, 100, 256);
  EXPECT_EQ(lim.get_allocated_bytes(), 256u);  // counted rounded up to the alignment
  EXPECT_THROW(ref.allocate(rmm::cuda_stream_default, 1000, 256), rmm::out_of_memory);
  auto copy = lim;
  EXPECT_EQ(copy.get_allocated_bytes(), 256u);
  ref.deallocate(rmm::cuda_stream_default, p, 100, 256);
  EXPECT_EQ(copy.get_allocated_bytes(), 0u);
  EXPECT_THROW((rmm::mr::limiting_resource_adaptor{rmm::mr::detail::unchecked_system_memory_resource(), 1024, 3}), rmm::logic_error);
}

TEST(TrackingResourceAdaptor, AllocatedBytes)
{
  rmm::mr::tracking_resource_adaptor tr{rmm::mr::detail::unchecked_system_memory_resource(), true};
  rmm::device_async_resource_ref ref{tr};
  void* p = ref.allocate(rmm::cuda_stream_default, 300, 256);
  void* q = ref.allocate(rmm::cuda_stream_default, 700, 256);
  EXPECT_EQ(tr.get_allocated_bytes(), 1000u);
  ref.deallocate(rmm::cuda_stream_default, p, 300, 256);
  EXPECT_EQ(rmm::mr::tracking_resource_adaptor{tr}.get_allocated_bytes(), 700u);
  ref.deallocate(rmm::cuda_stream_default, q, 700, 256);
  EXPECT_EQ(tr.get_allocated_bytes(), 0u);
}

TEST(AlignedResourceAdaptor, AlignsPastTheBaseAlignment)
{
  rmm::mr::aligned_resource_adaptor al{rmm::mr::detail::unchecked_system_memory_resource(), 4096};
  rmm::device_async_resource_ref ref{al};
  void* p = ref.allocate(rmm::cuda_stream_default, 100, 256);
  EXPECT_TRUE(rmm::is_pointer_aligned(p, 4096));
  ref.deallocate(rmm::cuda_stream_default, p, 100, 256);
  round_trip(al, 5000);
  EXPECT_THROW((rmm::mr::aligned_resource_adaptor{rmm::mr::detail::unchecked_system_memory_resource(), 1000}), rmm::logic_error);
}

TEST(ArenaMemoryResource, OverSimulatedDevice)
{
  auto sim = simulated(std::size_t{1} << 32);
  rmm::mr::arena_memory_resource arena{sim, std::size_t{256} << 20};
  round_trip(arena, 5000, false);
  round_trip(arena, std::size_t{64} << 20, false);
  rmm::mr::arena_memory_resource copy = arena;
  EXPECT_TRUE(copy == arena);
  EXPECT_THROW(arena.allocate_sync(std::size_t{8} << 30), rmm::out_of_memory);
}

TEST(ArenaMemoryResource, OverSystemMemory)
{
  rmm::mr::arena_memory_resource arena{rmm::mr::detail::unchecked_system_memory_resource(), std::size_t{4} << 20};
  round_trip(arena, 10000);
}

TEST(FixedSizeMemoryResource, BlockSize)
{
  rmm::mr::fixed_size_memory_resource fixed{rmm::mr::detail::unchecked_system_memory_resource(), 4096, 8};
  EXPECT_EQ(fixed.get_block_size(), 4096u);
  round_trip(fixed, 4000);
  rmm::mr::fixed_size_memory_resource defaults{simulated(std::size_t{1} << 30)};
  EXPECT_EQ(defaults.get_block_size(), std::size_t{1} << 20);
  round_trip(defaults, 1000, false);
}

TEST(BinningMemoryResource, ExponentsAndAddedBins)
{
  rmm::mr::system_memory_resource sys = rmm::mr::detail::unchecked_system_memory_resource();
  rmm::mr::binning_memory_resource bins{sys, 10, 14};
  round_trip(bins, 2000);
  round_trip(bins, 1 << 20);  // larger than every bin: the upstream

  auto c = std::make_shared<counts>();
  {
    rmm::mr::binning_memory_resource empty{sys};
    empty.add_bin(4096, device_any{counting_resource{c}});  // an explicit bin: a user's resource
    empty.add_bin(1024);                                     // a fixed-size bin over the upstream
    round_trip(empty, 3000);
    EXPECT_EQ(c->allocs.load(), 1);
    round_trip(empty, 500);
    EXPECT_EQ(c->allocs.load(), 1);
    EXPECT_THROW((rmm::mr::binning_memory_resource{sys, 12, 10}), rmm::logic_error);
  }
  EXPECT_EQ(c->live.load(), 0);  // the bin went with the binning resource
}

// A C++ resource as upstream of a Rust pool, under a statistics adaptor: the pool's upstream calls
// land in the C++ resource, and everything is released when the objects die.
TEST(Composition, StatisticsOverPoolOverUserResource)
{
  auto c = std::make_shared<counts>();
  {
    rmm::mr::pool_memory_resource pool{counting_resource{c}, 1 << 20};
    EXPECT_EQ(c->allocs.load(), 1);  // the initial pool
    EXPECT_EQ(c->live_bytes.load(), 1 << 20);
    statistics_resource_adaptor stats{pool};
    rmm::device_async_resource_ref ref{stats};

    void* small = ref.allocate(rmm::cuda_stream_default, 1000, 256);
    EXPECT_EQ(c->allocs.load(), 1);  // served by the pool
    void* big = ref.allocate(rmm::cuda_stream_default, 3 << 20, 256);
    EXPECT_EQ(c->allocs.load(), 2);  // the pool grew from the C++ resource
    EXPECT_EQ(stats.get_bytes_counter().value, 1000 + (3 << 20));
    EXPECT_EQ(stats.get_allocations_counter(), (counter{2, 2, 2}));
    EXPECT_EQ(static_cast<long long>(pool.pool_size()), c->live_bytes.load());
    ref.deallocate(rmm::cuda_stream_default, big, 3 << 20, 256);
    ref.deallocate(rmm::cuda_stream_default, small, 1000, 256);
    EXPECT_EQ(stats.get_bytes_counter(), (counter{0, 1000 + (3 << 20), 1000 + (3 << 20)}));
    EXPECT_EQ(c->deallocs.load(), 0);  // the pool keeps its memory
    EXPECT_GE(c->live.load(), 1);
  }
  EXPECT_EQ(c->deallocs.load(), c->allocs.load());  // the pool gave everything back
  EXPECT_EQ(c->live_bytes.load(), 0);
  EXPECT_EQ(c->live.load(), 0);  // and nothing keeps the C++ resource alive
}

TEST(Composition, UpstreamIsTheUsersResource)
{
  auto c = std::make_shared<counts>();
  {
    rmm::mr::pool_memory_resource pool{counting_resource{c}, 1 << 20};
    auto up = pool.get_upstream_resource();
    void* p = up.allocate(rmm::cuda_stream_default, 256, 256);
    EXPECT_EQ(c->allocs.load(), 2);
    up.deallocate(rmm::cuda_stream_default, p, 256, 256);
  }
  EXPECT_EQ(c->live.load(), 0);
}

// One constructor takes every kind of upstream: an rmm resource and an any_resource holding one (its
// librmm handle passes through), a user's resource type and a resource_ref to it (boxed).
TEST(Composition, EveryKindOfUpstreamArgument)
{
  rmm::mr::system_memory_resource sys = rmm::mr::detail::unchecked_system_memory_resource();
  auto c = std::make_shared<counts>();
  {
    counting_resource user{c};
    rmm::mr::limiting_resource_adaptor over_rmm{sys, 1 << 20};
    rmm::mr::limiting_resource_adaptor over_any{device_any{sys}, 1 << 20};
    rmm::mr::limiting_resource_adaptor over_user{user, 1 << 20};
    rmm::mr::limiting_resource_adaptor over_ref{rmm::device_async_resource_ref{user}, 1 << 20};
    for (auto* lim : {&over_rmm, &over_any, &over_user, &over_ref}) { round_trip(*lim, 4096); }
    EXPECT_EQ(c->allocs.load(), 2);  // the user's resource served the last two
    EXPECT_TRUE(over_rmm.get_upstream_resource() == rmm::device_async_resource_ref{sys});
  }
  EXPECT_EQ(c->live.load(), 0);
  static_assert(!std::is_constructible_v<rmm::mr::limiting_resource_adaptor, int, std::size_t>);
}

TEST(Composition, RmmUpstreamHandlePassesThrough)
{
  rmm::mr::system_memory_resource sys = rmm::mr::detail::unchecked_system_memory_resource();
  rmm::mr::pool_memory_resource pool{sys, 1 << 20};
  rmm::mr::limiting_resource_adaptor lim{pool, 1 << 20};
  rmm::mr::tracking_resource_adaptor tr{device_any{lim}};  // through any_resource: boxed, still works
  statistics_resource_adaptor stats{lim};
  // The adaptor retained the pool's own librmm handle: no C++ box in between.
  rmm_resource handle = rmm::mr::detail::upstream_holder{pool}.handle();
  EXPECT_EQ(handle.vtable->owner, rmm_abi_owner());
  round_trip(stats, 4096);
  round_trip(tr, 4096);
  EXPECT_EQ(lim.get_allocated_bytes(), 0u);
  EXPECT_THROW(stats.allocate_sync(2 << 20), rmm::out_of_memory);
  EXPECT_EQ(stats.get_allocations_counter().value, 0);
}

TEST(Composition, PoolAsCurrentDeviceResource)
{
  // The registry takes host memory in host mode and device memory when a GPU is present.
  rmm::mr::detail::c_resource const base = rmm_is_host_mode()
                                             ? rmm::mr::detail::c_resource{rmm::mr::detail::unchecked_system_memory_resource()}
                                             : rmm::mr::detail::c_resource{rmm::mr::cuda_memory_resource{}};
  rmm::mr::pool_memory_resource pool{base, 1 << 20};
  statistics_resource_adaptor stats{pool};
  rmm::mr::set_current_device_resource(stats);  // passes its librmm handle through
  rmm_resource current{nullptr, nullptr};
  rmm_error err{};
  ASSERT_EQ(rmm_get_current_device_resource(&current, &err), RMM_OK) << err.message;
  EXPECT_EQ(current.self, stats.handle().self);
  rmm_resource_release(current);
  auto ref = rmm::mr::get_current_device_resource_ref();
  void* p = ref.allocate(rmm::cuda_stream_default, 512, 256);
  EXPECT_EQ(stats.get_bytes_counter().value, 512);
  ref.deallocate(rmm::cuda_stream_default, p, 512, 256);
  rmm::mr::reset_current_device_resource();
}

// Issue 30: one rule for a valid free across the pool and its adaptors
// (docs/design/checked-frees.md): a size in the same multiple of 256 is accepted and counted at the
// allocation's size; memory allocated beside an adaptor is forwarded through it, uncounted.
TEST(CheckedFrees, StatisticsOverAPoolCountAFreeAtTheAllocatedSize)
{
  rmm::mr::system_memory_resource sys = rmm::mr::detail::unchecked_system_memory_resource();
  rmm::mr::pool_memory_resource pool{sys, 1 << 20, 1 << 20};
  statistics_resource_adaptor stats{pool};
  void* p = stats.allocate_sync(1000);
  stats.deallocate_sync(p, 1001);
  EXPECT_EQ(stats.get_bytes_counter(), (counter{0, 1000, 1000}));
  void* beside = pool.allocate_sync(256);
  stats.deallocate_sync(beside, 256);  // the pool knows it: forwarded, not counted
  EXPECT_EQ(stats.get_bytes_counter().value, 0);
  EXPECT_EQ(stats.get_allocations_counter(), (counter{0, 1, 1}));
  void* all = pool.allocate_sync(1 << 20);  // the pool is empty again: everything came back
  pool.deallocate_sync(all, 1 << 20);
}

TEST(CheckedFrees, ALimitHoldsWhenMemoryAllocatedBesideItIsFreedThroughIt)
{
  rmm::mr::system_memory_resource sys = rmm::mr::detail::unchecked_system_memory_resource();
  rmm::mr::pool_memory_resource pool{sys, 1 << 20, 4 << 20};
  rmm::mr::limiting_resource_adaptor lim{pool, 1 << 20};
  void* mine = lim.allocate_sync(1 << 20);
  void* beside = pool.allocate_sync(512 << 10);
  lim.deallocate_sync(beside, 512 << 10);
  EXPECT_EQ(lim.get_allocated_bytes(), std::size_t{1} << 20);
  EXPECT_THROW((void)lim.allocate_sync(512 << 10), rmm::out_of_memory);
  lim.deallocate_sync(mine, 1 << 20);
  EXPECT_EQ(lim.get_allocated_bytes(), 0u);
}

// Issue 30: allocating 256 bytes until the host has no memory left throws rmm::out_of_memory (the
// pool's record of live allocations cannot grow), never aborts, and everything can be freed. In a
// child process whose address space is capped 4 MiB above what the pool reserved.
TEST(HostExhaustion, AllocatingUntilTheHostIsExhaustedThrowsOutOfMemory)
{
  // With a GPU the engine's stream syncs need the CUDA driver, which cannot start under the cap
  // (cuDevicePrimaryCtxRetain fails): the case is the host's, as in test_c_abi's twin.
  if (!rmm_is_host_mode()) { GTEST_SKIP() << "host memory only (CUDA cannot start under the cap)"; }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto run = [] {
    constexpr std::size_t reserved = std::size_t{128} << 20;
    rmm::mr::system_memory_resource sys = rmm::mr::detail::unchecked_system_memory_resource();
    rmm::mr::pool_memory_resource pool{sys, reserved, reserved};
    std::vector<void*> held;
    held.reserve(reserved / 256 + 1);
    mallopt(M_MMAP_THRESHOLD, 128 << 10);  // large tables from mmap: the cap counts them
    rlimit old{};
    getrlimit(RLIMIT_AS, &old);
    std::ifstream statm{"/proc/self/statm"};
    unsigned long pages = 0;
    statm >> pages;
    rlimit cap{pages * static_cast<unsigned long>(sysconf(_SC_PAGESIZE)) + (4ul << 20), old.rlim_max};
    if (setrlimit(RLIMIT_AS, &cap) != 0) { std::exit(12); }
    std::string what = "no error";
    try {
      while (held.size() < held.capacity()) {
        held.push_back(pool.allocate_sync(256));
      }
    } catch (rmm::out_of_memory const& e) {
      what = std::string{"rmm::out_of_memory: "} + e.what();
    }
    for (void* p : held) {
      pool.deallocate_sync(p, 256);
    }
    setrlimit(RLIMIT_AS, &old);
    std::fprintf(stderr, "%zu allocations, then %s\n", held.size(), what.c_str());
    std::exit(what == "no error" ? 14 : 0);
  };
  EXPECT_EXIT(run(), testing::ExitedWithCode(0), "allocations, then rmm::out_of_memory");
}

TEST(LoggingResourceAdaptor, WritesHeaderAndLines)
{
  std::string const path = "rmm_cpp_logging_" + std::to_string(::getpid()) + ".csv";
  EXPECT_EQ(rmm::mr::logging_resource_adaptor::header(), "Thread,Time,Action,Pointer,Size,Stream");
  {
    rmm::mr::logging_resource_adaptor log{rmm::mr::detail::unchecked_system_memory_resource(), path};
    EXPECT_EQ(log.get_file_name(), path);
    auto copy = log;
    EXPECT_TRUE(copy == log);
    round_trip(log, 100);
    round_trip(copy, 200);
    log.flush();
    std::ifstream in{path};
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) { lines.push_back(line); }
    ASSERT_EQ(lines.size(), 5u);
    EXPECT_EQ(lines[0], rmm::mr::logging_resource_adaptor::header());
    EXPECT_NE(lines[1].find(",allocate,"), std::string::npos) << lines[1];
    EXPECT_NE(lines[1].find(",100,"), std::string::npos) << lines[1];
    EXPECT_NE(lines[2].find(",free,"), std::string::npos) << lines[2];
    EXPECT_NE(lines[3].find(",200,"), std::string::npos) << lines[3];
    auto up = log.get_upstream_resource();
    EXPECT_NE(cuda::mr::resource_cast<rmm::mr::system_memory_resource>(&up), nullptr);
  }
  EXPECT_EQ(std::remove(path.c_str()), 0);
}

TEST(LoggingResourceAdaptor, ErrorsMap)
{
  EXPECT_THROW((rmm::mr::logging_resource_adaptor{rmm::mr::detail::unchecked_system_memory_resource(), "/nonexistent-dir/x.csv"}),
               rmm::logic_error);
  if (std::getenv("RMM_LOG_FILE") == nullptr) {
    EXPECT_THROW(rmm::mr::logging_resource_adaptor{rmm::mr::detail::unchecked_system_memory_resource()}, rmm::logic_error);
  }
}

TEST(LoggingResourceAdaptor, OverUserResourceWithAutoFlush)
{
  std::string const path = "rmm_cpp_logging_auto_" + std::to_string(::getpid()) + ".csv";
  auto c = std::make_shared<counts>();
  {
    rmm::mr::logging_resource_adaptor log{device_any{counting_resource{c}}, path, true};
    round_trip(log, 64);
    std::ifstream in{path};  // no flush(): auto_flush wrote the lines
    std::string all{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
    EXPECT_NE(all.find(",free,"), std::string::npos) << all;
    EXPECT_EQ(c->allocs.load(), 1);
  }
  EXPECT_EQ(c->live.load(), 0);
  EXPECT_EQ(std::remove(path.c_str()), 0);
}

TEST(PrefetchResourceAdaptor, ForwardsToUpstream)
{
  rmm::mr::statistics_resource_adaptor stats{rmm::mr::detail::unchecked_system_memory_resource()};
  rmm::mr::prefetch_resource_adaptor pre{stats};
  round_trip(pre, 1000);
  EXPECT_EQ(stats.get_allocations_counter().total, 1);
  auto up = pre.get_upstream_resource();
  auto const* as = cuda::mr::resource_cast<rmm::mr::statistics_resource_adaptor>(&up);
  ASSERT_NE(as, nullptr);
  EXPECT_TRUE(*as == stats);
  EXPECT_TRUE(up == rmm::device_async_resource_ref{stats});
}

TEST(RecordingResourceAdaptor, ForwardsToUpstreamAndIsRecordedWhileTheTimelineRecords)
{
  rmm::mr::statistics_resource_adaptor stats{rmm::mr::detail::unchecked_system_memory_resource()};
  rmm::mr::recording_resource_adaptor rec{stats};
  round_trip(rec, 1000);
  EXPECT_EQ(stats.get_allocations_counter().total, 1);
  auto up = rec.get_upstream_resource();
  EXPECT_TRUE(up == rmm::device_async_resource_ref{stats});

  rmm::timeline::options opts;
  opts.clear = true;
  rmm::timeline::start(opts);
  void* p = rec.allocate_sync(4321, 256);
  auto json_bytes = rmm::timeline::snapshot(rmm::timeline::format::json);
  rec.deallocate_sync(p, 4321, 256);
  rmm::timeline::stop();
  std::string json(reinterpret_cast<char const*>(json_bytes.data()), json_bytes.size());
  EXPECT_NE(json.find("\"size\":4321"), std::string::npos) << json.substr(0, 400);
  EXPECT_NE(json.find("recording_resource_adaptor > statistics_resource_adaptor"), std::string::npos);
}

TEST(Timeline, RecordsTheCurrentResourceWithNativeStacksAndWritesPickles)
{
  auto before = rmm::mr::get_current_device_resource_ref();
  rmm::timeline::options opts;
  opts.native_stacks = true;
  opts.clear         = true;
  rmm::timeline::start(opts);
  EXPECT_TRUE(rmm::timeline::is_recording());
  auto ref = rmm::mr::get_current_device_resource_ref();
  EXPECT_FALSE(ref == before);  // a recording_resource_adaptor over it
  void* p = ref.allocate_sync(8192, 256);
  auto pickle = rmm::timeline::snapshot();
  ASSERT_GE(pickle.size(), 2u);
  EXPECT_EQ(pickle[0], std::byte{0x80});  // pickle PROTO
  auto json_bytes = rmm::timeline::snapshot(rmm::timeline::format::json);
  std::string json(reinterpret_cast<char const*>(json_bytes.data()), json_bytes.size());
  // The native stack names this test's body (C++ frames, symbolized by librmm).
  EXPECT_NE(json.find("RecordsTheCurrentResourceWithNativeStacks"), std::string::npos) << json.substr(0, 2000);
  auto path = ::testing::TempDir() + "timeline.pickle";
  rmm::timeline::dump_snapshot(path);
  std::ifstream in(path, std::ios::binary);
  EXPECT_EQ(in.get(), 0x80);
  EXPECT_THROW(rmm::timeline::dump_snapshot(::testing::TempDir() + "timeline.txt"), rmm::logic_error);
  ref.deallocate_sync(p, 8192, 256);
  rmm::timeline::stop();
  EXPECT_FALSE(rmm::timeline::is_recording());
  EXPECT_TRUE(rmm::mr::get_current_device_resource_ref() == before);
  opts.max_entries = 0;
  EXPECT_THROW(rmm::timeline::start(opts), rmm::logic_error);
  std::remove(path.c_str());
}

TEST(ThreadSafeResourceAdaptor, ManyThreads)
{
  auto c = std::make_shared<counts>();
  rmm::mr::thread_safe_resource_adaptor ts{device_any{counting_resource{c}}};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([ts]() mutable {
      for (int i = 0; i < 100; ++i) {
        void* p = ts.allocate_sync(128);
        ts.deallocate_sync(p, 128);
      }
    });
  }
  for (auto& t : threads) { t.join(); }
  EXPECT_EQ(c->allocs.load(), 800);
  EXPECT_EQ(c->deallocs.load(), 800);
  EXPECT_EQ(c->live_bytes.load(), 0);
}

namespace {

/// The callback argument of the failure-callback tests: a ballast block the callback can free.
struct ballast_state {
  rmm::mr::detail::c_resource sim;
  void* block;
  int calls;
};

constexpr std::size_t ballast_bytes = std::size_t{3} << 20;

bool free_ballast(std::size_t, void* arg)
{
  auto* s = static_cast<ballast_state*>(arg);
  ++s->calls;
  if (s->block == nullptr) { return false; }
  s->sim.deallocate_sync(s->block, ballast_bytes);
  s->block = nullptr;
  return true;
}

}  // namespace

TEST(FailureCallbackResourceAdaptor, RetriesWhileTheCallbackSaysSo)
{
  auto sim = simulated(std::size_t{4} << 20);
  ballast_state state{sim, sim.allocate_sync(ballast_bytes), 0};
  rmm::mr::failure_callback_resource_adaptor<> fc{sim, free_ballast, &state};
  void* p = fc.allocate_sync(std::size_t{2} << 20);  // fails, the callback frees the ballast, retried
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(state.calls, 1);
  EXPECT_EQ(state.block, nullptr);
  auto copy = fc;
  EXPECT_THROW(copy.allocate_sync(ballast_bytes), rmm::out_of_memory);  // the callback gives up
  EXPECT_EQ(state.calls, 2);
  fc.deallocate_sync(p, std::size_t{2} << 20);
  auto up = fc.get_upstream_resource();
  auto const* as = cuda::mr::resource_cast<rmm::mr::detail::c_resource>(&up);
  ASSERT_NE(as, nullptr);
  EXPECT_TRUE(*as == sim);
}

TEST(FailureCallbackResourceAdaptor, ExceptionInTheCallbackReachesTheCaller)
{
  int calls = 0;
  rmm::mr::failure_callback_resource_adaptor<> fc{
    simulated(std::size_t{1} << 20),
    [](std::size_t, void* arg) -> bool {
      ++*static_cast<int*>(arg);
      throw std::runtime_error{"from the callback"};
    },
    &calls};
  EXPECT_THROW(fc.allocate_sync(std::size_t{2} << 20), std::runtime_error);  // as in RMM
  EXPECT_EQ(calls, 1);
  void* p = fc.allocate_sync(1024);  // no failure, no call
  fc.deallocate_sync(p, 1024);
  EXPECT_EQ(calls, 1);
}

TEST(FailureCallbackResourceAdaptor, CallbackLivesAsLongAsTheAdaptor)
{
  auto token = std::make_shared<int>(0);
  std::weak_ptr<int> watch = token;
  {
    rmm::mr::failure_callback_resource_adaptor<> fc{
      rmm::mr::detail::unchecked_system_memory_resource(), [token](std::size_t, void*) { return false; }, nullptr};
    token.reset();
    auto copy = fc;
    EXPECT_FALSE(watch.expired());  // held by the adaptor
  }
  EXPECT_TRUE(watch.expired());  // released with the last reference
  EXPECT_THROW((rmm::mr::failure_callback_resource_adaptor<>{rmm::mr::detail::unchecked_system_memory_resource(), nullptr, nullptr}),
               rmm::logic_error);
}

TEST(PoolMemoryResource, MaximumPoolSize)
{
  rmm::mr::system_memory_resource sys = rmm::mr::detail::unchecked_system_memory_resource();
  EXPECT_EQ((rmm::mr::pool_memory_resource{sys, 1 << 20, std::size_t{4} << 20}.maximum_pool_size()),
            std::optional<std::size_t>{std::size_t{4} << 20});
  EXPECT_EQ((rmm::mr::pool_memory_resource{sys, 1 << 20}.maximum_pool_size()), std::nullopt);
}

TEST(TrackingResourceAdaptor, OutstandingAllocationsStr)
{
  rmm::mr::tracking_resource_adaptor tr{rmm::mr::detail::unchecked_system_memory_resource()};
  EXPECT_EQ(tr.get_outstanding_allocations_str(), "");
  void* p = tr.allocate_sync(300);
  char expected[64];
  std::snprintf(expected, sizeof expected, "%#zx: 300 B\n", reinterpret_cast<std::uintptr_t>(p));
  EXPECT_EQ(tr.get_outstanding_allocations_str(), expected);
  std::vector<void*> more;
  for (int i = 0; i < 50; ++i) { more.push_back(tr.allocate_sync(64)); }  // a long text
  auto const text = tr.get_outstanding_allocations_str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 51);
  for (void* q : more) { tr.deallocate_sync(q, 64); }
  tr.deallocate_sync(p, 300);
  EXPECT_EQ(tr.get_outstanding_allocations_str(), "");
  rmm::mr::tracking_resource_adaptor with_stacks{rmm::mr::detail::unchecked_system_memory_resource(), true};
  void* s = with_stacks.allocate_sync(128);
  EXPECT_NE(with_stacks.get_outstanding_allocations_str().find(": 128 B : callstack:"), std::string::npos);
  with_stacks.deallocate_sync(s, 128);
}

// --- get_upstream_resource() equals a reference to the upstream passed (RMM's AdaptorTest and
// CcclAdaptorTest.GetUpstreamResource): CCCL's resource_ref compares the referenced objects when their
// types match, so the adaptor must refer to an object of the upstream's own type, not to a
// detail::c_resource. Constructing these over cuda_memory_resource allocates nothing (host mode too).

namespace {

template <class Adaptor>
void expect_upstream_is(Adaptor const& adaptor, rmm::mr::cuda_memory_resource& cuda)
{
  rmm::device_async_resource_ref expected{cuda};
  EXPECT_TRUE(adaptor.get_upstream_resource() == expected);
  auto up = adaptor.get_upstream_resource();
  EXPECT_NE(cuda::mr::resource_cast<rmm::mr::cuda_memory_resource>(&up), nullptr);
  EXPECT_EQ(cuda::mr::resource_cast<rmm::mr::detail::c_resource>(&up), nullptr) << "not the sliced base";
  auto copy = adaptor;  // a copy refers to an equal upstream
  EXPECT_TRUE(copy.get_upstream_resource() == expected);
}

}  // namespace

TEST(GetUpstreamResource, EqualsAReferenceToTheUpstreamPassed)
{
  rmm::mr::cuda_memory_resource cuda;
  std::ostringstream log_out;
  expect_upstream_is(rmm::mr::aligned_resource_adaptor{cuda}, cuda);
  expect_upstream_is(rmm::mr::failure_callback_resource_adaptor<>{cuda, [](std::size_t, void*) { return false; }, nullptr},
                     cuda);
  expect_upstream_is(rmm::mr::limiting_resource_adaptor{cuda, std::size_t{1} << 30}, cuda);
  expect_upstream_is(rmm::mr::logging_resource_adaptor{cuda, log_out}, cuda);
  expect_upstream_is(rmm::mr::pool_memory_resource{cuda, 0}, cuda);
  expect_upstream_is(rmm::mr::prefetch_resource_adaptor{cuda}, cuda);
  expect_upstream_is(rmm::mr::statistics_resource_adaptor{cuda}, cuda);
  expect_upstream_is(rmm::mr::thread_safe_resource_adaptor{cuda}, cuda);
  expect_upstream_is(rmm::mr::tracking_resource_adaptor{cuda}, cuda);
  // Through a shared_ptr, as RMM's AdaptorTest holds them.
  auto shared = std::make_shared<rmm::mr::limiting_resource_adaptor>(cuda, std::size_t{64} << 20);
  expect_upstream_is(*shared, cuda);
}

TEST(GetUpstreamResource, AnAdaptorUpstreamKeepsItsType)
{
  rmm::mr::cuda_memory_resource cuda;
  rmm::mr::statistics_resource_adaptor stats{cuda};
  rmm::mr::limiting_resource_adaptor limit{stats, std::size_t{1} << 30};
  EXPECT_TRUE(limit.get_upstream_resource() == rmm::device_async_resource_ref{stats});
  rmm::mr::statistics_resource_adaptor other{cuda};
  EXPECT_FALSE(limit.get_upstream_resource() == rmm::device_async_resource_ref{other}) << "another adaptor";
  EXPECT_FALSE(limit.get_upstream_resource() == rmm::device_async_resource_ref{cuda}) << "another type";
}

TEST(GetUpstreamResource, TypeErasedUpstreamRefersToTheObjectInside)
{
  rmm::mr::cuda_memory_resource cuda;
  device_any erased{cuda};
  rmm::mr::limiting_resource_adaptor limit{erased, std::size_t{1} << 30};
  EXPECT_TRUE(limit.get_upstream_resource() == rmm::device_async_resource_ref{cuda});
}
