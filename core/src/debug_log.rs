//! The debug log: RMM's `rmm::default_logger()` (rapids_logger) on top of [`tracing`].
//!
//! rmm-core reports through `tracing` macros (`tracing::debug!`, `tracing::error!`, ...), whose
//! targets all start with `rmm`. This module gives those events RMM's sink, pattern and level API:
//! - [`init_debug_log`] installs a global subscriber that writes rmm's events to the file named by
//!   `RMM_DEBUG_LOG_FILE` (truncated, as RMM does) or, when that is unset, to stderr. It is
//!   idempotent, and it installs nothing when the host application already has a subscriber: rmm's
//!   events then go to the host's (and the level API below only records the level).
//!   rmm-core calls it lazily when the first resource is wrapped in an [`crate::AnyResource`], but
//!   only when `RMM_DEBUG_LOG_FILE` is set. librmm (the C ABI and the C++ binding) calls it when it
//!   is loaded (`bindings-cpp/src/debug_log.rs`), so C and C++ programs hear rmm's warnings and
//!   errors on stderr, as RMM's default logger writes them; a Rust program that wants them
//!   installs it (or its own subscriber) itself.
//! - [`report_unheard`] is for failures that must reach someone even where nothing was installed:
//!   it also writes to stderr when no subscriber would record the event.
//! - lines follow RMM's pattern `[%6t][%H:%M:%S:%f][%-6l] %v`: the OS thread id right-aligned in 6
//!   columns, local wall-clock time with microseconds, the level name left-aligned in 6, the message;
//! - [`set_logging_level`], [`logging_level`], [`should_log`], [`flush_logger`],
//!   [`set_flush_level`], [`flush_level`] mirror rapids_logger's functions. The default level is
//!   `info`, as RMM's.
//!
//! Differences from RMM, and why:
//! - `tracing` has no `critical` level. A critical event is an error whose target is
//!   [`CRITICAL_TARGET`]; it is printed as `critical`, and at level [`Level::Critical`] only those
//!   pass.
//! - the default flush level is [`Level::Trace`] (every line reaches the file at once), not `off`:
//!   a Rust `static` is never destroyed at exit, so a buffered line would otherwise be lost.
//!   A higher flush level buffers lower lines until [`flush_logger`] or a line at that level.
//! - only events whose target starts with `rmm` are written: the file is rmm's log, not the
//!   process's.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::{FmtContext, MakeWriter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::{LookupSpan, Registry};
use tracing_subscriber::reload;

use crate::error::{Error, Result};

/// The environment variable naming the debug log file (as RMM's).
pub const DEBUG_LOG_FILE_ENV: &str = "RMM_DEBUG_LOG_FILE";

/// RMM's line pattern, in spdlog notation; every line written here follows it.
pub const PATTERN: &str = "[%6t][%H:%M:%S:%f][%-6l] %v";

/// The target of critical events: `tracing::error!(target: CRITICAL_TARGET, ...)`.
pub const CRITICAL_TARGET: &str = "rmm::critical";

/// The prefix of the targets this log writes (every rmm crate's module path starts with it).
const RMM_TARGETS: &str = "rmm";

/// A log level (rapids_logger's `level_enum`), from the most verbose to none.
///
/// ```
/// use rmm_core::debug_log::Level;
/// assert!(Level::Warn > Level::Info);
/// assert_eq!(Level::Critical.name(), "critical");
/// assert_eq!(Level::from_name("warn"), Some(Level::Warn));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Level {
    /// Everything, including per-allocation traces.
    Trace = 0,
    /// Diagnostics for developers.
    Debug = 1,
    /// Notable events (the default level).
    Info = 2,
    /// Something unexpected that rmm recovered from.
    Warn = 3,
    /// An operation failed.
    Error = 4,
    /// rmm cannot go on safely.
    Critical = 5,
    /// Nothing.
    Off = 6,
}

impl Level {
    const ALL: [Level; 7] = [
        Level::Trace,
        Level::Debug,
        Level::Info,
        Level::Warn,
        Level::Error,
        Level::Critical,
        Level::Off,
    ];

    /// rapids_logger's name: `trace`, `debug`, `info`, `warn`, `error`, `critical`, `off`.
    pub const fn name(self) -> &'static str {
        match self {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
            Level::Critical => "critical",
            Level::Off => "off",
        }
    }

    /// The level called `name` (as [`Level::name`] spells it), if any.
    pub fn from_name(name: &str) -> Option<Level> {
        Self::ALL.into_iter().find(|l| l.name() == name)
    }

    /// The level whose value (`level as u8`, rapids_logger's `level_enum` value) is `code`, if any.
    ///
    /// ```
    /// use rmm_core::debug_log::Level;
    /// assert_eq!(Level::from_code(3), Some(Level::Warn));
    /// assert_eq!(Level::from_code(7), None);
    /// ```
    pub fn from_code(code: i32) -> Option<Level> {
        usize::try_from(code)
            .ok()
            .and_then(|i| Self::ALL.get(i))
            .copied()
    }

    /// The name in log lines (spdlog's `%l`: `warning` for [`Level::Warn`]).
    const fn line_name(self) -> &'static str {
        match self {
            Level::Warn => "warning",
            other => other.name(),
        }
    }

    fn from_u8(raw: u8) -> Level {
        Self::ALL
            .get(usize::from(raw))
            .copied()
            .unwrap_or(Level::Off)
    }

    /// The level of a `tracing` event (errors at [`CRITICAL_TARGET`] are critical).
    fn of(meta: &Metadata<'_>) -> Level {
        match *meta.level() {
            tracing::Level::TRACE => Level::Trace,
            tracing::Level::DEBUG => Level::Debug,
            tracing::Level::INFO => Level::Info,
            tracing::Level::WARN => Level::Warn,
            _ if meta.target() == CRITICAL_TARGET => Level::Critical,
            _ => Level::Error,
        }
    }

    /// The filter that lets rmm's events at `self` and above through.
    fn filter(self) -> Targets {
        let threshold = match self {
            Level::Trace => LevelFilter::TRACE,
            Level::Debug => LevelFilter::DEBUG,
            Level::Info => LevelFilter::INFO,
            Level::Warn => LevelFilter::WARN,
            Level::Error => LevelFilter::ERROR,
            Level::Critical => {
                return Targets::new().with_target(CRITICAL_TARGET, LevelFilter::ERROR)
            }
            Level::Off => return Targets::new(),
        };
        Targets::new().with_target(RMM_TARGETS, threshold)
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where [`init_debug_log`] sends rmm's events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DebugLogSink {
    /// The file named by `RMM_DEBUG_LOG_FILE`.
    File(PathBuf),
    /// Standard error (`RMM_DEBUG_LOG_FILE` is unset).
    Stderr,
    /// The host application's own subscriber, which was installed first.
    Host,
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);
static FLUSH_LEVEL: AtomicU8 = AtomicU8::new(Level::Trace as u8);

/// What [`init_debug_log`] installed.
struct Installed {
    sink: DebugLogSink,
    /// The level filter of our subscriber (absent when the host's subscriber is in charge).
    filter: Option<reload::Handle<Targets, Registry>>,
    out: Option<Arc<Sink>>,
}

impl Installed {
    /// Nothing installed: the host's subscriber is in charge.
    const fn host() -> Self {
        Installed {
            sink: DebugLogSink::Host,
            filter: None,
            out: None,
        }
    }
}

static INSTALLED: Mutex<Option<Installed>> = Mutex::new(None);
static LAZY_CHECKED: AtomicBool = AtomicBool::new(false);

fn installed() -> MutexGuard<'static, Option<Installed>> {
    INSTALLED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Installs rmm's debug log as the global `tracing` subscriber, once; later calls return the sink
/// chosen by the first.
///
/// The sink is the file named by `RMM_DEBUG_LOG_FILE` (created or truncated) or, when it is unset,
/// stderr. When the process already has a global subscriber, nothing is installed and
/// [`DebugLogSink::Host`] is returned: rmm's events go to the host's subscriber.
///
/// A host application that installs its own subscriber later (for example with
/// `tracing_subscriber::fmt().init()`, which panics when one is already set) should do so before
/// creating rmm resources, or leave `RMM_DEBUG_LOG_FILE` unset.
///
/// # Errors
/// [`Error::InvalidArgument`] when the file cannot be created; nothing is installed then, and a
/// later call tries again.
pub fn init_debug_log() -> Result<DebugLogSink> {
    let mut state = installed();
    if let Some(done) = state.as_ref() {
        return Ok(done.sink.clone());
    }
    if tracing::dispatcher::has_been_set() {
        // Checked first so that a host's subscriber spares RMM_DEBUG_LOG_FILE from being truncated.
        *state = Some(Installed::host());
        return Ok(DebugLogSink::Host);
    }
    let (out, sink): (Box<dyn Write + Send>, _) = match std::env::var_os(DEBUG_LOG_FILE_ENV) {
        Some(path) => {
            let path = PathBuf::from(path);
            let file = File::create(&path).map_err(|e| {
                Error::invalid(format!(
                    "cannot create {DEBUG_LOG_FILE_ENV}={}: {e}",
                    path.display()
                ))
            })?;
            (Box::new(BufWriter::new(file)), DebugLogSink::File(path))
        }
        None => (Box::new(io::stderr()), DebugLogSink::Stderr),
    };
    let out = Arc::new(Sink::new(out));
    let (subscriber, filter) = subscriber(out.clone());
    let done = match tracing::subscriber::set_global_default(subscriber) {
        Ok(()) => Installed {
            sink,
            filter: Some(filter),
            out: Some(out),
        },
        // Another thread's subscriber won the race since the check above.
        Err(_) => Installed::host(),
    };
    let sink = done.sink.clone();
    *state = Some(done);
    Ok(sink)
}

/// Reports an error on rmm's debug log, and on stderr too when no `tracing` subscriber would record
/// it (nothing installed the debug log and the host has none), so that it is never silent. For
/// failures nobody asked about and no caller sees (an allocation log that loses events).
pub(crate) fn report_unheard(message: std::fmt::Arguments<'_>) {
    tracing::error!("{message}");
    if tracing::dispatcher::get_default(|d| d.is::<tracing::subscriber::NoSubscriber>()) {
        eprintln!("rmm: {message}");
    }
}

/// [`init_debug_log`] when `RMM_DEBUG_LOG_FILE` is set, checked once per process (cheap after the
/// first call). rmm-core calls it whenever a resource is wrapped in an [`crate::AnyResource`].
pub(crate) fn init_from_env() {
    if LAZY_CHECKED.load(Ordering::Acquire) || LAZY_CHECKED.swap(true, Ordering::AcqRel) {
        return;
    }
    if std::env::var_os(DEBUG_LOG_FILE_ENV).is_some() {
        if let Err(e) = init_debug_log() {
            eprintln!("rmm: {e}");
        }
    }
}

/// Sets the level below which rmm's events are dropped (rapids_logger's `set_level`).
///
/// ```
/// use rmm_core::debug_log::{logging_level, set_logging_level, should_log, Level};
/// let before = logging_level();
/// set_logging_level(Level::Error);
/// assert!(!should_log(Level::Warn) && should_log(Level::Critical));
/// set_logging_level(before);
/// ```
pub fn set_logging_level(level: Level) {
    init_from_env();
    let state = installed();
    LEVEL.store(level as u8, Ordering::Release);
    if let Some(filter) = state.as_ref().and_then(|done| done.filter.as_ref()) {
        if let Err(e) = filter.reload(level.filter()) {
            eprintln!("rmm: cannot change the debug log level: {e}");
        }
    }
}

/// The current level (default [`Level::Info`]).
pub fn logging_level() -> Level {
    Level::from_u8(LEVEL.load(Ordering::Acquire))
}

/// True when a message at `level` would be logged: `level >= logging_level()` (rapids_logger's,
/// and so spdlog's, rule, under which `should_log(Level::Off)` is always true).
pub fn should_log(level: Level) -> bool {
    level >= logging_level()
}

/// Sets the level at and above which each line is flushed to the file at once.
pub fn set_flush_level(level: Level) {
    FLUSH_LEVEL.store(level as u8, Ordering::Release);
}

/// The flush level (default [`Level::Trace`]: every line is flushed).
pub fn flush_level() -> Level {
    Level::from_u8(FLUSH_LEVEL.load(Ordering::Acquire))
}

/// Writes out the lines buffered below the flush level (rapids_logger's `flush`).
pub fn flush_logger() {
    let out = installed().as_ref().and_then(|done| done.out.clone());
    if let Some(out) = out {
        out.flush();
    }
}

/// The subscriber rmm installs: a reloadable level filter and a formatter in RMM's pattern,
/// writing to `out`.
fn subscriber(
    out: Arc<Sink>,
) -> (
    impl Subscriber + Send + Sync,
    reload::Handle<Targets, Registry>,
) {
    let (filter, handle) = reload::Layer::new(logging_level().filter());
    let format = tracing_subscriber::fmt::layer()
        .event_format(RmmPattern)
        .with_writer(SharedSink(out));
    (Registry::default().with(filter).with(format), handle)
}

/// The output of the debug log: one writer under a mutex, so lines never interleave.
struct Sink {
    out: Mutex<Box<dyn Write + Send>>,
}

impl Sink {
    fn new(out: Box<dyn Write + Send>) -> Self {
        Self {
            out: Mutex::new(out),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Box<dyn Write + Send>> {
        self.out.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn flush(&self) {
        if let Err(e) = self.lock().flush() {
            eprintln!("rmm: flushing the debug log: {e}");
        }
    }
}

/// Writes one formatted line (the formatter hands over the whole line at once).
struct LineWriter<'a> {
    sink: &'a Sink,
    flush: bool,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, line: &[u8]) -> io::Result<usize> {
        let mut out = self.sink.lock();
        out.write_all(line)?;
        if self.flush {
            out.flush()?;
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.sink.lock().flush()
    }
}

/// The [`Sink`] as the formatter's writer factory (shared with [`flush_logger`]).
struct SharedSink(Arc<Sink>);

impl<'a> MakeWriter<'a> for SharedSink {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter {
            sink: &self.0,
            flush: true,
        }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Self::Writer {
        LineWriter {
            sink: &self.0,
            flush: Level::of(meta) >= flush_level(),
        }
    }
}

/// RMM's pattern `[%6t][%H:%M:%S:%f][%-6l] %v`.
struct RmmPattern;

impl<S, N> FormatEvent<S, N> for RmmPattern
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let now = WallClock::now();
        let level = Level::of(event.metadata()).line_name();
        write!(
            writer,
            "[{:>6}][{}:{:06}][{level:<6}] ",
            os_thread_id(),
            now.hms(),
            now.micros
        )?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

// ---- Shared with the logging adaptor: the thread id and the clock of RMM's log lines. ----

/// The OS thread id (`gettid`), as spdlog's `%t` prints it.
pub(crate) fn os_thread_id() -> u64 {
    thread_local! {
        static TID: u64 = current_os_thread_id();
    }
    TID.with(|tid| *tid)
}

#[cfg(target_os = "linux")]
fn current_os_thread_id() -> u64 {
    // SAFETY: gettid takes no arguments, cannot fail and touches no memory.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    u64::try_from(tid).unwrap_or_default()
}

#[cfg(not(target_os = "linux"))]
fn current_os_thread_id() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::thread::current().id()) & 0xffff_ffff
}

/// Local wall-clock time of day with microseconds (spdlog's `%H:%M:%S` and `%f`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WallClock {
    /// `HH:MM:SS`, local time.
    hms: [u8; 8],
    /// Microseconds into the second.
    pub(crate) micros: u32,
}

impl WallClock {
    /// Now. The local time of day is computed once per second and thread (`localtime_r` takes a
    /// process-wide lock in glibc, which would serialize logging threads).
    pub(crate) fn now() -> Self {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let secs = since_epoch.as_secs();
        thread_local! {
            static LAST: Cell<(u64, [u8; 8])> = const { Cell::new((u64::MAX, [0; 8])) };
        }
        let hms = LAST.with(|last| {
            let (cached_secs, cached) = last.get();
            if cached_secs == secs {
                return cached;
            }
            let hms = local_hms(secs);
            last.set((secs, hms));
            hms
        });
        Self {
            hms,
            micros: since_epoch.subsec_micros(),
        }
    }

    /// `HH:MM:SS`.
    pub(crate) fn hms(&self) -> &str {
        std::str::from_utf8(&self.hms).unwrap_or("00:00:00")
    }
}

/// `HH:MM:SS` of `secs` since the epoch in local time (UTC if the time zone cannot be read).
pub(crate) fn local_hms(secs: u64) -> [u8; 8] {
    let t = libc::time_t::try_from(secs).unwrap_or(libc::time_t::MAX);
    let mut tm = std::mem::MaybeUninit::<libc::tm>::zeroed();
    // SAFETY: both pointers are valid for the call; localtime_r writes only `tm` and is thread-safe.
    let local = unsafe { !libc::localtime_r(&t, tm.as_mut_ptr()).is_null() };
    let (h, m, s) = if local {
        // SAFETY: localtime_r succeeded and filled `tm` (it was zeroed before in any case).
        let tm = unsafe { tm.assume_init() };
        (tm.tm_hour as u64, tm.tm_min as u64, tm.tm_sec as u64)
    } else {
        (secs / 3600 % 24, secs / 60 % 60, secs % 60)
    };
    let digit = |v: u64| b'0' + (v % 10) as u8;
    [
        digit(h / 10),
        digit(h),
        b':',
        digit(m / 10),
        digit(m),
        b':',
        digit(s / 10),
        digit(s),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_path(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("rmm-debug-log-{}-{name}", std::process::id()))
    }

    /// Checks one line against `[%6t][%H:%M:%S:%f][%-6l] %v` and returns (level, message).
    fn parse_line(line: &str) -> (String, String) {
        let rest = line.strip_prefix('[').unwrap_or_else(|| panic!("{line:?}"));
        let (tid, rest) = rest.split_once("][").unwrap();
        assert_eq!(
            tid.len(),
            6.max(tid.trim_start().len()),
            "%6t pads to 6: {line:?}"
        );
        assert_eq!(
            tid.trim_start().parse::<u64>().unwrap(),
            os_thread_id(),
            "{line:?}"
        );
        let (time, rest) = rest.split_once("][").unwrap();
        let parts: Vec<&str> = time.split(':').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [2, 2, 2, 6],
            "{line:?}"
        );
        assert!(
            parts.iter().all(|p| p.bytes().all(|b| b.is_ascii_digit())),
            "{line:?}"
        );
        let (level, message) = rest.split_once("] ").unwrap();
        assert!(level.len() >= 6, "%-6l pads to 6: {line:?}");
        (level.trim_end().to_string(), message.to_string())
    }

    #[test]
    fn a_debug_line_reaches_the_file_in_rmm_pattern() {
        let path = temp_path("pattern");
        let file = File::create(&path).unwrap();
        let out = Arc::new(Sink::new(Box::new(BufWriter::new(file))));
        let (subscriber, filter) = subscriber(out.clone());
        filter.reload(Level::Debug.filter()).unwrap();
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!(target: "rmm_core::test", "outstanding: {} B", 4096);
            tracing::trace!(target: "rmm_core::test", "below the level");
            tracing::warn!(target: "rmm_core::test", "careful");
            tracing::error!(target: CRITICAL_TARGET, "cannot go on");
            tracing::error!(target: "some_other_crate", "not rmm's");
        });
        out.flush();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let lines: Vec<(String, String)> = text.lines().map(parse_line).collect();
        let expected = [
            ("debug", "outstanding: 4096 B"),
            ("warning", "careful"),
            ("critical", "cannot go on"),
        ];
        let lines: Vec<(&str, &str)> = lines
            .iter()
            .map(|(l, m)| (l.as_str(), m.as_str()))
            .collect();
        assert_eq!(lines, expected, "{text}");
    }

    /// Counts the events that reach it.
    struct Count(Arc<std::sync::atomic::AtomicUsize>);

    impl<S: Subscriber> tracing_subscriber::Layer<S> for Count {
        fn on_event(&self, _: &Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn level_filters_match_rapids_logger() {
        // The events logged at each level, from trace to critical.
        let passing = |level: Level| {
            let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let subscriber = Registry::default()
                .with(level.filter())
                .with(Count(count.clone()));
            tracing::subscriber::with_default(subscriber, || {
                tracing::trace!(target: "rmm_core::x", "m");
                tracing::debug!(target: "rmm_core::x", "m");
                tracing::info!(target: "rmm_core::x", "m");
                tracing::warn!(target: "rmm_core::x", "m");
                tracing::error!(target: "rmm_core::x", "m");
                tracing::error!(target: CRITICAL_TARGET, "m");
                tracing::error!(target: "not_ours", "m");
            });
            count.load(Ordering::SeqCst)
        };
        let counts: Vec<usize> = Level::ALL.into_iter().map(passing).collect();
        assert_eq!(counts, [6, 5, 4, 3, 2, 1, 0]);
    }

    #[test]
    fn level_names_round_trip_and_order() {
        for level in Level::ALL {
            assert_eq!(Level::from_name(level.name()), Some(level));
            assert_eq!(Level::from_u8(level as u8), level);
        }
        assert_eq!(Level::from_name("warning"), None);
        assert_eq!(Level::Warn.line_name(), "warning");
        assert!(Level::Trace < Level::Off);
    }

    #[test]
    fn wall_clock_is_well_formed() {
        let now = WallClock::now();
        let hms = now.hms();
        assert_eq!(hms.len(), 8);
        let fields: Vec<u32> = hms.split(':').map(|f| f.parse().unwrap()).collect();
        assert!(fields[0] < 24 && fields[1] < 60 && fields[2] < 61, "{hms}");
        assert!(now.micros < 1_000_000);
        assert_eq!(local_hms(0).len(), 8);
        assert!(os_thread_id() > 0);
        let other = std::thread::spawn(os_thread_id).join().unwrap();
        assert_ne!(other, os_thread_id(), "each thread has its own id");
    }
}
