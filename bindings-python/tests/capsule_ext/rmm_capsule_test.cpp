// A small C++ extension module for bindings-python/tests/test_capsules.py: it makes buffers in C++
// (librmm's C ABI, and with RMM_TEST_CXX_API the C++ API's std::unique_ptr<rmm::device_buffer>) and
// hands them to Python, takes them back, holds them, and passes memory resources both ways, all
// through <rmm/python_capsules.hpp> / <rmm/python.hpp>. Built by the test with g++ against librmm_rs.so.
#define PY_SSIZE_T_CLEAN
#ifdef RMM_TEST_CXX_API
#include <rmm/python.hpp>
#else
#include <rmm/python_capsules.hpp>
#endif

#include <string>
#include <vector>

namespace {

std::vector<rmm_device_buffer*> held;  // buffers C++ owns between calls (GIL-protected)

PyObject* rmm_failure(int status, rmm_error const& err, char const* what)
{
  PyErr_Format(PyExc_RuntimeError, "%s: %s (%s)", what, err.message, rmm_error_kind_name(status));
  return nullptr;
}

/** A new buffer of n bytes set to `byte`, from the current device resource, on the default stream. */
rmm_device_buffer* new_filled(Py_ssize_t n, int byte)
{
  rmm_device_buffer* buf = nullptr;
  rmm_error err{};
  int status = rmm_device_buffer_new(static_cast<size_t>(n), 256, nullptr, rmm_resource{nullptr, nullptr}, &buf, &err);
  if (status != RMM_OK) {
    rmm_failure(status, err, "rmm_device_buffer_new");
    return nullptr;
  }
  if (n > 0) { status = rmm_memset_async(rmm_device_buffer_data(buf), byte, static_cast<size_t>(n), nullptr, &err); }
  if (status == RMM_OK) { status = rmm_stream_synchronize(nullptr, &err); }
  if (status != RMM_OK) {
    rmm_device_buffer_free(buf);
    rmm_failure(status, err, "fill");
    return nullptr;
  }
  return buf;
}

/** The contents of `buf` as bytes (copied on the default stream, synchronized). */
PyObject* contents(void const* data, size_t size)
{
  std::string host(size, '\0');
  rmm_error err{};
  int status = size == 0 ? RMM_OK : rmm_memcpy_async(host.data(), data, size, nullptr, &err);
  if (status == RMM_OK) { status = rmm_stream_synchronize(nullptr, &err); }
  if (status != RMM_OK) { return rmm_failure(status, err, "rmm_memcpy_async"); }
  return PyBytes_FromStringAndSize(host.data(), static_cast<Py_ssize_t>(size));
}

PyObject* make_buffer(PyObject*, PyObject* args)
{
  Py_ssize_t n = 0;
  int byte = 0;
  if (!PyArg_ParseTuple(args, "ni", &n, &byte)) { return nullptr; }
  rmm_device_buffer* buf = new_filled(n, byte);
  return buf == nullptr ? nullptr : rmm::python::to_python(buf);
}

PyObject* make_capsule(PyObject*, PyObject* args)
{
  Py_ssize_t n = 0;
  int byte = 0;
  if (!PyArg_ParseTuple(args, "ni", &n, &byte)) { return nullptr; }
  rmm_device_buffer* buf = new_filled(n, byte);
  return buf == nullptr ? nullptr : rmm::python::buffer_to_capsule(buf);
}

/** Takes the buffer of obj, returns (address, contents) and frees it. */
PyObject* take(PyObject*, PyObject* obj)
{
  rmm_device_buffer* buf = rmm::python::buffer_from_python(obj);
  if (buf == nullptr) { return nullptr; }
  void* data = rmm_device_buffer_data(buf);
  PyObject* bytes = contents(data, rmm_device_buffer_size(buf));
  rmm_device_buffer_free(buf);
  if (bytes == nullptr) { return nullptr; }
  return Py_BuildValue("(KN)", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(data)), bytes);
}

PyObject* hold(PyObject*, PyObject* obj)
{
  rmm_device_buffer* buf = rmm::python::buffer_from_python(obj);
  if (buf == nullptr) { return nullptr; }
  held.push_back(buf);
  return PyLong_FromSize_t(held.size());
}

PyObject* give_back(PyObject*, PyObject*)
{
  if (held.empty()) {
    PyErr_SetString(PyExc_IndexError, "C++ holds no buffer");
    return nullptr;
  }
  rmm_device_buffer* buf = held.back();
  held.pop_back();
  return rmm::python::to_python(buf);
}

PyObject* drop_held(PyObject*, PyObject*)
{
  size_t const n = held.size();
  for (rmm_device_buffer* buf : held) { rmm_device_buffer_free(buf); }
  held.clear();
  return PyLong_FromSize_t(n);
}

/** A Python resource -> librmm handle -> a new Python object of the same resource. */
PyObject* resource_roundtrip(PyObject*, PyObject* obj)
{
  rmm_resource handle = rmm::python::resource_from_python(obj);
  if (handle.vtable == nullptr) { return nullptr; }
  PyObject* back = rmm::python::resource_to_python(handle);
  rmm_resource_release(handle);
  return back;
}

/** Allocates and frees n bytes through the resource of obj, from C. */
PyObject* allocate_through(PyObject*, PyObject* args)
{
  PyObject* obj = nullptr;
  Py_ssize_t n = 0;
  if (!PyArg_ParseTuple(args, "On", &obj, &n)) { return nullptr; }
  rmm_resource handle = rmm::python::resource_from_python(obj);
  if (handle.vtable == nullptr) { return nullptr; }
  void* p = nullptr;
  rmm_error err{};
  int status = rmm_resource_allocate(handle, nullptr, static_cast<size_t>(n), 256, &p, &err);
  if (status == RMM_OK) { status = rmm_resource_deallocate(handle, nullptr, p, static_cast<size_t>(n), 256, &err); }
  rmm_resource_release(handle);
  if (status != RMM_OK) { return rmm_failure(status, err, "allocate_through"); }
  Py_RETURN_NONE;
}

#ifdef RMM_TEST_CXX_API
/** std::make_unique<rmm::device_buffer>(n) from `mr` (a Python resource) or the current one. */
PyObject* cxx_make(PyObject*, PyObject* args)
{
  Py_ssize_t n = 0;
  PyObject* mr = Py_None;
  if (!PyArg_ParseTuple(args, "n|O", &n, &mr)) { return nullptr; }
  try {
    std::unique_ptr<rmm::device_buffer> buf;
    if (mr == Py_None) {
      buf = std::make_unique<rmm::device_buffer>(static_cast<std::size_t>(n), rmm::cuda_stream_view{});
    } else {
      auto resource = rmm::resource_from_python(mr);
      if (!resource) { return nullptr; }
      rmm::device_async_resource_ref ref{*resource};
      buf = std::make_unique<rmm::device_buffer>(static_cast<std::size_t>(n), rmm::cuda_stream_view{}, ref);
    }
    return rmm::to_python(std::move(buf));
  } catch (std::exception const& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

/** rmm::from_python(obj): (size, contents, memory_resource as Python) of the C++ buffer, then frees it. */
PyObject* cxx_take(PyObject*, PyObject* obj)
{
  std::unique_ptr<rmm::device_buffer> buf = rmm::from_python(obj);
  if (!buf) { return nullptr; }
  PyObject* bytes = contents(buf->data(), buf->size());
  if (bytes == nullptr) { return nullptr; }
  PyObject* mr = rmm::resource_to_python(rmm::mr::device_any_resource{buf->memory_resource()});
  if (mr == nullptr) {
    Py_DECREF(bytes);
    return nullptr;
  }
  return Py_BuildValue("(nNN)", static_cast<Py_ssize_t>(buf->size()), bytes, mr);
}
#endif

PyMethodDef methods[] = {
  {"make_buffer", make_buffer, METH_VARARGS, "make_buffer(n, byte): an rmm.DeviceBuffer made in C++"},
  {"make_capsule", make_capsule, METH_VARARGS, "make_capsule(n, byte): an 'rmm.device_buffer.v1' capsule"},
  {"take", take, METH_O, "take(obj): (address, contents) of the buffer C++ took, then freed"},
  {"hold", hold, METH_O, "hold(obj): C++ keeps the buffer; returns how many it holds"},
  {"give_back", give_back, METH_NOARGS, "give_back(): the last held buffer as an rmm.DeviceBuffer"},
  {"drop_held", drop_held, METH_NOARGS, "drop_held(): frees every held buffer; returns how many"},
  {"resource_roundtrip", resource_roundtrip, METH_O, "Python resource -> C -> Python"},
  {"allocate_through", allocate_through, METH_VARARGS, "allocate_through(mr, n) from C"},
#ifdef RMM_TEST_CXX_API
  {"cxx_make", cxx_make, METH_VARARGS, "cxx_make(n, mr=None): std::unique_ptr<rmm::device_buffer> to Python"},
  {"cxx_take", cxx_take, METH_O, "cxx_take(obj): rmm::from_python"},
#endif
  {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "rmm_capsule_test", "rmm capsule test module", -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit_rmm_capsule_test(void)
{
  PyObject* m = PyModule_Create(&module);
#ifdef RMM_TEST_CXX_API
  if (m != nullptr) { PyModule_AddIntConstant(m, "HAS_CXX_API", 1); }
#else
  if (m != nullptr) { PyModule_AddIntConstant(m, "HAS_CXX_API", 0); }
#endif
  return m;
}
