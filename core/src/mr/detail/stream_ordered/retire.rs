//! Streams of ours destroyed while blocks freed on them are still tagged: every core listening
//! (GPU mode) replaces the stream in its tags by a marker recorded before the destruction.

use std::sync::{Arc, Mutex, Weak};

use crate::cuda::{self, Stream};

use super::key::{Marker, Pending, PendingOn, LEGACY, PER_THREAD};
use super::{lock, Core};

impl Core {
    /// Called before `stream` is destroyed: blocks still waiting on it get a marker recorded now
    /// (or, if that fails, the stream is synchronized), so nobody records on a dead handle.
    pub(crate) fn retire(&self, stream: Stream) {
        if matches!(stream.as_raw(), 0 | LEGACY | PER_THREAD) {
            return;
        }
        let key = self.key(stream);
        let mut g = lock(&self.global);
        self.flush_caches(&mut g);
        let names = |t: &Pending| {
            t.entries()
                .iter()
                .any(|on| matches!(on, PendingOn::Stream(k) if *k == key))
        };
        if !g.free.iter().any(|b| names(&b.tag)) {
            return;
        }
        let replacement = match self.syncer.record_marker(key) {
            Ok(token) => Some(PendingOn::Marker(Marker::new(key, token))),
            Err(e) => {
                tracing::warn!(
                    "{}: recording on {key:?} before it is destroyed: {e}; synchronizing it",
                    self.name
                );
                if let Err(e) = self.syncer.sync_stream(key) {
                    tracing::error!("{}: synchronizing {key:?}: {e}", self.name);
                }
                None
            }
        };
        g.free.retag(|t| {
            if names(t) {
                t.rewrite(|on| {
                    matches!(on, PendingOn::Stream(k) if *k == key).then(|| replacement.clone())
                });
            }
        });
    }
}

/// The cores that listen for stream destruction (GPU mode only).
static LISTENING: Mutex<Vec<Weak<Core>>> = Mutex::new(Vec::new());

/// Makes `core` hear of the destruction of streams of ours (see [`Core::retire`]).
pub(super) fn listen(core: &Arc<Core>) {
    cuda::stream::set_destroy_hook(stream_destroyed);
    let mut live = lock(&LISTENING);
    live.retain(|w| w.strong_count() > 0);
    live.push(Arc::downgrade(core));
}

/// Every listening core forgets `stream` (see [`Core::retire`]).
fn stream_destroyed(stream: Stream) {
    let cores: Vec<Arc<Core>> = lock(&LISTENING).iter().filter_map(Weak::upgrade).collect();
    for core in cores {
        core.retire(stream);
    }
}
