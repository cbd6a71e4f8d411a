//! The one place where `rmm_core::Error` becomes a Python exception.
//!
//! | core error | Python exception |
//! | --- | --- |
//! | `OutOfMemory` | `MemoryError` (as RMM raises for `rmm::out_of_memory`) |
//! | `InvalidArgument` | `ValueError` |
//! | `Cuda`, `NoDriver`, `NoDevice`, `Unsupported` | `RuntimeError` |
//! | `Cuda` from an allocation | `MemoryError` (RMM's `RMM_CUDA_TRY_ALLOC` throws `rmm::bad_alloc`) |
//!
//! The message is the core error's `Display` text, so Python sees the same words as Rust and C++,
//! behind the prefix of RMM's C++ exceptions (`RMM failure at: `, `CUDA error at: `, and
//! `std::bad_alloc: out_of_memory: ` before an out-of-memory one), where RMM's file and line are
//! `rmm-rs`: callers that match RMM's texts (cudf-polars looks for "RMM failure") keep working.
//!
//! A Python callback that a resource calls (`CallbackMemoryResource`, `FailureCallbackResourceAdaptor`)
//! may raise: the exception is parked here ([`park`]) while the core unwinds with a plain error, and
//! the binding call that started the operation raises it instead of the core error, translated as
//! RMM translates a callback's exception: `MemoryError` stays, anything else becomes `RuntimeError`
//! with the same message.

use std::cell::RefCell;

use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::PyErr;
use rmm_core::Error;

thread_local! {
    /// The exception a Python callback raised during the core call in progress on this thread.
    static PARKED: RefCell<Option<PyErr>> = const { RefCell::new(None) };
}

/// Keeps `error` (raised by a Python callback inside a core call on this thread) until the binding
/// that made the call converts the core's error; a later exception replaces an earlier one.
pub(crate) fn park(error: PyErr) {
    PARKED.with(|p| *p.borrow_mut() = Some(error));
}

/// Forgets an exception parked by an earlier operation that recovered without failing (a pool that
/// retried with its upstream, say); called when a binding starts an operation that may park one.
pub(crate) fn clear_parked() {
    PARKED.with(|p| p.borrow_mut().take());
}

/// The parked exception as RMM raises a callback's exception: `MemoryError` as is, anything else
/// (any `BaseException`) as `RuntimeError` with its message.
fn take_parked() -> Option<PyErr> {
    let parked = PARKED.with(|p| p.borrow_mut().take())?;
    Some(pyo3::Python::attach(|py| {
        if parked.is_instance_of::<PyMemoryError>(py) {
            parked
        } else {
            PyRuntimeError::new_err(parked.value(py).to_string())
        }
    }))
}

/// The Python exception for a core error.
pub(crate) fn to_py_err(error: Error) -> PyErr {
    if let Some(parked) = take_parked() {
        return parked;
    }
    let message = rmm_message(&error);
    match error {
        Error::OutOfMemory { .. } => PyMemoryError::new_err(message),
        Error::InvalidArgument(_) => PyValueError::new_err(message),
        Error::Cuda { .. } | Error::NoDriver(_) | Error::NoDevice(_) | Error::Unsupported(_) => {
            PyRuntimeError::new_err(message)
        }
    }
}

/// The text of a core error as RMM's exceptions word theirs (see the module's documentation).
pub(crate) fn rmm_message(error: &Error) -> String {
    match error {
        Error::OutOfMemory { .. } => {
            format!("std::bad_alloc: out_of_memory: RMM failure at: rmm-rs: {error}")
        }
        Error::Cuda { .. } => format!("CUDA error at: rmm-rs: {error}"),
        _ => format!("RMM failure at: rmm-rs: {error}"),
    }
}

/// The Python exception for a core error of an allocation: as [`to_py_err`], except that a CUDA
/// error is a `MemoryError` too. RMM's resources wrap every CUDA call of an allocation in
/// `RMM_CUDA_TRY_ALLOC`, which throws `rmm::bad_alloc` (a `std::bad_alloc`, so Cython raises
/// `MemoryError`) whatever the CUDA error: a pool destroyed under `CudaAsyncViewMemoryResource`, say.
pub(crate) fn to_py_alloc_err(error: Error) -> PyErr {
    match error {
        Error::Cuda { .. } if !has_parked() => {
            PyMemoryError::new_err(format!("std::bad_alloc: {}", rmm_message(&error)))
        }
        other => to_py_err(other),
    }
}

fn has_parked() -> bool {
    PARKED.with(|p| p.borrow().is_some())
}

/// `.into_py_result()` on a core `Result`: the idiom every binding method ends with;
/// `.into_py_alloc_result()` for the calls that allocate (see [`to_py_alloc_err`]).
pub(crate) trait IntoPyResult<T> {
    fn into_py_result(self) -> pyo3::PyResult<T>;
    fn into_py_alloc_result(self) -> pyo3::PyResult<T>;
}

impl<T> IntoPyResult<T> for rmm_core::Result<T> {
    fn into_py_result(self) -> pyo3::PyResult<T> {
        self.map_err(to_py_err)
    }
    fn into_py_alloc_result(self) -> pyo3::PyResult<T> {
        self.map_err(to_py_alloc_err)
    }
}
