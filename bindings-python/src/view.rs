//! `rmm.StridedMemoryView` (over `rmm_core::view`) and DLPack 1.x for `rmm.DeviceBuffer`.
//!
//! A view is read from any producer: DLPack (`__dlpack__` with the stream handshake, versioned
//! capsules first, legacy ones as the fallback), the CUDA Array Interface v3 (its `stream` is
//! waited for through an event, as the CAI spec says) and the buffer protocol (NumPy and friends on
//! the host). Its fields are typed read-only attributes; `shape`, `strides` and `byte_strides` are
//! tuples, and also zero-copy `memoryview`s (format `q`) of the int64 arrays that the C struct
//! (`rmm_strided_view`, address `c_view_address`, for Cython) points to. `release()` (or leaving a
//! `with` block) lets go of the producer; any use after that raises `ValueError`.
//!
//! DLPack export (`__dlpack__`, `__dlpack_device__`) is zero-copy: the capsule's tensor keeps the
//! view's owner (and so the producer, for a `DeviceBuffer` the buffer and its resource) alive until
//! the consumer calls the deleter.

use std::ffi::{c_int, c_void, CStr};

use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyDict, PyTuple};
use pyo3::{PyTraverseError, PyVisit};
use rmm_core::cuda::{self, Event, EventFlags, Stream};
use rmm_core::view::dlpack::{
    device_type as dt, type_code, DLDevice, DLManagedTensor, DLManagedTensorVersioned,
    DLPACK_FLAG_BITMASK_IS_COPIED,
};
use rmm_core::view::{
    dtype_of_format, item_strides, memory_device, rmm_strided_view, MetaStore, StridedMemoryView,
    ViewOwner, ViewParts,
};
use rmm_core::{AnyResource, DeviceBuffer, MemoryResource};

use crate::buffer::{BufferExport, PyDeviceBuffer};
use crate::error::IntoPyResult;
use crate::hostbuf::{PyBuffer_Release, PyObject_GetBuffer, RawBuffer};
use crate::mr::PyDeviceMemoryResource;
use crate::stream::PyStream;

const VERSIONED: &CStr = c"dltensor_versioned";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";
const LEGACY: &CStr = c"dltensor";
const USED_LEGACY: &CStr = c"used_dltensor";

// ---- metadata in a bytearray, shared with memoryviews -------------------------------------------

/// The view's int64 words in a Python `bytearray` (never resized), so that `memoryview`s of them
/// are zero-copy and keep the words alive after the view is released.
struct PyMeta {
    _keep: Py<PyByteArray>,
    ptr: *mut i64,
    len: usize,
}

// SAFETY: the bytearray is never resized (only read-only memoryviews of it escape), so `ptr` stays
// valid while `obj` lives; `Py` itself is Send + Sync.
unsafe impl Send for PyMeta {}
// SAFETY: as above.
unsafe impl Sync for PyMeta {}

impl MetaStore for PyMeta {
    fn words(&self) -> &[i64] {
        // SAFETY: `len` 8-byte-aligned words at `ptr`, alive with `obj` (see the type's doc).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
    fn words_mut(&mut self) -> &mut [i64] {
        // SAFETY: as above; only the view's constructor writes, before anything else sees the words.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

fn py_meta(py: Python<'_>, ndim: usize) -> PyResult<(Box<dyn MetaStore>, Py<PyByteArray>)> {
    let len = 3 * ndim;
    let obj = PyByteArray::new(py, &vec![0u8; 8 * len + 8]);
    // One spare word: the bytearray's storage is aligned to 8 on CPython's allocators, but align by
    // hand if it ever is not.
    let base = obj.data() as usize;
    let ptr = if len == 0 {
        std::ptr::NonNull::<i64>::dangling().as_ptr()
    } else {
        base.next_multiple_of(8) as *mut i64
    };
    let unbound = obj.unbind();
    Ok((
        Box::new(PyMeta {
            _keep: unbound.clone_ref(py),
            ptr,
            len,
        }),
        unbound,
    ))
}

/// The C struct at a stable address.
struct RawCopy(Box<rmm_strided_view>);

// SAFETY: plain data whose pointers point into the view's immutable metadata (or are NULL once
// released); Python reads it under the GIL, Cython through `c_view_address`.
unsafe impl Send for RawCopy {}
// SAFETY: as above.
unsafe impl Sync for RawCopy {}

// ---- the class --------------------------------------------------------------------------------

/// A typed, strided, read-only description of memory that a producer owns (DLPack, CUDA Array
/// Interface or buffer-protocol object), kept alive until `release()`.
///
/// `StridedMemoryView(obj, stream=None)` is `StridedMemoryView.from_object(obj, stream)`.
#[pyclass(module = "rmm", name = "StridedMemoryView")]
pub(crate) struct PyStridedMemoryView {
    view: Option<StridedMemoryView>,
    /// A stable copy of the C struct for Cython (zeroed at release).
    raw: RawCopy,
    meta: Py<PyByteArray>,
    exporting_obj: Py<PyAny>,
}

impl PyStridedMemoryView {
    fn new(
        py: Python<'_>,
        parts: ViewParts,
        owner: Option<ViewOwner>,
        obj: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let (store, meta) = py_meta(py, parts.shape.len())?;
        let view = StridedMemoryView::with_store(parts, owner, store).into_py_result()?;
        Ok(Self::wrap(view, meta, obj))
    }

    fn wrap(view: StridedMemoryView, meta: Py<PyByteArray>, obj: &Bound<'_, PyAny>) -> Self {
        let raw = RawCopy(Box::new(*view.as_raw()));
        Self {
            view: Some(view),
            raw,
            meta,
            exporting_obj: obj.clone().unbind(),
        }
    }

    fn get(&self) -> PyResult<&StridedMemoryView> {
        self.view.as_ref().ok_or_else(|| {
            PyValueError::new_err("operation forbidden on a released StridedMemoryView")
        })
    }

    fn words_memoryview<'py>(&self, py: Python<'py>, which: usize) -> PyResult<Bound<'py, PyAny>> {
        let v = self.get()?;
        let n = v.ndim();
        let off =
            (v.as_raw().shape as usize).saturating_sub(self.meta.bind(py).data() as usize) / 8;
        let mv = py
            .import("builtins")?
            .getattr("memoryview")?
            .call1((self.meta.bind(py),))?;
        let start = if n == 0 { 0 } else { off + which * n };
        let words = mv.call_method1(
            "__getitem__",
            (pyo3::types::PySlice::new(
                py,
                0,
                (8 * (off + 3 * n)) as isize,
                1,
            ),),
        )?;
        let q = words.call_method1("cast", ("q",))?;
        let part = q.call_method1(
            "__getitem__",
            (pyo3::types::PySlice::new(
                py,
                start as isize,
                (start + n) as isize,
                1,
            ),),
        )?;
        part.call_method0("toreadonly")
    }
}

/// The consumer stream of `stream=`: None, an `rmm` Stream, an int handle, or an object with
/// `__cuda_stream__` (cuda.core), `cuda_stream` (PyTorch) or `ptr` (CuPy).
fn consumer_stream(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Stream>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    let raw: usize = if let Ok(s) = obj.cast::<PyStream>() {
        s.get().stream().as_raw()
    } else if obj.extract::<i64>().is_ok_and(|i| i == -1) {
        NO_SYNC
    } else if let Ok(i) = obj.extract::<usize>() {
        i
    } else if let Ok(p) = obj.call_method0("__cuda_stream__") {
        p.get_item(1)?.extract()?
    } else if let Ok(h) = obj.getattr("cuda_stream") {
        h.extract()?
    } else if let Ok(h) = obj.getattr("ptr") {
        h.extract()?
    } else {
        return Err(PyTypeError::new_err(format!(
            "stream: expected a Stream, an int handle or a stream object, got {}",
            obj.get_type().name()?
        )));
    };
    // SAFETY: a handle the caller vouches for; it is only passed to the driver.
    Ok(Some(unsafe { Stream::from_raw(raw) }))
}

/// `stream=-1`: the consumer asks for no synchronization (DLPack's and cuda.core's meaning).
const NO_SYNC: usize = usize::MAX;

/// The DLPack `stream` argument for a CUDA producer: 1 for the legacy default stream, 2 for the
/// per-thread one, -1 for no synchronization, the handle otherwise (the standard forbids 0).
fn dlpack_stream_arg(stream: Option<Stream>) -> i64 {
    match stream {
        None => 1,
        Some(s) if s.as_raw() == NO_SYNC => -1,
        Some(s) if s.is_default() => 1,
        Some(s) if s.is_per_thread_default() => 2,
        Some(s) => s.as_raw() as i64,
    }
}

/// Makes `consumer` (or the host, when None) wait for the work queued on `producer` so far.
fn order_after(producer: Stream, consumer: Option<Stream>) -> rmm_core::Result<()> {
    let same = |c: Stream| {
        c == producer || (c.is_default() && producer.is_default()) || c.as_raw() == NO_SYNC
    };
    if cuda::is_host_mode() || consumer.is_some_and(same) {
        return Ok(());
    }
    let event = Event::new(EventFlags::DisableTiming)?;
    event.record(producer)?;
    match consumer {
        Some(c) => c.wait_event(&event),
        None => event.synchronize(),
    }
}

/// The capsule `cap` consumed into a view (renamed "used_..." on success).
fn from_capsule(
    py: Python<'_>,
    cap: &Bound<'_, PyAny>,
    obj: &Bound<'_, PyAny>,
) -> PyResult<PyStridedMemoryView> {
    // SAFETY: `cap` is a live object; these calls only read its type and name.
    let name = unsafe {
        if ffi::PyCapsule_CheckExact(cap.as_ptr()) == 0 {
            return Err(PyTypeError::new_err(format!(
                "expected a DLPack capsule, got {}",
                cap.get_type().name()?
            )));
        }
        let name = ffi::PyCapsule_GetName(cap.as_ptr());
        if name.is_null() {
            return Err(
                PyErr::take(py).unwrap_or_else(|| PyTypeError::new_err("a capsule without a name"))
            );
        }
        CStr::from_ptr(name).to_owned()
    };
    let view = if name.as_c_str() == VERSIONED {
        // SAFETY: the name matches, so the pointer is a DLManagedTensorVersioned the capsule owns.
        let t = unsafe { ffi::PyCapsule_GetPointer(cap.as_ptr(), VERSIONED.as_ptr()) }
            as *mut DLManagedTensorVersioned;
        // SAFETY: a live tensor; taken over only on success (the capsule's destructor deletes it otherwise).
        let view = unsafe { borrow_then_take(t, |t| StridedMemoryView::from_dlpack_versioned(t)) }
            .into_py_result()?;
        // SAFETY: renaming marks the capsule consumed, so its destructor leaves the tensor to us.
        unsafe { ffi::PyCapsule_SetName(cap.as_ptr(), USED_VERSIONED.as_ptr()) };
        view
    } else if name.as_c_str() == LEGACY {
        // SAFETY: as above for the legacy struct.
        let t = unsafe { ffi::PyCapsule_GetPointer(cap.as_ptr(), LEGACY.as_ptr()) }
            as *mut DLManagedTensor;
        // SAFETY: as above.
        let view = unsafe { borrow_then_take(t, |t| StridedMemoryView::from_dlpack(t)) }
            .into_py_result()?;
        // SAFETY: as above.
        unsafe { ffi::PyCapsule_SetName(cap.as_ptr(), USED_LEGACY.as_ptr()) };
        view
    } else if name.as_c_str() == USED_VERSIONED || name.as_c_str() == USED_LEGACY {
        return Err(PyValueError::new_err(
            "the DLPack capsule was already consumed",
        ));
    } else {
        return Err(PyTypeError::new_err(format!(
            "not a DLPack capsule (name {:?})",
            name
        )));
    };
    // Move the metadata into a bytearray so that memoryviews of it are zero-copy.
    let parts = ViewParts {
        ptr: view.ptr(),
        shape: view.shape().to_vec(),
        strides: Some(view.strides().to_vec()),
        dtype: view.dtype(),
        device: view.device(),
        readonly: view.readonly(),
        subbyte_padded: true,
    };
    PyStridedMemoryView::new(py, parts, view.owner().cloned(), obj)
}

/// Runs `f` on `t` (which takes it over only when it succeeds).
///
/// # Safety
/// `t` is a live tensor.
unsafe fn borrow_then_take<T>(
    t: *mut T,
    f: impl FnOnce(*mut T) -> rmm_core::Result<StridedMemoryView>,
) -> rmm_core::Result<StridedMemoryView> {
    if t.is_null() {
        return Err(rmm_core::Error::invalid("the DLPack capsule holds NULL"));
    }
    f(t)
}

fn from_dlpack_impl(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    stream: Option<Stream>,
) -> PyResult<PyStridedMemoryView> {
    if !obj.hasattr("__dlpack__")? {
        return Err(PyTypeError::new_err(format!(
            "a {} is neither a DLPack capsule nor has __dlpack__",
            obj.get_type().name()?
        )));
    }
    let device: (i32, i32) = match obj.call_method0("__dlpack_device__") {
        Ok(d) => d.extract()?,
        Err(_) => (dt::CPU, 0),
    };
    let kwargs = PyDict::new(py);
    if matches!(device.0, dt::CUDA | dt::CUDA_MANAGED) {
        kwargs.set_item("stream", dlpack_stream_arg(stream))?;
    }
    kwargs.set_item("max_version", (1, 1))?;
    let cap = match obj.call_method("__dlpack__", (), Some(&kwargs)) {
        Ok(cap) => cap,
        Err(e) if e.is_instance_of::<PyTypeError>(py) => {
            // A producer older than DLPack 1.0 knows no max_version: ask for a legacy capsule.
            kwargs.del_item("max_version")?;
            obj.call_method("__dlpack__", (), Some(&kwargs))?
        }
        Err(e) => return Err(e),
    };
    from_capsule(py, &cap, obj)
}

fn from_cai_impl(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    stream: Option<Stream>,
) -> PyResult<PyStridedMemoryView> {
    // A DeviceBuffer's memory is counted as exported before its interface is read, so it cannot
    // be resized under the view.
    let export = match obj.cast::<PyDeviceBuffer>() {
        Ok(buffer) => Some(BufferExport::new(buffer, &buffer.get().read(py))),
        Err(_) => None,
    };
    let cai = obj.getattr("__cuda_array_interface__")?;
    let get = |k: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
        Ok(cai.get_item(k).ok().filter(|v| !v.is_none()))
    };
    // Versions 0 to 3 are the interface's; a later one may mean fields this reader does not know.
    if let Some(version) = get("version")? {
        match version.extract::<i64>() {
            Ok(0..=3) => {}
            _ => {
                return Err(PyValueError::new_err(format!(
                    "unsupported __cuda_array_interface__ version {} (0 to 3 are known)",
                    version.repr()?
                )))
            }
        }
    }
    if get("mask")?.is_some() {
        return Err(PyBufferError::new_err(
            "masked CUDA arrays are not supported",
        ));
    }
    let (ptr, readonly): (usize, bool) = cai.get_item("data")?.extract()?;
    let shape: Vec<i64> = cai.get_item("shape")?.extract()?;
    let typestr: String = cai.get_item("typestr")?.extract()?;
    let dtype = dtype_of_format(&typestr).into_py_result()?;
    let itemsize = rmm_core::view::itemsize_of(dtype, false).into_py_result()?;
    let strides = match get("strides")? {
        Some(s) => Some(item_strides(&s.extract::<Vec<i64>>()?, itemsize).into_py_result()?),
        None => None,
    };
    if let Some(s) = get("stream")? {
        let raw: usize = s.extract()?;
        if raw == 0 {
            return Err(PyValueError::new_err(
                "__cuda_array_interface__ stream 0 is disallowed (ambiguous)",
            ));
        }
        // SAFETY: the producer's stream handle, only passed to the driver.
        let producer = unsafe { Stream::from_raw(raw) };
        py.detach(|| order_after(producer, stream))
            .into_py_result()?;
    }
    let device = if cuda::is_host_mode() {
        DLDevice {
            device_type: dt::CPU,
            device_id: 0,
        }
    } else {
        let id = cuda::current_device().into_py_result()?;
        let kind = if cuda::memory::is_managed(ptr as *const u8) {
            dt::CUDA_MANAGED
        } else {
            dt::CUDA
        };
        DLDevice {
            device_type: kind,
            device_id: id,
        }
    };
    let parts = ViewParts {
        ptr,
        shape,
        strides,
        dtype,
        device,
        readonly,
        subbyte_padded: false,
    };
    let owner = match export {
        Some(export) => ViewOwner::new(export),
        None => ViewOwner::new(obj.clone().unbind()),
    };
    PyStridedMemoryView::new(py, parts, Some(owner), obj)
}

/// An exported `Py_buffer`, released (with the GIL) when the last view of it goes.
struct ExportedBuffer(Box<RawBuffer>);

// SAFETY: the Py_buffer is only released in drop, with the GIL taken there.
unsafe impl Send for ExportedBuffer {}
// SAFETY: never accessed through a shared reference.
unsafe impl Sync for ExportedBuffer {}

impl Drop for ExportedBuffer {
    fn drop(&mut self) {
        // SAFETY: filled by a successful PyObject_GetBuffer; released once, holding the GIL.
        Python::attach(|_| unsafe { PyBuffer_Release(&mut *self.0) });
    }
}

fn from_buffer_impl(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<PyStridedMemoryView> {
    // PyBUF_RECORDS_RO: strides and format; `readonly` says whether it may be written.
    const RECORDS_RO: c_int = 0x0010 | 0x0008 | 0x0004;
    // SAFETY: an all-zero Py_buffer is a valid out-parameter (plain pointers and integers).
    let mut raw: Box<RawBuffer> = Box::new(unsafe { std::mem::zeroed() });
    // SAFETY: `obj` is live (GIL held); `raw` is a valid Py_buffer to fill.
    if unsafe { PyObject_GetBuffer(obj.as_ptr(), &mut *raw, RECORDS_RO) } != 0 {
        return Err(PyErr::fetch(py));
    }
    let exported = ExportedBuffer(raw);
    let r = &*exported.0;
    if !r.suboffsets.is_null() {
        return Err(PyBufferError::new_err(
            "buffers with suboffsets (PIL-style) are not supported",
        ));
    }
    let format = if r.format.is_null() {
        "B".to_owned()
    } else {
        // SAFETY: NUL-terminated, alive until release (PyBUF_FORMAT).
        unsafe { CStr::from_ptr(r.format) }
            .to_string_lossy()
            .into_owned()
    };
    let dtype = dtype_of_format(&format).into_py_result()?;
    let itemsize = rmm_core::view::itemsize_of(dtype, false).into_py_result()?;
    if itemsize != r.itemsize as i64 {
        return Err(PyBufferError::new_err(format!(
            "format {format:?} has {itemsize} bytes per item, the buffer {}",
            r.itemsize
        )));
    }
    let ndim = usize::try_from(r.ndim).map_err(|_| PyBufferError::new_err("negative ndim"))?;
    let read = |p: *const ffi::Py_ssize_t| -> Vec<i64> {
        // SAFETY: PyBUF_STRIDES fills `ndim` shape and stride entries (strides may be NULL).
        (0..ndim).map(|i| unsafe { *p.add(i) } as i64).collect()
    };
    let shape = if ndim == 0 { Vec::new() } else { read(r.shape) };
    let strides = if ndim == 0 || r.strides.is_null() {
        None
    } else {
        Some(item_strides(&read(r.strides), itemsize).into_py_result()?)
    };
    let parts = ViewParts {
        ptr: r.buf as usize,
        shape,
        strides,
        dtype,
        device: DLDevice {
            device_type: dt::CPU,
            device_id: 0,
        },
        readonly: r.readonly != 0,
        subbyte_padded: false,
    };
    PyStridedMemoryView::new(py, parts, Some(ViewOwner::new(exported)), obj)
}

// ---- DLPack export --------------------------------------------------------------------------------

unsafe extern "C" fn versioned_capsule_destructor(cap: *mut ffi::PyObject) {
    // SAFETY: called by Python with the capsule; an unconsumed one still owns its tensor.
    unsafe {
        if ffi::PyCapsule_IsValid(cap, VERSIONED.as_ptr()) == 1 {
            let t =
                ffi::PyCapsule_GetPointer(cap, VERSIONED.as_ptr()) as *mut DLManagedTensorVersioned;
            if let Some(deleter) = t.as_ref().and_then(|t| t.deleter) {
                deleter(t);
            }
        }
    }
}

unsafe extern "C" fn legacy_capsule_destructor(cap: *mut ffi::PyObject) {
    // SAFETY: as above, for a legacy capsule.
    unsafe {
        if ffi::PyCapsule_IsValid(cap, LEGACY.as_ptr()) == 1 {
            let t = ffi::PyCapsule_GetPointer(cap, LEGACY.as_ptr()) as *mut DLManagedTensor;
            if let Some(deleter) = t.as_ref().and_then(|t| t.deleter) {
                deleter(t);
            }
        }
    }
}

/// A capsule of `view` as the consumer asked: versioned when `max_version` allows 1.x (its minor
/// capped at ours), legacy otherwise.
fn capsule<'py>(
    py: Python<'py>,
    view: &StridedMemoryView,
    max_version: Option<(u32, u32)>,
    flags: u64,
) -> PyResult<Bound<'py, PyAny>> {
    let (ptr, name, destructor): (*mut c_void, &CStr, unsafe extern "C" fn(*mut ffi::PyObject)) =
        match max_version {
            Some((major, minor)) if major >= 1 => {
                let t = view.to_dlpack_versioned(flags);
                if major == 1 {
                    // SAFETY: a fresh tensor of ours.
                    unsafe { (*t).version.minor = (*t).version.minor.min(minor) };
                }
                (t.cast(), VERSIONED, versioned_capsule_destructor)
            }
            _ => (view.to_dlpack().cast(), LEGACY, legacy_capsule_destructor),
        };
    // SAFETY: a valid pointer and a static name; the destructor deletes an unconsumed tensor.
    let cap = unsafe { ffi::PyCapsule_New(ptr, name.as_ptr(), Some(destructor)) };
    if cap.is_null() {
        // SAFETY: the capsule was not made: delete the tensor ourselves.
        unsafe {
            if name == VERSIONED {
                let t = ptr as *mut DLManagedTensorVersioned;
                ((*t).deleter.expect("ours has a deleter"))(t);
            } else {
                let t = ptr as *mut DLManagedTensor;
                ((*t).deleter.expect("ours has a deleter"))(t);
            }
        }
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference from PyCapsule_New.
    Ok(unsafe { Bound::from_owned_ptr(py, cap) })
}

fn parse_max_version(v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<(u32, u32)>> {
    match v.filter(|v| !v.is_none()) {
        None => Ok(None),
        Some(v) => v
            .extract::<(u32, u32)>()
            .map(Some)
            .map_err(|_| PyTypeError::new_err("max_version must be a (major, minor) tuple")),
    }
}

fn check_dl_device(own: DLDevice, dl_device: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    if let Some(d) = dl_device.filter(|d| !d.is_none()) {
        let (t, id): (i32, i32) = d.extract()?;
        if (t, id) != (own.device_type, own.device_id) {
            return Err(PyBufferError::new_err(format!(
                "cannot export to device ({t}, {id}): the data is on ({}, {}) and cross-device copies are not supported",
                own.device_type, own.device_id
            )));
        }
    }
    Ok(())
}

#[pymethods]
impl PyStridedMemoryView {
    #[new]
    #[pyo3(signature = (obj, stream = None))]
    fn py_new(
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Self::from_object_impl(py, obj, stream)
    }

    /// A view of `obj`: DLPack if it has `__dlpack__`, else the CUDA Array Interface, else the
    /// buffer protocol. `stream` is the consumer's stream: an rmm `Stream`, an int handle, a
    /// cuda.core/CuPy/PyTorch stream, -1 for no synchronization, or None (the default stream for
    /// DLPack, a host synchronization for the CUDA Array Interface).
    #[staticmethod]
    #[pyo3(signature = (obj, stream = None))]
    fn from_object(
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Self::from_object_impl(py, obj, stream)
    }

    /// A view through DLPack (`obj.__dlpack__`), or of a DLPack capsule itself.
    #[staticmethod]
    #[pyo3(signature = (obj, stream = None))]
    fn from_dlpack(
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let stream = consumer_stream(stream)?;
        // SAFETY: reads the object's type only.
        if unsafe { ffi::PyCapsule_CheckExact(obj.as_ptr()) } == 1 {
            return from_capsule(py, obj, obj);
        }
        from_dlpack_impl(py, obj, stream)
    }

    /// A view through `obj.__cuda_array_interface__` (v3; its stream is waited for).
    #[staticmethod]
    #[pyo3(signature = (obj, stream = None))]
    fn from_cuda_array_interface(
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        from_cai_impl(py, obj, consumer_stream(stream)?)
    }

    /// A view of host memory through the buffer protocol.
    #[staticmethod]
    fn from_buffer(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        from_buffer_impl(py, obj)
    }

    /// Address of element `[0, ..., 0]`.
    #[getter]
    fn ptr(&self) -> PyResult<usize> {
        Ok(self.get()?.ptr())
    }

    /// Number of dimensions.
    #[getter]
    fn ndim(&self) -> PyResult<usize> {
        Ok(self.get()?.ndim())
    }

    /// Extents (a tuple).
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.get()?.shape())
    }

    /// Strides in items (a tuple).
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.get()?.strides())
    }

    /// Strides in bytes (a tuple).
    #[getter]
    fn byte_strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.get()?.byte_strides())
    }

    /// The shape as a read-only, zero-copy `memoryview` (format `q`) of the int64 array the C
    /// struct points to.
    #[getter]
    fn shape_memoryview<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.words_memoryview(py, 0)
    }

    /// The strides in items as a zero-copy `memoryview`.
    #[getter]
    fn strides_memoryview<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.words_memoryview(py, 1)
    }

    /// The strides in bytes as a zero-copy `memoryview`.
    #[getter]
    fn byte_strides_memoryview<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.words_memoryview(py, 2)
    }

    /// Bytes per item.
    #[getter]
    fn itemsize(&self) -> PyResult<i64> {
        Ok(self.get()?.itemsize())
    }

    /// The number of items.
    #[getter]
    fn size(&self) -> PyResult<i64> {
        Ok(self.get()?.len())
    }

    /// The DLPack dtype as `(code, bits, lanes)`.
    #[getter]
    fn dl_dtype(&self) -> PyResult<(u8, u8, u16)> {
        let d = self.get()?.dtype();
        Ok((d.code, d.bits, d.lanes))
    }

    /// The `"<f4"`-style format string.
    #[getter]
    fn format(&self) -> PyResult<String> {
        Ok(self.get()?.format().to_owned())
    }

    /// The NumPy dtype (`ml_dtypes`' for bfloat16 and the float8s when installed), or None.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let v = self.get()?;
        let Ok(np) = py.import("numpy") else {
            return Ok(None);
        };
        let format = v.format();
        if v.dtype().code == type_code::OPAQUE_HANDLE || v.dtype().lanes != 1 {
            return Ok(np
                .call_method1("dtype", (format!("V{}", v.itemsize()),))
                .ok());
        }
        if let Ok(d) = np.call_method1("dtype", (format,)) {
            return Ok(Some(d));
        }
        Ok(py
            .import("ml_dtypes")
            .ok()
            .and_then(|m| m.getattr(format).ok())
            .and_then(|t| np.call_method1("dtype", (t,)).ok()))
    }

    /// DLPack `DLDeviceType` (1 CPU, 2 CUDA, 3 CUDA host, 13 CUDA managed).
    #[getter]
    fn device_type(&self) -> PyResult<i32> {
        Ok(self.get()?.device().device_type)
    }

    /// The device ordinal.
    #[getter]
    fn device_id(&self) -> PyResult<i32> {
        Ok(self.get()?.device().device_id)
    }

    /// True when CUDA kernels can read the data.
    #[getter]
    fn is_device_accessible(&self) -> PyResult<bool> {
        Ok(self.get()?.device_accessible())
    }

    /// The same as `is_device_accessible` (the C struct's name).
    #[getter]
    fn device_accessible(&self) -> PyResult<bool> {
        self.is_device_accessible()
    }

    /// True when the data must not be written through this view.
    #[getter]
    fn readonly(&self) -> PyResult<bool> {
        Ok(self.get()?.readonly())
    }

    /// True for row-major contiguous data.
    #[getter]
    fn is_c_contiguous(&self) -> PyResult<bool> {
        Ok(self.get()?.is_c_contiguous())
    }

    /// True for column-major contiguous data.
    #[getter]
    fn is_f_contiguous(&self) -> PyResult<bool> {
        Ok(self.get()?.is_f_contiguous())
    }

    /// The object the view was made from (None once released).
    #[getter]
    fn exporting_obj(&self, py: Python<'_>) -> Py<PyAny> {
        self.exporting_obj.clone_ref(py)
    }

    /// True once released.
    #[getter]
    fn released(&self) -> bool {
        self.view.is_none()
    }

    /// The C struct's validity word: non-zero while acquired, 0 once released.
    #[getter]
    fn generation(&self) -> u64 {
        self.raw.0.generation
    }

    /// Address of the view's C struct (`rmm_strided_view`, see `rmm/librmm/strided_view.pxd`), for
    /// Cython and ctypes; valid while this object lives (its `generation` is 0 once released).
    #[getter]
    fn c_view_address(&self) -> usize {
        &*self.raw.0 as *const rmm_strided_view as usize
    }

    /// For a view from `to_device`: the address of its C struct in device memory, else 0.
    #[getter]
    fn device_copy_address(&self) -> PyResult<usize> {
        Ok(self.get()?.as_raw().device_copy as usize)
    }

    /// A view of the same memory whose C struct, shape, strides and format are also in memory from
    /// `mr` (default: the current device resource), uploaded on `stream`; `device_copy_address` is
    /// that struct (a kernel argument).
    #[pyo3(signature = (mr = None, stream = None))]
    fn to_device(
        &self,
        py: Python<'_>,
        mr: Option<Bound<'_, PyDeviceMemoryResource>>,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let v = self.get()?;
        let resource: AnyResource = match mr {
            Some(mr) => mr.get().inner.clone(),
            None => crate::registry::current_resource(py)?,
        };
        let stream = consumer_stream(stream)?.unwrap_or(Stream::DEFAULT);
        let (store, meta) = py_meta(py, v.ndim())?;
        let on_device = py
            .detach(|| v.to_device_with_store(resource, stream, store))
            .into_py_result()?;
        Ok(Self::wrap(on_device, meta, self.exporting_obj.bind(py)))
    }

    /// Lets go of the producer and frees the metadata (memoryviews already taken stay valid).
    /// Releasing twice raises ValueError.
    fn release(&mut self, py: Python<'_>) -> PyResult<()> {
        if self.view.is_none() {
            return Err(PyValueError::new_err(
                "the StridedMemoryView was already released",
            ));
        }
        self.clear(py);
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// The exporting object, the metadata and, when this view alone holds it, the Python object
    /// its owner keeps alive (the producer, or a DeviceBuffer's export), for the cycle collector.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.exporting_obj)?;
        visit.call(&self.meta)?;
        // A shared owner (a capsule exported from this view holds it too) is not this view's alone.
        if let Some(owner) = self
            .view
            .as_ref()
            .and_then(|v| v.owner())
            .filter(|o| o.holders() == 1)
        {
            if let Some(producer) = owner.downcast_ref::<Py<PyAny>>() {
                visit.call(producer)?;
            } else if let Some(export) = owner.downcast_ref::<BufferExport>() {
                visit.call(export.buffer())?;
            }
        }
        Ok(())
    }

    /// Releases the view (the collector breaking a cycle through it).
    fn __clear__(&mut self) {
        Python::attach(|py| self.clear(py));
    }

    fn __exit__(
        &mut self,
        py: Python<'_>,
        _t: &Bound<'_, PyAny>,
        _v: &Bound<'_, PyAny>,
        _tb: &Bound<'_, PyAny>,
    ) {
        self.clear(py);
    }

    /// DLPack export (zero-copy; the capsule keeps the producer alive). `copy=True` raises
    /// BufferError (a view owns no memory to copy into).
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<&Bound<'py, PyAny>>,
        dl_device: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = stream;
        let v = self.get()?;
        check_dl_device(v.device(), dl_device)?;
        if copy == Some(true) {
            return Err(PyBufferError::new_err(
                "StridedMemoryView cannot export a copy (copy=True)",
            ));
        }
        capsule(py, v, parse_max_version(max_version)?, 0)
    }

    fn __dlpack_device__(&self) -> PyResult<(i32, i32)> {
        let d = self.get()?.device();
        Ok((d.device_type, d.device_id))
    }

    fn __repr__(&self) -> String {
        match &self.view {
            None => "<rmm.StridedMemoryView (released)>".to_owned(),
            Some(v) => format!(
                "<rmm.StridedMemoryView ptr={:#x} shape={:?} strides={:?} format={:?} device=({}, {}){}>",
                v.ptr(),
                v.shape(),
                v.strides(),
                v.format(),
                v.device().device_type,
                v.device().device_id,
                if v.readonly() { " readonly" } else { "" }
            ),
        }
    }
}

impl PyStridedMemoryView {
    /// The release: the view (and with it the producer's owner), the C struct, the exporting object.
    fn clear(&mut self, py: Python<'_>) {
        let view = self.view.take();
        *self.raw.0 = rmm_strided_view::EMPTY;
        self.exporting_obj = py.None();
        drop(view);
    }

    fn from_object_impl(
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let s = consumer_stream(stream)?;
        let has_cai = obj.hasattr("__cuda_array_interface__")?;
        if obj.hasattr("__dlpack__")? {
            return match from_dlpack_impl(py, obj, s) {
                // CuPy 14 exports negative strides divided as unsigned numbers (its itemsize is a
                // size_t), which the view refuses as overflowing; its CUDA Array Interface has them
                // right, so a producer that offers both is read through that instead.
                Err(e) if has_cai && e.is_instance_of::<PyValueError>(py) => {
                    from_cai_impl(py, obj, s)
                }
                other => other,
            };
        }
        if has_cai {
            return from_cai_impl(py, obj, s);
        }
        from_buffer_impl(py, obj).map_err(|e| {
            if e.is_instance_of::<PyTypeError>(py) {
                PyTypeError::new_err(format!(
                    "cannot view a {}: it has no __dlpack__, __cuda_array_interface__ or buffer protocol",
                    obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                ))
            } else {
                e
            }
        })
    }
}

// ---- DeviceBuffer's DLPack ----------------------------------------------------------------------

/// `DeviceBuffer.__dlpack_device__()`: where the memory is (`rmm_core::view::memory_device`).
pub(crate) fn buffer_dlpack_device(b: &DeviceBuffer) -> (i32, i32) {
    let d = memory_device(b.as_ptr(), b.memory_resource().access(), b.device());
    (d.device_type, d.device_id)
}

/// `DeviceBuffer.__dlpack__(stream=None, max_version=None, dl_device=None, copy=None)`: a uint8 1-D
/// tensor of `nbytes`, zero-copy (the capsule keeps the buffer, and so its resource, alive), or of a
/// new copy for `copy=True` (flagged IS_COPIED). A CUDA consumer's `stream` waits for the buffer's
/// stream through an event (-1: no synchronization; 0, which the standard disallows, is taken as
/// CUDA's legacy default stream, as older PyTorch consumers mean it).
pub(crate) fn buffer_dlpack<'py>(
    slf: &Bound<'py, PyDeviceBuffer>,
    stream: Option<&Bound<'py, PyAny>>,
    max_version: Option<&Bound<'py, PyAny>>,
    dl_device: Option<&Bound<'py, PyAny>>,
    copy: Option<bool>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = slf.py();
    let max_version = parse_max_version(max_version)?;
    let (owner_obj, flags) = if copy == Some(true) {
        let copied = Bound::new(py, slf.get().copy_for_export(py)?)?;
        (copied, DLPACK_FLAG_BITMASK_IS_COPIED)
    } else {
        (slf.clone(), 0)
    };
    // Held until the export is counted, so no resize moves the memory in between.
    let b = owner_obj.get().read(py);
    let parts = ViewParts::bytes_of(&b);
    let device = parts.device;
    check_dl_device(device, dl_device)?;
    if let Some(s) = stream.filter(|s| !s.is_none()) {
        let raw: i64 = s
            .extract()
            .map_err(|_| PyTypeError::new_err("stream must be an int or None"))?;
        if device_type_is_cuda(device.device_type) {
            match raw {
                // -1: the consumer asks for no synchronization. 0 is disallowed by the standard but
                // older consumers (PyTorch before 2.1) pass their default stream's handle, 0: the
                // legacy default stream, which is what it means to CUDA.
                -1 => {}
                r if r < -1 => return Err(PyValueError::new_err(format!("invalid stream {r}"))),
                r => {
                    // SAFETY: the consumer's stream handle, only passed to the driver.
                    let consumer = unsafe { Stream::from_raw(r as usize) };
                    let producer = b.stream();
                    py.detach(|| order_after(producer, Some(consumer)))
                        .into_py_result()?;
                }
            }
        }
    }
    let owner = ViewOwner::new(BufferExport::new(&owner_obj, &b));
    drop(b);
    let view = StridedMemoryView::new(parts, Some(owner)).into_py_result()?;
    capsule(py, &view, max_version, flags)
}

fn device_type_is_cuda(t: i32) -> bool {
    matches!(t, dt::CUDA | dt::CUDA_MANAGED)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStridedMemoryView>()?;
    Ok(())
}
