//! RMM's `rmm.pylibrmm.logger` (`level_enum`, `should_log`, `set_logging_level`,
//! `get_logging_level`, `flush_logger`, `set_flush_level`, `get_flush_level`) over the debug log of
//! the process's engine, librmm's (`rmm_debug_log_*`).
//!
//! `level_enum` is an `enum.IntEnum` with rapids_logger's values (`trace` = 0 ... `off` = 6,
//! `n_levels` = 7). Every function takes a `level_enum` member and raises TypeError for anything
//! else (a plain int included), as RMM does. `n_levels` logs nothing, like `off` (spdlog's rule);
//! the getters return the member that was set.

use std::ffi::c_int;
use std::sync::atomic::{AtomicU8, Ordering};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList};
use rmm_core::debug_log::Level;

use crate::error::IntoPyResult;
use crate::native;

/// rapids_logger's `n_levels`: one past `off`.
const N_LEVELS: u8 = 7;
const NAMES: [&str; 8] = [
    "trace", "debug", "info", "warn", "error", "critical", "off", "n_levels",
];

/// The `level_enum` value last set through Python, per setting (u8::MAX: never set). Only used
/// while the core still holds the level it maps to, so a level set from C++ or Rust wins.
static SET_LOGGING: AtomicU8 = AtomicU8::new(u8::MAX);
static SET_FLUSH: AtomicU8 = AtomicU8::new(u8::MAX);

static LEVEL_ENUM: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn level_enum(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    LEVEL_ENUM
        .get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            let members = PyList::new(py, NAMES.iter().enumerate().map(|(i, name)| (*name, i)))?;
            let kwargs = PyDict::new(py);
            kwargs.set_item("module", "rmm.pylibrmm.logger")?;
            Ok(py
                .import("enum")?
                .getattr("IntEnum")?
                .call(("level_enum", members), Some(&kwargs))?
                .unbind())
        })
        .map(|e| e.bind(py))
}

/// The value of a `level_enum` member; TypeError for anything else.
fn level_value(level: &Bound<'_, PyAny>) -> PyResult<u8> {
    if !level.is_instance(level_enum(level.py())?)? {
        return Err(PyTypeError::new_err(
            "level must be an instance of the level_enum enum",
        ));
    }
    level.extract()
}

/// The core level of a `level_enum` value (`n_levels` logs nothing, like `off`).
fn core_level(value: u8) -> Level {
    Level::from_name(NAMES[usize::from(value.min(N_LEVELS))]).unwrap_or(Level::Off)
}

fn member<'py>(py: Python<'py>, value: u8) -> PyResult<Bound<'py, PyAny>> {
    level_enum(py)?.call1((value,))
}

/// The member for the engine's `current` level (a `level_enum` value): the one Python set, if it
/// maps to `current`.
fn current_member<'py>(
    py: Python<'py>,
    current: c_int,
    set: &AtomicU8,
) -> PyResult<Bound<'py, PyAny>> {
    let last = set.load(Ordering::Acquire);
    let value = if last <= N_LEVELS && core_level(last) as c_int == current {
        last
    } else {
        current as u8
    };
    member(py, value)
}

/// True when a message at `level` would be logged.
#[pyfunction]
fn should_log(level: &Bound<'_, PyAny>) -> PyResult<bool> {
    let value = level_value(level)?;
    // spdlog compares the raw values: `n_levels` is above every threshold.
    // SAFETY: plain values.
    Ok(value == N_LEVELS
        || unsafe { native::rmm_debug_log_should_log(core_level(value) as c_int) } != 0)
}

/// RMM's `UserWarning` after a setting, when a message at `level` would not be logged (for the
/// flush level: one below the logging level).
fn warn_unless_logged(level: &Bound<'_, PyAny>) -> PyResult<()> {
    if should_log(level)? {
        return Ok(());
    }
    let py = level.py();
    let name = NAMES[usize::from(level_value(level)?.min(N_LEVELS))];
    let message = std::ffi::CString::new(format!(
        "RMM will not log level_enum.{name}. This may be because the C++ library is compiled for a less-verbose logging level."
    ))?;
    PyErr::warn(
        py,
        &py.get_type::<pyo3::exceptions::PyUserWarning>(),
        &message,
        1,
    )
}

/// Sets the debug log level.
#[pyfunction]
fn set_logging_level(level: &Bound<'_, PyAny>) -> PyResult<()> {
    let value = level_value(level)?;
    SET_LOGGING.store(value, Ordering::Release);
    let core = core_level(value) as c_int;
    // SAFETY: plain values.
    native::call("rmm_debug_log_set_level", |err| unsafe {
        native::rmm_debug_log_set_level(core, err)
    })
    .into_py_result()?;
    warn_unless_logged(level)
}

/// The debug log level (a `level_enum` member).
#[pyfunction]
fn get_logging_level(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    // SAFETY: no arguments.
    current_member(py, unsafe { native::rmm_debug_log_level() }, &SET_LOGGING)
}

/// Writes out buffered debug log lines.
#[pyfunction]
fn flush_logger(py: Python<'_>) {
    // SAFETY: no arguments.
    py.detach(|| unsafe { native::rmm_debug_log_flush() });
}

/// Sets the level at and above which debug log lines are flushed at once.
#[pyfunction]
fn set_flush_level(level: &Bound<'_, PyAny>) -> PyResult<()> {
    let value = level_value(level)?;
    SET_FLUSH.store(value, Ordering::Release);
    let core = core_level(value) as c_int;
    // SAFETY: plain values.
    native::call("rmm_debug_log_set_flush_level", |err| unsafe {
        native::rmm_debug_log_set_flush_level(core, err)
    })
    .into_py_result()?;
    warn_unless_logged(level)
}

/// The flush level (a `level_enum` member).
#[pyfunction]
fn get_flush_level(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    // SAFETY: no arguments.
    current_member(
        py,
        unsafe { native::rmm_debug_log_flush_level() },
        &SET_FLUSH,
    )
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("level_enum", level_enum(m.py())?)?;
    m.add_function(wrap_pyfunction!(should_log, m)?)?;
    m.add_function(wrap_pyfunction!(set_logging_level, m)?)?;
    m.add_function(wrap_pyfunction!(get_logging_level, m)?)?;
    m.add_function(wrap_pyfunction!(flush_logger, m)?)?;
    m.add_function(wrap_pyfunction!(set_flush_level, m)?)?;
    m.add_function(wrap_pyfunction!(get_flush_level, m)?)?;
    Ok(())
}
