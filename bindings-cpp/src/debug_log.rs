//! rmm's debug log, installed when librmm is loaded, as RMM's `rmm::default_logger()` exists from
//! the start: rmm's warnings and errors (a refused `retain`/`release`, an allocation log losing
//! events, a failed free in a `noexcept` path) reach stderr, or the file named by
//! `RMM_DEBUG_LOG_FILE`, in RMM's line pattern (`rmm_core::debug_log`).
//!
//! Only the library itself (`librmm.so`, `librmm.a`: the `rmm_librmm` cfg that `build.rs` sets)
//! installs it. The same sources as an rlib (`rmm-c-abi`, linked into Rust binaries) do not: a
//! Rust program chooses its own `tracing` subscriber, and installing one first would make its own
//! `init()` panic.

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
