//! The process-exit flag behind RMM's `rmm::process_is_exiting()` (`<rmm/process_is_exiting.hpp>`).
//!
//! One flag per process, in librmm: C++ code in any shared library of the process sees the same
//! answer. It turns true when `exit()` runs the `atexit` handler registered by
//! [`rmm_register_process_exit_hook`], so handlers registered before that call (and destructors of
//! static objects constructed before it) observe `true`, as with RMM.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

static EXITING: AtomicBool = AtomicBool::new(false);
static REGISTERED: Once = Once::new();
static REGISTRATION_FAILED: AtomicBool = AtomicBool::new(false);

extern "C" {
    fn atexit(callback: extern "C" fn()) -> c_int;
}

/// The `atexit` handler: only stores the flag (it cannot panic).
extern "C" fn mark_exiting() {
    EXITING.store(true, Ordering::Release);
}

/// 1 once the process has begun `exit()` (after the hook was registered), 0 before. One atomic load:
/// safe to call from destructors at any time.
#[no_mangle]
pub extern "C" fn rmm_process_is_exiting() -> c_int {
    c_int::from(EXITING.load(Ordering::Acquire))
}

/// Registers the `atexit` handler that sets the flag, once per process; later calls do nothing.
/// Returns 0 on success, -1 when `atexit` refused the registration (then, and on every later call).
#[no_mangle]
pub extern "C" fn rmm_register_process_exit_hook() -> c_int {
    let result = std::panic::catch_unwind(|| {
        REGISTERED.call_once(|| {
            // SAFETY: `mark_exiting` is a plain extern "C" function with no arguments that lives as
            // long as librmm is loaded, which is until the process ends (librmm is never unloaded
            // while registered handlers may run: it owns the process's registry).
            if unsafe { atexit(mark_exiting) } != 0 {
                REGISTRATION_FAILED.store(true, Ordering::Release);
            }
        });
    });
    if result.is_err() || REGISTRATION_FAILED.load(Ordering::Acquire) {
        -1
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_is_false_while_the_process_runs_and_registration_is_idempotent() {
        assert_eq!(rmm_process_is_exiting(), 0);
        assert_eq!(rmm_register_process_exit_hook(), 0);
        assert_eq!(rmm_register_process_exit_hook(), 0);
        assert_eq!(rmm_process_is_exiting(), 0);
    }
}
