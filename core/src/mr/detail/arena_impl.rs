//! The arena allocator's algorithm (RMM's `arena_memory_resource_impl`), over the data of
//! [`super::arena`].
//!
//! Locks (never more than these, always in this order):
//! 1. the *global* lock (one per resource): the global arena and the registry of arenas;
//! 2. *arena* locks, one per arena.
//!
//! The fast path (a small request, or the free of a small block, served by the caller's own arena)
//! takes only its arena's lock, which it finds through a thread-local cache: no lock, counter or
//! cache line is shared between threads that use different streams (RMM takes two process-wide
//! `shared_mutex`es on every call). Anything that needs more than one arena, or the global arena,
//! takes the global lock first and then arena locks; nothing waits for the global lock while it
//! holds an arena lock. Every move of a superblock between arenas and the global arena happens
//! under the global lock, so a search under it sees each superblock exactly once.
//!
//! Stream safety (memory is only reused where no queued work can still use it):
//! - a small block freed into its stream's arena is reused by that stream only (stream order);
//! - a block freed on another stream or thread than its arena's first waits for the freeing
//!   stream, then goes to the arena that holds it;
//! - a large block waits for the freeing stream before it rejoins the global arena;
//! - defragmentation locks every arena and synchronizes the device before it moves superblocks;
//! - a thread's arena waits for the thread's per-thread default stream when the thread exits: an
//!   event recorded there as it exits (never a blocking call in a thread-exit destructor) must
//!   complete, or the device be synchronized (defragmentation), before its superblocks return.
//!
//! Waiting only happens when the arena works for a GPU ([`Shared::gpu`]): in host mode, or over a
//! simulated upstream, nothing here calls CUDA (tests pass made-up stream handles).

use std::cell::RefCell;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use super::arena::{Arena, ArenaKind, Freed, Global, Superblocks, ThreadStream, SUPERBLOCK_SIZE};
use crate::aligned::{align_up, DEFAULT_ALIGNMENT};
use crate::cuda::{self, DeviceGuard, DeviceId, Event, EventFlags, Stream};
use crate::error::{Error, Result};
use crate::mr::detail::fragmentation::free_space;
use crate::{AnyResource, MemoryResource};

/// RMM's message for an arena that is full.
pub(crate) const NO_ROOM: &str = "No room in arena.";

/// The most stream arenas a thread remembers per resource.
const STREAM_CACHE: usize = 8;

/// Trips to the global arena after which an arena takes [`SPARES`] more superblocks per trip.
const SPARES_AFTER: u32 = 16;
/// Empty superblocks taken beside the one needed (see [`Shared::allocate_small`]).
const SPARES: usize = 3;

/// A snapshot of the arena's accounting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Snapshot {
    pub used: usize,
    pub global_free: usize,
    pub largest_global_free: usize,
    pub superblock_free: usize,
    pub largest_superblock_free: usize,
    pub superblocks: usize,
    pub orphan_superblocks: usize,
    pub arenas: usize,
    pub large_allocations: usize,
}

/// The state every clone of an arena resource shares.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Unique per resource, never reused: the key of the thread-local caches.
    id: u64,
    upstream: AnyResource,
    /// The upstream block as allocated.
    block: usize,
    block_bytes: usize,
    /// The 256-aligned part of it that the arena manages.
    base: usize,
    size: usize,
    /// The device to synchronize with, when the arena works for a GPU.
    gpu: Option<DeviceId>,
    dump_path: Option<PathBuf>,
    /// Whether a dump was written already (the first truncates the file, later ones append).
    dumped: AtomicBool,
    global: Mutex<Global>,
}

/// Where `stream`'s blocks live for the calling thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ArenaKey {
    /// The thread's own arena for a default stream.
    Thread(ThreadStream),
    /// The arena of a stream, by raw handle.
    Stream(usize),
}

impl ArenaKey {
    fn of(stream: Stream) -> Self {
        if stream.is_per_thread_default() {
            Self::Thread(ThreadStream::PerThread)
        } else if stream.is_default() {
            // Handle 0 and `cudaStreamLegacy` are one stream.
            Self::Thread(ThreadStream::Legacy)
        } else {
            Self::Stream(stream.as_raw())
        }
    }

    /// The shared arena that serves this key when the thread's own cannot (the thread is
    /// exiting).
    fn shared(self) -> usize {
        match self {
            Self::Thread(ThreadStream::PerThread) => Stream::PER_THREAD.as_raw(),
            Self::Thread(ThreadStream::Legacy) => LEGACY_ARENA,
            Self::Stream(raw) => raw,
        }
    }
}

/// The key of the shared legacy default stream arena in [`Global::streams`].
const LEGACY_ARENA: usize = 0;

impl Shared {
    /// Takes `size` bytes (a multiple of 256, at least [`SUPERBLOCK_SIZE`]) from `upstream`.
    ///
    /// # Errors
    /// The upstream's allocation error.
    pub(crate) fn new(
        upstream: AnyResource,
        size: usize,
        gpu: Option<DeviceId>,
        dump_path: Option<PathBuf>,
    ) -> Result<Arc<Self>> {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let ptr = upstream.allocate_sync(size, DEFAULT_ALIGNMENT)?;
        let block = ptr as usize;
        // Base resources return 256-aligned memory; should one not, use the aligned part.
        let base = align_up(block, DEFAULT_ALIGNMENT).unwrap_or(block);
        let usable = (size - (base - block)) & !(DEFAULT_ALIGNMENT - 1);
        Ok(Arc::new(Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            upstream,
            block,
            block_bytes: size,
            base,
            size: usable,
            gpu,
            dump_path,
            dumped: AtomicBool::new(false),
            global: Mutex::new(Global::new(base, usable)),
        }))
    }

    /// The bytes the arena manages.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// The upstream resource.
    pub(crate) fn upstream(&self) -> &AnyResource {
        &self.upstream
    }

    /// True when the arena synchronizes with a GPU.
    pub(crate) fn works_for_gpu(&self) -> bool {
        self.gpu.is_some()
    }

    fn lock_global(&self) -> MutexGuard<'_, Global> {
        self.global.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn oom(&self, bytes: usize, detail: String) -> Error {
        Error::OutOfMemory {
            bytes,
            resource: "arena_memory_resource".to_owned(),
            detail,
        }
    }

    // ---- arenas -------------------------------------------------------------------------------

    /// The arena of `stream` for the calling thread (found in the thread-local cache, created on
    /// first use).
    fn arena_for(self: &Arc<Self>, stream: Stream) -> Arc<Arena> {
        let key = ArenaKey::of(stream);
        let cached = LOCAL.try_with(|local| {
            let mut local = local.try_borrow_mut().ok()?;
            Some(local.arena(self, key))
        });
        match cached {
            Ok(Some(arena)) => arena,
            // The thread is exiting (its cache is gone): share an arena keyed by the handle.
            _ => self.stream_arena(key.shared()),
        }
    }

    /// Runs `f` on the arena of `stream` for the calling thread: borrowed from the thread-local
    /// cache when it is there (no reference count changes hands), else as [`Shared::arena_for`]
    /// finds or makes it. `f` must not look at the thread-local cache.
    #[inline]
    fn with_arena<R>(self: &Arc<Self>, stream: Stream, f: impl FnOnce(&Arena) -> R) -> R {
        let key = ArenaKey::of(stream);
        let mut f = Some(f);
        let cached = LOCAL.try_with(|local| {
            let local = local.try_borrow().ok()?;
            let arena = local.find(self.id, key)?;
            f.take().map(|f| f(arena))
        });
        match (cached, f) {
            (Ok(Some(done)), _) => done,
            (_, Some(f)) => f(&self.arena_for(stream)),
            (_, None) => unreachable!("`f` ran only if it returned"),
        }
    }

    /// The arena of stream `key`, created on first use.
    fn stream_arena(&self, key: usize) -> Arc<Arena> {
        let mut global = self.lock_global();
        global
            .streams
            .entry(key)
            .or_insert_with(|| Arc::new(Arena::new(ArenaKind::Stream(key))))
            .clone()
    }

    /// A new arena for the calling thread's `stream`.
    fn new_thread_arena(&self, stream: ThreadStream) -> Arc<Arena> {
        static THREAD_ARENAS: AtomicU64 = AtomicU64::new(1);
        let arena = Arc::new(Arena::new(ArenaKind::Thread {
            number: THREAD_ARENAS.fetch_add(1, Ordering::Relaxed),
            stream,
        }));
        let mut global = self.lock_global();
        self.reap_retired(&mut global, false);
        global.threads.push(arena.clone());
        arena
    }

    /// Returns an exiting thread's arena: a legacy default stream arena's superblocks join the
    /// shared legacy arena (the same stream: no waiting); a per-thread default stream arena's go
    /// to the global arena: empty superblocks join the free space, the others become orphans
    /// until their last block is freed.
    ///
    /// Runs in a thread-exit destructor, so it never blocks on the GPU: blocks freed on the
    /// thread's default stream may still be used by work queued there, so (on a GPU) an event is
    /// recorded on that stream and the arena waits, with its event, among the *retired* arenas
    /// until the event has completed ([`Shared::reap_retired`]) or the device is synchronized.
    fn retire_thread_arena(&self, arena: &Arc<Arena>) {
        if arena.on_legacy_stream() {
            let mut global = self.lock_global();
            global.threads.retain(|a| !Arc::ptr_eq(a, arena));
            let in_use = arena.lock().take_in_use();
            if !in_use.is_empty() {
                let legacy = global
                    .streams
                    .entry(LEGACY_ARENA)
                    .or_insert_with(|| Arc::new(Arena::new(ArenaKind::Stream(LEGACY_ARENA))))
                    .clone();
                let mut legacy = legacy.lock();
                for sb in in_use {
                    legacy.insert(sb);
                }
            }
            if arena.lock().len() == 0 {
                return;
            }
            // The empty superblocks left may serve any stream once the legacy stream has done the
            // work queued on their blocks. Recorded under the global lock: every free into them
            // (this thread's, or another's through `deallocate`'s legacy path) came before.
            let event = self.exit_event(Stream::LEGACY);
            self.retire(&mut global, arena, event);
            return;
        }
        let event = self.exit_event(Stream::PER_THREAD);
        let mut global = self.lock_global();
        global.threads.retain(|a| !Arc::ptr_eq(a, arena));
        self.retire(&mut global, arena, event);
    }

    /// On a GPU, an event recorded on an exiting thread's default `stream` (`None` inside when
    /// recording failed: then the arena waits for the next device synchronization); `None` when
    /// the arena works for no GPU.
    fn exit_event(&self, stream: Stream) -> Option<Option<Event>> {
        self.gpu.map(|device| {
            let recorded = DeviceGuard::new(device).and_then(|_device| {
                let event = Event::new(EventFlags::DisableTiming)?;
                event.record(stream)?;
                Ok(event)
            });
            recorded
                .map_err(|e| {
                    tracing::warn!(
                        "arena_memory_resource: recording an event on an exiting thread's stream: {e}; its arena \
                         waits for the next device synchronization"
                    )
                })
                .ok()
        })
    }

    /// Hands an exiting thread's `arena` to the global arena now (no GPU), or once `event` has
    /// completed.
    fn retire(&self, global: &mut Global, arena: &Arc<Arena>, event: Option<Option<Event>>) {
        match event {
            None => {
                let superblocks = arena.lock().take_all();
                for sb in superblocks {
                    global.release(sb);
                }
            }
            Some(event) => global.retired.push((arena.clone(), event)),
        }
    }

    /// Returns the superblocks of retired arenas whose event has completed (a non-blocking query)
    /// to the global arena; with `synchronized` (the device was just synchronized), all of them.
    /// The caller holds the global lock and no arena lock.
    fn reap_retired(&self, global: &mut Global, synchronized: bool) {
        if global.retired.is_empty() {
            return;
        }
        // The query needs the arena's device current on this thread (a thread that only reads the
        // statistics may have none).
        let _device = self.gpu.and_then(|device| DeviceGuard::new(device).ok());
        let retired = std::mem::take(&mut global.retired);
        for (arena, event) in retired {
            let done = synchronized
                || event
                    .as_ref()
                    .is_some_and(|e| e.is_complete().unwrap_or(false));
            if done {
                let superblocks = arena.lock().take_all();
                for sb in superblocks {
                    global.release(sb);
                }
            } else {
                global.retired.push((arena, event));
            }
        }
    }

    // ---- synchronization ----------------------------------------------------------------------

    fn synchronize_stream(&self, stream: Stream) -> Result<()> {
        match self.gpu {
            Some(_) => stream.synchronize(),
            None => Ok(()),
        }
    }

    fn synchronize_device(&self) -> Result<()> {
        match self.gpu {
            Some(device) => {
                let _device = DeviceGuard::new(device)?;
                cuda::memory::device_synchronize()
            }
            None => Ok(()),
        }
    }

    // ---- allocation ---------------------------------------------------------------------------

    /// Allocates `bytes` (> 0) bytes on `stream`.
    pub(crate) fn allocate(self: &Arc<Self>, stream: Stream, bytes: usize) -> Result<*mut u8> {
        let size = match align_up(bytes, DEFAULT_ALIGNMENT) {
            Some(size) if size <= self.size => size,
            _ => {
                return Err(self.oom(
                    bytes,
                    format!("the arena holds {} bytes in all. {NO_ROOM}", self.size),
                ));
            }
        };
        let found = if size > SUPERBLOCK_SIZE {
            let mut global = self.lock_global();
            global.allocate_large(size).or_else(|| {
                self.reap_retired(&mut global, false);
                global.allocate_large(size)
            })
        } else {
            self.with_arena(stream, |arena| self.allocate_small(arena, size))
        };
        match found {
            Some(addr) => Ok(addr as *mut u8),
            None => self.defragment_and_retry(stream, bytes, size),
        }
    }

    /// First fit in `arena`; else a superblock from the global arena.
    fn allocate_small(&self, arena: &Arena, size: usize) -> Option<usize> {
        let fast = arena.lock().first_fit(size);
        if fast.is_some() {
            return fast;
        }
        let mut global = self.lock_global();
        self.reap_retired(&mut global, false);
        let mut superblocks = arena.lock();
        // Another thread may have freed into this arena meanwhile.
        if let Some(addr) = superblocks.first_fit(size) {
            return Some(addr);
        }
        let sb = global.acquire(size)?;
        superblocks.insert(sb);
        // An arena that keeps coming back for superblocks (churn of blocks near the superblock
        // size: RMM's random workload) takes a few more at once while the global arena has room:
        // every trip is the global lock, and 16 threads each making one per allocation queue on
        // it (on the H100 they ran at 0.52-0.55 of RMM's time, no better than 4 threads).
        if superblocks.note_acquisition() > SPARES_AFTER {
            for _ in 0..SPARES {
                if global.free_bytes() < self.size / 4 {
                    break;
                }
                let Some(spare) = global.acquire_spare() else {
                    break;
                };
                superblocks.insert(spare);
            }
        }
        superblocks.first_fit(size)
    }

    /// Locks every arena (after the global lock), synchronizes the device, and returns every
    /// empty superblock to the global arena, where neighbours coalesce.
    /// Exited threads' arenas (`arenas` are every arena, `guards` their locks, in one order) give
    /// back every superblock: the synchronization completed their streams' work.
    fn defragment_locked(
        &self,
        global: &mut Global,
        arenas: &[Arc<Arena>],
        guards: &mut [MutexGuard<'_, Superblocks>],
    ) -> Result<()> {
        // With every arena locked, no free can land between the synchronization and the move.
        self.synchronize_device()?;
        let retired = std::mem::take(&mut global.retired);
        for (arena, guard) in arenas.iter().zip(guards.iter_mut()) {
            let exited = retired.iter().any(|(r, _)| Arc::ptr_eq(r, arena));
            let superblocks = if exited {
                guard.take_all()
            } else {
                guard.take_empty()
            };
            for sb in superblocks {
                global.release(sb);
            }
        }
        Ok(())
    }

    /// Returns every arena's empty superblocks to the global arena.
    ///
    /// # Errors
    /// A failed device synchronization (nothing moves then).
    pub(crate) fn defragment(&self) -> Result<()> {
        let mut global = self.lock_global();
        let arenas = global.arenas();
        let mut guards: Vec<_> = arenas.iter().map(|a| a.lock()).collect();
        self.defragment_locked(&mut global, &arenas, &mut guards)
    }

    /// The slow path after a failed allocation: defragment, retry once (still holding every lock,
    /// so the memory just gathered cannot be taken by others first), then dump and fail.
    fn defragment_and_retry(
        self: &Arc<Self>,
        stream: Stream,
        bytes: usize,
        size: usize,
    ) -> Result<*mut u8> {
        let own = (size <= SUPERBLOCK_SIZE).then(|| self.arena_for(stream));
        let mut global = self.lock_global();
        let arenas = global.arenas();
        let mut guards: Vec<_> = arenas.iter().map(|a| a.lock()).collect();
        self.defragment_locked(&mut global, &arenas, &mut guards)?;
        let found = match &own {
            None => global.allocate_large(size),
            Some(own) => match arenas.iter().position(|a| Arc::ptr_eq(a, own)) {
                Some(i) => retry_small(&mut global, &mut guards, i, size),
                None => None,
            },
        };
        if let Some(addr) = found {
            return Ok(addr as *mut u8);
        }
        let detail = format!(
            "{bytes} bytes on stream {stream}; {}. {NO_ROOM}",
            free_space(global.free_bytes(), global.largest_free())
        );
        self.dump(&global, &arenas, &guards, bytes, stream);
        Err(self.oom(bytes, detail))
    }

    // ---- deallocation -------------------------------------------------------------------------

    /// Frees `[ptr, ptr + bytes)` on `stream`.
    pub(crate) fn deallocate(
        self: &Arc<Self>,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
    ) -> Result<()> {
        let addr = ptr as usize;
        let size = align_up(bytes, DEFAULT_ALIGNMENT).unwrap_or(usize::MAX);
        if addr < self.base || addr - self.base >= self.size || size > self.size {
            return Err(Error::invalid(format!(
                "{ptr:p} (+{bytes}) was not allocated by this arena"
            )));
        }
        if size > SUPERBLOCK_SIZE {
            // The global arena serves every stream: wait for the work that may use the block.
            let synced = self.synchronize_stream(stream);
            self.lock_global().free_large(addr, size)?;
            return synced;
        }
        let fast = self.with_arena(stream, |arena| arena.lock().free(addr, size))?;
        if let Freed::Done { .. } = fast {
            return Ok(());
        }
        if stream.is_default() {
            // Another thread's legacy arena (or the shared one): freed on the stream it serves,
            // so the block may join it without waiting.
            let global = self.lock_global();
            for other in global.arenas().iter().filter(|a| a.on_legacy_stream()) {
                if let Freed::Done { .. } = other.lock().free(addr, size)? {
                    return Ok(());
                }
            }
        }
        // Allocated on another stream or thread (or its superblock moved): the block may join an
        // arena whose stream is not ordered after `stream`, so wait for `stream` first.
        let synced = self.synchronize_stream(stream);
        // Most often the block is in an arena this thread used lately (RMM's multi-stream shape:
        // allocate on one of the thread's streams, free on another): no global lock then, which
        // every such free from every thread would otherwise queue on.
        let local = LOCAL.try_with(|local| {
            let local = local.try_borrow().ok()?;
            local.free_in_recent(self.id, addr, size)
        });
        if let Ok(Some(freed)) = local {
            freed?;
            return synced;
        }
        let mut global = self.lock_global();
        for other in global.arenas() {
            if let Freed::Done { .. } = other.lock().free(addr, size)? {
                return synced;
            }
        }
        match global.free_in_orphan(addr, size)? {
            Freed::Done { .. } => synced,
            Freed::NotHere => Err(Error::invalid(format!(
                "{ptr:p} (+{bytes}) is not a live allocation of this arena"
            ))),
        }
    }

    // ---- accounting and dump ------------------------------------------------------------------

    /// The accounting, with every lock taken in turn.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let mut global = self.lock_global();
        // Exited threads' arenas whose streams have finished count as returned.
        self.reap_retired(&mut global, false);
        let arenas = global.arenas();
        let (large_bytes, large_allocations) = global.large();
        let mut s = Snapshot {
            used: large_bytes + global.orphans.used(),
            global_free: global.free_bytes(),
            largest_global_free: global.largest_free(),
            superblock_free: global.orphans.free_bytes(),
            largest_superblock_free: global.orphans.largest(),
            superblocks: global.orphans.len(),
            orphan_superblocks: global.orphans.len(),
            arenas: arenas.len(),
            large_allocations,
        };
        for arena in &arenas {
            let sbs = arena.lock();
            s.used += sbs.used();
            s.superblock_free += sbs.free_bytes();
            s.largest_superblock_free = s.largest_superblock_free.max(sbs.largest());
            s.superblocks += sbs.len();
        }
        s
    }

    /// The whole state as text (what the dump file holds).
    pub(crate) fn describe(&self) -> String {
        let global = self.lock_global();
        let arenas = global.arenas();
        let guards: Vec<_> = arenas.iter().map(|a| a.lock()).collect();
        describe(&global, &arenas, &guards)
    }

    /// Writes the state to the dump file, when the resource was asked to.
    fn dump(
        &self,
        global: &Global,
        arenas: &[Arc<Arena>],
        guards: &[MutexGuard<'_, Superblocks>],
        bytes: usize,
        stream: Stream,
    ) {
        let Some(path) = &self.dump_path else { return };
        let mut text = String::new();
        let _ = writeln!(text, "**************************************************");
        let _ = writeln!(
            text,
            "Ran out of memory trying to allocate {bytes} bytes on stream {stream}."
        );
        let _ = writeln!(text, "**************************************************");
        text.push_str(&describe(global, arenas, guards));
        let first = !self.dumped.swap(true, Ordering::Relaxed);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(!first)
            .truncate(first)
            .open(path);
        if let Err(e) = file.and_then(|mut f| f.write_all(text.as_bytes())) {
            tracing::warn!(
                "arena_memory_resource: could not write the memory dump to {}: {e}",
                path.display()
            );
        }
    }

    /// The managed range `(base, size)`.
    pub(crate) fn range(&self) -> (usize, usize) {
        (self.base, self.size)
    }

    /// Panics when an invariant is broken (tests only).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let global = self.lock_global();
        global.check_invariants();
        let arenas = global.arenas();
        let mut all: Vec<(usize, usize)> = global
            .orphans
            .iter()
            .map(|sb| (sb.start(), sb.size()))
            .collect();
        for arena in &arenas {
            let sbs = arena.lock();
            sbs.check_invariants();
            all.extend(sbs.iter().map(|sb| (sb.start(), sb.size())));
        }
        all.sort_unstable();
        for w in all.windows(2) {
            assert!(
                w[0].0 + w[0].1 <= w[1].0,
                "superblocks {:#x} and {:#x} of different arenas overlap",
                w[0].0,
                w[1].0
            );
        }
        for &(start, size) in &all {
            assert!(
                start >= self.base && start + size <= self.base + self.size,
                "superblock {start:#x} outside the arena"
            );
            assert!(
                !global.free_overlaps(start, size),
                "superblock {start:#x} is also free space"
            );
        }
    }
}

/// The retry of a small request after defragmentation, with the global lock and every arena lock
/// held (`own` indexes the requesting arena): first fit in the own arena, then a superblock from
/// the global arena, then a partly used superblock of another arena with a free block that fits
/// (safe to move: the device was just synchronized).
fn retry_small(
    global: &mut Global,
    guards: &mut [MutexGuard<'_, Superblocks>],
    own: usize,
    size: usize,
) -> Option<usize> {
    if let Some(addr) = guards[own].first_fit(size) {
        return Some(addr);
    }
    let sb = global.acquire(size).or_else(|| {
        guards
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| *i != own)
            .find_map(|(_, g)| g.take_first_that_fits(size))
    })?;
    guards[own].insert(sb);
    guards[own].first_fit(size)
}

fn describe(
    global: &Global,
    arenas: &[Arc<Arena>],
    guards: &[MutexGuard<'_, Superblocks>],
) -> String {
    let mut text = String::new();
    global.describe(&mut text);
    for (arena, sbs) in arenas.iter().zip(guards) {
        arena.describe(sbs, &mut text);
    }
    text
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: the block came from `upstream.allocate_sync` with these arguments in `new`, and
        // the arena is gone: nothing can hand out its memory any more.
        let freed = unsafe {
            self.upstream.deallocate_sync(
                self.block as *mut u8,
                self.block_bytes,
                DEFAULT_ALIGNMENT,
            )
        };
        if let Err(e) = freed {
            tracing::error!(
                "arena_memory_resource: returning {} bytes to {}: {e}",
                self.block_bytes,
                self.upstream.name()
            );
        }
    }
}

// ---- the thread-local cache ---------------------------------------------------------------------

thread_local! {
    static LOCAL: RefCell<Local> = RefCell::new(Local::default());
}

/// What a thread remembers about each arena resource it used.
#[derive(Default)]
struct Local {
    entries: Vec<LocalEntry>,
}

struct LocalEntry {
    id: u64,
    shared: Weak<Shared>,
    /// The thread's own arenas (per-thread default stream, legacy default stream), each created
    /// on first use.
    thread_arenas: [Option<Arc<Arena>>; 2],
    /// Recently used stream arenas, most recent last.
    streams: Vec<(usize, Arc<Arena>)>,
}

impl Local {
    /// The arena of `key` for resource `id`, if this thread has it already.
    #[inline]
    fn find(&self, id: u64, key: ArenaKey) -> Option<&Arc<Arena>> {
        let entry = self.entries.iter().find(|e| e.id == id)?;
        match key {
            ArenaKey::Thread(stream) => entry.thread_arenas[stream as usize].as_ref(),
            ArenaKey::Stream(key) => entry
                .streams
                .iter()
                .rev()
                .find(|(k, _)| *k == key)
                .map(|(_, arena)| arena),
        }
    }

    fn arena(&mut self, shared: &Arc<Shared>, key: ArenaKey) -> Arc<Arena> {
        let i = match self.entries.iter().position(|e| e.id == shared.id) {
            Some(i) => i,
            None => {
                // Forget resources that are gone, then remember this one.
                self.entries.retain(|e| e.shared.strong_count() > 0);
                self.entries.push(LocalEntry {
                    id: shared.id,
                    shared: Arc::downgrade(shared),
                    thread_arenas: [None, None],
                    streams: Vec::new(),
                });
                self.entries.len() - 1
            }
        };
        let entry = &mut self.entries[i];
        match key {
            ArenaKey::Thread(stream) => entry.thread_arenas[stream as usize]
                .get_or_insert_with(|| shared.new_thread_arena(stream))
                .clone(),
            ArenaKey::Stream(key) => {
                if let Some((_, arena)) = entry.streams.iter().rev().find(|(k, _)| *k == key) {
                    return arena.clone();
                }
                let arena = shared.stream_arena(key);
                if entry.streams.len() == STREAM_CACHE {
                    entry.streams.remove(0);
                }
                entry.streams.push((key, arena.clone()));
                arena
            }
        }
    }

    /// Frees `[addr, addr + size)` into the arena of resource `id` that holds it among the ones
    /// this thread used lately; `None` when none of them holds it.
    fn free_in_recent(&self, id: u64, addr: usize, size: usize) -> Option<Result<()>> {
        let entry = self.entries.iter().find(|e| e.id == id)?;
        let arenas = entry.thread_arenas.iter().flatten();
        for arena in arenas.chain(entry.streams.iter().rev().map(|(_, a)| a)) {
            match arena.lock().free(addr, size) {
                Ok(Freed::Done { .. }) => return Some(Ok(())),
                Ok(Freed::NotHere) => {}
                Err(e) => return Some(Err(e)),
            }
        }
        None
    }
}

impl Drop for Local {
    /// The thread is exiting: its arenas go back to the resources still alive.
    fn drop(&mut self) {
        for entry in self.entries.drain(..) {
            let Some(shared) = entry.shared.upgrade() else {
                continue;
            };
            for arena in entry.thread_arenas.into_iter().flatten() {
                shared.retire_thread_arena(&arena);
            }
        }
    }
}
