//! [`Snapshot`]: the data of PyTorch's `torch.cuda.memory._snapshot()`, built from the recorder,
//! written as pickle, JSON or RMM's CSV log, and read back with typed errors.
//!
//! The keys are PyTorch's: `{"segments": [{"device", "address", "total_size", "allocated_size",
//! "active_size", "requested_size", "stream", "segment_type", "segment_pool_id", "is_expandable",
//! "frames", "blocks": [{"address", "size", "requested_size", "state", "frames"}]}],
//! "device_traces": [[{"action", "addr", "size", "stream", "time_us", "frames"}]]}`. Ours beside
//! them, which PyTorch's readers ignore: `"resource"` on segments, blocks and trace entries (the
//! resource stack), `"thread"` and, for `oom`, `"message"` on trace entries, and a top-level
//! `"rmm"` dict (`{"dropped_events"}`). A segment's blocks cover it exactly (the gaps are
//! `inactive` blocks), as `torch.cuda._memory_viz.segsum` checks.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::event::{Action, Event, Frame, Stack};
use super::pickle::{from_pickle, PickleError, Pickler};
use super::value::{Field, FieldPath, ShapeError, Value};
use crate::aligned::DEFAULT_ALIGNMENT;

/// A block's state (PyTorch's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockState {
    /// Handed out and not freed (`active_allocated`).
    ActiveAllocated,
    /// Freed, waiting for its stream (`active_pending_free`).
    ActivePendingFree,
    /// Free (`inactive`).
    Inactive,
}

impl BlockState {
    /// PyTorch's name.
    pub fn as_str(self) -> &'static str {
        match self {
            BlockState::ActiveAllocated => "active_allocated",
            BlockState::ActivePendingFree => "active_pending_free",
            BlockState::Inactive => "inactive",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "active_allocated" => BlockState::ActiveAllocated,
            "active_pending_free" => BlockState::ActivePendingFree,
            "inactive" => BlockState::Inactive,
            _ => return None,
        })
    }
}

/// A block of a segment.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// Its address.
    pub address: u64,
    /// Its bytes (the allocation rounded up as the resource rounds it, or a gap).
    pub size: u64,
    /// The bytes asked for (`size` for a free block).
    pub requested_size: u64,
    /// Its state.
    pub state: BlockState,
    /// The stack of the caller that allocated it (empty for a free block or when not recorded).
    pub frames: Stack,
    /// The resource stack it was allocated through (empty for a free block).
    pub resource: String,
}

/// A segment: memory a pool or arena took from its upstream, or one allocation made outside any
/// recorded segment.
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    /// The device.
    pub device: i32,
    /// Its address.
    pub address: u64,
    /// Its bytes.
    pub total_size: u64,
    /// Bytes of its allocated blocks.
    pub allocated_size: u64,
    /// Bytes of its active blocks (allocated or pending free).
    pub active_size: u64,
    /// Bytes asked for by its allocated blocks.
    pub requested_size: u64,
    /// The stream it was taken on.
    pub stream: u64,
    /// `"large"` or `"small"` (PyTorch's pools; ours are all `"large"` unless read from a file).
    pub segment_type: String,
    /// The resource that took it (for one allocation: the resource stack).
    pub resource: String,
    /// Its blocks, in address order, covering it exactly.
    pub blocks: Vec<Block>,
}

/// A trace entry's action (PyTorch's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceAction {
    /// `alloc`.
    Alloc,
    /// `free_requested`.
    FreeRequested,
    /// `free_completed`.
    FreeCompleted,
    /// `segment_alloc`.
    SegmentAlloc,
    /// `segment_free`.
    SegmentFree,
    /// `segment_map` (PyTorch's expandable segments).
    SegmentMap,
    /// `segment_unmap`.
    SegmentUnmap,
    /// `snapshot`.
    Snapshot,
    /// `oom`.
    Oom,
}

impl TraceAction {
    /// PyTorch's name.
    pub fn as_str(self) -> &'static str {
        match self {
            TraceAction::Alloc => "alloc",
            TraceAction::FreeRequested => "free_requested",
            TraceAction::FreeCompleted => "free_completed",
            TraceAction::SegmentAlloc => "segment_alloc",
            TraceAction::SegmentFree => "segment_free",
            TraceAction::SegmentMap => "segment_map",
            TraceAction::SegmentUnmap => "segment_unmap",
            TraceAction::Snapshot => "snapshot",
            TraceAction::Oom => "oom",
        }
    }

    pub(crate) const ALL: [TraceAction; 9] = [
        TraceAction::Alloc,
        TraceAction::FreeRequested,
        TraceAction::FreeCompleted,
        TraceAction::SegmentAlloc,
        TraceAction::SegmentFree,
        TraceAction::SegmentMap,
        TraceAction::SegmentUnmap,
        TraceAction::Snapshot,
        TraceAction::Oom,
    ];

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

/// One entry of a device's trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceEntry {
    /// What happened.
    pub action: TraceAction,
    /// The address (0 for `oom`).
    pub addr: u64,
    /// The bytes.
    pub size: u64,
    /// The stream handle.
    pub stream: u64,
    /// Microseconds since the Unix epoch.
    pub time_us: i64,
    /// The caller's stack (empty when not recorded).
    pub frames: Stack,
    /// For `oom`: the device's free bytes.
    pub device_free: Option<u64>,
    /// The OS thread (ours; absent in PyTorch's files).
    pub thread: Option<u64>,
    /// The resource stack (ours).
    pub resource: Option<String>,
    /// For `oom`: the error's text (ours).
    pub message: Option<String>,
}

/// A memory snapshot (see the module docs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// Segments with their blocks, by device then address.
    pub segments: Vec<Segment>,
    /// One trace per device (index = device), oldest entry first.
    pub device_traces: Vec<Vec<TraceEntry>>,
    /// Events the ring dropped before this snapshot (its capacity was reached).
    pub dropped_events: u64,
}

/// A snapshot file's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Python pickle (PyTorch's `.pickle`; memory_viz reads it).
    Pickle,
    /// JSON with the same keys.
    Json,
    /// RMM's CSV allocation log (`Thread,Time,Action,Pointer,Size,Stream`), which `rmm-replay`
    /// replays; write only (it holds the traces without stacks).
    ReplayLog,
}

impl Format {
    /// The format an extension names: `.pickle`/`.pkl`, `.json`, `.csv`.
    pub fn from_path(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "pickle" | "pkl" => Some(Format::Pickle),
            "json" => Some(Format::Json),
            "csv" => Some(Format::ReplayLog),
            _ => None,
        }
    }
}

/// Why a snapshot could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The data is not a readable pickle (truncated, corrupt, or naming classes).
    #[error("not a readable snapshot pickle: {0}")]
    Pickle(#[from] PickleError),
    /// The data is not JSON.
    #[error("not a readable snapshot JSON: {0}")]
    Json(String),
    /// The data is readable but not a snapshot's shape.
    #[error("not a memory snapshot: {0}")]
    Shape(#[from] ShapeError),
    /// Neither pickle nor JSON, or an extension that names no format.
    #[error("{0}")]
    Format(String),
}

impl SnapshotError {
    fn in_file(self, path: &Path) -> SnapshotError {
        match self {
            SnapshotError::Io { .. } => self,
            other => SnapshotError::Format(format!("{}: {other}", path.display())),
        }
    }
}

fn empty_stack() -> Stack {
    Arc::from(Vec::new())
}

/// Builds a snapshot from the recorder's live set, segments and ring.
pub(super) fn build<'a>(
    live: impl Iterator<Item = &'a Event>,
    segments: impl Iterator<Item = &'a Event>,
    ring: impl Iterator<Item = &'a Event>,
    dropped: u64,
) -> Snapshot {
    let mut seg_map: BTreeMap<(i32, u64), (&Event, Vec<&Event>)> = segments
        .map(|s| ((s.device, s.addr), (s, Vec::new())))
        .collect();
    let mut loose = Vec::new();
    for a in live {
        let container =
            seg_map
                .range_mut(..=(a.device, a.addr))
                .next_back()
                .filter(|((d, start), (s, _))| {
                    *d == a.device && a.addr >= *start && a.addr + a.size <= start + s.size
                });
        match container {
            Some((_, (_, blocks))) => blocks.push(a),
            None => loose.push(a),
        }
    }
    let mut out: Vec<Segment> = seg_map
        .into_values()
        .map(|(s, blocks)| segment_of(s, blocks))
        .collect();
    out.extend(loose.into_iter().map(|a| {
        let block = allocated_block(a, a.size);
        Segment {
            device: a.device,
            address: a.addr,
            total_size: a.size,
            allocated_size: a.size,
            active_size: a.size,
            requested_size: a.size,
            stream: a.stream,
            segment_type: "large".to_owned(),
            resource: a.resource.to_string(),
            blocks: vec![block],
        }
    }));
    out.sort_by_key(|s| (s.device, s.address));

    let mut device_traces: Vec<Vec<TraceEntry>> = Vec::new();
    for e in ring {
        let device = usize::try_from(e.device).unwrap_or(0);
        if device_traces.len() <= device {
            device_traces.resize_with(device + 1, Vec::new);
        }
        let trace = &mut device_traces[device];
        let entry = |action| TraceEntry {
            action,
            addr: e.addr,
            size: e.size,
            stream: e.stream,
            time_us: e.time_us,
            frames: e.frames.clone().unwrap_or_else(empty_stack),
            device_free: (e.action == Action::Oom).then_some(e.device_free),
            thread: Some(e.thread),
            resource: Some(e.resource.to_string()),
            message: e.message.as_deref().map(str::to_owned),
        };
        match e.action {
            Action::Alloc => trace.push(entry(TraceAction::Alloc)),
            Action::Free => {
                trace.push(entry(TraceAction::FreeRequested));
                trace.push(entry(TraceAction::FreeCompleted));
            }
            Action::SegmentAlloc => trace.push(entry(TraceAction::SegmentAlloc)),
            Action::SegmentFree => trace.push(entry(TraceAction::SegmentFree)),
            Action::Oom => trace.push(entry(TraceAction::Oom)),
        }
    }
    if device_traces.is_empty() {
        device_traces.push(Vec::new());
    }
    Snapshot {
        segments: out,
        device_traces,
        dropped_events: dropped,
    }
}

fn allocated_block(a: &Event, size: u64) -> Block {
    Block {
        address: a.addr,
        size,
        requested_size: a.size,
        state: BlockState::ActiveAllocated,
        frames: a.frames.clone().unwrap_or_else(empty_stack),
        resource: a.resource.to_string(),
    }
}

fn free_block(address: u64, size: u64) -> Block {
    Block {
        address,
        size,
        requested_size: size,
        state: BlockState::Inactive,
        frames: empty_stack(),
        resource: String::new(),
    }
}

/// A segment's blocks: its allocations (rounded as sub-allocators round them, never past the next
/// block or the segment's end) with the gaps between them as free blocks.
fn segment_of(s: &Event, mut allocations: Vec<&Event>) -> Segment {
    allocations.sort_by_key(|a| a.addr);
    let end = s.addr + s.size;
    let mut blocks = Vec::with_capacity(allocations.len() * 2 + 1);
    let mut cursor = s.addr;
    for (i, a) in allocations.iter().enumerate() {
        if a.addr < cursor {
            // Overlaps the previous block: a free the recorder did not see. Left out.
            continue;
        }
        if a.addr > cursor {
            blocks.push(free_block(cursor, a.addr - cursor));
        }
        let next = allocations
            .get(i + 1)
            .map_or(end, |n| n.addr.max(a.addr + a.size))
            .min(end);
        let rounded = a.size.div_ceil(DEFAULT_ALIGNMENT as u64) * DEFAULT_ALIGNMENT as u64;
        let size = rounded.min(next - a.addr).max(a.size);
        blocks.push(allocated_block(a, size));
        cursor = a.addr + size;
    }
    if cursor < end {
        blocks.push(free_block(cursor, end - cursor));
    }
    let allocated: u64 = blocks
        .iter()
        .filter(|b| b.state == BlockState::ActiveAllocated)
        .map(|b| b.size)
        .sum();
    let requested: u64 = blocks
        .iter()
        .filter(|b| b.state == BlockState::ActiveAllocated)
        .map(|b| b.requested_size)
        .sum();
    Segment {
        device: s.device,
        address: s.addr,
        total_size: s.size,
        allocated_size: allocated,
        active_size: allocated,
        requested_size: requested,
        stream: s.stream,
        segment_type: "large".to_owned(),
        resource: s.resource.to_string(),
        blocks,
    }
}

// ---- writing ---------------------------------------------------------------------------------

fn int(v: u64) -> i64 {
    // Addresses and sizes fit in 63 bits on every platform CUDA runs on.
    i64::try_from(v).unwrap_or(i64::MAX)
}

const SEGMENT_KEYS: [&str; 13] = [
    "device",
    "address",
    "total_size",
    "allocated_size",
    "active_size",
    "requested_size",
    "stream",
    "segment_type",
    "segment_pool_id",
    "is_expandable",
    "frames",
    "resource",
    "blocks",
];

impl Snapshot {
    /// The snapshot as the values Python's `pickle.load` / `json.load` give (frames copied out).
    pub fn to_value(&self) -> Value {
        let frames = |stack: &Stack| {
            Value::List(
                stack
                    .iter()
                    .map(|f| {
                        Value::dict([
                            ("filename", Value::from(f.filename.as_str())),
                            ("line", Value::Int(i64::from(f.line))),
                            ("name", Value::from(f.name.as_str())),
                        ])
                    })
                    .collect(),
            )
        };
        let segments = self
            .segments
            .iter()
            .map(|s| {
                let blocks = s
                    .blocks
                    .iter()
                    .map(|b| {
                        Value::dict([
                            ("address", Value::Int(int(b.address))),
                            ("size", Value::Int(int(b.size))),
                            ("requested_size", Value::Int(int(b.requested_size))),
                            ("state", Value::from(b.state.as_str())),
                            ("frames", frames(&b.frames)),
                            ("resource", Value::from(b.resource.as_str())),
                        ])
                    })
                    .collect();
                Value::dict([
                    ("device", Value::Int(i64::from(s.device))),
                    ("address", Value::Int(int(s.address))),
                    ("total_size", Value::Int(int(s.total_size))),
                    ("allocated_size", Value::Int(int(s.allocated_size))),
                    ("active_size", Value::Int(int(s.active_size))),
                    ("requested_size", Value::Int(int(s.requested_size))),
                    ("stream", Value::Int(int(s.stream))),
                    ("segment_type", Value::from(s.segment_type.as_str())),
                    (
                        "segment_pool_id",
                        Value::Tuple(vec![Value::Int(0), Value::Int(0)]),
                    ),
                    ("is_expandable", Value::Bool(false)),
                    ("frames", Value::List(Vec::new())),
                    ("resource", Value::from(s.resource.as_str())),
                    ("blocks", Value::List(blocks)),
                ])
            })
            .collect();
        let traces = self
            .device_traces
            .iter()
            .map(|t| {
                Value::List(
                    t.iter()
                        .map(|e| {
                            let mut d = vec![
                                ("action", Value::from(e.action.as_str())),
                                ("addr", Value::Int(int(e.addr))),
                                ("size", Value::Int(int(e.size))),
                                ("stream", Value::Int(int(e.stream))),
                                ("time_us", Value::Int(e.time_us)),
                                ("frames", frames(&e.frames)),
                            ];
                            if let Some(free) = e.device_free {
                                d.push(("device_free", Value::Int(int(free))));
                            }
                            if let Some(t) = e.thread {
                                d.push(("thread", Value::Int(int(t))));
                            }
                            if let Some(r) = &e.resource {
                                d.push(("resource", Value::from(r.as_str())));
                            }
                            if let Some(m) = &e.message {
                                d.push(("message", Value::from(m.as_str())));
                            }
                            Value::dict(d)
                        })
                        .collect(),
                )
            })
            .collect();
        Value::dict([
            ("segments", Value::List(segments)),
            ("device_traces", Value::List(traces)),
            (
                "rmm",
                Value::dict([("dropped_events", Value::Int(int(self.dropped_events)))]),
            ),
        ])
    }

    /// The snapshot as pickle protocol 2 (what `torch.cuda.memory._dump_snapshot` writes; memory_viz
    /// and `pickle.load` read it). Each distinct stack is written once and shared.
    pub fn to_pickle(&self) -> Vec<u8> {
        let mut p = Pickler::new();
        p.dict_with(&["segments", "device_traces", "rmm"], |p, i| match i {
            0 => p.list_with(self.segments.len(), |p, j| self.pickle_segment(p, j)),
            1 => p.list_with(self.device_traces.len(), |p, d| {
                let trace = &self.device_traces[d];
                p.list_with(trace.len(), |p, k| pickle_entry(p, &trace[k]));
            }),
            _ => p.dict_with(&["dropped_events"], |p, _| p.int(int(self.dropped_events))),
        });
        p.finish()
    }

    fn pickle_segment(&self, p: &mut Pickler, j: usize) {
        let s = &self.segments[j];
        p.dict_with(&SEGMENT_KEYS, |p, k| match SEGMENT_KEYS[k] {
            "device" => p.int(i64::from(s.device)),
            "address" => p.int(int(s.address)),
            "total_size" => p.int(int(s.total_size)),
            "allocated_size" => p.int(int(s.allocated_size)),
            "active_size" => p.int(int(s.active_size)),
            "requested_size" => p.int(int(s.requested_size)),
            "stream" => p.int(int(s.stream)),
            "segment_type" => p.str(&s.segment_type),
            "segment_pool_id" => p.int_pair(0, 0),
            "is_expandable" => p.boolean(false),
            "frames" => p.list_with(0, |_, _| {}),
            "resource" => p.str(&s.resource),
            _ => p.list_with(s.blocks.len(), |p, b| {
                let b = &s.blocks[b];
                p.dict_with(
                    &[
                        "address",
                        "size",
                        "requested_size",
                        "state",
                        "frames",
                        "resource",
                    ],
                    |p, k| match k {
                        0 => p.int(int(b.address)),
                        1 => p.int(int(b.size)),
                        2 => p.int(int(b.requested_size)),
                        3 => p.str(b.state.as_str()),
                        4 => pickle_frames(p, &b.frames),
                        _ => p.str(&b.resource),
                    },
                );
            }),
        });
    }

    /// The snapshot as JSON (the keys of the pickle; tuples become lists).
    pub fn to_json(&self) -> String {
        value_to_json(&self.to_value()).to_string()
    }

    /// The traces as RMM's CSV allocation log (`Thread,Time,Action,Pointer,Size,Stream`), in time
    /// order across devices: `alloc` → `allocate`, `free_completed` → `free`, `oom` → `allocate
    /// failure`; segment events are left out (the replayed resource makes its own).
    pub fn to_replay_log(&self) -> String {
        let mut entries: Vec<&TraceEntry> = self
            .device_traces
            .iter()
            .flatten()
            .filter(|e| {
                matches!(
                    e.action,
                    TraceAction::Alloc | TraceAction::FreeCompleted | TraceAction::Oom
                )
            })
            .collect();
        entries.sort_by_key(|e| e.time_us);
        let mut out = String::from("Thread,Time,Action,Pointer,Size,Stream\n");
        for e in entries {
            let secs = u64::try_from(e.time_us.div_euclid(1_000_000)).unwrap_or(0);
            let micros = e.time_us.rem_euclid(1_000_000);
            let hms = crate::debug_log::local_hms(secs);
            let hms = std::str::from_utf8(&hms).unwrap_or("00:00:00");
            let (action, pointer) = match e.action {
                TraceAction::Alloc => ("allocate", format!("{:#x}", e.addr)),
                TraceAction::Oom => ("allocate failure", "(nil)".to_owned()),
                _ => ("free", format!("{:#x}", e.addr)),
            };
            out.push_str(&format!(
                "{},{hms}.{micros:06},{action},{pointer},{},{:#x}\n",
                e.thread.unwrap_or(0),
                e.size,
                e.stream
            ));
        }
        out
    }

    /// The snapshot in `format`.
    pub fn to_bytes(&self, format: Format) -> Vec<u8> {
        match format {
            Format::Pickle => self.to_pickle(),
            Format::Json => self.to_json().into_bytes(),
            Format::ReplayLog => self.to_replay_log().into_bytes(),
        }
    }

    /// Writes the snapshot to `path` in the format its extension names.
    ///
    /// # Errors
    /// [`SnapshotError::Format`] for an unknown extension, [`SnapshotError::Io`] when writing fails.
    pub fn write(&self, path: &Path) -> Result<(), SnapshotError> {
        let format = Format::from_path(path).ok_or_else(|| {
            SnapshotError::Format(format!(
                "{}: unknown snapshot format (use .pickle, .json or .csv)",
                path.display()
            ))
        })?;
        std::fs::write(path, self.to_bytes(format)).map_err(|source| SnapshotError::Io {
            path: path.to_owned(),
            source,
        })
    }

    // ---- reading ------------------------------------------------------------------------------

    /// Reads a snapshot pickle (ours, or PyTorch's `_dump_snapshot` file).
    ///
    /// # Errors
    /// [`SnapshotError::Pickle`] for a truncated or corrupt pickle, [`SnapshotError::Shape`] for
    /// data that is not a snapshot.
    pub fn from_pickle(data: &[u8]) -> Result<Snapshot, SnapshotError> {
        Ok(Snapshot::from_value(&from_pickle(data)?)?)
    }

    /// Reads a snapshot written as JSON.
    ///
    /// # Errors
    /// [`SnapshotError::Json`] for text that is not JSON, [`SnapshotError::Shape`] for data that
    /// is not a snapshot.
    pub fn from_json(text: &str) -> Result<Snapshot, SnapshotError> {
        let json: serde_json::Value =
            serde_json::from_str(text).map_err(|e| SnapshotError::Json(e.to_string()))?;
        Ok(Snapshot::from_value(&json_to_value(&json))?)
    }

    /// Reads a snapshot, pickle or JSON (told apart by the first byte).
    ///
    /// # Errors
    /// As [`Snapshot::from_pickle`] and [`Snapshot::from_json`]; [`SnapshotError::Format`] for
    /// data that is neither.
    pub fn from_bytes(data: &[u8]) -> Result<Snapshot, SnapshotError> {
        let first = data.iter().find(|b| !b.is_ascii_whitespace());
        match first {
            Some(0x80) => Snapshot::from_pickle(data),
            Some(b'{') => Snapshot::from_json(
                std::str::from_utf8(data)
                    .map_err(|e| SnapshotError::Json(format!("not UTF-8 text: {e}")))?,
            ),
            None => Err(SnapshotError::Format("the file is empty".into())),
            Some(b) => Err(SnapshotError::Format(format!(
                "neither a pickle (first byte 0x80) nor JSON (first byte '{{'): first byte {b:#04x}"
            ))),
        }
    }

    /// Reads a snapshot file, pickle or JSON.
    ///
    /// # Errors
    /// [`SnapshotError::Io`] when it cannot be read; otherwise as [`Snapshot::from_bytes`], with the
    /// path in the message.
    pub fn read(path: &Path) -> Result<Snapshot, SnapshotError> {
        let data = std::fs::read(path).map_err(|source| SnapshotError::Io {
            path: path.to_owned(),
            source,
        })?;
        Snapshot::from_bytes(&data).map_err(|e| e.in_file(path))
    }

    /// Reads the data of a snapshot (what [`Snapshot::to_value`] gives, or PyTorch's).
    ///
    /// # Errors
    /// [`ShapeError`] naming the first field that is missing or of the wrong type.
    pub fn from_value(value: &Value) -> Result<Snapshot, ShapeError> {
        let top = Field::new(value, FieldPath::default());
        let mut segments = Vec::new();
        for s in top.req("segments")?.items()? {
            segments.push(read_segment(&s)?);
        }
        let mut device_traces = Vec::new();
        if let Some(traces) = top.opt("device_traces")? {
            for t in traces.items()? {
                let mut entries = Vec::new();
                for e in t.items()? {
                    entries.push(read_entry(&e)?);
                }
                device_traces.push(entries);
            }
        }
        let dropped_events = match top.opt("rmm")? {
            Some(rmm) => rmm.opt("dropped_events")?.map(|d| d.uint()).transpose()?,
            None => None,
        }
        .unwrap_or(0);
        Ok(Snapshot {
            segments,
            device_traces,
            dropped_events,
        })
    }
}

fn pickle_frames(p: &mut Pickler, stack: &Stack) {
    // Stacks are shared by every event and block that has them: written once.
    let identity = Arc::as_ptr(stack) as *const Frame as usize;
    if stack.is_empty() {
        p.list_with(0, |_, _| {});
        return;
    }
    p.shared_list_with(identity, stack.len(), |p, i| {
        let f = &stack[i];
        p.dict_with(&["filename", "line", "name"], |p, k| match k {
            0 => p.str(&f.filename),
            1 => p.int(i64::from(f.line)),
            _ => p.str(&f.name),
        });
    });
}

fn pickle_entry(p: &mut Pickler, e: &TraceEntry) {
    let mut keys = vec!["action", "addr", "size", "stream", "time_us", "frames"];
    if e.device_free.is_some() {
        keys.push("device_free");
    }
    if e.thread.is_some() {
        keys.push("thread");
    }
    if e.resource.is_some() {
        keys.push("resource");
    }
    if e.message.is_some() {
        keys.push("message");
    }
    let keys_for_match = keys.clone();
    p.dict_with(&keys, |p, k| match keys_for_match[k] {
        "action" => p.str(e.action.as_str()),
        "addr" => p.int(int(e.addr)),
        "size" => p.int(int(e.size)),
        "stream" => p.int(int(e.stream)),
        "time_us" => p.int(e.time_us),
        "frames" => pickle_frames(p, &e.frames),
        "device_free" => p.int(int(e.device_free.unwrap_or(0))),
        "thread" => p.int(int(e.thread.unwrap_or(0))),
        "resource" => p.str(e.resource.as_deref().unwrap_or("")),
        _ => p.str(e.message.as_deref().unwrap_or("")),
    });
}

fn read_frames(f: Option<Field<'_>>) -> Result<Stack, ShapeError> {
    let Some(f) = f else {
        return Ok(empty_stack());
    };
    let mut frames = Vec::new();
    for fr in f.items()? {
        frames.push(Frame {
            filename: fr.req("filename")?.str()?.to_owned(),
            line: u32::try_from(fr.req("line")?.uint()?).unwrap_or(u32::MAX),
            name: fr.req("name")?.str()?.to_owned(),
        });
    }
    Ok(frames.into())
}

fn opt_str(f: &Field<'_>, name: &str) -> Result<Option<String>, ShapeError> {
    f.opt(name)?.map(|v| v.str().map(str::to_owned)).transpose()
}

fn read_segment(s: &Field<'_>) -> Result<Segment, ShapeError> {
    let address = s.req("address")?.uint()?;
    let total_size = s.req("total_size")?.uint()?;
    let mut blocks = Vec::new();
    let mut offset = address;
    for b in s.req("blocks")?.items()? {
        let size = b.req("size")?.uint()?;
        let state_field = b.req("state")?;
        let state_text = state_field.str()?;
        let state = BlockState::parse(state_text).ok_or_else(|| {
            ShapeError(format!(
                "{}: unknown block state {state_text:?}",
                state_field.path
            ))
        })?;
        let block_address = b
            .opt("address")?
            .map(|a| a.uint())
            .transpose()?
            .unwrap_or(offset);
        blocks.push(Block {
            address: block_address,
            size,
            requested_size: b
                .opt("requested_size")?
                .map(|r| r.uint())
                .transpose()?
                .unwrap_or(size),
            state,
            frames: read_frames(b.opt("frames")?)?,
            resource: opt_str(&b, "resource")?.unwrap_or_default(),
        });
        offset = block_address.saturating_add(size);
    }
    let allocated: u64 = blocks
        .iter()
        .filter(|b| b.state == BlockState::ActiveAllocated)
        .map(|b| b.size)
        .sum();
    let uint_or = |name: &str, default: u64| -> Result<u64, ShapeError> {
        Ok(s.opt(name)?
            .map(|v| v.uint())
            .transpose()?
            .unwrap_or(default))
    };
    Ok(Segment {
        device: s
            .opt("device")?
            .map(|d| d.int())
            .transpose()?
            .map_or(0, |d| i32::try_from(d).unwrap_or(0)),
        address,
        total_size,
        allocated_size: uint_or("allocated_size", allocated)?,
        active_size: uint_or("active_size", allocated)?,
        requested_size: uint_or("requested_size", allocated)?,
        stream: uint_or("stream", 0)?,
        segment_type: opt_str(s, "segment_type")?.unwrap_or_else(|| "large".to_owned()),
        resource: opt_str(s, "resource")?.unwrap_or_default(),
        blocks,
    })
}

fn read_entry(e: &Field<'_>) -> Result<TraceEntry, ShapeError> {
    let action_field = e.req("action")?;
    let action_text = action_field.str()?;
    let action = TraceAction::parse(action_text).ok_or_else(|| {
        ShapeError(format!(
            "{}: unknown action {action_text:?}",
            action_field.path
        ))
    })?;
    let uint = |name: &str| -> Result<Option<u64>, ShapeError> {
        e.opt(name)?.map(|v| v.uint()).transpose()
    };
    Ok(TraceEntry {
        action,
        addr: uint("addr")?.unwrap_or(0),
        size: e.req("size")?.uint()?,
        stream: uint("stream")?.unwrap_or(0),
        time_us: e.opt("time_us")?.map(|t| t.int()).transpose()?.unwrap_or(0),
        frames: read_frames(e.opt("frames")?)?,
        device_free: uint("device_free")?,
        thread: uint("thread")?,
        resource: opt_str(e, "resource")?,
        message: opt_str(e, "message")?,
    })
}

fn value_to_json(v: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        Value::None => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) => J::from(*i),
        Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
        Value::Str(s) => J::String(s.clone()),
        Value::List(items) | Value::Tuple(items) => {
            J::Array(items.iter().map(value_to_json).collect())
        }
        Value::Dict(items) => J::Object(
            items
                .iter()
                .map(|(k, v)| {
                    let key = match k {
                        Value::Str(s) => s.clone(),
                        other => format!("{other:?}"),
                    };
                    (key, value_to_json(v))
                })
                .collect(),
        ),
    }
}

fn json_to_value(j: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    match j {
        J::Null => Value::None,
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => n
            .as_i64()
            .map(Value::Int)
            .or_else(|| {
                n.as_u64()
                    .map(|u| Value::Int(i64::try_from(u).unwrap_or(i64::MAX)))
            })
            .unwrap_or_else(|| Value::Float(n.as_f64().unwrap_or(0.0))),
        J::String(s) => Value::Str(s.clone()),
        J::Array(items) => Value::List(items.iter().map(json_to_value).collect()),
        J::Object(items) => Value::Dict(
            items
                .iter()
                .map(|(k, v)| (Value::Str(k.clone()), json_to_value(v)))
                .collect(),
        ),
    }
}

impl fmt::Display for Snapshot {
    /// A one-line summary: segments, bytes reserved and allocated, trace entries.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reserved: u64 = self.segments.iter().map(|s| s.total_size).sum();
        let allocated: u64 = self.segments.iter().map(|s| s.allocated_size).sum();
        let entries: usize = self.device_traces.iter().map(Vec::len).sum();
        write!(
            f,
            "{} segments, {reserved} bytes reserved, {allocated} allocated, {entries} trace entries",
            self.segments.len()
        )
    }
}
