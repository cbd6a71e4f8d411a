//! A host application that installed its own `tracing` subscriber keeps it: rmm's debug log
//! installs nothing and rmm's events go to the host's subscriber.
//!
//! (Its own test binary: the global subscriber is process-wide.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rmm_core::debug_log::{self, DebugLogSink, Level};
use tracing_subscriber::layer::SubscriberExt;

struct Count(Arc<AtomicUsize>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Count {
    fn on_event(&self, _: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn the_host_subscriber_is_kept() {
    let seen = Arc::new(AtomicUsize::new(0));
    let host = tracing_subscriber::registry().with(Count(seen.clone()));
    tracing::subscriber::set_global_default(host).unwrap();
    let path = std::env::temp_dir().join(format!("rmm-debug-log-host-{}.log", std::process::id()));
    std::env::set_var(debug_log::DEBUG_LOG_FILE_ENV, &path);
    assert_eq!(debug_log::init_debug_log().unwrap(), DebugLogSink::Host);
    assert!(!path.exists(), "the file is neither created nor truncated");
    assert_eq!(
        debug_log::init_debug_log().unwrap(),
        DebugLogSink::Host,
        "idempotent"
    );
    tracing::warn!(target: "rmm_core::it", "to the host");
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    debug_log::set_logging_level(Level::Error);
    assert_eq!(
        debug_log::logging_level(),
        Level::Error,
        "the level is still recorded"
    );
    assert!(!debug_log::should_log(Level::Warn));
    debug_log::flush_logger();
}
