//! The process's memory timeline: every allocation any language makes from the registry, recorded
//! with its caller's stack and written as a PyTorch memory snapshot (memory_viz reads it).
//!
//! One recorder per process (librmm's when it is loaded, so Python, C++ and Rust share it).
//! [`start`] puts a recording adaptor over each device's resource; [`stop`] takes it away again.
//! Rust callers get native stacks with [`Options::native_stacks`].
//!
//! ```
//! use rmm::timeline::{self, Options};
//! use rmm::{DeviceVector, cuda::Stream};
//!
//! let recording = timeline::record(Options { native_stacks: true, clear: true, ..Options::default() })?;
//! let v: DeviceVector<f32> = DeviceVector::with_current_resource(1000, Stream::DEFAULT)?;
//! let snapshot = timeline::snapshot()?;
//! let block = snapshot.segments.iter().flat_map(|s| &s.blocks).find(|b| b.address == v.as_ptr() as u64).unwrap();
//! assert_eq!(block.requested_size, 4000);
//! assert!(!block.frames.is_empty()); // this program's native frames
//! drop(recording); // stops
//! # drop(v);
//! # Ok::<(), rmm::Error>(())
//! ```

use std::path::Path;

use rmm_core::registry::recording;

pub use rmm_core::timeline::{
    Block, BlockState, Format, Frame, Options, Segment, Snapshot, SnapshotError, TraceAction,
    TraceEntry,
};

use crate::Result;

/// Turns the process's recorder on (see the module docs).
///
/// # Errors
/// [`crate::Error::InvalidArgument`] for `max_entries` of 0; registry errors.
pub fn start(options: Options) -> Result<()> {
    recording::start_recording(&options)
}

/// Turns the recorder off and puts back the resources [`start`] wrapped; what it recorded stays.
///
/// # Errors
/// Registry errors.
pub fn stop() -> Result<()> {
    recording::stop_recording()
}

/// True while the recorder is on.
pub fn is_recording() -> bool {
    recording::is_recording()
}

/// The recorder's contents now.
///
/// # Errors
/// A snapshot from librmm that does not read back.
pub fn snapshot() -> Result<Snapshot> {
    recording::snapshot()
}

/// Writes the snapshot to `path`: `.pickle`/`.pkl` (PyTorch's format), `.json`, or `.csv` (RMM's
/// allocation log for `rmm-replay`).
///
/// # Errors
/// [`crate::Error::InvalidArgument`] for an unknown extension or a file that cannot be written.
pub fn dump_snapshot(path: impl AsRef<Path>) -> Result<()> {
    recording::dump_snapshot(path.as_ref())
}

/// Reads a snapshot file (ours or PyTorch's; pickle or JSON).
///
/// # Errors
/// [`SnapshotError`]: the file cannot be read, is truncated or corrupt (with the byte offset), or
/// is not a snapshot (with the field).
pub fn read_snapshot(path: impl AsRef<Path>) -> std::result::Result<Snapshot, SnapshotError> {
    Snapshot::read(path.as_ref())
}

/// Records until dropped: [`record`]'s guard.
#[must_use = "recording stops when the guard drops"]
#[derive(Debug)]
pub struct Recording(());

impl Drop for Recording {
    fn drop(&mut self) {
        if let Err(e) = stop() {
            tracing::warn!("rmm::timeline: stopping the recorder: {e}");
        }
    }
}

/// [`start`]s the recorder and stops it when the returned guard drops.
///
/// # Errors
/// As for [`start`].
pub fn record(options: Options) -> Result<Recording> {
    start(options)?;
    Ok(Recording(()))
}
