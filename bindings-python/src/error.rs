//! The one place where `rmm_core::Error` becomes a Python exception.
//!
//! | core error | Python exception |
//! | --- | --- |
//! | `OutOfMemory` | `MemoryError` (as RMM raises for `rmm::out_of_memory`) |
//! | `InvalidArgument` | `ValueError` |
//! | `Cuda`, `NoDriver`, `NoDevice`, `Unsupported` | `RuntimeError` |
//!
//! The message is the core error's `Display` text, so Python sees the same words as Rust and C++.
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
    let message = error.to_string();
    match error {
        Error::OutOfMemory { .. } => PyMemoryError::new_err(message),
        Error::InvalidArgument(_) => PyValueError::new_err(message),
        Error::Cuda { .. } | Error::NoDriver(_) | Error::NoDevice(_) | Error::Unsupported(_) => {
            PyRuntimeError::new_err(message)
        }
    }
}

/// `.into_py_result()` on a core `Result`: the idiom every binding method ends with.
pub(crate) trait IntoPyResult<T> {
    fn into_py_result(self) -> pyo3::PyResult<T>;
}

impl<T> IntoPyResult<T> for rmm_core::Result<T> {
    fn into_py_result(self) -> pyo3::PyResult<T> {
        self.map_err(to_py_err)
    }
}
