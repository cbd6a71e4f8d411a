//! rmm's debug log, installed when librmm is loaded, as RMM's `rmm::default_logger()` exists from
//! the start: rmm's warnings and errors (a refused `retain`/`release`, an allocation log losing
//! events, a failed free in a `noexcept` path) reach stderr, or the file named by
//! `RMM_DEBUG_LOG_FILE`, in RMM's line pattern (`rmm_core::debug_log`).
//!
//! Only the library itself (`librmm_rs.so`, `librmm_rs.a`: the `rmm_librmm` cfg that `build.rs` sets)
//! installs it. The same sources as an rlib (`rmm-c-abi`, linked into Rust binaries) do not: a
//! Rust program chooses its own `tracing` subscriber, and installing one first would make its own
//! `init()` panic.
//!
//! C functions for rmm's debug log (`rmm_debug_log_*` in `rmm_c.h`): the level, the flush level and
//! the flush of the log the engine writes (`rmm_core::debug_log`, `RMM_DEBUG_LOG_FILE`), so that a
//! binding that does not link rmm-core itself (Python's `rmm.set_logging_level`, ...) sets the one
//! log of the process's engine. Levels are rapids_logger's `level_enum` values,
//! `RMM_LOG_LEVEL_TRACE` (0) to `RMM_LOG_LEVEL_OFF` (6).

use std::ffi::c_int;

use rmm_core::debug_log::{self, Level};
use rmm_core::error::{Error, Result};
use rmm_core::resource::guard::guarded;
use rmm_core::resource::rmm_error;

/// Runs once when the library is loaded (an ELF constructor, before `main` for a linked library,
/// inside `dlopen` otherwise). `init_debug_log` installs nothing when the process already has a
/// `tracing` subscriber in this copy of the crate, and cannot panic on a bad file: it returns the
/// error, which is printed.
#[cfg(all(rmm_librmm, not(test), target_os = "linux"))]
#[used]
#[link_section = ".init_array"]
static INSTALL_DEBUG_LOG: extern "C" fn() = {
    extern "C" fn install() {
        // No unwinding out of a constructor.
        let result = std::panic::catch_unwind(rmm_core::debug_log::init_debug_log);
        match result {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => eprintln!("rmm: the debug log was not installed: {e}"),
            Err(_) => eprintln!("rmm: installing the debug log panicked"),
        }
    }
    install
};

/// `RMM_LOG_LEVEL_*` of `rmm_c.h`: rapids_logger's `level_enum`, one per [`Level`].
pub const RMM_LOG_LEVEL_TRACE: c_int = 0;
/// See [`RMM_LOG_LEVEL_TRACE`].
pub const RMM_LOG_LEVEL_DEBUG: c_int = 1;
/// See [`RMM_LOG_LEVEL_TRACE`].
pub const RMM_LOG_LEVEL_INFO: c_int = 2;
/// See [`RMM_LOG_LEVEL_TRACE`].
pub const RMM_LOG_LEVEL_WARN: c_int = 3;
/// See [`RMM_LOG_LEVEL_TRACE`].
pub const RMM_LOG_LEVEL_ERROR: c_int = 4;
/// See [`RMM_LOG_LEVEL_TRACE`].
pub const RMM_LOG_LEVEL_CRITICAL: c_int = 5;
/// See [`RMM_LOG_LEVEL_TRACE`].
pub const RMM_LOG_LEVEL_OFF: c_int = 6;

// The C values are the engine's levels (header_check ties the header to the constants above).
const _: () = assert!(
    RMM_LOG_LEVEL_TRACE == Level::Trace as c_int
        && RMM_LOG_LEVEL_DEBUG == Level::Debug as c_int
        && RMM_LOG_LEVEL_INFO == Level::Info as c_int
        && RMM_LOG_LEVEL_WARN == Level::Warn as c_int
        && RMM_LOG_LEVEL_ERROR == Level::Error as c_int
        && RMM_LOG_LEVEL_CRITICAL == Level::Critical as c_int
        && RMM_LOG_LEVEL_OFF == Level::Off as c_int
);

fn level_from_c(level: c_int) -> Result<Level> {
    Level::from_code(level).ok_or_else(|| {
        Error::invalid(format!(
            "log level {level} is not an RMM_LOG_LEVEL_* value (0 to 6)"
        ))
    })
}

/// Sets the debug log's level: messages below it are not written.
///
/// # Errors
/// `RMM_ERROR_INVALID_ARGUMENT` for a value that is no `RMM_LOG_LEVEL_*`.
///
/// # Safety
/// `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_debug_log_set_level(level: c_int, err: *mut rmm_error) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            level_from_c(level).map(debug_log::set_logging_level)
        })
    }
}

/// The debug log's level (default `RMM_LOG_LEVEL_INFO`).
#[no_mangle]
pub extern "C" fn rmm_debug_log_level() -> c_int {
    debug_log::logging_level() as c_int
}

/// 1 when a message at `level` would be written (`level` at or above the log's level), else 0; 0 for
/// a value that is no `RMM_LOG_LEVEL_*`.
#[no_mangle]
pub extern "C" fn rmm_debug_log_should_log(level: c_int) -> c_int {
    c_int::from(Level::from_code(level).is_some_and(debug_log::should_log))
}

/// Sets the level at and above which each line is written out at once.
///
/// # Errors
/// `RMM_ERROR_INVALID_ARGUMENT` for a value that is no `RMM_LOG_LEVEL_*`.
///
/// # Safety
/// `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_debug_log_set_flush_level(level: c_int, err: *mut rmm_error) -> c_int {
    // SAFETY: caller contract.
    unsafe { guarded(err, || level_from_c(level).map(debug_log::set_flush_level)) }
}

/// The flush level (default `RMM_LOG_LEVEL_TRACE`: every line is written out at once).
#[no_mangle]
pub extern "C" fn rmm_debug_log_flush_level() -> c_int {
    debug_log::flush_level() as c_int
}

/// Writes out the lines buffered below the flush level.
#[no_mangle]
pub extern "C" fn rmm_debug_log_flush() {
    // A panic must not cross into C; flushing a writer does not panic, but the guard costs nothing.
    let _ = std::panic::catch_unwind(debug_log::flush_logger);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmm_core::resource::status::{RMM_ERROR_INVALID_ARGUMENT, RMM_OK};

    #[test]
    fn levels_round_trip_and_bad_values_are_refused() {
        let (level, flush) = (rmm_debug_log_level(), rmm_debug_log_flush_level());
        let mut err = rmm_error::new();
        // SAFETY: a valid error struct.
        unsafe {
            assert_eq!(
                rmm_debug_log_set_level(Level::Warn as c_int, &mut err),
                RMM_OK
            );
            assert_eq!(rmm_debug_log_level(), Level::Warn as c_int);
            assert_eq!(rmm_debug_log_should_log(Level::Error as c_int), 1);
            assert_eq!(rmm_debug_log_should_log(Level::Info as c_int), 0);
            assert_eq!(rmm_debug_log_should_log(42), 0);
            assert_eq!(
                rmm_debug_log_set_level(7, &mut err),
                RMM_ERROR_INVALID_ARGUMENT
            );
            assert!(
                err.message().contains("RMM_LOG_LEVEL_"),
                "{}",
                err.message()
            );
            assert_eq!(
                rmm_debug_log_level(),
                Level::Warn as c_int,
                "a refused value changes nothing"
            );
            assert_eq!(
                rmm_debug_log_set_flush_level(Level::Error as c_int, &mut err),
                RMM_OK
            );
            assert_eq!(rmm_debug_log_flush_level(), Level::Error as c_int);
            assert_eq!(
                rmm_debug_log_set_flush_level(-1, std::ptr::null_mut()),
                RMM_ERROR_INVALID_ARGUMENT
            );
            rmm_debug_log_flush();
            assert_eq!(rmm_debug_log_set_level(level, &mut err), RMM_OK);
            assert_eq!(rmm_debug_log_set_flush_level(flush, &mut err), RMM_OK);
        }
    }
}
