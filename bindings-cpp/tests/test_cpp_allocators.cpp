// GoogleTest suite of the allocators (polymorphic_allocator, stream_allocator_adaptor) and of the
// resources added with them (callback_memory_resource, cuda_async_view / cuda_async_managed, the
// std::ostream logging_resource_adaptor). CPU parts run over host memory; GPU parts skip in host mode.
// The Thrust integration (thrust_allocator, exec_policy, device_vector) is in test_cuda_thrust.cu.

#include <rmm/aligned.hpp>
#include <rmm/cuda_stream_view.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/callback_memory_resource.hpp>
#include <rmm/mr/cuda_async_managed_memory_resource.hpp>
#include <rmm/mr/cuda_async_memory_resource.hpp>
#include <rmm/mr/cuda_async_view_memory_resource.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/logging_resource_adaptor.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/mr/polymorphic_allocator.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>
#include <rmm/mr/system_memory_resource.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <numeric>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using rmm::mr::callback_memory_resource;
using rmm::mr::cuda_async_managed_memory_resource;
using rmm::mr::cuda_async_view_memory_resource;
using rmm::mr::logging_resource_adaptor;
using rmm::mr::make_stream_allocator_adaptor;
using rmm::mr::polymorphic_allocator;
using rmm::mr::pool_memory_resource;
using rmm::mr::statistics_resource_adaptor;
using rmm::mr::stream_allocator_adaptor;
using rmm::mr::system_memory_resource;

using int_allocator = stream_allocator_adaptor<polymorphic_allocator<int>>;

static_assert(std::is_same_v<polymorphic_allocator<int>::value_type, int>);
static_assert(std::is_same_v<std::allocator_traits<int_allocator>::rebind_alloc<double>,
                             stream_allocator_adaptor<polymorphic_allocator<double>>>);
static_assert(!std::is_default_constructible_v<int_allocator>);
// Made from a resource object, or implicitly from an any_resource, as in RMM.
static_assert(std::is_constructible_v<polymorphic_allocator<int>, system_memory_resource>);
static_assert(std::is_convertible_v<rmm::mr::device_any_resource, polymorphic_allocator<int>>);
static_assert(cuda::mr::resource_with<callback_memory_resource, cuda::mr::device_accessible>);
static_assert(!cuda::mr::resource_with<callback_memory_resource, cuda::mr::host_accessible>);
static_assert(!cuda::mr::resource_with<cuda_async_view_memory_resource, cuda::mr::host_accessible>);
static_assert(cuda::mr::resource_with<cuda_async_managed_memory_resource, cuda::mr::host_accessible>);
static_assert(!std::is_convertible_v<cudaMemPool_t, cuda_async_view_memory_resource>);

bool host_mode() { return rmm_is_host_mode() != 0; }

/// The lines of @p text (without their '\n').
std::vector<std::string> lines_of(std::string const& text)
{
  std::vector<std::string> lines;
  std::istringstream in{text};
  for (std::string line; std::getline(in, line);) { lines.push_back(line); }
  return lines;
}

}  // namespace

// --- polymorphic_allocator / stream_allocator_adaptor --------------------------------------------

TEST(PolymorphicAllocator, AllocatesFromItsResourceOnTheStream)
{
  system_memory_resource sys = rmm::mr::detail::unchecked_system_memory_resource();
  statistics_resource_adaptor stats{sys};
  polymorphic_allocator<int> alloc{stats};
  int* p = alloc.allocate(100, rmm::cuda_stream_default);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(rmm::is_pointer_aligned(p, rmm::CUDA_ALLOCATION_ALIGNMENT));
  std::iota(p, p + 100, 0);  // host memory
  EXPECT_EQ(p[99], 99);
  EXPECT_EQ(stats.get_bytes_counter().value, static_cast<std::int64_t>(100 * sizeof(int)));
  alloc.deallocate(p, 100, rmm::cuda_stream_default);
  EXPECT_EQ(stats.get_bytes_counter().value, 0);
  EXPECT_EQ(stats.get_allocations_counter().total, 1);
}

TEST(PolymorphicAllocator, RebindCopiesAndEquality)
{
  system_memory_resource sys = rmm::mr::detail::unchecked_system_memory_resource();
  statistics_resource_adaptor stats{sys};
  statistics_resource_adaptor other_stats{sys};
  polymorphic_allocator<int> a{stats};
  polymorphic_allocator<double> rebound{a};
  polymorphic_allocator<int> copy = a;
  polymorphic_allocator<int> other{other_stats};
  EXPECT_TRUE(a == rebound);
  EXPECT_TRUE(a == copy);
  EXPECT_FALSE(a != copy);
  EXPECT_TRUE(a != other);
  // The rebound copy uses the same resource (the statistics see it).
  double* d = rebound.allocate(8, rmm::cuda_stream_default);
  EXPECT_EQ(stats.get_bytes_counter().value, static_cast<std::int64_t>(8 * sizeof(double)));
  rebound.deallocate(d, 8, rmm::cuda_stream_default);
  auto up = a.get_upstream_resource();
  EXPECT_NE(cuda::mr::resource_cast<statistics_resource_adaptor>(&up), nullptr);
}

TEST(PolymorphicAllocator, CopiesKeepTheResourceAlive)
{
  std::unique_ptr<polymorphic_allocator<int>> alloc;
  {
    system_memory_resource sys = rmm::mr::detail::unchecked_system_memory_resource();
    pool_memory_resource pool{sys, 1 << 20};
    alloc = std::make_unique<polymorphic_allocator<int>>(pool);
  }  // the allocator's copy of the pool keeps it alive
  int* p = alloc->allocate(1000, rmm::cuda_stream_default);
  p[999] = 7;
  EXPECT_EQ(p[999], 7);
  alloc->deallocate(p, 1000, rmm::cuda_stream_default);
}

TEST(PolymorphicAllocator, DefaultUsesTheCurrentDeviceResource)
{
  // The registry takes host memory in host mode and device memory when a GPU is present.
  rmm::mr::detail::c_resource const base = host_mode()
                                             ? rmm::mr::detail::c_resource{rmm::mr::detail::unchecked_system_memory_resource()}
                                             : rmm::mr::detail::c_resource{rmm::mr::cuda_memory_resource{}};
  statistics_resource_adaptor stats{base};
  rmm::mr::set_current_device_resource(stats);
  {
    polymorphic_allocator<int> alloc;
    EXPECT_TRUE(alloc == polymorphic_allocator<int>{rmm::mr::get_current_device_resource_ref()});
    int* p = alloc.allocate(64, rmm::cuda_stream_default);
    EXPECT_EQ(stats.get_bytes_counter().value, static_cast<std::int64_t>(64 * sizeof(int)));
    alloc.deallocate(p, 64, rmm::cuda_stream_default);
  }
  rmm::mr::reset_current_device_resource();
  EXPECT_EQ(stats.get_allocations_counter().total, 1);
}

TEST(PolymorphicAllocator, OverflowingRequestIsBadAlloc)
{
  polymorphic_allocator<double> alloc{rmm::mr::detail::unchecked_system_memory_resource()};
  EXPECT_THROW(alloc.allocate(static_cast<std::size_t>(-1) / 2, rmm::cuda_stream_default), rmm::bad_alloc);
}

TEST(StreamAllocatorAdaptor, BindsAStream)
{
  system_memory_resource sys = rmm::mr::detail::unchecked_system_memory_resource();
  polymorphic_allocator<int> alloc{sys};
  auto adapted = make_stream_allocator_adaptor(alloc, rmm::cuda_stream_per_thread);
  static_assert(std::is_same_v<decltype(adapted), int_allocator>);
  EXPECT_EQ(adapted.stream(), rmm::cuda_stream_per_thread);
  EXPECT_TRUE(adapted.underlying_allocator() == alloc);
  int* p = std::allocator_traits<int_allocator>::allocate(adapted, 10);
  p[9] = 3;
  std::allocator_traits<int_allocator>::deallocate(adapted, p, 10);
  stream_allocator_adaptor<polymorphic_allocator<double>> rebound{adapted};
  EXPECT_EQ(rebound.stream(), adapted.stream());
  EXPECT_TRUE(rebound == adapted);
  int_allocator on_default{alloc, rmm::cuda_stream_default};
  EXPECT_TRUE(on_default == adapted) << "equality is the underlying allocators'";
}

TEST(StreamAllocatorAdaptor, StdVectorOverSystemMemory)
{
  system_memory_resource sys = rmm::mr::detail::unchecked_system_memory_resource();
  statistics_resource_adaptor stats{sys};
  {
    std::vector<int, int_allocator> v(int_allocator{polymorphic_allocator<int>{stats}, rmm::cuda_stream_default});
    for (int i = 0; i < 10000; ++i) { v.push_back(i); }
    EXPECT_EQ(std::accumulate(v.begin(), v.end(), 0LL), 9999LL * 10000 / 2);
    EXPECT_GE(stats.get_bytes_counter().value, static_cast<std::int64_t>(10000 * sizeof(int)));
    EXPECT_GT(stats.get_allocations_counter().total, 1) << "push_back regrew through the resource";
  }
  EXPECT_EQ(stats.get_bytes_counter().value, 0);
}

TEST(StreamAllocatorAdaptor, StdVectorOverPoolInHostMemory)
{
  system_memory_resource sys = rmm::mr::detail::unchecked_system_memory_resource();
  pool_memory_resource pool{sys, 1 << 20};
  statistics_resource_adaptor stats{pool};
  {
    auto alloc = make_stream_allocator_adaptor(polymorphic_allocator<int>{stats}, rmm::cuda_stream_default);
    std::vector<int, decltype(alloc)> v(50000, 1, alloc);
    std::vector<int, decltype(alloc)> copy = v;
    EXPECT_EQ(std::accumulate(copy.begin(), copy.end(), 0), 50000);
    EXPECT_EQ(stats.get_allocations_counter().value, 2);
    EXPECT_EQ(pool.pool_size(), std::size_t{1} << 20) << "served by the pool's initial memory";
  }
  EXPECT_EQ(stats.get_bytes_counter().value, 0);
}

// --- callback_memory_resource --------------------------------------------------------------------

namespace {

/// What the callbacks below saw, reached through their void* arguments.
struct seen {
  int allocations{0};
  int deallocations{0};
  cudaStream_t last_stream{nullptr};
};

void* host_allocate(std::size_t bytes, rmm::cuda_stream_view stream, void* arg)
{
  auto* s = static_cast<seen*>(arg);
  ++s->allocations;
  s->last_stream = stream.value();
  return std::aligned_alloc(256, rmm::align_up(bytes, 256));
}

void host_deallocate(void* ptr, std::size_t, rmm::cuda_stream_view stream, void* arg)
{
  auto* s = static_cast<seen*>(arg);
  ++s->deallocations;
  s->last_stream = stream.value();
  std::free(ptr);
}

}  // namespace

TEST(CallbackMemoryResource, CallsTheFunctionsWithTheirArguments)
{
  seen on_alloc;
  seen on_free;
  callback_memory_resource mr{host_allocate, host_deallocate, &on_alloc, &on_free};
  callback_memory_resource copy = mr;
  EXPECT_TRUE(copy == mr);
  EXPECT_FALSE(mr == (callback_memory_resource{host_allocate, host_deallocate, &on_alloc, &on_free}));
  void* p = mr.allocate(rmm::cuda_stream_per_thread, 1000);
  std::memset(p, 1, 1000);
  EXPECT_EQ(on_alloc.allocations, 1);
  EXPECT_EQ(on_alloc.last_stream, rmm::cuda_stream_per_thread.value());
  copy.deallocate(rmm::cuda_stream_per_thread, p, 1000);
  EXPECT_EQ(on_free.deallocations, 1);
  EXPECT_EQ(on_alloc.deallocations, 0) << "each function gets its own argument";
  EXPECT_EQ(mr.allocate(rmm::cuda_stream_default, 0), nullptr) << "empty requests never reach the functions";
  EXPECT_EQ(on_alloc.allocations, 1);
  void* q = mr.allocate_sync(64);
  mr.deallocate_sync(q, 64);
  EXPECT_EQ(on_free.deallocations, 2);
  EXPECT_EQ(rmm_resource_access(mr.handle()), RMM_ACCESS_DEVICE);
}

TEST(CallbackMemoryResource, ExceptionsAndNullBecomeRmmErrors)
{
  auto throws_bad_alloc = [](std::size_t, rmm::cuda_stream_view, void*) -> void* { throw std::bad_alloc{}; };
  auto throws_runtime = [](std::size_t, rmm::cuda_stream_view, void*) -> void* {
    throw std::runtime_error{"the allocator broke"};
  };
  auto gives_null = [](std::size_t, rmm::cuda_stream_view, void*) -> void* { return nullptr; };
  auto frees = [](void* p, std::size_t, rmm::cuda_stream_view, void*) { std::free(p); };
  EXPECT_THROW(callback_memory_resource(throws_bad_alloc, frees).allocate_sync(128), rmm::out_of_memory);
  try {
    callback_memory_resource{throws_runtime, frees}.allocate_sync(128);
    FAIL() << "the callback's exception must come back";
  } catch (rmm::logic_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("the allocator broke"), std::string::npos) << e.what();
  }
  EXPECT_THROW(callback_memory_resource(gives_null, frees).allocate_sync(128), rmm::out_of_memory);
  // A throwing deallocate function cannot throw out of the noexcept deallocate.
  seen s;
  callback_memory_resource bad_free{host_allocate,
                                    [](void* p, std::size_t, rmm::cuda_stream_view, void*) {
                                      std::free(p);
                                      throw std::runtime_error{"free failed"};
                                    },
                                    &s};
  void* p = bad_free.allocate_sync(32);
  bad_free.deallocate_sync(p, 32);  // prints the error
}

TEST(CallbackMemoryResource, EmptyFunctionsAreLogicErrorsAndTheFunctionsAreReleased)
{
  EXPECT_THROW((callback_memory_resource{nullptr, host_deallocate}), rmm::logic_error);
  EXPECT_THROW((callback_memory_resource{host_allocate, nullptr}), rmm::logic_error);
  auto token = std::make_shared<int>(0);
  {
    seen s;
    callback_memory_resource mr{[token](std::size_t b, rmm::cuda_stream_view st, void* a) {
                                  return host_allocate(b, st, a);
                                },
                                host_deallocate, &s, &s};
    EXPECT_EQ(token.use_count(), 2);
    rmm::device_async_resource_ref ref{mr};
    void* p = ref.allocate(rmm::cuda_stream_default, 16, 256);
    ref.deallocate(rmm::cuda_stream_default, p, 16, 256);
    EXPECT_EQ(s.allocations, 1);
  }
  EXPECT_EQ(token.use_count(), 1) << "librmm released the functions with the last copy";
}

// --- logging_resource_adaptor to a std::ostream --------------------------------------------------

TEST(LoggingResourceAdaptor, OstreamGetsRmmsHeaderAndLines)
{
  std::ostringstream out;
  void* p = nullptr;
  {
    logging_resource_adaptor log{rmm::mr::detail::unchecked_system_memory_resource(), out};
    EXPECT_EQ(log.get_file_name(), "");
    // As RMM's ostream sink: every line goes into the stream when logged, without flush()
    // (RMM's Adaptor.STDOUT reads the header through gtest's CaptureStdout).
    EXPECT_EQ(out.str(), logging_resource_adaptor::header() + "\n");
    p = log.allocate(rmm::cuda_stream_default, 100);
    EXPECT_EQ(lines_of(out.str()).size(), 2u) << out.str();
    log.deallocate(rmm::cuda_stream_default, p, 100);
    log.flush();
    auto lines = lines_of(out.str());
    ASSERT_EQ(lines.size(), 3u) << out.str();
    EXPECT_EQ(lines[0], logging_resource_adaptor::header());
    std::ostringstream ptr;
    ptr << std::hex << reinterpret_cast<std::uintptr_t>(p);
    std::regex const allocate{"^[0-9]+,[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6},allocate,0x" + ptr.str() + ",100,0x0$"};
    std::regex const free{"^[0-9]+,[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6},free,0x" + ptr.str() + ",100,0x0$"};
    EXPECT_TRUE(std::regex_match(lines[1], allocate)) << lines[1];
    EXPECT_TRUE(std::regex_match(lines[2], free)) << lines[2];
    void* q = log.allocate(rmm::cuda_stream_per_thread, 64);
    log.deallocate(rmm::cuda_stream_per_thread, q, 64);
  }  // the last copy flushes
  auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 5u) << out.str();
  EXPECT_NE(lines[3].find(",allocate,"), std::string::npos) << lines[3];
  EXPECT_TRUE(lines[3].size() > 4 && lines[3].substr(lines[3].size() - 4) == ",0x2") << lines[3];
}

TEST(LoggingResourceAdaptor, OstreamAutoFlushAndCopies)
{
  std::ostringstream out;
  system_memory_resource sys = rmm::mr::detail::unchecked_system_memory_resource();
  pool_memory_resource pool{sys, 1 << 20};
  logging_resource_adaptor log{pool, out, true};
  EXPECT_EQ(out.str(), logging_resource_adaptor::header() + "\n") << "auto_flush writes the header at once";
  auto copy = log;
  EXPECT_TRUE(copy == log);
  void* p = copy.allocate_sync(256);
  EXPECT_EQ(lines_of(out.str()).size(), 2u) << "without flush()";
  log.deallocate_sync(p, 256);
  EXPECT_EQ(lines_of(out.str()).size(), 3u);
  auto up = log.get_upstream_resource();
  // A reference to the pool as its own type (RMM's semantics: it equals a reference to the upstream).
  auto const* as = cuda::mr::resource_cast<pool_memory_resource>(&up);
  ASSERT_NE(as, nullptr);
  EXPECT_TRUE(*as == pool);
  EXPECT_TRUE(up == rmm::device_async_resource_ref{pool});
}

TEST(LoggingResourceAdaptor, FailingOstreamLosesLinesNotAllocations)
{
  std::ostringstream out;
  logging_resource_adaptor log{rmm::mr::detail::unchecked_system_memory_resource(), out};
  out.setstate(std::ios::badbit);
  void* p = log.allocate_sync(64);  // still succeeds
  ASSERT_NE(p, nullptr);
  log.deallocate_sync(p, 64);
  EXPECT_THROW(log.flush(), rmm::logic_error);
  out.clear();
}

// --- cuda_async_view / cuda_async_managed ---------------------------------------------------------

TEST(CudaAsyncViewMemoryResource, NullPoolIsLogicError)
{
  try {
    cuda_async_view_memory_resource mr{cudaMemPool_t{nullptr}};
    FAIL() << "a null pool must be rejected";
  } catch (rmm::logic_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("Unexpected null pool handle."), std::string::npos) << e.what();
  }
}

TEST(CudaAsyncManagedMemoryResource, HostModeConstructionThrowsCudaError)
{
  if (!host_mode()) { GTEST_SKIP() << "host mode only"; }
  EXPECT_THROW(cuda_async_managed_memory_resource{}, rmm::cuda_error);
}

TEST(CudaAsyncViewMemoryResource, AllocatesFromAnotherResourcesPoolOnGpu)
{
  if (host_mode()) { GTEST_SKIP() << "needs a CUDA GPU"; }
  rmm::mr::cuda_async_memory_resource owner;
  cuda_async_view_memory_resource view{owner.pool_handle()};
  EXPECT_EQ(view.pool_handle(), owner.pool_handle());
  auto copy = view;
  EXPECT_TRUE(copy == view);
  void* p = view.allocate(rmm::cuda_stream_default, 1 << 20);
  ASSERT_NE(p, nullptr);
  copy.deallocate(rmm::cuda_stream_default, p, 1 << 20);
  polymorphic_allocator<float> alloc{view};
  float* f = alloc.allocate(1000, rmm::cuda_stream_default);
  alloc.deallocate(f, 1000, rmm::cuda_stream_default);
}

TEST(CudaAsyncManagedMemoryResource, AllocatesHostAccessibleMemoryOnGpu)
{
  if (host_mode()) { GTEST_SKIP() << "needs a CUDA GPU"; }
  std::unique_ptr<cuda_async_managed_memory_resource> mr;
  try {
    mr = std::make_unique<cuda_async_managed_memory_resource>();
  } catch (rmm::logic_error const& e) {
    GTEST_SKIP() << "managed memory pools unsupported here: " << e.what();
  }
  EXPECT_NE(mr->pool_handle(), nullptr);
  void* p = mr->allocate_sync(4096);
  std::memset(p, 0x5a, 4096);  // managed memory, nothing pending after allocate_sync
  EXPECT_EQ(static_cast<unsigned char*>(p)[4095], 0x5a);
  mr->deallocate_sync(p, 4096);
}
