//! What the recorder keeps: [`Event`]s, each with its [`Action`], and the caller [`Stack`] of
//! [`Frame`]s a binding supplies.

use std::sync::Arc;

/// One frame of a caller's stack, innermost first in a [`Stack`] (PyTorch's frame dict:
/// `{"filename", "line", "name"}`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The source file (a Python file, or for native frames the object file when no debug
    /// information names the source).
    pub filename: String,
    /// The line (0 when unknown).
    pub line: u32,
    /// The function.
    pub name: String,
}

/// A caller's stack, innermost frame first; shared by every event that has it.
pub type Stack = Arc<[Frame]>;

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// An allocation handed out (`alloc`).
    Alloc,
    /// An allocation given back (written as PyTorch's `free_requested` + `free_completed`).
    Free,
    /// A pool or arena took a segment from its upstream (`segment_alloc`).
    SegmentAlloc,
    /// A pool or arena gave a segment back to its upstream (`segment_free`).
    SegmentFree,
    /// An allocation failed for lack of memory (`oom`).
    Oom,
}

impl Action {
    /// PyTorch's name of the action (for [`Action::Free`], the name of its completion).
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Alloc => "alloc",
            Action::Free => "free_completed",
            Action::SegmentAlloc => "segment_alloc",
            Action::SegmentFree => "segment_free",
            Action::Oom => "oom",
        }
    }
}

/// One recorded event.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// What happened.
    pub action: Action,
    /// The address (for [`Action::Oom`]: 0).
    pub addr: u64,
    /// The bytes (for [`Action::Oom`]: the bytes asked for).
    pub size: u64,
    /// The stream handle.
    pub stream: u64,
    /// The device (in host mode 0).
    pub device: i32,
    /// Microseconds since the Unix epoch.
    pub time_us: i64,
    /// The OS thread id.
    pub thread: u64,
    /// The resources the event passed through, outermost first, joined by `" > "`
    /// (`"statistics_resource_adaptor > pool_memory_resource > cuda_memory_resource"`).
    pub resource: Arc<str>,
    /// The caller's stack, when a binding supplied one or native stacks are captured.
    pub frames: Option<Stack>,
    /// For [`Action::Oom`]: the device's free bytes (0 when unknown, as in host mode) and the
    /// error's text; empty otherwise.
    pub device_free: u64,
    /// For [`Action::Oom`]: the error's text.
    pub message: Option<Arc<str>>,
}

/// Microseconds since the Unix epoch, now.
pub(crate) fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
