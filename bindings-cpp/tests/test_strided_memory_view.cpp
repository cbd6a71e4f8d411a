// GoogleTest suite of rmm::strided_memory_view (strided_memory_view.hpp) over the C ABI's
// rmm_strided_view: a DLPack 1.x producer written here, fields and std::span accessors, RAII
// release (the producer's deleter runs exactly once), moves, errors, device copy and re-export.

#include <rmm/strided_memory_view.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

// dlpack.h 1.1's layout (rmm_c.h only declares the managed tensors).
typedef struct {
  int32_t device_type;
  int32_t device_id;
} DLDevice;
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  rmm_dl_data_type dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;
struct DLManagedTensorVersioned {
  uint32_t major;
  uint32_t minor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned*);
  uint64_t flags;
  DLTensor dl_tensor;
};

namespace {

int deleted = 0;

struct Producer {
  std::vector<float> data;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensorVersioned tensor{};
};

void delete_producer(DLManagedTensorVersioned* t)
{
  delete static_cast<Producer*>(t->manager_ctx);
  ++deleted;
}

/// A 4x6 float32 matrix viewed with every other column, rows reversed: shape {4, 3}, strides {-6, 2}.
DLManagedTensorVersioned* produce(uint32_t major = 1, uint64_t flags = 0)
{
  auto* p = new Producer{};
  for (int i = 0; i < 24; ++i) {
    p->data.push_back(static_cast<float>(i));
  }
  p->shape                 = {4, 3};
  p->strides               = {-6, 2};
  p->tensor.major          = major;
  p->tensor.minor          = 1;
  p->tensor.manager_ctx    = p;
  p->tensor.deleter        = delete_producer;
  p->tensor.flags          = flags;
  p->tensor.dl_tensor.data = p->data.data();
  p->tensor.dl_tensor.device      = DLDevice{1, 0};
  p->tensor.dl_tensor.ndim        = 2;
  p->tensor.dl_tensor.dtype       = rmm_dl_data_type{2, 32, 1};
  p->tensor.dl_tensor.shape       = p->shape.data();
  p->tensor.dl_tensor.strides     = p->strides.data();
  p->tensor.dl_tensor.byte_offset = 18 * sizeof(float);  // row 3 first
  return &p->tensor;
}

}  // namespace

TEST(StridedMemoryView, FieldsAndSpansDescribeTheProducersArray)
{
  int const before = deleted;
  {
    auto v = rmm::strided_memory_view::from_dlpack(produce(1, 1));
    EXPECT_TRUE(v.valid());
    EXPECT_EQ(v.ndim(), 2);
    EXPECT_EQ(v.itemsize(), 4);
    EXPECT_EQ(v.format(), "<f4");
    EXPECT_EQ(v.dtype().code, 2);
    EXPECT_TRUE(v.readonly());
    EXPECT_FALSE(v.device_accessible());
    EXPECT_EQ(v.device_type(), 1);
    EXPECT_EQ(v.size(), 12);
    EXPECT_FALSE(v.is_c_contiguous());
    EXPECT_FALSE(v.is_f_contiguous());
    EXPECT_EQ(*v.data<float>(), 18.0F);
#ifdef RMM_STRIDED_VIEW_HAS_SPAN
    std::vector<int64_t> shape(v.shape().begin(), v.shape().end());
    std::vector<int64_t> strides(v.strides().begin(), v.strides().end());
    std::vector<int64_t> bytes(v.byte_strides().begin(), v.byte_strides().end());
#else
    std::vector<int64_t> shape(v.shape(), v.shape() + v.ndim());
    std::vector<int64_t> strides(v.strides(), v.strides() + v.ndim());
    std::vector<int64_t> bytes(v.byte_strides(), v.byte_strides() + v.ndim());
#endif
    EXPECT_EQ(shape, (std::vector<int64_t>{4, 3}));
    EXPECT_EQ(strides, (std::vector<int64_t>{-6, 2}));
    EXPECT_EQ(bytes, (std::vector<int64_t>{-24, 8}));
    // Element [1, 2] through the strides: row 2, column 4.
    auto const* base = reinterpret_cast<char const*>(v.ptr());
    EXPECT_EQ(*reinterpret_cast<float const*>(base + 1 * bytes[0] + 2 * bytes[1]), 16.0F);
    EXPECT_EQ(deleted, before);
  }
  EXPECT_EQ(deleted, before + 1) << "the destructor released the producer once";
}

TEST(StridedMemoryView, MovesTransferTheViewAndMovedFromViewsThrow)
{
  int const before = deleted;
  auto a = rmm::strided_memory_view::from_dlpack(produce());
  auto b = std::move(a);
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): checked on purpose
  EXPECT_THROW((void)a.ndim(), rmm::logic_error);
  EXPECT_TRUE(b.valid());
  b = rmm::strided_memory_view::from_dlpack(produce());
  EXPECT_EQ(deleted, before + 1) << "assignment released the old view";
  b.reset();
  b.reset();
  EXPECT_EQ(deleted, before + 2);
  EXPECT_THROW((void)b.shape(), rmm::logic_error);
}

TEST(StridedMemoryView, RefusedTensorsStayWithTheCallerAndDoubleReleaseIsAnError)
{
  int const before = deleted;
  DLManagedTensorVersioned* t = produce(2);
  EXPECT_THROW((void)rmm::strided_memory_view::from_dlpack(t), rmm::logic_error);
  EXPECT_EQ(deleted, before);
  t->deleter(t);

  rmm_strided_view raw{};
  rmm_error err{};
  ASSERT_EQ(rmm_strided_view_from_dlpack_versioned(produce(), &raw, &err), RMM_OK) << err.message;
  rmm_strided_view copy = raw;
  EXPECT_EQ(rmm_strided_view_release(&raw, &err), RMM_OK);
  EXPECT_EQ(rmm_strided_view_release(&raw, &err), RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string{err.message}.find("released"), std::string::npos) << err.message;
  EXPECT_EQ(rmm_strided_view_release(&copy, &err), RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(rmm_strided_view_check(&copy, &err), RMM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(deleted, before + 2);
}

TEST(StridedMemoryView, PartsExportAndDeviceCopy)
{
  double data[6] = {0, 1, 2, 3, 4, 5};
  int64_t shape[2] = {2, 3};
  auto v = rmm::strided_memory_view::from_parts(data, 2, shape, nullptr, "<f8");
  EXPECT_TRUE(v.is_c_contiguous());
  EXPECT_THROW((void)rmm::strided_memory_view::from_parts(data, 2, shape, nullptr, "<f3"), rmm::logic_error);

  DLManagedTensorVersioned* t = v.to_dlpack();
  ASSERT_NE(t, nullptr);
  auto again = rmm::strided_memory_view::from_dlpack(t);
  EXPECT_EQ(again.ptr(), reinterpret_cast<std::uintptr_t>(data));
  EXPECT_EQ(again.format(), "<f8");

  if (rmm_is_host_mode() == 0) {
    GTEST_SKIP() << "the device copy is read back on the host in host mode only";
  }
  auto d = v.to_device();
  auto const* dev = d.c_view().device_copy;
  ASSERT_NE(dev, nullptr);
  EXPECT_EQ(dev->device_copy, dev);
  EXPECT_EQ(dev->ndim, 2);
  EXPECT_EQ(dev->shape[1], 3);
  EXPECT_EQ(dev->strides[0], 3);
  EXPECT_EQ(std::string{dev->format}, "<f8");
}

// Issue 30: parts no view can describe are refused (rmm::logic_error, RMM_ERROR_INVALID_ARGUMENT),
// whatever face they come through.
TEST(StridedMemoryView, MalformedPartsAreRefused)
{
  double data[4] = {0, 1, 2, 3};
  int64_t four[1]        = {4};
  int64_t min_stride[1]  = {INT64_MIN};
  int64_t huge[1]        = {INT64_C(1) << 62};
  int64_t step4[1]       = {4};
  using v = rmm::strided_memory_view;
  EXPECT_THROW((void)v::from_parts(nullptr, 1, four, nullptr, "<f8"), rmm::logic_error) << "NULL data with elements";
  EXPECT_THROW((void)v::from_parts(data, 1, four, nullptr, "<f8", 99), rmm::logic_error) << "device type 99";
  EXPECT_THROW((void)v::from_parts(data, 1, four, nullptr, "<f8", 1, -7), rmm::logic_error) << "device id -7";
  EXPECT_THROW((void)v::from_parts(data, 1, four, min_stride, "<f8"), rmm::logic_error) << "INT64_MIN stride";
  EXPECT_THROW((void)v::from_parts(data, 1, huge, step4, "|u1"), rmm::logic_error) << "past the address space";
  if (rmm_is_host_mode() != 0) {
    EXPECT_THROW((void)v::from_parts(data, 1, four, nullptr, "<f8", 2, 0), rmm::logic_error)
      << "a CUDA device in host mode";
  }
  int64_t empty[1] = {0};
  EXPECT_NO_THROW((void)v::from_parts(nullptr, 1, empty, nullptr, "<f8")) << "NULL data without elements is fine";
}
