//! The environment variables of RMM's logs, read for real: `RMM_LOG_FILE` (the allocation log)
//! and `RMM_DEBUG_LOG_FILE` (the debug log, installed lazily by the first `AnyResource`).
//!
//! Environment variables and the global `tracing` subscriber are process-wide, so these tests
//! live in their own test binary and take turns through `ENV`.

use std::path::PathBuf;
use std::sync::Mutex;

use rmm_core::cuda::Stream;
use rmm_core::debug_log::{self, DebugLogSink, Level};
use rmm_core::mr::{LoggingResourceAdaptor, SystemMemoryResource};
use rmm_core::{AnyResource, Error, MemoryResource};

static ENV: Mutex<()> = Mutex::new(());

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("rmm-env-logging-{}-{name}", std::process::id()))
}

#[test]
fn rmm_log_file_names_the_allocation_log() {
    let _env = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let path = temp_path("alloc.csv");
    std::env::set_var("RMM_LOG_FILE", &path);
    let mr = LoggingResourceAdaptor::from_env(SystemMemoryResource::new()).unwrap();
    assert_eq!(mr.file_name(), Some(path.as_path()));
    let p = mr.allocate(Stream::DEFAULT, 10, 256).unwrap();
    // SAFETY: from allocate above.
    unsafe { mr.deallocate(Stream::DEFAULT, p, 10, 256).unwrap() };
    drop(mr);
    let log = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 3, "{log}");
    assert_eq!(lines[0], "Thread,Time,Action,Pointer,Size,Stream");
    assert!(
        lines[1].ends_with(&format!(",allocate,{:#x},10,0x0", p as usize)),
        "{log}"
    );
    assert!(
        lines[2].ends_with(&format!(",free,{:#x},10,0x0", p as usize)),
        "{log}"
    );
    std::fs::remove_file(&path).unwrap();

    std::env::remove_var("RMM_LOG_FILE");
    let err = LoggingResourceAdaptor::from_env(SystemMemoryResource::new()).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("RMM_LOG_FILE is unset"), "{err}");
}

#[test]
fn rmm_debug_log_file_receives_rmm_events_at_the_set_level() {
    let _env = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let path = temp_path("debug.log");
    std::env::set_var(debug_log::DEBUG_LOG_FILE_ENV, &path);
    // The first resource wrapped in an AnyResource installs the debug log.
    let _mr = AnyResource::new(SystemMemoryResource::new());
    assert_eq!(
        debug_log::init_debug_log().unwrap(),
        DebugLogSink::File(path.clone()),
        "idempotent"
    );
    assert_eq!(debug_log::logging_level(), Level::Info);
    tracing::debug!(target: "rmm_core::it", "hidden at info");
    debug_log::set_logging_level(Level::Debug);
    assert!(debug_log::should_log(Level::Debug) && !debug_log::should_log(Level::Trace));
    tracing::debug!(target: "rmm_core::it", "shown at debug");
    tracing::warn!(target: "elsewhere", "another crate's event");
    debug_log::set_flush_level(Level::Error);
    assert_eq!(debug_log::flush_level(), Level::Error);
    tracing::info!(target: "rmm_core::it", "buffered until flushed");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap().lines().count(),
        1,
        "below the flush level"
    );
    debug_log::flush_logger();
    let log = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert!(
        lines[0].starts_with('[') && lines[0].ends_with("][debug ] shown at debug"),
        "{log}"
    );
    assert!(
        lines[1].ends_with("][info  ] buffered until flushed"),
        "{log}"
    );
    debug_log::set_logging_level(Level::Off);
    tracing::error!(target: "rmm_core::it", "off");
    debug_log::flush_logger();
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 2);
    std::env::remove_var(debug_log::DEBUG_LOG_FILE_ENV);
    std::fs::remove_file(&path).unwrap();
}
