// RAPIDS RMM 26.10's librmm.so and rmm-rs's librmm_rs.so in one process, both in use.
//
// Built against RMM's wheel (its headers, librmm.so, librapids_logger.so) and linked with our
// librmm_rs.so as well: each library keeps its own file name, SONAME and symbols (RMM's are C++ in
// rmm::_RMM_26_10, ours are the C functions rmm_* of <rmm_rs/rmm_c.h>), so neither binds to the
// other's. Runs without a GPU: RMM's statistics adaptor and callback resource are host code, and
// our pool works on host memory in host mode.
#include "check.hpp"

#include <rmm/error.hpp>
#include <rmm/mr/callback_memory_resource.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>
#include <rmm/process_is_exiting.hpp>
#include <rmm/resource_ref.hpp>

#include <rmm_rs/rmm_c.h>

#include <cuda/stream>

#include <dlfcn.h>

#include <cstring>
#include <string>

namespace {

constexpr char rmm_process_is_exiting_symbol[] = "_ZN3rmm10_RMM_26_1018process_is_exitingEv";

std::string path_of(const void* address)
{
  Dl_info info{};
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr) { return {}; }
  return info.dli_fname;
}

bool ends_with(const std::string& s, const std::string& suffix)
{
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Our pool over our system memory resource, through the C ABI only. OWNING.
rmm_resource our_pool(std::uint64_t initial, std::uint64_t maximum)
{
  rmm_error err{};
  rmm_resource system{}, pool{};
  if (rmm_system_memory_resource_new(&system, &err) != RMM_OK) { throw rmm::logic_error(err.message); }
  int status = rmm_pool_memory_resource_new(system, initial, maximum, &pool, &err);
  rmm_resource_release(system);
  if (status != RMM_OK) { throw rmm::logic_error(err.message); }
  return pool;
}

// RMM's callback_memory_resource calling our C ABI: the plainest way for RMM's own code to use a
// resource of ours, without any header of ours but the C one.
void* allocate_from(std::size_t bytes, cuda::stream_ref stream, void* arg)
{
  void* ptr = nullptr;
  rmm_error err{};
  if (rmm_resource_allocate(*static_cast<rmm_resource*>(arg), stream.get(), bytes, 256, &ptr, &err) != RMM_OK) {
    throw rmm::out_of_memory(err.message);
  }
  return ptr;
}

void deallocate_to(void* ptr, std::size_t bytes, cuda::stream_ref stream, void* arg)
{
  rmm_resource_deallocate(*static_cast<rmm_resource*>(arg), stream.get(), ptr, bytes, 256, nullptr);
}

}  // namespace

TEST(each_library_is_loaded_under_its_own_soname_with_its_own_symbols)
{
  void* rmm_lib  = dlopen("librmm.so", RTLD_NOLOAD | RTLD_LAZY);
  void* ours_lib = dlopen("librmm_rs.so", RTLD_NOLOAD | RTLD_LAZY);
  CHECK(rmm_lib != nullptr);
  CHECK(ours_lib != nullptr);
  CHECK(rmm_lib != ours_lib);
  if (rmm_lib == nullptr || ours_lib == nullptr) { return; }
  // Our C ABI comes from librmm_rs.so only, RMM's C++ API from librmm.so only.
  CHECK(dlsym(rmm_lib, "rmm_abi_version") == nullptr);
  CHECK(ends_with(path_of(dlsym(ours_lib, "rmm_abi_version")), "/librmm_rs.so"));
  CHECK(ends_with(path_of(reinterpret_cast<const void*>(&rmm_abi_version)), "/librmm_rs.so"));
  CHECK(ends_with(path_of(dlsym(rmm_lib, rmm_process_is_exiting_symbol)), "/librmm.so"));
  CHECK(ends_with(path_of(dlsym(RTLD_DEFAULT, rmm_process_is_exiting_symbol)), "/librmm.so"));
  CHECK(dlsym(ours_lib, rmm_process_is_exiting_symbol) == nullptr);
  dlclose(rmm_lib);
  dlclose(ours_lib);
}

TEST(both_libraries_answer_their_own_calls)
{
  CHECK(rmm_abi_version() == RMM_ABI_VERSION);
  CHECK(rmm_process_is_exiting() == 0);  // ours
  CHECK(!rmm::process_is_exiting());     // RMM's
}

TEST(rmm_adaptors_count_allocations_served_by_our_pool)
{
  rmm_resource pool = our_pool(1u << 20, 4u << 20);
  {
    rmm::mr::callback_memory_resource through_ours{allocate_from, deallocate_to, &pool, &pool};
    rmm::mr::statistics_resource_adaptor stats{through_ours};
    rmm::device_async_resource_ref ref{stats};
    cuda::stream_ref stream{cudaStream_t{}};

    void* a = ref.allocate(stream, 1000, 256);
    void* b = ref.allocate(stream, 3000, 256);
    CHECK(a != nullptr);
    CHECK(b != nullptr);
    CHECK(rmm_is_host_mode() == 0 || (std::memset(a, 0x5a, 1000), std::memset(b, 0xa5, 3000), true));
    CHECK(stats.get_allocations_counter().value == 2);
    CHECK(stats.get_bytes_counter().value == 4000);
    std::uint64_t pool_bytes = 0;
    CHECK(rmm_pool_memory_resource_pool_size(pool, &pool_bytes, nullptr) == RMM_OK);
    CHECK(pool_bytes >= (1u << 20));

    ref.deallocate(stream, a, 1000, 256);
    ref.deallocate(stream, b, 3000, 256);
    CHECK(stats.get_allocations_counter().value == 0);
    CHECK(stats.get_allocations_counter().total == 2);

    // Our pool's refusal reaches RMM's adaptor as RMM's own exception type.
    CHECK_THROWS(rmm::out_of_memory, ref.allocate(stream, 64u << 20, 256));
    CHECK(stats.get_allocations_counter().value == 0);
  }
  rmm_resource_release(pool);
}

int main() { return beside_test::run_all(); }
