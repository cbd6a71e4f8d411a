// GoogleTest suite of rmm::mr::experimental::expandable_pool_memory_resource (issue 28): growth in
// place, trim between live blocks, out of memory naming mapped and free bytes, the release
// threshold, export to another process, peers. Host mode runs every test on host memory standing in
// for the device; the GPU-only ones skip there.

#include <rmm/cuda_stream_view.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/experimental/expandable_pool_memory_resource.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>
#include <cuda/stream_ref>

#include <gtest/gtest.h>

#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

using rmm::mr::experimental::expandable_pool_memory_resource;
using rmm::mr::experimental::imported_allocation;

constexpr std::size_t MiB = std::size_t{1} << 20;

bool host_mode() { return rmm_is_host_mode() != 0; }

int device_count()
{
  int count = 0;
  rmm_error err{};
  if (rmm_device_count(&count, &err) != RMM_OK) { return 0; }
  return count;
}

/// Writes @p bytes of @p value at device (or, in host mode, host) address @p ptr and waits.
void fill(void* ptr, std::size_t bytes, unsigned char value)
{
  std::vector<unsigned char> host(bytes, value);
  rmm_error err{};
  ASSERT_EQ(rmm_memcpy_async(ptr, host.data(), bytes, nullptr, &err), RMM_OK) << err.message;
  ASSERT_EQ(rmm_stream_synchronize(nullptr, &err), RMM_OK) << err.message;
}

/// True when the @p bytes at @p ptr (device or host) all hold @p value.
bool holds(void const* ptr, std::size_t bytes, unsigned char value)
{
  std::vector<unsigned char> host(bytes, static_cast<unsigned char>(~value));
  rmm_error err{};
  if (rmm_memcpy_async(host.data(), ptr, bytes, nullptr, &err) != RMM_OK) { return false; }
  if (rmm_stream_synchronize(nullptr, &err) != RMM_OK) { return false; }
  for (auto b : host) {
    if (b != value) { return false; }
  }
  return true;
}

static_assert(cuda::mr::resource_with<expandable_pool_memory_resource, cuda::mr::device_accessible>);
static_assert(sizeof(rmm::mr::experimental::expandable_pool_statistics) == 14 * sizeof(std::uint64_t));

TEST(ExpandablePool, GrowsInPlaceAndFreeSpaceCoalescesAcrossGrowthSteps)
{
  expandable_pool_memory_resource mr{std::nullopt, 256 * MiB};
  auto const granule = mr.statistics().granularity;
  EXPECT_EQ(mr.statistics().reserved_bytes, 256 * MiB);
  EXPECT_EQ(mr.mapped_bytes(), 0U);
  cuda::stream_ref stream{rmm::cuda_stream_view{}};
  void* a = mr.allocate(stream, granule);
  void* b = mr.allocate(stream, granule);
  EXPECT_EQ(static_cast<char*>(b), static_cast<char*>(a) + granule) << "the range grows in place";
  EXPECT_EQ(mr.mapped_bytes(), 2 * granule);
  mr.deallocate(stream, a, granule);
  mr.deallocate(stream, b, granule);
  // The two growth steps coalesced: one request of both granules fits where they were.
  void* both = mr.allocate(stream, 2 * granule);
  EXPECT_EQ(both, a);
  EXPECT_EQ(mr.mapped_bytes(), 2 * granule) << "no new mapping for memory already mapped";
  fill(both, 2 * granule, 0x3c);
  EXPECT_TRUE(holds(both, 2 * granule, 0x3c));
  mr.deallocate(stream, both, 2 * granule);
  EXPECT_EQ(mr.used_bytes(), 0U);
}

TEST(ExpandablePool, TrimGivesBackFreeGranulesBetweenLiveBlocks)
{
  expandable_pool_memory_resource mr{std::nullopt, 256 * MiB};
  auto const granule = mr.statistics().granularity;
  cuda::stream_ref stream{rmm::cuda_stream_view{}};
  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i) {
    blocks.push_back(mr.allocate(stream, granule));
    fill(blocks.back(), granule, static_cast<unsigned char>(i));
  }
  for (std::size_t i = 1; i < blocks.size(); i += 2) { mr.deallocate(stream, blocks[i], granule); }
  auto const before = mr.statistics();
  EXPECT_EQ(before.releasable_bytes, 4 * granule);
  EXPECT_EQ(mr.trim(), 4 * granule);
  EXPECT_EQ(mr.mapped_bytes(), 4 * granule) << "the live blocks' granules stay mapped";
  for (std::size_t i = 0; i < blocks.size(); i += 2) {
    EXPECT_TRUE(holds(blocks[i], granule, static_cast<unsigned char>(i))) << "block " << i;
  }
  // The holes are mapped again on demand.
  void* again = mr.allocate(stream, granule);
  fill(again, granule, 0xee);
  EXPECT_TRUE(holds(again, granule, 0xee));
  mr.deallocate(stream, again, granule);
  for (std::size_t i = 0; i < blocks.size(); i += 2) { mr.deallocate(stream, blocks[i], granule); }
  mr.trim();
  EXPECT_EQ(mr.mapped_bytes(), 0U);
  EXPECT_GE(mr.statistics().granules_released, 9U);
}

TEST(ExpandablePool, OutOfMemoryNamesMappedAndFreeBytes)
{
  expandable_pool_memory_resource mr{std::nullopt, 8 * MiB};
  cuda::stream_ref stream{rmm::cuda_stream_view{}};
  void* live = mr.allocate(stream, 4 * MiB);
  try {
    (void)mr.allocate(stream, 16 * MiB);
    FAIL() << "16 MiB cannot fit a reservation of 8 MiB";
  } catch (rmm::out_of_memory const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("mapped"), std::string::npos) << what;
    EXPECT_NE(what.find("free"), std::string::npos) << what;
    EXPECT_NE(what.find("expandable_pool_memory_resource"), std::string::npos) << what;
  }
  mr.deallocate(stream, live, 4 * MiB);
}

TEST(ExpandablePool, InitialSizeAndReleaseThreshold)
{
  expandable_pool_memory_resource mr{16 * MiB, 256 * MiB};
  EXPECT_GE(mr.mapped_bytes(), 16 * MiB);
  EXPECT_EQ(mr.used_bytes(), 0U);
  EXPECT_EQ(mr.release_threshold(), std::nullopt);
  mr.set_release_threshold(0);
  EXPECT_EQ(mr.release_threshold(), std::optional<std::size_t>{0});
  cuda::stream_ref stream{rmm::cuda_stream_view{}};
  void* p = mr.allocate(stream, 32 * MiB);
  mr.deallocate(stream, p, 32 * MiB);
  rmm_error err{};
  ASSERT_EQ(rmm_stream_synchronize(nullptr, &err), RMM_OK);
  // A free that reaches the shared list gives idle granules back down to the threshold; what a
  // still-busy stream holds is given back by trim().
  mr.trim();
  EXPECT_EQ(mr.mapped_bytes(), 0U);
}

TEST(ExpandablePool, CopiesShareThePoolAndRefsWork)
{
  expandable_pool_memory_resource mr{std::nullopt, 64 * MiB};
  auto copy = mr;
  EXPECT_TRUE(copy == mr);
  expandable_pool_memory_resource other{std::nullopt, 64 * MiB};
  EXPECT_FALSE(other == mr);
  rmm::device_async_resource_ref ref{copy};
  void* p = ref.allocate(rmm::cuda_stream_view{}, 1000, 256);
  EXPECT_EQ(mr.used_bytes(), 1024U);
  ref.deallocate(rmm::cuda_stream_view{}, p, 1000, 256);
}

TEST(ExpandablePool, BadInputIsATypedError)
{
  if (host_mode()) {
    EXPECT_THROW((expandable_pool_memory_resource{std::nullopt, 64 * MiB, std::nullopt, {1}}), rmm::logic_error)
      << "host mode has no peers";
  }
  expandable_pool_memory_resource mr{std::nullopt, 64 * MiB};
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  int dummy = 0;
  EXPECT_THROW(mr.export_allocation(&dummy, sizeof dummy, rmm::cuda_stream_view{}, fds[0]), rmm::logic_error)
    << "not an allocation of the pool";
  close(fds[0]);
  close(fds[1]);
}

// Two processes: this one exports a sub-allocation, a child (this test program again, running only
// ChildReadsTheExport) imports it from the socket it inherits and checks its bytes, with no copy
// through the host on the exporting side.
constexpr char const* child_fd_env = "RMM_EXPANDABLE_POOL_CHILD_FD";

TEST(ExpandablePoolIpc, ChildReadsTheExport)
{
  char const* fd_text = std::getenv(child_fd_env);
  if (fd_text == nullptr) { GTEST_SKIP() << "runs as the child of AnotherProcessImportsASubAllocation"; }
  int const fd = std::atoi(fd_text);
  auto imported = imported_allocation::receive(fd);
  ASSERT_EQ(imported.size(), 3 * MiB + 100);
  EXPECT_TRUE(holds(imported.data(), imported.size(), 0xa5));
  unsigned char done = 1;
  ASSERT_EQ(write(fd, &done, 1), 1);
}

TEST(ExpandablePoolIpc, AnotherProcessImportsASubAllocation)
{
  if (std::getenv(child_fd_env) != nullptr) { GTEST_SKIP() << "the child runs only ChildReadsTheExport"; }
  expandable_pool_memory_resource mr{std::nullopt, 256 * MiB};
  cuda::stream_ref stream{rmm::cuda_stream_view{}};
  // Not at the start of a granule: the export carries the offset.
  void* before = mr.allocate(stream, 4096);
  std::size_t const bytes = 3 * MiB + 100;
  void* shared = mr.allocate(stream, bytes);
  fill(shared, bytes, 0xa5);

  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  std::string const env = std::string{child_fd_env} + "=" + std::to_string(fds[1]);
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) { envp.push_back(*e); }
  envp.push_back(const_cast<char*>(env.c_str()));
  envp.push_back(nullptr);
  std::string self(4096, '\0');
  auto const n = readlink("/proc/self/exe", self.data(), self.size() - 1);
  ASSERT_GT(n, 0);
  self.resize(static_cast<std::size_t>(n));
  std::string filter = "--gtest_filter=ExpandablePoolIpc.ChildReadsTheExport";
  char* argv[] = {self.data(), filter.data(), nullptr};
  pid_t child = 0;
  ASSERT_EQ(posix_spawn(&child, self.c_str(), nullptr, nullptr, argv, envp.data()), 0);
  close(fds[1]);

  mr.export_allocation(shared, bytes, stream, fds[0]);
  unsigned char done = 0;
  EXPECT_EQ(read(fds[0], &done, 1), 1) << "the child answers once it has read the bytes";
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child's checks failed";
  close(fds[0]);
  mr.deallocate(stream, shared, bytes);
  mr.deallocate(stream, before, 4096);
}

TEST(ExpandablePoolGpu, APeerDeviceReadsThePoolsMemory)
{
  if (host_mode()) { GTEST_SKIP() << "needs a CUDA GPU"; }
  if (device_count() < 2) { GTEST_SKIP() << "needs 2 devices"; }
  expandable_pool_memory_resource mr{std::nullopt, 256 * MiB, std::nullopt, {1}};
  cuda::stream_ref stream{rmm::cuda_stream_view{}};
  void* p = mr.allocate(stream, 2 * MiB);
  fill(p, 2 * MiB, 0x42);
  // A copy from device 0's pool to a buffer of device 1 goes peer to peer.
  rmm_error err{};
  void* other = nullptr;
  rmm_resource resource1{nullptr, nullptr};
  ASSERT_EQ(rmm_device_set_current(1, &err), RMM_OK) << err.message;
  ASSERT_EQ(rmm_get_current_device_resource(&resource1, &err), RMM_OK) << err.message;
  ASSERT_EQ(rmm_resource_allocate_sync(resource1, 2 * MiB, 256, &other, &err), RMM_OK) << err.message;
  ASSERT_EQ(rmm_memcpy_async(other, p, 2 * MiB, nullptr, &err), RMM_OK) << err.message;
  ASSERT_EQ(rmm_stream_synchronize(nullptr, &err), RMM_OK) << err.message;
  EXPECT_TRUE(holds(other, 2 * MiB, 0x42));
  ASSERT_EQ(rmm_resource_deallocate_sync(resource1, other, 2 * MiB, 256, &err), RMM_OK);
  rmm_resource_release(resource1);
  ASSERT_EQ(rmm_device_set_current(0, &err), RMM_OK);
  mr.deallocate(stream, p, 2 * MiB);
}

TEST(ExpandablePoolGpu, GrowthIsDeviceMemory)
{
  if (host_mode()) { GTEST_SKIP() << "needs a CUDA GPU"; }
  expandable_pool_memory_resource mr{};
  auto const s = mr.statistics();
  EXPECT_GE(s.granularity, 2 * MiB) << "the driver's granule";
  EXPECT_GT(s.reserved_bytes, 0U);
  cuda::stream_ref stream{rmm::cuda_stream_view{}};
  void* p = mr.allocate(stream, 100 * MiB);
  fill(p, 100 * MiB, 0x11);
  EXPECT_TRUE(holds(p, 100 * MiB, 0x11));
  EXPECT_EQ(mr.mapped_bytes() % s.granularity, 0U);
  mr.deallocate(stream, p, 100 * MiB);
  EXPECT_EQ(mr.trim(), mr.statistics().peak_mapped_bytes);
}

}  // namespace
