//! Logged stream handles → streams to replay on.
//!
//! RMM's replay ignores the `Stream` column; here each distinct logged handle gets its own stream:
//!
//! | logged | with a GPU (real or simulated device) | simulated device, no GPU | host (no GPU) |
//! |---|---|---|---|
//! | `0x0` | [`Stream::DEFAULT`] | opaque `0x0` | [`Stream::DEFAULT`] |
//! | `0x1` | [`Stream::LEGACY`] | opaque `0x1` | [`Stream::LEGACY`] |
//! | `0x2` | [`Stream::PER_THREAD`] (each replay thread its own) | opaque `0x2` | [`Stream::PER_THREAD`] |
//! | other | a new non-blocking [`OwnedStream`] | the logged handle, opaque | [`Stream::DEFAULT`] |
//!
//! Without a GPU no CUDA is called: the logged handles are kept as they are, only to tell streams
//! apart. With a GPU, even a simulated replay uses real streams, because the sub-allocators stacked
//! on the simulated device record events on the streams they are given.

use std::collections::HashMap;

use rmm_core::cuda::{OwnedStream, Stream, StreamFlags};
use serde::Serialize;

use crate::resources::Target;

/// How one logged stream is replayed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StreamInfo {
    /// The logged handle, in hex.
    pub logged: String,
    /// What it is replayed on.
    pub replayed_as: String,
}

/// The streams of one replay. Owned streams live as long as the map.
pub struct StreamMap {
    streams: HashMap<u64, Stream>,
    info: Vec<StreamInfo>,
    owned: Vec<OwnedStream>,
}

impl StreamMap {
    /// Maps each handle in `logged` (duplicates are fine) for a replay on `target`.
    ///
    /// # Errors
    /// The driver's error when a stream cannot be created (GPU only).
    pub fn new(logged: impl IntoIterator<Item = u64>, target: &Target) -> rmm_core::Result<Self> {
        let mut map = Self {
            streams: HashMap::new(),
            info: Vec::new(),
            owned: Vec::new(),
        };
        for handle in logged {
            if map.streams.contains_key(&handle) {
                continue;
            }
            let special = match handle {
                0 => Some((Stream::DEFAULT, "default stream")),
                1 => Some((Stream::LEGACY, "legacy default stream")),
                2 => Some((Stream::PER_THREAD, "per-thread default stream")),
                _ => None,
            };
            // Real streams wherever a GPU exists, a simulated replay included: a sub-allocator stacked
            // on the simulated device records events on its streams, which needs valid handles. Opaque
            // labels only on a simulated device without a GPU, where nothing calls CUDA.
            let real_streams = match target {
                Target::Gpu { .. } => true,
                Target::Simulated { .. } => rmm_core::cuda::is_available(),
                Target::Host => false,
            };
            let (stream, what) = match (real_streams, target, special) {
                (false, Target::Simulated { .. }, _) => {
                    let raw = usize::try_from(handle).unwrap_or(usize::MAX);
                    // SAFETY: `from_raw` asks for a live stream while the handle is used. This one is
                    // an opaque label: without a GPU nothing in the replay passes a stream to CUDA.
                    (
                        unsafe { Stream::from_raw(raw) },
                        "opaque handle (simulated device, no GPU)".to_string(),
                    )
                }
                (_, _, Some((stream, what))) => (stream, what.to_string()),
                (true, _, None) => {
                    let owned = OwnedStream::new(StreamFlags::NonBlocking)?;
                    let stream = owned.stream();
                    map.owned.push(owned);
                    (stream, format!("new non-blocking stream {stream}"))
                }
                (false, _, None) => (Stream::DEFAULT, "default stream (no GPU)".to_string()),
            };
            map.streams.insert(handle, stream);
            map.info.push(StreamInfo {
                logged: format!("{handle:#x}"),
                replayed_as: what,
            });
        }
        Ok(map)
    }

    /// The stream for logged handle `logged` ([`Stream::DEFAULT`] for one never mapped).
    pub fn get(&self, logged: u64) -> Stream {
        self.streams
            .get(&logged)
            .copied()
            .unwrap_or(Stream::DEFAULT)
    }

    /// How each logged stream is replayed, in the order first seen.
    pub fn info(&self) -> &[StreamInfo] {
        &self.info
    }

    /// Waits for the work queued on the streams this map created.
    ///
    /// # Errors
    /// The driver's error.
    pub fn synchronize(&self) -> rmm_core::Result<()> {
        self.owned.iter().try_for_each(OwnedStream::synchronize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulated_streams_keep_their_handles() {
        let map = StreamMap::new(
            [0, 0x7f00, 2, 0x7f00, 1],
            &Target::Simulated { capacity: 1 << 20 },
        )
        .unwrap();
        assert_eq!(map.info().len(), 4);
        assert_eq!(map.get(2), Stream::PER_THREAD);
        assert_eq!(map.info()[1].logged, "0x7f00");
        if rmm_core::cuda::is_available() {
            // With a GPU even a simulated replay runs on real streams (sub-allocators record events).
            assert_ne!(
                map.get(0x7f00).as_raw(),
                0x7f00,
                "a new stream, not the logged handle"
            );
            assert!(map.info()[1]
                .replayed_as
                .starts_with("new non-blocking stream"));
        } else {
            assert_eq!(
                map.get(0x7f00).as_raw(),
                0x7f00,
                "without a GPU the handle is an opaque label"
            );
        }
        map.synchronize().unwrap();
    }

    #[test]
    fn host_replays_fold_other_streams_into_the_default_one() {
        let map = StreamMap::new([0x55d1c7a4e8f0, 1], &Target::Host).unwrap();
        assert_eq!(map.get(0x55d1c7a4e8f0), Stream::DEFAULT);
        assert_eq!(map.get(1), Stream::LEGACY);
        assert_eq!(map.info()[0].replayed_as, "default stream (no GPU)");
    }
}
