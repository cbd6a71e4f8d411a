//! Reclaiming the per-thread caches (shards and fronts) into the shared list, and the fronts'
//! arrival and departure with their threads.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::blocks::Global;
use super::front::{Front, Hot};
use super::key::{Marker, Pending, StreamKey};
use super::{lock, Core};

impl Core {
    /// Moves every cached block to the shared list; returns how many there were.
    pub(super) fn flush_caches(&self, g: &mut Global) -> usize {
        self.flush_caches_for(g, None).0
    }

    /// [`Core::flush_caches`] for a request on `for_key`: blocks that wait for another stream's
    /// open batch stay in their shards while that batch's thread lives (it closes the batch, or
    /// takes the blocks back), since `for_key` could not take them from the shared list either
    /// (only a device-wide synchronization would free them) and there they would block every
    /// stream. Returns the blocks moved and the bytes left behind so.
    pub(super) fn flush_caches_for(
        &self,
        g: &mut Global,
        for_key: Option<StreamKey>,
    ) -> (usize, usize) {
        let keep = |tag: &Pending| for_key.is_some_and(|key| tag.waits_on_live_batch(key));
        let (mut moved, mut kept) = (0, 0);
        for shard in self.shards.iter() {
            // The shard stays locked until its blocks are in the shared list: `stats`, which
            // takes every lock, always finds them in one place or the other.
            let mut s = lock(&shard.0);
            let recent = std::mem::take(&mut s.recent);
            s.recent_bytes = 0;
            let free = std::mem::take(&mut s.free);
            for b in recent {
                if keep(&b.tag) {
                    kept += b.size;
                    s.push_recent(b);
                } else {
                    moved += 1;
                    self.insert_free(g, b.addr, b.size, b.region, b.tag);
                }
            }
            for b in free.into_blocks() {
                if keep(&b.tag) {
                    kept += b.size;
                    s.free.insert(b.addr, b.size, b.region, b.tag);
                } else {
                    moved += 1;
                    self.insert_free(g, b.addr, b.size, b.region, b.tag);
                }
            }
        }
        // Likewise a front's block of another stream that only its own calls may name: drained,
        // it would join an open batch that nobody can close.
        let keep_hot = |h: &Hot| for_key.is_some_and(|key| h.key.needs_marker() && h.key != key);
        let hot: Vec<Hot> = lock(&self.fronts)
            .iter()
            .filter_map(|f| {
                f.drain_if(|h| {
                    let take = !keep_hot(h);
                    if !take {
                        kept += h.size;
                    }
                    take
                })
            })
            .collect();
        moved += hot.len();
        for h in hot {
            // Counted as handed out while in the front.
            g.used = g.used.wrapping_sub(h.size);
            let tag = self.tag_of_free(h.key, h.size, false);
            match g.region_of(h.addr, h.size) {
                Some(region) => self.insert_free(g, h.addr, h.size, region, tag),
                None => tracing::error!(
                    "{}: dropping a bad front block [{:#x}, +{})",
                    self.name,
                    h.addr,
                    h.size
                ),
            }
        }
        (moved, kept)
    }

    /// Lists a thread's new front (called by [`front`](super::front) on the thread's first use of this core).
    pub(super) fn front_made(&self, front: &Arc<Front>) {
        lock(&self.fronts).push(front.clone());
    }

    /// A thread ends: its front leaves the list and its block goes the usual free path (its stream
    /// is not named now: a batch of it stays open).
    pub(super) fn front_gone(&self, front: &Arc<Front>) {
        let hot = {
            let mut fronts = lock(&self.fronts);
            fronts.retain(|f| !Arc::ptr_eq(f, front));
            // Counted under the list's lock, with the drain: `stats` sees the block in the front
            // or counts it leaving, never neither (a thread's end can race `stats`: threads of
            // `std::thread::scope` may still run their thread-local destructors after the scope
            // returns).
            front
                .drain()
                .inspect(|_| _ = self.leaving.fetch_add(1, Ordering::AcqRel))
        };
        if let Some(h) = hot {
            self.free_front_block(h, false);
            // Before `leaving` drops: whoever sees it drop sees this too.
            self.left.fetch_add(1, Ordering::AcqRel);
            self.leaving.fetch_sub(1, Ordering::AcqRel);
        }
        // Its shard's open batches will not be closed by their thread: abandoned, their blocks
        // go to the shared list at the next flush, where one device-wide synchronization covers
        // them when another stream needs them (see `flush_caches_for`).
        if let Some(shard) = self.shard_of_thread() {
            let abandoned: Vec<Arc<Marker>> =
                lock(shard).open.drain(..).map(|b| b.marker).collect();
            for m in &abandoned {
                m.abandon();
            }
            self.orphan(abandoned);
        }
    }

    /// Waits while a block is between an ending thread's front and the free lists.
    #[cold]
    pub(super) fn wait_while_blocks_leave_fronts(&self) {
        while self.leaving.load(Ordering::Acquire) > 0 {
            std::thread::yield_now();
        }
    }
}
