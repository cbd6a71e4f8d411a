//! Batches: the frees on a stream that only its own calls may name (a PTDS, a stream made
//! elsewhere), collected without a driver call and closed by one event (see the glossary in
//! [`super`]), and the device-wide synchronization that covers the batches nobody will close.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use crate::error::Result;

use super::blocks::Global;
use super::front;
use super::key::{Marker, MarkerToken, Pending, PendingOn, StreamKey};
use super::shard::{Batch, Shard};
use super::{lock, Core};

/// Frees on a stream that only its own calls may name (a PTDS, a stream made elsewhere) that one
/// batch collects before a free closes it with one event: the event costs about a microsecond, so
/// this keeps it to a few nanoseconds per free.
pub(crate) const CLOSE_FREES: u32 = 256;

/// Bytes freed into one batch that make the next free close it, so that memory reaches other
/// streams soon under churn of large blocks.
pub(crate) const CLOSE_BYTES: usize = 64 << 20;

/// Open batches one shard keeps (one per stream its threads free on); an older one becomes an
/// orphan: its stream may be gone (a destroyed stream, an exited thread's PTDS).
pub(super) const MAX_OPEN: usize = 8;

impl Core {
    /// Covers every open batch by one device-wide synchronization and closes them; false when
    /// there was none. The synchronization also completes everything the blocks of the shared list
    /// wait for (the caches are flushed into it first), so they all lose their tags: no stream needs
    /// ordering after them any more (PyTorch's "synchronize, then every cached block is free").
    /// The caller holds `global` (lock order: then each shard, then the orphans).
    pub(super) fn cover_open_batches(&self, g: &mut Global) -> Result<bool> {
        let mut batches: Vec<Arc<Marker>> = Vec::new();
        for shard in self.shards.iter() {
            batches.extend(lock(&shard.0).open.drain(..).map(|b| b.marker));
        }
        batches.append(&mut lock(&self.orphans));
        // A block in another thread's front, of a stream that only that thread's calls may name
        // (its PTDS, a stream made elsewhere): requests leave it there (see `flush_caches_for`),
        // so a thread that freed and then went idle would hold it until its end; the
        // synchronization covers it too (its free returned before the drain below).
        let held_in_fronts = || {
            lock(&self.fronts)
                .iter()
                .any(|f| f.peek().is_some_and(|h| h.key.needs_marker()))
        };
        if batches.is_empty() && !held_in_fronts() {
            return Ok(false);
        }
        self.flush_caches(g);
        // Every free of these batches, and of every block now in the shared list, returned before
        // this point, so the work their blocks wait for was queued before the synchronization.
        if let Err(e) = self.syncer.sync_device() {
            lock(&self.orphans).append(&mut batches);
            return Err(e);
        }
        for m in batches {
            m.close(MarkerToken::Id(0));
        }
        g.free.retag(|t| *t = Pending::default());
        g.passed.stranded = 0;
        Ok(true)
    }

    /// Keeps `batches` for [`Core::cover_open_batches`], dropping the orphans no block carries any
    /// more (their blocks were all handed out again): a thread per request would otherwise grow
    /// the list by a few markers per thread until the next device-wide synchronization.
    pub(super) fn orphan(&self, batches: impl IntoIterator<Item = Arc<Marker>>) {
        let mut orphans = lock(&self.orphans);
        orphans.retain(|m| Arc::strong_count(m) > 1);
        orphans.extend(batches);
    }

    /// Adds a free of `size` bytes on `key` (a stream that only its own calls may name) to the
    /// shard's open batch of that stream and returns the block's tag. Every [`CLOSE_FREES`] frees or
    /// [`CLOSE_BYTES`] bytes, one event recorded on the stream now closes the batch, this free
    /// included, but only when `named`: the current call names the stream (a block leaving a front
    /// may be of a stream the call does not name, which may be gone: its batch stays open).
    pub(super) fn join_batch(
        &self,
        s: &mut Shard,
        key: StreamKey,
        size: usize,
        named: bool,
    ) -> Pending {
        let i = match s.open.iter().position(|b| b.marker.owner == key) {
            Some(i) => i,
            None => {
                // The thread's end abandons the batch (`front_gone`), however its frees got here.
                front::ensure(self);
                if s.open.len() >= MAX_OPEN {
                    self.orphan(std::iter::once(s.open.remove(0).marker));
                }
                s.open.push(Batch {
                    marker: Marker::open(key),
                    frees: 0,
                    bytes: 0,
                });
                s.open.len() - 1
            }
        };
        let b = &mut s.open[i];
        b.frees += 1;
        b.bytes = b.bytes.saturating_add(size);
        let tag = Pending::one(PendingOn::Marker(b.marker.clone()));
        if named && (b.frees >= self.close_frees.load(Ordering::Relaxed) || b.bytes >= CLOSE_BYTES)
        {
            self.close_batch(s, i);
        }
        tag
    }

    /// Closes the shard's open batch `i` with one event recorded on its stream now, which the
    /// current call names. Not into a graph being captured: the event would be a node of the
    /// graph, not a point of the stream's work; the batch then stays open and tries again later.
    pub(super) fn close_batch(&self, s: &mut Shard, i: usize) {
        let key = s.open[i].marker.owner;
        // Recording and numbering under one lock: of two closed markers of one stream (batches
        // of two shards), the higher number is then the later event, which covers the other.
        static RECORD_ORDER: Mutex<()> = Mutex::new(());
        let order = lock(&RECORD_ORDER);
        let recorded = self.syncer.close_marker(key);
        match recorded {
            Some(Ok(token)) => {
                s.open.remove(i).marker.close(token);
                drop(order);
            }
            other => {
                if let Some(Err(e)) = other {
                    tracing::warn!(
                        "{}: recording a marker on {key:?}: {e}; the batch stays open",
                        self.name
                    );
                }
                let b = &mut s.open[i];
                (b.frees, b.bytes) = (0, 0);
            }
        }
    }

    /// Test hook: frees per batch.
    #[cfg(test)]
    pub(crate) fn set_close_frees(&self, frees: u32) {
        self.close_frees.store(frees, Ordering::Relaxed);
    }

    /// The tag of a block freed on `key`, outside any shard: a live stream, or the stream's open
    /// batch in the calling thread's shard (closed only when `named`, see [`Core::join_batch`]).
    /// The caller holds no shard lock.
    pub(super) fn tag_of_free(&self, key: StreamKey, size: usize, named: bool) -> Pending {
        if key.needs_marker() {
            self.join_batch(&mut lock(self.shard()), key, size, named)
        } else {
            Pending::one(PendingOn::Stream(key))
        }
    }
}
