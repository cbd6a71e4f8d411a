//! Replaying a log: one thread per logged thread, every event in the log's global order.
//!
//! # Threads
//! A log can name tens of thousands of threads (a program that starts one per task); one OS
//! thread each would exhaust the process. At most [`DEFAULT_MAX_THREADS`] (or the caller's bound)
//! replay threads run: logged thread `t` (by order of first appearance) is replayed on replay
//! thread `t % n`, so each logged thread's events still run on one OS thread, in order. Logged
//! threads that share a replay thread also share its thread-local state (a resource's per-thread
//! caches), which the program did not; with as many logged threads as the bound or fewer, every
//! logged thread has its own, as in RMM's replay.
//!
//! # Ordering
//! RMM's replay keeps the global order with one mutex, one condition variable and an event index:
//! after every event all threads wake up to check whether it is their turn. Here the event index is
//! an atomic, and the thread that finishes event `i` wakes only the owner of event `i + 1`
//! (`Thread::unpark`), and nobody when it owns that event itself. So a run of events on one thread
//! costs no synchronization at all, and a hand-over costs one wake-up, whatever the thread count.
//!
//! # Pointers
//! Logged pointers map to replayed ones (`logged → (replayed, size, stream)`). A free of a pointer
//! the replay does not hold is counted, not fatal: the log may start mid-run, or have lost lines. A
//! free of an allocation whose replay failed is skipped. Whatever is still live at the end is a
//! leak of the log: it is counted and freed, so the resource ends empty.
//!
//! # Measures
//! *Live* bytes come from the log's own sizes, so they do not depend on the resource: they are what
//! the program really held. *Reserved* bytes are what the resource held from its base (the
//! counting adaptor under it), sampled after every event. `1 − peak live / peak reserved` is the
//! fragmentation (plus the rounding) of the resource on this workload.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use rmm_core::cuda::Stream;
use rmm_core::{MemoryResource, DEFAULT_ALIGNMENT};
use serde::Serialize;

use crate::log::{seconds_since_start, Action, Event};
use crate::resources::Setup;
use crate::streams::StreamMap;

/// The progress bar moves every this many events (it takes a lock).
const PROGRESS_STEP: usize = 1024;

/// At most this many failures and problems are kept with their details (all are counted).
pub const MAX_DETAILS: usize = 100;

/// The most replay threads [`replay`] starts (see the module's "Threads").
pub const DEFAULT_MAX_THREADS: usize = 256;

/// Counts for one logged thread.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ThreadStats {
    /// The logged thread id.
    pub thread: u64,
    /// Events replayed on it (allocations and frees).
    pub events: usize,
    /// Allocations replayed.
    pub allocations: usize,
    /// Frees replayed.
    pub frees: usize,
    /// Allocations that failed in the replay.
    pub allocation_failures: usize,
    /// `allocate failure` lines of the log (not replayed).
    pub failures_in_log: usize,
}

/// An allocation that failed in the replay, with what was going on at the time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// The log line.
    pub line: u64,
    /// The logged thread.
    pub thread: u64,
    /// The requested size.
    pub size: usize,
    /// The logged stream, in hex.
    pub stream: String,
    /// Live bytes (from the log) just before the request.
    pub live_bytes: usize,
    /// Bytes the resource held from its base just before the request.
    pub reserved_bytes: usize,
    /// The resource's error.
    pub error: String,
}

/// Something in the log or the replay that is not an allocation failure but is worth a look.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The log line.
    pub line: u64,
    /// What happened.
    pub what: String,
}

/// Totals of a replay.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Allocations replayed.
    pub allocations: usize,
    /// Frees replayed (or skipped, see below).
    pub frees: usize,
    /// Allocations that failed in the replay.
    pub allocation_failures: usize,
    /// Frees the resource rejected.
    pub deallocation_errors: usize,
    /// Frees of pointers not live in the log at that point (counted as errors of the log).
    pub unknown_frees: usize,
    /// Frees skipped because their allocation had failed in the replay.
    pub frees_of_failed_allocations: usize,
    /// Frees whose size differs from their allocation's (freed with the allocation's size).
    pub size_mismatches: usize,
    /// Allocations of a pointer that was already live (the older one is freed at the end).
    pub duplicate_pointers: usize,
    /// Allocations the log never freed (freed by the replay at the end).
    pub leaked_allocations: usize,
    /// Their bytes.
    pub leaked_bytes: usize,
}

/// Memory over the replay: one point per replayed event.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// Seconds since the first event of the log, when it has times.
    pub seconds: Option<Vec<f64>>,
    /// Live bytes after each event (from the log).
    pub live: Vec<usize>,
    /// Reserved bytes after each event.
    pub reserved: Vec<usize>,
}

/// What a replay did.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Events replayed (allocations and frees).
    pub events: usize,
    /// `allocate failure` lines of the log.
    pub failures_in_log: usize,
    /// Totals.
    pub counts: Counts,
    /// Per logged thread, in order of first appearance.
    pub threads: Vec<ThreadStats>,
    /// The OS threads that replayed them (at most the bound given to [`replay_on`]).
    pub replay_threads: usize,
    /// The first [`MAX_DETAILS`] allocation failures, in log order.
    pub failures: Vec<Failure>,
    /// The first [`MAX_DETAILS`] problems, in log order.
    pub problems: Vec<Problem>,
    /// The most bytes live at once (from the log's sizes).
    pub peak_live_bytes: usize,
    /// The most bytes the resource held from its base at once.
    pub peak_reserved_bytes: usize,
    /// Time from the first event to the last, resource calls included.
    pub wall_time: Duration,
    /// Memory over time.
    pub series: Series,
}

impl Outcome {
    /// `1 − peak live / peak reserved`: the share of the resource's memory that the program could
    /// not use at the peak. `None` when an allocation failed (the replay never held the log's peak)
    /// or nothing was reserved.
    pub fn fragmentation(&self) -> Option<f64> {
        if self.counts.allocation_failures > 0 || self.peak_reserved_bytes == 0 {
            return None;
        }
        Some((1.0 - self.peak_live_bytes as f64 / self.peak_reserved_bytes as f64).max(0.0))
    }

    /// True when the resource failed an allocation or rejected a free.
    pub fn failed(&self) -> bool {
        self.counts.allocation_failures > 0 || self.counts.deallocation_errors > 0
    }
}

/// A replay thread panicked (a bug in a resource): the replay stopped.
#[derive(Debug, thiserror::Error)]
#[error("the replay thread of logged thread {thread} panicked: {message}")]
pub struct Panicked {
    /// The logged thread.
    pub thread: u64,
    /// The panic's message.
    pub message: String,
}

/// A logged pointer's replayed allocation.
#[derive(Clone, Copy, Debug)]
enum Slot {
    Live {
        ptr: usize,
        size: usize,
        stream: Stream,
        line: u64,
    },
    Failed,
}

/// What all replay threads share.
struct Shared<'a> {
    events: &'a [Event],
    /// Indices into `events` of the events replayed, in order.
    order: Vec<usize>,
    /// The replay thread of each replayed event.
    owner: Vec<usize>,
    /// The logged thread (index in order of first appearance) of each replayed event.
    logged: Vec<usize>,
    /// Replay threads: logged thread `t` runs on `t % workers`.
    workers: usize,
    /// Live bytes before each replayed event (from the log).
    live_before: Vec<usize>,
    /// The replayed event whose turn it is.
    next: AtomicUsize,
    /// Set when a thread panicked: the others stop waiting.
    aborted: AtomicBool,
    handles: OnceLock<Vec<Thread>>,
    slots: Mutex<HashMap<u64, Slot>>,
    /// Allocations displaced by a duplicate pointer, freed at the end.
    orphans: Mutex<Vec<Slot>>,
    setup: &'a Setup,
    streams: &'a StreamMap,
    progress: &'a ProgressBar,
}

/// What one replay thread gathered.
#[derive(Default)]
struct Gathered {
    /// Its logged threads' counts: logged thread `t` at `t / workers`.
    stats: Vec<ThreadStats>,
    counts: Counts,
    failures: Vec<Failure>,
    problems: Vec<Problem>,
    /// (replayed event, reserved bytes after it).
    samples: Vec<(usize, usize)>,
}

/// Replays `events` on `setup`'s resource, the logged streams mapped by `streams`.
///
/// Blocks until the replay is over; `progress` is set to the number of events done as it goes. Allocation failures
/// are counted in the [`Outcome`], not returned as errors.
///
/// ```
/// use indicatif::ProgressBar;
/// use rmm_replay::{log::parse, replay::replay, resources::setup, streams::StreamMap};
/// let log = "Thread,Time,Action,Pointer,Size,Stream\n\
///            7,10:00:00.000000,allocate,0x1000,4096,0x0\n\
///            7,10:00:00.000010,free,0x1000,4096,0x0\n";
/// let events = parse(log.as_bytes())?;
/// let device = setup(None, Some(1 << 20))?; // a simulated 1 MiB device
/// let streams = StreamMap::new(events.iter().map(|e| e.stream), &device.target)?;
/// let outcome = replay(&events, &device, &streams, &ProgressBar::hidden())?;
/// assert_eq!((outcome.events, outcome.peak_live_bytes, outcome.peak_reserved_bytes), (2, 4096, 4096));
/// assert!(!outcome.failed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`Panicked`] when a replay thread panicked (the other threads stop, and what was still
/// allocated stays allocated).
pub fn replay(
    events: &[Event],
    setup: &Setup,
    streams: &StreamMap,
    progress: &ProgressBar,
) -> Result<Outcome, Panicked> {
    replay_on(events, setup, streams, progress, DEFAULT_MAX_THREADS)
}

/// [`replay`] on at most `max_threads` OS threads (at least one); see the module's "Threads".
///
/// # Errors
/// As [`replay`].
pub fn replay_on(
    events: &[Event],
    setup: &Setup,
    streams: &StreamMap,
    progress: &ProgressBar,
    max_threads: usize,
) -> Result<Outcome, Panicked> {
    // Logged threads in order of first appearance, failures included (they get counted).
    let mut thread_index = HashMap::new();
    let mut threads: Vec<ThreadStats> = Vec::new();
    for e in events {
        let t = *thread_index.entry(e.thread).or_insert_with(|| {
            threads.push(ThreadStats {
                thread: e.thread,
                ..Default::default()
            });
            threads.len() - 1
        });
        if e.action == Action::AllocateFailure {
            threads[t].failures_in_log += 1;
        }
    }
    let order: Vec<usize> = (0..events.len())
        .filter(|&i| events[i].action != Action::AllocateFailure)
        .collect();
    let logged: Vec<usize> = order
        .iter()
        .map(|&i| thread_index[&events[i].thread])
        .collect();
    let workers = threads.len().clamp(1, max_threads.max(1));
    let owner: Vec<usize> = logged.iter().map(|&t| t % workers).collect();
    let mut mine: Vec<Vec<usize>> = vec![Vec::new(); workers];
    for (k, &w) in owner.iter().enumerate() {
        mine[w].push(k);
    }
    let (live_before, live_after, peak_live_bytes) = live_bytes(events, &order);

    let shared = Shared {
        events,
        order,
        owner,
        logged,
        workers,
        live_before,
        next: AtomicUsize::new(0),
        aborted: AtomicBool::new(false),
        handles: OnceLock::new(),
        slots: Mutex::new(HashMap::new()),
        orphans: Mutex::new(Vec::new()),
        setup,
        streams,
        progress,
    };
    // The logged thread of the event being replayed (the one a panic interrupted).
    let current_thread = |shared: &Shared<'_>| {
        let k = shared.next.load(Ordering::Acquire);
        shared.order.get(k).map_or(0, |&i| events[i].thread)
    };
    let (gathered, wall_time) = thread::scope(|scope| {
        let mut workers = Vec::with_capacity(mine.len());
        for (w, mine) in mine.into_iter().enumerate() {
            let shared = &shared;
            let spawned = thread::Builder::new()
                .name(format!("replay-{w}"))
                .spawn_scoped(scope, move || run_thread(shared, w, &mine));
            match spawned {
                Ok(worker) => workers.push(worker),
                Err(e) => {
                    // Nobody has started: release the ones waiting and give up.
                    shared.aborted.store(true, Ordering::Release);
                    workers.iter().for_each(|w| w.thread().unpark());
                    workers.into_iter().for_each(|w| drop(w.join()));
                    let message = format!("cannot start a replay thread: {e}");
                    let thread = threads.get(w).map_or(0, |t| t.thread);
                    return (Err(Panicked { thread, message }), Duration::ZERO);
                }
            }
        }
        // Every thread waits for the handles before its first event.
        let _ = shared
            .handles
            .set(workers.iter().map(|w| w.thread().clone()).collect());
        let started = Instant::now();
        workers.iter().for_each(|w| w.thread().unpark());
        let results: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
        let wall_time = started.elapsed();
        let gathered = results
            .into_iter()
            .map(|r| {
                r.map_err(|payload| Panicked {
                    thread: current_thread(&shared),
                    message: panic_message(payload.as_ref()),
                })
            })
            .collect::<Result<Vec<_>, _>>();
        (gathered, wall_time)
    });
    let gathered = gathered?;

    let mut outcome = Outcome {
        events: shared.order.len(),
        failures_in_log: events.len() - shared.order.len(),
        peak_live_bytes,
        wall_time,
        replay_threads: shared.workers,
        ..Default::default()
    };
    let mut reserved = vec![0; shared.order.len()];
    let mut replayed: Vec<Option<ThreadStats>> = vec![None; threads.len()];
    for (w, g) in gathered.into_iter().enumerate() {
        for (i, stats) in g.stats.into_iter().enumerate() {
            replayed[w + i * shared.workers] = Some(stats);
        }
        add_counts(&mut outcome.counts, &g.counts);
        outcome.failures.extend(g.failures);
        outcome.problems.extend(g.problems);
        for (k, bytes) in g.samples {
            reserved[k] = bytes;
        }
    }
    for (stats, replayed) in threads.iter().zip(replayed) {
        outcome.threads.push(ThreadStats {
            thread: stats.thread,
            failures_in_log: stats.failures_in_log,
            ..replayed.unwrap_or_default()
        });
    }
    outcome.failures.sort_by_key(|f| f.line);
    outcome.failures.truncate(MAX_DETAILS);

    // Free what the log left allocated, so the resource ends empty.
    let leftovers = shared
        .slots
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    let orphans = shared
        .orphans
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    let mut leftovers: Vec<Slot> = leftovers.into_values().chain(orphans).collect();
    leftovers.sort_by_key(|s| match s {
        Slot::Live { line, .. } => *line,
        Slot::Failed => 0,
    });
    for slot in leftovers {
        if let Slot::Live {
            ptr,
            size,
            stream,
            line,
        } = slot
        {
            outcome.counts.leaked_allocations += 1;
            outcome.counts.leaked_bytes += size;
            // SAFETY: `ptr` came from this resource's `allocate` with `size` and the default
            // alignment, and no replayed event uses it any more.
            if let Err(e) = unsafe {
                setup
                    .resource
                    .deallocate(stream, ptr as *mut u8, size, DEFAULT_ALIGNMENT)
            } {
                outcome.counts.deallocation_errors += 1;
                outcome.problems.push(Problem {
                    line,
                    what: format!("freeing the leaked allocation of line {line} failed: {e}"),
                });
            }
        }
    }
    if let Err(e) = streams.synchronize() {
        outcome.problems.push(Problem {
            line: 0,
            what: format!("synchronizing the replay's streams failed: {e}"),
        });
    }
    outcome.problems.sort_by_key(|p| p.line);
    outcome.problems.truncate(MAX_DETAILS);

    outcome.peak_reserved_bytes = reserved
        .iter()
        .copied()
        .max()
        .unwrap_or(0)
        .max(setup.counter.peak_bytes());
    let seconds =
        seconds_since_start(events).map(|all| shared.order.iter().map(|&i| all[i]).collect());
    outcome.series = Series {
        seconds,
        live: live_after,
        reserved,
    };
    Ok(outcome)
}

/// Live bytes before and after each replayed event, and the peak, from the log's own sizes.
fn live_bytes(events: &[Event], order: &[usize]) -> (Vec<usize>, Vec<usize>, usize) {
    let mut sizes: HashMap<u64, usize> = HashMap::new();
    let (mut live, mut peak) = (0usize, 0usize);
    let mut before = Vec::with_capacity(order.len());
    let mut after = Vec::with_capacity(order.len());
    for &i in order {
        let e = &events[i];
        before.push(live);
        match e.action {
            Action::Allocate => {
                if let Some(old) = sizes.insert(e.pointer, e.size) {
                    live -= old;
                }
                live += e.size;
            }
            Action::Free => live -= sizes.remove(&e.pointer).unwrap_or(0),
            Action::AllocateFailure => {}
        }
        peak = peak.max(live);
        after.push(live);
    }
    (before, after, peak)
}

fn add_counts(total: &mut Counts, c: &Counts) {
    total.allocations += c.allocations;
    total.frees += c.frees;
    total.allocation_failures += c.allocation_failures;
    total.deallocation_errors += c.deallocation_errors;
    total.unknown_frees += c.unknown_frees;
    total.frees_of_failed_allocations += c.frees_of_failed_allocations;
    total.size_mismatches += c.size_mismatches;
    total.duplicate_pointers += c.duplicate_pointers;
    total.leaked_allocations += c.leaked_allocations;
    total.leaked_bytes += c.leaked_bytes;
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// Sets `aborted` and wakes everyone if its thread unwinds.
struct AbortOnPanic<'a, 'b>(&'a Shared<'b>);

impl Drop for AbortOnPanic<'_, '_> {
    fn drop(&mut self) {
        if thread::panicking() {
            self.0.aborted.store(true, Ordering::Release);
            for t in self.0.handles.get().into_iter().flatten() {
                t.unpark();
            }
        }
    }
}

/// Replays the events `mine` (indices of replayed events) of replay thread `me`.
fn run_thread(shared: &Shared<'_>, me: usize, mine: &[usize]) -> Gathered {
    let _guard = AbortOnPanic(shared);
    let mut g = Gathered {
        samples: Vec::with_capacity(mine.len()),
        ..Default::default()
    };
    // Start once every thread's handle is known (spurious wake-ups just loop).
    while shared.handles.get().is_none() {
        if shared.aborted.load(Ordering::Acquire) {
            return g;
        }
        thread::park();
    }
    for &k in mine {
        // Wait for our turn (spurious wake-ups just loop).
        while shared.next.load(Ordering::Acquire) != k {
            if shared.aborted.load(Ordering::Acquire) {
                return g;
            }
            thread::park();
        }
        replay_event(shared, k, &mut g);
        g.samples.push((k, shared.setup.reserved_bytes()));
        // Pass the turn: wake the next event's thread unless it is us.
        shared.next.store(k + 1, Ordering::Release);
        if let Some(&next_owner) = shared.owner.get(k + 1) {
            if next_owner != me {
                if let Some(t) = shared.handles.get().and_then(|h| h.get(next_owner)) {
                    t.unpark();
                }
            }
        }
        if (k + 1) % PROGRESS_STEP == 0 || k + 1 == shared.order.len() {
            shared.progress.set_position((k + 1) as u64);
        }
    }
    g
}

fn replay_event(shared: &Shared<'_>, k: usize, g: &mut Gathered) {
    let e = &shared.events[shared.order[k]];
    let local = shared.logged[k] / shared.workers;
    if g.stats.len() <= local {
        g.stats.resize_with(local + 1, ThreadStats::default);
    }
    let stats = &mut g.stats[local];
    let stream = shared.streams.get(e.stream);
    let resource = &shared.setup.resource;
    let problem = |g: &mut Gathered, what: String| {
        if g.problems.len() < MAX_DETAILS {
            g.problems.push(Problem { line: e.line, what });
        }
    };
    stats.events += 1;
    match e.action {
        Action::Allocate => {
            stats.allocations += 1;
            g.counts.allocations += 1;
            let reserved_before = shared.setup.reserved_bytes();
            let slot = match resource.allocate(stream, e.size, DEFAULT_ALIGNMENT) {
                Ok(ptr) => Slot::Live {
                    ptr: ptr as usize,
                    size: e.size,
                    stream,
                    line: e.line,
                },
                Err(error) => {
                    stats.allocation_failures += 1;
                    g.counts.allocation_failures += 1;
                    if g.failures.len() < MAX_DETAILS {
                        g.failures.push(Failure {
                            line: e.line,
                            thread: e.thread,
                            size: e.size,
                            stream: format!("{:#x}", e.stream),
                            live_bytes: shared.live_before[k],
                            reserved_bytes: reserved_before,
                            error: error.to_string(),
                        });
                    }
                    Slot::Failed
                }
            };
            if e.pointer == 0 {
                // A null pointer in the log (a 0-byte request): nothing can free it by name.
                if let Slot::Live { ptr: 1.., .. } = slot {
                    lock(&shared.orphans).push(slot);
                }
                return;
            }
            let displaced = lock(&shared.slots).insert(e.pointer, slot);
            if let Some(old @ Slot::Live { line, .. }) = displaced {
                g.counts.duplicate_pointers += 1;
                problem(
                    g,
                    format!(
                        "{:#x} allocated again while live since line {line}",
                        e.pointer
                    ),
                );
                lock(&shared.orphans).push(old);
            }
        }
        Action::Free => {
            stats.frees += 1;
            g.counts.frees += 1;
            if e.pointer == 0 {
                return;
            }
            let slot = lock(&shared.slots).remove(&e.pointer);
            match slot {
                Some(Slot::Live { ptr, size, .. }) => {
                    if size != e.size {
                        g.counts.size_mismatches += 1;
                        problem(
                            g,
                            format!(
                                "{:#x} freed with {} bytes but allocated with {size}",
                                e.pointer, e.size
                            ),
                        );
                    }
                    // SAFETY: `ptr` came from this resource's `allocate` with `size` bytes and the
                    // default alignment; the log frees it once (the slot is gone now).
                    if let Err(error) = unsafe {
                        resource.deallocate(stream, ptr as *mut u8, size, DEFAULT_ALIGNMENT)
                    } {
                        g.counts.deallocation_errors += 1;
                        problem(
                            g,
                            format!(
                                "the resource rejected the free of {:#x}: {error}",
                                e.pointer
                            ),
                        );
                    }
                }
                Some(Slot::Failed) => g.counts.frees_of_failed_allocations += 1,
                None => {
                    g.counts.unknown_frees += 1;
                    problem(
                        g,
                        format!(
                            "free of {:#x}, which is not live at this point of the log",
                            e.pointer
                        ),
                    );
                }
            }
        }
        Action::AllocateFailure => {}
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::parse;
    use crate::resources::setup;

    const MIB: usize = 1 << 20;

    /// A synthetic log: 4 threads, 3 streams (default, per-thread and a created one), interleaved.
    /// Thread A: 0x1000 (1 MiB), B: 0x2000 (2 MiB), C: 0x3000 (3 MiB), D: 0x4000 (4 MiB), then frees
    /// in mixed order and a second wave. Peak live: 10 MiB (all four), then 4 + 5 = 9 MiB.
    fn four_threads_three_streams() -> String {
        let rows = [
            ("11", "allocate", "0x1000", MIB, "0x0"),
            ("22", "allocate", "0x2000", 2 * MIB, "0x2"),
            ("33", "allocate", "0x3000", 3 * MIB, "0x7f00aa"),
            ("0x2c", "allocate", "0x4000", 4 * MIB, "0x7f00aa"),
            ("22", "free", "0x2000", 2 * MIB, "0x2"),
            ("11", "free", "0x1000", MIB, "0x0"),
            ("33", "free", "0x3000", 3 * MIB, "0x7f00aa"),
            ("11", "allocate", "0x5000", 5 * MIB, "0x0"),
            ("0x2c", "free", "0x4000", 4 * MIB, "0x7f00aa"),
            ("22", "allocate failure", "(nil)", 64 * MIB, "0x2"),
            ("33", "free", "0x5000", 5 * MIB, "0x0"),
        ];
        let mut log = String::from("Thread,Time,Action,Pointer,Size,Stream\n");
        for (i, (t, a, p, s, st)) in rows.iter().enumerate() {
            log += &format!("{t},12:00:{:02}.000000,{a},{p},{s},{st}\n", i);
        }
        log
    }

    fn run(log: &str, gib_bytes: usize) -> Outcome {
        let events = parse(log.as_bytes()).unwrap();
        let device = setup(None, Some(gib_bytes)).unwrap();
        let streams = StreamMap::new(events.iter().map(|e| e.stream), &device.target).unwrap();
        let outcome = replay(&events, &device, &streams, &ProgressBar::hidden()).unwrap();
        assert_eq!(
            device.counter.current_bytes(),
            0,
            "the replay leaves the resource empty"
        );
        outcome
    }

    #[test]
    fn four_threads_on_three_streams_replay_in_order_with_the_right_peaks() {
        let outcome = run(&four_threads_three_streams(), 64 * MIB);
        assert_eq!((outcome.events, outcome.failures_in_log), (10, 1));
        assert_eq!(outcome.peak_live_bytes, 10 * MIB);
        assert_eq!(outcome.peak_reserved_bytes, 10 * MIB);
        assert_eq!(outcome.fragmentation(), Some(0.0));
        assert!(!outcome.failed());
        assert_eq!(
            outcome.counts,
            Counts {
                allocations: 5,
                frees: 5,
                ..Default::default()
            }
        );
        let per_thread: Vec<_> = outcome
            .threads
            .iter()
            .map(|t| (t.thread, t.events, t.failures_in_log))
            .collect();
        assert_eq!(
            per_thread,
            [(11, 3, 0), (22, 2, 1), (33, 3, 0), (0x2c, 2, 0)]
        );
        // Strict global order: reserved bytes follow the log step by step.
        let mib: Vec<_> = outcome.series.reserved.iter().map(|b| b / MIB).collect();
        assert_eq!(mib, [1, 3, 6, 10, 8, 7, 4, 9, 5, 0]);
        assert_eq!(outcome.series.live, outcome.series.reserved);
        assert_eq!(
            outcome.series.seconds.as_ref().unwrap()[9],
            10.0,
            "the failure line is not replayed"
        );
    }

    /// Issue 30: a log with 32,000 thread ids started one OS thread each and aborted. At most
    /// [`DEFAULT_MAX_THREADS`] run now; every logged thread keeps its own counts.
    #[test]
    fn a_log_of_32000_threads_replays_on_a_bounded_pool() {
        const THREADS: usize = 32_000;
        let mut log = String::from("Thread,Action,Pointer,Size,Stream\n");
        // Each thread allocates; then each frees, in reverse order: 64,000 events, 32,000 hand-overs
        // between threads in each half.
        for t in 0..THREADS {
            log += &format!(
                "{},allocate,{:#x},256,0x0\n",
                1000 + t,
                0x10_0000 + 0x100 * t
            );
        }
        for t in (0..THREADS).rev() {
            log += &format!("{},free,{:#x},256,0x0\n", 1000 + t, 0x10_0000 + 0x100 * t);
        }
        let outcome = run(&log, 64 * MIB);
        assert_eq!(outcome.replay_threads, DEFAULT_MAX_THREADS);
        assert_eq!(outcome.threads.len(), THREADS);
        assert!(!outcome.failed());
        assert_eq!(
            (outcome.counts.allocations, outcome.counts.frees),
            (THREADS, THREADS)
        );
        for (t, stats) in outcome.threads.iter().enumerate() {
            assert_eq!(
                (stats.thread, stats.events, stats.allocations, stats.frees),
                (1000 + t as u64, 2, 1, 1),
                "logged thread {t}"
            );
        }
        assert_eq!(outcome.peak_live_bytes, THREADS * 256);
        assert_eq!(outcome.series.live.last(), Some(&0));
    }

    /// Sharing replay threads changes nothing the replay measures: the order is the log's.
    #[test]
    fn fewer_replay_threads_than_logged_ones_give_the_same_replay() {
        let log = four_threads_three_streams();
        let events = parse(log.as_bytes()).unwrap();
        let on = |max_threads: usize| {
            let device = setup(None, Some(64 * MIB)).unwrap();
            let streams = StreamMap::new(events.iter().map(|e| e.stream), &device.target).unwrap();
            replay_on(
                &events,
                &device,
                &streams,
                &ProgressBar::hidden(),
                max_threads,
            )
            .unwrap()
        };
        let (all, two, one) = (on(16), on(2), on(1));
        assert_eq!(
            (all.replay_threads, two.replay_threads, one.replay_threads),
            (4, 2, 1)
        );
        for shared in [&two, &one] {
            assert_eq!(shared.threads, all.threads);
            assert_eq!(shared.counts, all.counts);
            assert_eq!(shared.series.reserved, all.series.reserved);
            assert_eq!(shared.series.live, all.series.live);
        }
    }

    #[test]
    fn a_log_bigger_than_the_device_fails_with_details() {
        let outcome = run(&four_threads_three_streams(), 8 * MIB);
        assert!(outcome.failed());
        // 4 MiB at line 5 does not fit next to 6 MiB; 5 MiB at line 9 fits once the rest is freed.
        assert_eq!(outcome.counts.allocation_failures, 1);
        assert_eq!(
            outcome.counts.frees_of_failed_allocations, 1,
            "its free is skipped, not an error"
        );
        assert_eq!(outcome.counts.unknown_frees, 0);
        let first = &outcome.failures[0];
        assert_eq!(
            (first.line, first.thread, first.size, first.live_bytes),
            (5, 0x2c, 4 * MIB, 6 * MIB)
        );
        assert_eq!(
            (first.reserved_bytes, first.stream.as_str()),
            (6 * MIB, "0x7f00aa")
        );
        assert!(first.error.contains("out of memory"), "{}", first.error);
        assert_eq!(
            outcome.peak_live_bytes,
            10 * MIB,
            "live bytes come from the log, not the replay"
        );
        assert_eq!(outcome.peak_reserved_bytes, 6 * MIB);
        assert_eq!(
            outcome.fragmentation(),
            None,
            "the replay never held the log's peak"
        );
        assert_eq!(outcome.threads[3].allocation_failures, 1);
    }

    #[test]
    fn unknown_frees_duplicates_mismatches_and_leaks_are_counted_not_fatal() {
        let log = "Thread,Time,Action,Pointer,Size,Stream\n\
                   1,00:00:00.0,free,0xdead,100,0x0\n\
                   1,00:00:00.0,allocate,0x100,100,0x0\n\
                   2,00:00:00.0,allocate,0x100,200,0x0\n\
                   2,00:00:00.0,free,0x100,300,0x0\n\
                   1,00:00:00.0,allocate,0x900,1000,0x0\n\
                   1,00:00:00.0,allocate,(nil),0,0x0\n\
                   1,00:00:00.0,free,(nil),0,0x0\n";
        let outcome = run(log, MIB);
        let c = &outcome.counts;
        assert_eq!(
            (c.unknown_frees, c.duplicate_pointers, c.size_mismatches),
            (1, 1, 1)
        );
        assert_eq!(
            (c.leaked_allocations, c.leaked_bytes),
            (2, 1100),
            "the displaced 0x100 and 0x900"
        );
        assert_eq!(c.deallocation_errors, 0);
        assert!(
            !outcome.failed(),
            "log problems are not allocation failures"
        );
        let lines: Vec<_> = outcome.problems.iter().map(|p| p.line).collect();
        assert_eq!(lines, [2, 4, 5]);
        assert_eq!(
            outcome.peak_live_bytes, 1000,
            "a re-allocated pointer replaces its old size"
        );
    }

    #[test]
    fn many_threads_hand_over_every_event() {
        // 16 threads, strictly round robin: every event is a hand-over.
        let mut log = String::from("Thread,Time,Action,Pointer,Size,Stream\n");
        for round in 0..50 {
            for t in 0..16 {
                log += &format!(
                    "{t},00:00:00.0,allocate,{:#x},256,{:#x}\n",
                    0x1000 + t * 0x100 + round * 0x10000,
                    t % 3
                );
            }
            for t in 0..16 {
                log += &format!(
                    "{t},00:00:00.0,free,{:#x},256,{:#x}\n",
                    0x1000 + t * 0x100 + round * 0x10000,
                    t % 3
                );
            }
        }
        let outcome = run(&log, MIB);
        assert_eq!(outcome.events, 1600);
        assert_eq!(outcome.peak_live_bytes, 16 * 256);
        assert_eq!(outcome.peak_reserved_bytes, 16 * 256);
        assert!(outcome.threads.iter().all(|t| t.events == 100));
        assert_eq!(outcome.counts.leaked_allocations, 0);
        assert_eq!(
            outcome.series.seconds.as_ref().unwrap().iter().sum::<f64>(),
            0.0
        );
    }

    #[test]
    fn an_empty_log_replays_nothing() {
        let outcome = run("Thread,Time,Action,Pointer,Size,Stream\n", MIB);
        assert_eq!(
            (
                outcome.events,
                outcome.peak_reserved_bytes,
                outcome.fragmentation()
            ),
            (0, 0, None)
        );
        assert!(outcome.threads.is_empty());
    }
}
