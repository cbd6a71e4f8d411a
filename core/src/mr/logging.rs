//! `logging_resource_adaptor`: a CSV log of every allocation and free, in RMM's format, which the
//! replay tool reads back.
//!
//! The log starts with RMM's header `Thread,Time,Action,Pointer,Size,Stream`; each event is one
//! line `%t,%H:%M:%S.%f,<action>,<ptr>,<size>,<stream>`:
//! - `Thread`: the OS thread id (`gettid`), decimal;
//! - `Time`: local wall-clock time `HH:MM:SS.ffffff`;
//! - `Action`: `allocate`, `free` or `allocate failure`;
//! - `Pointer`: lowercase hex `0x…`, or `(nil)` for null (as glibc's `%p`, which RMM uses);
//! - `Size`: the bytes requested, decimal;
//! - `Stream`: the `cudaStream_t` handle in hex, `0x0` for the default stream.
//!
//! A line is formatted before the log's lock is taken; only the copy into the CSV writer's buffer
//! happens under it. Writing can fail (a full disk, a closed pipe): the allocation still succeeds,
//! the first failure is reported on rmm's debug log and, when nothing would record that, on stderr
//! (never silently), and [`LoggingResourceAdaptor::lost_events`] counts the events not written. Frees are logged before they are forwarded, as
//! RMM does, so the log orders a free before any reuse of its memory.

use std::cell::Cell;
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::cuda::Stream;
use crate::debug_log::{os_thread_id, report_unheard, WallClock};
use crate::error::{Error, Result};
use crate::mr::detail::forward::forward_to_upstream;
use crate::resource::{AnyResource, MemoryResource};

/// The environment variable [`LoggingResourceAdaptor::from_env`] reads (as RMM's).
pub const LOG_FILE_ENV: &str = "RMM_LOG_FILE";

/// The first line of every log (RMM's `header()`).
pub const HEADER: &str = "Thread,Time,Action,Pointer,Size,Stream";

/// What a log line records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Allocate,
    Free,
    AllocateFailure,
}

impl Action {
    const fn as_str(self) -> &'static str {
        match self {
            Action::Allocate => "allocate",
            Action::Free => "free",
            Action::AllocateFailure => "allocate failure",
        }
    }
}

type CsvSink = csv::Writer<LogOutput>;

/// Where the CSV lines go. A file keeps lines in the CSV writer's buffer until a flush, as RMM's
/// file sink buffers; a caller's writer (RMM's `std::ostream` constructor) gets every line as it
/// is logged, and its own `flush` only on an explicit flush or auto-flush, as RMM's ostream sink
/// writes each line into the stream and leaves buffering to it (gtest's `CaptureStdout` sees the
/// header at once: RMM's `Adaptor.STDOUT`).
struct LogOutput {
    out: Box<dyn Write + Send>,
    lines_through: bool,
    /// Set by [`flush_all`] around its flush (the CSV writer hands out `&` only); the log's mutex
    /// is held meanwhile.
    flush_through: AtomicBool,
    /// The first failure of `out` since the caller last looked ([`handed_over`]).
    failure: Cell<Option<std::io::Error>>,
}

impl Write for LogOutput {
    /// Hands `buf` over whole. A failure drops it (its events are lost, and the caller reports
    /// that through [`handed_over`]) instead of leaving it in the CSV writer's buffer, which would
    /// send it again with the next lines, and lines the output did take twice.
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Err(e) = self.out.write_all(buf) {
            self.failure.get_mut().get_or_insert(e);
        }
        Ok(buf.len())
    }

    /// With `lines_through`, the CSV writer's per-line flush only hands the line over.
    fn flush(&mut self) -> std::io::Result<()> {
        if self.lines_through && !self.flush_through.load(Ordering::Relaxed) {
            Ok(())
        } else {
            self.out.flush()
        }
    }
}

/// `result` of a CSV write or flush, failed if the output failed meanwhile.
fn handed_over(log: &CsvSink, result: csv::Result<()>) -> csv::Result<()> {
    result?;
    match log.get_ref().failure.take() {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// Hands everything buffered to the output and flushes the output itself.
fn flush_all(log: &mut CsvSink) -> csv::Result<()> {
    log.get_ref().flush_through.store(true, Ordering::Relaxed);
    let result = log.flush();
    log.get_ref().flush_through.store(false, Ordering::Relaxed);
    handed_over(log, result.map_err(Into::into))
}

struct Inner {
    upstream: AnyResource,
    log: Mutex<CsvSink>,
    file_name: Option<PathBuf>,
    auto_flush: AtomicBool,
    /// Set once the first write failure has been reported (later ones are only traced).
    write_failed: AtomicBool,
    /// Events whose line could not be written.
    lost: AtomicU64,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, CsvSink> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends one event; a failure to write is reported, never returned.
    fn record(&self, action: Action, ptr: *mut u8, bytes: usize, stream: Stream) {
        let line = Line::new(action, ptr, bytes, stream);
        let result = self.write(&mut self.lock(), &line);
        if let Err(e) = result {
            self.lost.fetch_add(1, Ordering::Relaxed);
            self.report_write_failure(&e);
        }
    }

    fn write(&self, log: &mut CsvSink, line: &Line) -> csv::Result<()> {
        let written = log.write_record(line.fields());
        handed_over(log, written)?;
        if self.auto_flush.load(Ordering::Relaxed) {
            flush_all(log)?;
        } else if log.get_ref().lines_through {
            let flushed = log.flush();
            handed_over(log, flushed.map_err(Into::into))?;
        }
        Ok(())
    }

    /// Runs `free` and logs it, unless the upstream refused it as an invalid argument (then
    /// nothing was freed, and a `free` line would make a replay free live memory). The log stays
    /// locked during the free, so no allocation that reuses the memory is logged before it.
    fn logged_free(
        &self,
        ptr: *mut u8,
        bytes: usize,
        stream: Stream,
        free: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let line = Line::new(Action::Free, ptr, bytes, stream);
        let mut log = self.lock();
        let result = free();
        if matches!(result, Err(Error::InvalidArgument(_))) {
            return result;
        }
        let written = self.write(&mut log, &line);
        drop(log);
        if let Err(e) = written {
            self.lost.fetch_add(1, Ordering::Relaxed);
            self.report_write_failure(&e);
        }
        result
    }

    fn report_write_failure(&self, error: &dyn std::fmt::Display) {
        let name = self
            .file_name
            .as_deref()
            .map_or_else(|| "its writer".into(), |p| p.display().to_string());
        if self.write_failed.swap(true, Ordering::Relaxed) {
            tracing::trace!("logging_resource_adaptor: writing to {name}: {error}");
        } else {
            report_unheard(format_args!(
                "logging_resource_adaptor: writing to {name} failed, events are being lost: {error}"
            ));
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Err(e) = flush_all(&mut self.lock()) {
            self.report_write_failure(&e);
        }
    }
}

/// One formatted event: the six fields in one string, cut at `ends`.
struct Line {
    text: String,
    ends: [usize; 6],
}

impl Line {
    fn new(action: Action, ptr: *mut u8, bytes: usize, stream: Stream) -> Self {
        let now = WallClock::now();
        let mut text = String::with_capacity(96);
        let mut ends = [0; 6];
        // Writing into a String cannot fail.
        let _ = write!(text, "{}", os_thread_id());
        ends[0] = text.len();
        let _ = write!(text, "{}.{:06}", now.hms(), now.micros);
        ends[1] = text.len();
        text.push_str(action.as_str());
        ends[2] = text.len();
        if ptr.is_null() {
            text.push_str("(nil)");
        } else {
            let _ = write!(text, "{:#x}", ptr as usize);
        }
        ends[3] = text.len();
        let _ = write!(text, "{bytes}");
        ends[4] = text.len();
        let _ = write!(text, "{stream}");
        ends[5] = text.len();
        Self { text, ends }
    }

    fn fields(&self) -> impl Iterator<Item = &str> {
        let starts = std::iter::once(0).chain(self.ends.into_iter().take(5));
        starts
            .zip(self.ends)
            .map(|(start, end)| &self.text[start..end])
    }
}

/// Logs every allocation and free of its upstream as CSV (RMM's `logging_resource_adaptor`).
///
/// Clones share the log. The log is flushed when the last clone drops, by [`flush`], or after
/// each line with [`with_auto_flush`]. An adaptor kept until the process exits (in a `static`,
/// say) is never dropped: flush it yourself.
///
/// [`flush`]: LoggingResourceAdaptor::flush
/// [`with_auto_flush`]: LoggingResourceAdaptor::with_auto_flush
///
/// ```
/// use rmm_core::{cuda::Stream, mr::{LoggingResourceAdaptor, SystemMemoryResource}, MemoryResource};
/// let path = std::env::temp_dir().join(format!("rmm-doc-{}.csv", std::process::id()));
/// let mr = LoggingResourceAdaptor::new(SystemMemoryResource::new(), &path)?;
/// let p = mr.allocate(Stream::DEFAULT, 100, 256)?;
/// // SAFETY: `p` came from `mr` with these arguments.
/// unsafe { mr.deallocate(Stream::DEFAULT, p, 100, 256)? };
/// mr.flush()?;
/// let log = std::fs::read_to_string(&path).unwrap();
/// let lines: Vec<&str> = log.lines().collect();
/// assert_eq!(lines[0], "Thread,Time,Action,Pointer,Size,Stream");
/// assert!(lines[1].contains(&format!(",allocate,{:#x},100,0x0", p as usize)));
/// assert!(lines[2].contains(",free,"));
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone)]
pub struct LoggingResourceAdaptor {
    inner: Arc<Inner>,
}

impl LoggingResourceAdaptor {
    /// Logs to the file at `path`, created or truncated (RMM's filename constructor).
    ///
    /// The path is used as given; RMM's Python layer inserts `.dev<N>` before the extension, which
    /// is the Python binding's business.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the file cannot be created or the header cannot be written.
    pub fn new<R: MemoryResource>(upstream: R, path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let file = std::fs::File::create(path).map_err(|e| {
            Error::invalid(format!(
                "cannot create the allocation log {}: {e}",
                path.display()
            ))
        })?;
        Self::build(
            AnyResource::new(upstream),
            Box::new(file),
            Some(path.to_path_buf()),
        )
    }

    /// Logs to the file named by `RMM_LOG_FILE` (RMM's constructor without a file name).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `RMM_LOG_FILE` is unset (RMM's message), or as
    /// [`LoggingResourceAdaptor::new`].
    pub fn from_env<R: MemoryResource>(upstream: R) -> Result<Self> {
        Self::new(upstream, Self::default_file_name()?)
    }

    /// Logs to `writer` (RMM's `std::ostream` constructor); [`file_name`] is then `None`.
    ///
    /// [`file_name`]: LoggingResourceAdaptor::file_name
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the header cannot be written.
    pub fn with_writer<R: MemoryResource>(
        upstream: R,
        writer: impl Write + Send + 'static,
    ) -> Result<Self> {
        Self::build(AnyResource::new(upstream), Box::new(writer), None)
    }

    /// The file named by `RMM_LOG_FILE` (RMM's `get_default_filename`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `RMM_LOG_FILE` is unset.
    pub fn default_file_name() -> Result<PathBuf> {
        file_name_from_env(std::env::var_os(LOG_FILE_ENV))
    }

    fn build(
        upstream: AnyResource,
        out: Box<dyn Write + Send>,
        file_name: Option<PathBuf>,
    ) -> Result<Self> {
        let lines_through = file_name.is_none();
        let mut log = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(LogOutput {
                out,
                lines_through,
                flush_through: AtomicBool::new(false),
                failure: Cell::new(None),
            });
        log.write_record(HEADER.split(',')).map_err(|e| {
            Error::invalid(format!("cannot write the allocation log's header: {e}"))
        })?;
        let inner = Inner {
            upstream,
            log: Mutex::new(log),
            file_name,
            auto_flush: AtomicBool::new(false),
            write_failed: AtomicBool::new(false),
            lost: AtomicU64::new(0),
        };
        if lines_through {
            // A caller's writer gets the header now; like a later line, a failure is reported,
            // not returned (an ostream in a bad state does not fail RMM's constructor either).
            let mut log = inner.lock();
            let flushed = log.flush();
            if let Err(e) = handed_over(&log, flushed.map_err(Into::into)) {
                drop(log);
                inner.report_write_failure(&e);
            }
        }
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// With `on`, every line is flushed as it is written (RMM's `auto_flush`); the lines so far
    /// are flushed now.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when flushing fails.
    pub fn with_auto_flush(self, on: bool) -> Result<Self> {
        self.inner.auto_flush.store(on, Ordering::Relaxed);
        if on {
            self.flush()?;
        }
        Ok(self)
    }

    /// True when every line is flushed as it is written.
    pub fn auto_flush(&self) -> bool {
        self.inner.auto_flush.load(Ordering::Relaxed)
    }

    /// Writes out the buffered lines (RMM's `flush`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the file or writer fails.
    pub fn flush(&self) -> Result<()> {
        flush_all(&mut self.inner.lock())
            .map_err(|e| Error::invalid(format!("flushing the allocation log: {e}")))
    }

    /// The events (allocations, frees, failures) whose line could not be written to the log.
    pub fn lost_events(&self) -> u64 {
        self.inner.lost.load(Ordering::Relaxed)
    }

    /// The log file, or `None` when logging to a writer (RMM's Python `get_file_name`).
    pub fn file_name(&self) -> Option<&Path> {
        self.inner.file_name.as_deref()
    }

    /// The log's first line, `Thread,Time,Action,Pointer,Size,Stream` (RMM's `header`).
    pub fn header(&self) -> &'static str {
        HEADER
    }

    /// The resource the events are forwarded to (RMM's `get_upstream_resource`).
    pub fn upstream(&self) -> &AnyResource {
        &self.inner.upstream
    }
}

/// RMM's `get_default_filename` on the value of `RMM_LOG_FILE`.
fn file_name_from_env(value: Option<std::ffi::OsString>) -> Result<PathBuf> {
    value.map(PathBuf::from).ok_or_else(|| {
        Error::invalid(
            "RMM logging requested without an explicit file name, but RMM_LOG_FILE is unset",
        )
    })
}

impl std::fmt::Debug for LoggingResourceAdaptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoggingResourceAdaptor")
            .field("upstream", &self.inner.upstream)
            .field("file_name", &self.inner.file_name)
            .finish()
    }
}

impl MemoryResource for LoggingResourceAdaptor {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        match self.inner.upstream.allocate(stream, bytes, alignment) {
            Ok(ptr) => {
                self.inner.record(Action::Allocate, ptr, bytes, stream);
                Ok(ptr)
            }
            Err(e) => {
                self.inner
                    .record(Action::AllocateFailure, std::ptr::null_mut(), bytes, stream);
                Err(e)
            }
        }
    }

    /// A free the upstream refuses as an invalid argument is not logged.
    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
    ) -> Result<()> {
        self.inner.logged_free(ptr, bytes, stream, || {
            // SAFETY: forwarded caller contract; the memory came from the upstream.
            unsafe {
                self.inner
                    .upstream
                    .deallocate(stream, ptr, bytes, alignment)
            }
        })
    }

    fn allocate_sync(&self, bytes: usize, alignment: usize) -> Result<*mut u8> {
        match self.inner.upstream.allocate_sync(bytes, alignment) {
            Ok(ptr) => {
                self.inner
                    .record(Action::Allocate, ptr, bytes, Stream::DEFAULT);
                Ok(ptr)
            }
            Err(e) => {
                self.inner.record(
                    Action::AllocateFailure,
                    std::ptr::null_mut(),
                    bytes,
                    Stream::DEFAULT,
                );
                Err(e)
            }
        }
    }

    unsafe fn deallocate_sync(&self, ptr: *mut u8, bytes: usize, alignment: usize) -> Result<()> {
        self.inner.logged_free(ptr, bytes, Stream::DEFAULT, || {
            // SAFETY: forwarded caller contract.
            unsafe { self.inner.upstream.deallocate_sync(ptr, bytes, alignment) }
        })
    }

    forward_to_upstream! {
        name: "logging_resource_adaptor",
        upstream: upstream,
        identity: inner,
        forward: access
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mr::{SimulatedMemoryResource, SystemMemoryResource};
    use crate::resource::Access;
    use crate::testing::{Probe, SharedBuffer};

    /// A writer that always fails.
    struct Broken;

    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk full"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Err(std::io::Error::other("disk full"))
        }
    }

    /// One parsed log line, as RMM's replay parser reads it.
    #[derive(Debug, PartialEq, Eq)]
    struct Event {
        thread: u64,
        action: String,
        pointer: usize,
        size: usize,
        stream: usize,
    }

    fn hex(field: &str) -> usize {
        if field == "(nil)" {
            return 0;
        }
        let digits = field
            .strip_prefix("0x")
            .unwrap_or_else(|| panic!("{field:?} is not 0x-prefixed hex"));
        assert_eq!(digits, digits.to_lowercase(), "lowercase hex");
        usize::from_str_radix(digits, 16).unwrap()
    }

    /// Parses a log with the csv crate: the exact header, six columns, well-formed fields.
    fn parse(log: &str) -> Vec<Event> {
        let mut reader = csv::Reader::from_reader(log.as_bytes());
        assert_eq!(
            reader
                .headers()
                .unwrap()
                .iter()
                .collect::<Vec<_>>()
                .join(","),
            HEADER
        );
        assert!(log.starts_with(&format!("{HEADER}\n")), "{log}");
        reader
            .records()
            .map(|record| {
                let record = record.unwrap();
                assert_eq!(record.len(), 6, "{record:?}");
                let time: Vec<&str> = record[1].split(['.', ':']).collect();
                assert_eq!(
                    time.iter().map(|t| t.len()).collect::<Vec<_>>(),
                    [2, 2, 2, 6],
                    "{record:?}"
                );
                assert!(
                    time.iter().all(|t| t.bytes().all(|b| b.is_ascii_digit())),
                    "{record:?}"
                );
                assert!(
                    ["allocate", "free", "allocate failure"].contains(&&record[2]),
                    "{record:?}"
                );
                Event {
                    thread: record[0].parse().unwrap(),
                    action: record[2].to_string(),
                    pointer: hex(&record[3]),
                    size: record[4].parse().unwrap(),
                    stream: hex(&record[5]),
                }
            })
            .collect()
    }

    fn event(action: &str, pointer: *mut u8, size: usize, stream: usize) -> Event {
        Event {
            thread: os_thread_id(),
            action: action.into(),
            pointer: pointer as usize,
            size,
            stream,
        }
    }

    #[test]
    fn header_then_one_line_per_event_over_host_memory() {
        let out = SharedBuffer::default();
        let mr =
            LoggingResourceAdaptor::with_writer(Probe::new(Access::HOST), out.clone()).unwrap();
        assert_eq!(mr.header(), HEADER);
        assert_eq!(mr.file_name(), None);
        assert_eq!(mr.access(), Access::HOST, "access comes from the upstream");
        let a = mr.allocate(Stream::DEFAULT, 100, 256).unwrap();
        let b = mr.allocate_sync(5000, 64).unwrap();
        let zero = mr.allocate(Stream::DEFAULT, 0, 256).unwrap();
        // SAFETY: each pointer came from `mr` with these arguments.
        unsafe {
            mr.deallocate(Stream::DEFAULT, a, 100, 256).unwrap();
            mr.deallocate_sync(b, 5000, 64).unwrap();
            mr.deallocate(Stream::DEFAULT, zero, 0, 256).unwrap();
        }
        mr.flush().unwrap();
        let probe = mr.upstream().downcast_ref::<Probe>().unwrap();
        assert_eq!(probe.allocations(), 3, "the upstream did the allocating");
        assert_eq!(probe.live.load(Ordering::SeqCst), 0);
        let log = out.text();
        assert_eq!(
            parse(&log),
            [
                event("allocate", a, 100, 0),
                event("allocate", b, 5000, 0),
                event("allocate", zero, 0, 0),
                event("free", a, 100, 0),
                event("free", b, 5000, 0),
                event("free", zero, 0, 0),
            ]
        );
        assert!(
            log.contains(",allocate,(nil),0,0x0\n"),
            "null prints as glibc's %p does: {log}"
        );
        assert!(
            log.contains(&format!(",allocate,{:#x},100,0x0\n", a as usize)),
            "{log}"
        );
    }

    #[test]
    fn failures_are_logged_and_streams_are_hex_over_a_simulated_device() {
        let out = SharedBuffer::default();
        let gpu = SimulatedMemoryResource::new(1 << 20).unwrap();
        let mr = LoggingResourceAdaptor::with_writer(gpu.clone(), out.clone()).unwrap();
        // SAFETY: a made-up handle; the simulated device never hands streams to CUDA.
        let stream = unsafe { Stream::from_raw(0x7f3a_0000_12c0) };
        let p = mr.allocate(stream, 4096, 256).unwrap();
        let err = mr.allocate(Stream::PER_THREAD, 2 << 20, 256).unwrap_err();
        assert!(
            err.is_out_of_memory(),
            "the upstream's error is passed on: {err}"
        );
        // SAFETY: from allocate above.
        unsafe { mr.deallocate(stream, p, 4096, 256).unwrap() };
        assert_eq!(gpu.usage().live_allocations, 0);
        mr.flush().unwrap();
        let log = out.text();
        assert_eq!(
            parse(&log),
            [
                event("allocate", p, 4096, 0x7f3a_0000_12c0),
                event("allocate failure", std::ptr::null_mut(), 2 << 20, 2),
                event("free", p, 4096, 0x7f3a_0000_12c0),
            ]
        );
        assert!(
            log.contains(",allocate failure,(nil),2097152,0x2\n"),
            "{log}"
        );
        assert!(log.contains(",0x7f3a000012c0\n"), "{log}");
    }

    #[test]
    fn file_log_is_truncated_flushed_and_named() {
        let path =
            std::env::temp_dir().join(format!("rmm-logging-{}-file.csv", std::process::id()));
        std::fs::write(&path, "old contents\n").unwrap();
        let mr = LoggingResourceAdaptor::new(SystemMemoryResource::new(), &path).unwrap();
        assert_eq!(mr.file_name(), Some(path.as_path()));
        let p = mr.allocate(Stream::DEFAULT, 64, 256).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "",
            "buffered until flushed"
        );
        mr.flush().unwrap();
        assert_eq!(
            parse(&std::fs::read_to_string(&path).unwrap()),
            [event("allocate", p, 64, 0)]
        );
        let clone = mr.clone();
        drop(mr);
        // SAFETY: from allocate above; clones share the upstream.
        unsafe { clone.deallocate(Stream::DEFAULT, p, 64, 256).unwrap() };
        drop(clone);
        let events = parse(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(events.len(), 2, "the last clone flushes on drop");
        std::fs::remove_file(&path).unwrap();
        let missing = std::env::temp_dir().join("rmm-no-such-dir").join("x.csv");
        let err = LoggingResourceAdaptor::new(SystemMemoryResource::new(), &missing).unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("x.csv"),
            "{err}"
        );
    }

    #[test]
    fn auto_flush_writes_each_line_at_once() {
        let path =
            std::env::temp_dir().join(format!("rmm-logging-{}-auto.csv", std::process::id()));
        let mr = LoggingResourceAdaptor::new(SystemMemoryResource::new(), &path)
            .unwrap()
            .with_auto_flush(true)
            .unwrap();
        assert!(mr.auto_flush());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{HEADER}\n"),
            "the header is flushed"
        );
        let p = mr.allocate(Stream::DEFAULT, 64, 256).unwrap();
        assert_eq!(parse(&std::fs::read_to_string(&path).unwrap()).len(), 1);
        // SAFETY: from allocate above.
        unsafe { mr.deallocate(Stream::DEFAULT, p, 64, 256).unwrap() };
        assert_eq!(parse(&std::fs::read_to_string(&path).unwrap()).len(), 2);
        drop(mr);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_writer_gets_the_header_and_each_line_as_they_are_logged() {
        // RMM's std::ostream constructor: lines go into the stream at once (gtest's CaptureStdout
        // reads the header before the adaptor is gone); a file keeps them until a flush.
        let out = SharedBuffer::default();
        let mr =
            LoggingResourceAdaptor::with_writer(SystemMemoryResource::new(), out.clone()).unwrap();
        assert_eq!(out.text(), format!("{HEADER}\n"));
        let p = mr.allocate(Stream::DEFAULT, 64, 256).unwrap();
        assert_eq!(parse(&out.text()).len(), 1, "{}", out.text());
        // SAFETY: from allocate above.
        unsafe { mr.deallocate(Stream::DEFAULT, p, 64, 256).unwrap() };
        assert_eq!(parse(&out.text()).len(), 2, "{}", out.text());
    }

    #[test]
    fn a_failing_log_never_fails_an_allocation() {
        let mr = LoggingResourceAdaptor::with_writer(SystemMemoryResource::new(), Broken).unwrap();
        // The header's hand-over failed (reported, not returned); switching auto-flush on (for
        // every clone) flushes the writer, and fails.
        let err = mr.clone().with_auto_flush(true).unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument(_)),
            "flush reports the writer's error: {err}"
        );
        assert!(mr.auto_flush());
        for _ in 0..3 {
            let p = mr.allocate(Stream::DEFAULT, 64, 256).unwrap();
            // SAFETY: from allocate above.
            unsafe { mr.deallocate(Stream::DEFAULT, p, 64, 256).unwrap() };
        }
        assert!(
            mr.inner.write_failed.load(Ordering::Relaxed),
            "the failure was reported"
        );
        assert_eq!(
            mr.lost_events(),
            6,
            "three allocations and three frees were lost"
        );
        assert!(mr.flush().is_err());
    }

    /// Issue 30: a failing allocation log was silent unless RMM_DEBUG_LOG_FILE was set. With no
    /// subscriber anywhere (a child process), the failure reaches stderr.
    #[test]
    fn a_failing_log_is_heard_on_stderr_when_nothing_records_events() {
        const CHILD: &str = "RMM_LOG_FAILURE_CHILD";
        if std::env::var_os(CHILD).is_some() {
            let mr =
                LoggingResourceAdaptor::with_writer(SystemMemoryResource::new(), Broken).unwrap();
            let p = mr.allocate(Stream::DEFAULT, 64, 256).unwrap();
            // SAFETY: from allocate above.
            unsafe { mr.deallocate(Stream::DEFAULT, p, 64, 256).unwrap() };
            return;
        }
        let test =
            "mr::logging::tests::a_failing_log_is_heard_on_stderr_when_nothing_records_events";
        let out = crate::testing::rerun_test(test, &[(CHILD, "1")])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert_eq!(
            stderr.matches("rmm: logging_resource_adaptor: writing to its writer failed, events are being lost: disk full").count(),
            1,
            "reported once: {stderr}"
        );
        // With a subscriber, the event goes to it (and not to stderr).
        let seen = SharedBuffer::default();
        let subscriber = tracing_subscriber::fmt().with_writer({
            let seen = seen.clone();
            move || seen.clone()
        });
        tracing::subscriber::with_default(subscriber.finish(), || {
            let mr =
                LoggingResourceAdaptor::with_writer(SystemMemoryResource::new(), Broken).unwrap();
            assert_eq!(mr.lost_events(), 0, "the header is not an event");
        });
        assert!(
            seen.text().contains("events are being lost"),
            "{}",
            seen.text()
        );
    }

    #[test]
    fn rmm_log_file_names_the_default_file() {
        assert_eq!(
            file_name_from_env(Some("/tmp/rmm.csv".into())).unwrap(),
            PathBuf::from("/tmp/rmm.csv")
        );
        let err = file_name_from_env(None).unwrap_err();
        assert_eq!(
            err,
            Error::invalid(
                "RMM logging requested without an explicit file name, but RMM_LOG_FILE is unset"
            )
        );
    }

    #[test]
    fn clones_share_the_log_and_compare_equal() {
        let out = SharedBuffer::default();
        let a =
            LoggingResourceAdaptor::with_writer(SystemMemoryResource::new(), out.clone()).unwrap();
        let b = a.clone();
        assert!(a.is_equal(&b) && a.is_equal(&AnyResource::new(b.clone())));
        let other =
            LoggingResourceAdaptor::with_writer(SystemMemoryResource::new(), std::io::sink())
                .unwrap();
        assert!(!a.is_equal(&other));
        assert!(!a.is_equal(&SystemMemoryResource::new()));
        assert_eq!(a.name(), "logging_resource_adaptor");
        assert!(format!("{a:?}").contains("system_memory_resource"));
    }

    #[test]
    fn threads_write_whole_lines() {
        let out = SharedBuffer::default();
        let mr =
            LoggingResourceAdaptor::with_writer(SystemMemoryResource::new(), out.clone()).unwrap();
        let threads: Vec<u64> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|t| {
                    let mr = &mr;
                    scope.spawn(move || {
                        for k in 0..100usize {
                            let bytes = 1 + t * 100 + k;
                            let p = mr.allocate(Stream::DEFAULT, bytes, 256).unwrap();
                            // SAFETY: from allocate above.
                            unsafe { mr.deallocate(Stream::DEFAULT, p, bytes, 256).unwrap() };
                        }
                        os_thread_id()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        mr.flush().unwrap();
        let events = parse(&out.text());
        assert_eq!(events.len(), 8 * 200);
        for (t, tid) in threads.iter().enumerate() {
            let mine: Vec<&Event> = events.iter().filter(|e| e.thread == *tid).collect();
            assert_eq!(mine.len(), 200, "thread {t}");
            for pair in mine.chunks(2) {
                assert_eq!(
                    (pair[0].action.as_str(), pair[1].action.as_str()),
                    ("allocate", "free")
                );
                assert_eq!(
                    (pair[0].pointer, pair[0].size),
                    (pair[1].pointer, pair[1].size)
                );
            }
        }
    }

    crate::mr::test_harness::resource_tests!(over_cuda, || {
        LoggingResourceAdaptor::with_writer(crate::mr::CudaMemoryResource::new(), std::io::sink())
            .map(AnyResource::new)
    });
    crate::mr::test_harness::resource_tests!(over_cuda_async, || {
        LoggingResourceAdaptor::with_writer(
            crate::mr::CudaAsyncMemoryResource::new()?,
            std::io::sink(),
        )
        .map(AnyResource::new)
    });

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn a_real_stream_is_logged_by_its_handle() {
        crate::testing::require_gpu();
        let out = SharedBuffer::default();
        let mr = LoggingResourceAdaptor::with_writer(
            crate::mr::CudaAsyncMemoryResource::new().unwrap(),
            out.clone(),
        )
        .unwrap();
        let stream = crate::cuda::OwnedStream::new(crate::cuda::StreamFlags::NonBlocking).unwrap();
        let p = mr.allocate(stream.stream(), 1 << 20, 256).unwrap();
        // SAFETY: from allocate above; nothing uses it.
        unsafe { mr.deallocate(stream.stream(), p, 1 << 20, 256).unwrap() };
        stream.synchronize().unwrap();
        mr.flush().unwrap();
        let handle = stream.stream().as_raw();
        assert_ne!(handle, 0);
        assert_eq!(
            parse(&out.text()),
            [
                event("allocate", p, 1 << 20, handle),
                event("free", p, 1 << 20, handle)
            ]
        );
    }
}
