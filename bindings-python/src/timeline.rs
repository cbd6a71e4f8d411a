//! The memory timeline for Python (`rmm.timeline`): librmm's recorder (`rmm_timeline_*`) started,
//! stopped and read from Python, and the stack provider that gives each recorded allocation the
//! Python frames of its caller.
//!
//! Frames are read on the allocating thread: at once when it holds the GIL (CuPy's allocation hook
//! runs so); from a thread-local where calls of this module that release the GIL before they
//! allocate (`DeviceBuffer`, `DeviceMemoryResource.allocate`) leave them first
//! ([`frames_for_detach`]); otherwise, on a Python thread that released the GIL (PyTorch's
//! operators release it around their work, allocations included), by taking the GIL back for the
//! walk. Threads that Python does not know (C++ or Rust threads) get no Python frames (their
//! native stack, if asked for, is recorded instead). Taking the GIL back inside an allocation can
//! deadlock only if the allocating code holds a lock that a thread holding the GIL waits for; with
//! `python_stacks=False` the provider is not installed at all.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CString};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rmm_core::registry::recording::{RMM_TIMELINE_CLEAR, RMM_TIMELINE_NATIVE_STACKS};
use rmm_core::timeline::Snapshot;

use crate::error::IntoPyResult;
use crate::native::{self, TimelineFrameSink};

/// Python frames deeper than this are left out.
const MAX_FRAMES: usize = 128;

/// One Python frame, ready for the C sink.
#[derive(Clone)]
struct PyFrame {
    filename: CString,
    line: u32,
    name: CString,
}

/// Whether the last `_timeline_start` asked for Python frames (the provider is installed then).
static PYTHON_STACKS: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Frames left by a call that released the GIL before allocating.
    static LEFT: RefCell<Option<Vec<PyFrame>>> = const { RefCell::new(None) };
}

fn c_text(s: String) -> CString {
    CString::new(s.replace('\0', "?")).unwrap_or_default()
}

/// The calling thread's Python frames, innermost first (the thread holds the GIL). The exception
/// state of the thread is left as it was.
fn frames_now(py: Python<'_>) -> Vec<PyFrame> {
    let saved = PyErr::take(py);
    let walk = || -> PyResult<Vec<PyFrame>> {
        let mut frames = Vec::new();
        let mut frame = py.import("sys")?.call_method1("_getframe", (0,))?;
        while !frame.is_none() && frames.len() < MAX_FRAMES {
            let code = frame.getattr("f_code")?;
            frames.push(PyFrame {
                filename: c_text(code.getattr("co_filename")?.extract()?),
                line: frame
                    .getattr("f_lineno")?
                    .extract::<Option<u32>>()?
                    .unwrap_or(0),
                name: c_text(code.getattr("co_name")?.extract()?),
            });
            frame = frame.getattr("f_back")?;
        }
        Ok(frames)
    };
    let frames = walk().unwrap_or_default();
    if let Some(e) = saved {
        e.restore(py);
    }
    frames
}

/// Leaves the caller's Python frames for the provider while the returned guard lives, when the
/// timeline records: for calls that release the GIL and then allocate.
pub(crate) fn frames_for_detach(py: Python<'_>) -> LeftFrames {
    // SAFETY: takes nothing, reads an atomic.
    if !PYTHON_STACKS.load(Ordering::Relaxed) || unsafe { native::rmm_timeline_is_recording() } == 0
    {
        return LeftFrames(false);
    }
    let frames = frames_now(py);
    LEFT.with(|left| *left.borrow_mut() = Some(frames));
    LeftFrames(true)
}

/// Clears the frames [`frames_for_detach`] left, when dropped.
pub(crate) struct LeftFrames(bool);

impl Drop for LeftFrames {
    fn drop(&mut self) {
        if self.0 {
            let _ = LEFT.try_with(|left| left.borrow_mut().take());
        }
    }
}

extern "C" {
    /// CPython's "does this thread hold the GIL" (exported by every CPython 3.x; outside the limited
    /// API's headers, so declared here).
    fn PyGILState_Check() -> c_int;
}

/// The stack provider librmm calls inside each recorded allocation (`rmm_timeline_stack_fn`).
unsafe extern "C" fn python_stack(
    _context: *mut c_void,
    sink: Option<TimelineFrameSink>,
    sink_context: *mut c_void,
) -> c_int {
    let Some(sink) = sink else { return 0 };
    let frames = std::panic::catch_unwind(|| {
        // SAFETY: asks whether this thread holds the GIL; callable from any thread.
        if unsafe { PyGILState_Check() } == 1 {
            return Some(Python::attach(frames_now));
        }
        if let Some(left) = LEFT.try_with(|left| left.borrow().clone()).ok().flatten() {
            return Some(left);
        }
        // SAFETY: reads this thread's Python thread state, if it has one; callable without the GIL.
        if unsafe { pyo3::ffi::PyGILState_GetThisThreadState() }.is_null() {
            return None; // not a Python thread (C++ or Rust threads): no Python frames
        }
        // A Python thread that released the GIL to allocate (PyTorch's operators do): wait for it.
        Python::try_attach(frames_now)
    })
    .ok()
    .flatten();
    let Some(frames) = frames.filter(|f| !f.is_empty()) else {
        return 0;
    };
    for f in &frames {
        // SAFETY: librmm's sink, with NUL-terminated strings alive for the call.
        unsafe { sink(sink_context, f.filename.as_ptr(), f.line, f.name.as_ptr()) };
    }
    1
}

/// Turns librmm's recorder on (see `rmm.timeline.start`).
#[pyfunction]
#[pyo3(signature = (max_entries, native_stacks, python_stacks, clear, dump_on_oom = None))]
fn _timeline_start(
    py: Python<'_>,
    max_entries: u64,
    native_stacks: bool,
    python_stacks: bool,
    clear: bool,
    dump_on_oom: Option<PathBuf>,
) -> PyResult<()> {
    let path = dump_on_oom
        .map(|p| CString::new(p.into_os_string().into_encoded_bytes()))
        .transpose()
        .map_err(|_| PyValueError::new_err("dump_on_oom: a path with a NUL character"))?;
    let mut flags = 0;
    if native_stacks {
        flags |= RMM_TIMELINE_NATIVE_STACKS;
    }
    if clear {
        flags |= RMM_TIMELINE_CLEAR;
    }
    let provider: Option<native::TimelineStackFn> = python_stacks.then_some(python_stack);
    native::call("rmm_timeline_set_stack_provider", |err| {
        // SAFETY: `python_stack` may be called from any thread with a NULL context, for the life
        // of this module (which is never unloaded).
        unsafe { native::rmm_timeline_set_stack_provider(provider, std::ptr::null_mut(), err) }
    })
    .into_py_result()?;
    PYTHON_STACKS.store(python_stacks, Ordering::Relaxed);
    let path_ptr: *const c_char = path.as_ref().map_or(std::ptr::null(), |p| p.as_ptr());
    let path_addr = path_ptr as usize;
    py.detach(|| {
        native::call("rmm_timeline_start", |err| {
            // SAFETY: the path is NULL or a NUL-terminated string alive for the call.
            unsafe {
                native::rmm_timeline_start(max_entries, flags, path_addr as *const c_char, err)
            }
        })
    })
    .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Turns librmm's recorder off (see `rmm.timeline.stop`).
#[pyfunction]
fn _timeline_stop(py: Python<'_>) -> PyResult<()> {
    py.detach(|| {
        // SAFETY: a valid error out-pointer.
        native::call("rmm_timeline_stop", |err| unsafe {
            native::rmm_timeline_stop(err)
        })
    })
    .into_py_result()
}

/// True while librmm's recorder is on.
#[pyfunction]
fn _timeline_is_recording() -> bool {
    // SAFETY: takes nothing.
    unsafe { native::rmm_timeline_is_recording() != 0 }
}

/// Forgets what librmm's recorder holds.
#[pyfunction]
fn _timeline_clear() {
    // SAFETY: takes nothing.
    unsafe { native::rmm_timeline_clear() }
}

/// The snapshot as bytes: format 0 pickle, 1 JSON, 2 RMM's CSV log.
#[pyfunction]
fn _timeline_snapshot(py: Python<'_>, format: c_int) -> PyResult<Py<PyBytes>> {
    let (mut data, mut length) = (std::ptr::null_mut::<c_void>(), 0usize);
    let (data_out, length_out) = (
        &mut data as *mut *mut c_void as usize,
        &mut length as *mut usize as usize,
    );
    py.detach(|| {
        native::call("rmm_timeline_snapshot", |err| {
            // SAFETY: valid out-pointers (the addresses of the locals above).
            unsafe {
                native::rmm_timeline_snapshot(
                    format,
                    data_out as *mut *mut c_void,
                    length_out as *mut usize,
                    err,
                )
            }
        })
    })
    .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let bytes = if data.is_null() {
        PyBytes::new(py, &[])
    } else {
        // SAFETY: librmm wrote `length` bytes at `data`, ours until freed just below.
        PyBytes::new(py, unsafe {
            std::slice::from_raw_parts(data.cast::<u8>(), length)
        })
    };
    // SAFETY: what rmm_timeline_snapshot gave, given back once.
    unsafe { native::rmm_timeline_bytes_free(data, length) };
    Ok(bytes.unbind())
}

/// Checks that `data` is a readable snapshot (pickle or JSON), with rmm-core's typed reader: a
/// truncated or corrupt file, or one whose pickle names classes or calls, is a ValueError that
/// says where and why. Returns "pickle" or "json".
#[pyfunction]
fn _timeline_check(py: Python<'_>, data: &[u8]) -> PyResult<&'static str> {
    let format = if data.iter().find(|b| !b.is_ascii_whitespace()) == Some(&0x80) {
        "pickle"
    } else {
        "json"
    };
    py.detach(|| Snapshot::from_bytes(data).map(|_| format))
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_timeline_start, m)?)?;
    m.add_function(wrap_pyfunction!(_timeline_stop, m)?)?;
    m.add_function(wrap_pyfunction!(_timeline_is_recording, m)?)?;
    m.add_function(wrap_pyfunction!(_timeline_clear, m)?)?;
    m.add_function(wrap_pyfunction!(_timeline_snapshot, m)?)?;
    m.add_function(wrap_pyfunction!(_timeline_check, m)?)?;
    Ok(())
}
