// Code that knows CCCL and nothing of rmm: it is compiled without rmm's include directory (see
// tests/CMakeLists.txt), so it can only see our resources through CCCL's type-erased interfaces.
// The harness (test_cpp_resource_harness.cpp) declares these functions itself and passes rmm
// resources in; a mismatch of the signatures fails at link time.

#include <cuda/memory_resource>
#include <cuda/stream_ref>

namespace cccl_only {

namespace {

bool aligned(void* ptr, cuda::std::size_t alignment)
{
  return reinterpret_cast<cuda::std::uintptr_t>(ptr) % alignment == 0;
}

}  // namespace

/// Allocates @p count blocks of @p bytes through @p mr on @p stream, then frees them newest first.
/// Returns how many blocks were missing or misaligned (0 when all is well).
int allocate_and_free(cuda::mr::resource_ref<cuda::mr::device_accessible> mr,
                      cuda::stream_ref stream,
                      cuda::std::size_t bytes,
                      int count)
{
  constexpr int max_blocks = 64;
  if (count > max_blocks) { return count; }
  void* blocks[max_blocks] = {};
  int bad                  = 0;
  for (int i = 0; i < count; ++i) {
    blocks[i] = mr.allocate(stream, bytes, 256);
    if (blocks[i] == nullptr || !aligned(blocks[i], 256)) { ++bad; }
  }
  for (int i = count - 1; i >= 0; --i) { mr.deallocate(stream, blocks[i], bytes, 256); }
  return bad;
}

/// Copies @p mr (an owning, type-erased copy that shares the resource's state), allocates from the
/// copy and frees through the original: valid exactly when the two compare equal, as CCCL requires.
/// Returns 0 when the copy compares equal and the memory round-trips, else a non-zero code.
int copy_allocate_free_through_original(cuda::mr::any_resource<cuda::mr::device_accessible> mr,
                                        cuda::stream_ref stream,
                                        cuda::std::size_t bytes)
{
  cuda::mr::any_resource<cuda::mr::device_accessible> copy = mr;
  if (!(copy == mr)) { return 1; }
  void* p = copy.allocate_sync(bytes, 256);
  if (p == nullptr || !aligned(p, 256)) { return 2; }
  mr.deallocate_sync(p, bytes, 256);
  void* q = copy.allocate(stream, bytes, 256);
  if (q == nullptr || !aligned(q, 256)) { return 3; }
  mr.deallocate(stream, q, bytes, 256);
  return 0;
}

/// True when allocating @p bytes through @p mr throws; the caller cannot name rmm's exception
/// types here, only see that the failure arrives as an exception rather than a null pointer.
bool allocation_throws(cuda::mr::resource_ref<cuda::mr::device_accessible> mr, cuda::std::size_t bytes)
{
  try {
    void* p = mr.allocate_sync(bytes, 256);
    mr.deallocate_sync(p, bytes, 256);
    return false;
  } catch (...) {
    return true;
  }
}

}  // namespace cccl_only
