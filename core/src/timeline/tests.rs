//! The recorder, its snapshots and their files, through the recording adaptor.

use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::cuda::Stream;
use crate::mr::{PoolMemoryResource, RecordingResourceAdaptor, SystemMemoryResource};
use crate::resource::MemoryResource;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

fn fresh(options: Options) {
    clear();
    start(Options {
        clear: true,
        ..options
    })
    .unwrap();
}

fn pool_under_recorder(initial: usize, maximum: Option<usize>) -> RecordingResourceAdaptor {
    let pool = PoolMemoryResource::new(
        crate::AnyResource::new(SystemMemoryResource::new()),
        Some(initial),
        maximum,
    )
    .unwrap();
    RecordingResourceAdaptor::new(pool)
}

// Other tests' pools grow and trim while these record (segment events are process-wide), so
// each test looks only at the addresses it allocated.

fn actions_at(s: &Snapshot, addrs: &[*mut u8]) -> Vec<TraceAction> {
    s.device_traces
        .iter()
        .flatten()
        .filter(|e| addrs.iter().any(|&p| e.addr == p as u64))
        .map(|e| e.action)
        .collect()
}

fn segment_holding(s: &Snapshot, p: *mut u8) -> &Segment {
    let p = p as u64;
    s.segments
        .iter()
        .find(|seg| seg.address <= p && p < seg.address + seg.total_size)
        .unwrap_or_else(|| panic!("no segment holds {p:#x}: {s}"))
}

#[test]
fn nothing_is_recorded_while_stopped() {
    let _serial = test_lock();
    clear();
    stop();
    let mr = RecordingResourceAdaptor::new(SystemMemoryResource::new());
    let p = mr.allocate(Stream::DEFAULT, 4 * KIB, 256).unwrap();
    // SAFETY: allocated just above with these arguments.
    unsafe { mr.deallocate(Stream::DEFAULT, p, 4 * KIB, 256).unwrap() };
    let s = snapshot();
    assert!(!s.segments.iter().any(|seg| seg.address == p as u64), "{s}");
    assert!(actions_at(&s, &[p]).is_empty(), "{s}");
}

#[test]
fn pool_allocations_are_blocks_of_the_pool_segment_which_they_cover_exactly() {
    let _serial = test_lock();
    let mr = pool_under_recorder(MIB, None);
    fresh(Options::default());
    mr.note_segments();
    let a = mr.allocate(Stream::DEFAULT, 1000, 256).unwrap();
    let b = mr.allocate(Stream::DEFAULT, 5000, 256).unwrap();
    // SAFETY: allocated above with these arguments.
    unsafe { mr.deallocate(Stream::DEFAULT, a, 1000, 256).unwrap() };
    let s = snapshot();
    stop();
    let seg = segment_holding(&s, b);
    assert_eq!(seg.total_size, MIB as u64);
    assert_eq!(seg.resource, "pool_memory_resource");
    let covered: u64 = seg.blocks.iter().map(|b| b.size).sum();
    assert_eq!(covered, seg.total_size, "blocks cover the segment: {seg:?}");
    let live: Vec<&Block> = seg
        .blocks
        .iter()
        .filter(|b| b.state == BlockState::ActiveAllocated)
        .collect();
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].address, b as u64);
    assert_eq!((live[0].size, live[0].requested_size), (5120, 5000));
    assert_eq!(seg.allocated_size, 5120);
    assert!(live[0]
        .resource
        .starts_with("recording_resource_adaptor > pool_memory_resource"));
    assert_eq!(
        actions_at(&s, &[a, b]),
        [
            TraceAction::Alloc,
            TraceAction::Alloc,
            TraceAction::FreeRequested,
            TraceAction::FreeCompleted
        ]
    );
    // SAFETY: allocated above with these arguments.
    unsafe { mr.deallocate(Stream::DEFAULT, b, 5000, 256).unwrap() };
}

#[test]
fn pool_growth_and_trim_are_segment_events() {
    let _serial = test_lock();
    let pool = PoolMemoryResource::new(
        crate::AnyResource::new(SystemMemoryResource::new()),
        Some(64 * KIB),
        None,
    )
    .unwrap();
    let mr = RecordingResourceAdaptor::new(pool.clone());
    fresh(Options::default());
    let big = mr.allocate(Stream::DEFAULT, 512 * KIB, 256).unwrap();
    // SAFETY: allocated above with these arguments.
    unsafe { mr.deallocate(Stream::DEFAULT, big, 512 * KIB, 256).unwrap() };
    pool.release_unused().unwrap();
    let s = snapshot();
    stop();
    let grown = s.device_traces[0]
        .iter()
        .find(|e| {
            e.action == TraceAction::SegmentAlloc
                && e.addr <= big as u64
                && (big as u64) < e.addr + e.size
        })
        .expect("the growth that made room for the allocation");
    assert!(grown.size >= 512 * KIB as u64);
    assert_eq!(grown.resource.as_deref(), Some("pool_memory_resource"));
    assert!(s.device_traces[0]
        .iter()
        .any(|e| e.action == TraceAction::SegmentFree && e.addr == grown.addr));
}

#[test]
fn allocations_outside_segments_are_segments_of_their_own() {
    let _serial = test_lock();
    let mr = RecordingResourceAdaptor::new(SystemMemoryResource::new());
    fresh(Options::default());
    let p = mr.allocate(Stream::DEFAULT, 3000, 256).unwrap();
    let s = snapshot();
    stop();
    let seg = segment_holding(&s, p);
    assert_eq!((seg.address, seg.total_size), (p as u64, 3000));
    assert_eq!(seg.blocks.len(), 1);
    // SAFETY: allocated above with these arguments.
    unsafe { mr.deallocate(Stream::DEFAULT, p, 3000, 256).unwrap() };
}

#[test]
fn the_ring_keeps_the_last_max_entries_and_counts_the_dropped() {
    let _serial = test_lock();
    let mr = RecordingResourceAdaptor::new(SystemMemoryResource::new());
    fresh(Options {
        max_entries: 3,
        ..Options::default()
    });
    let ptrs: Vec<_> = (0..5)
        .map(|_| mr.allocate(Stream::DEFAULT, KIB, 256).unwrap())
        .collect();
    let s = snapshot();
    stop();
    assert_eq!(s.device_traces[0].len(), 3);
    assert!(s.dropped_events >= 2, "{s}");
    assert_eq!(actions_at(&s, &ptrs[4..]), [TraceAction::Alloc]);
    // The live set is not bounded by the ring: all five are still shown.
    for &p in &ptrs {
        segment_holding(&s, p);
    }
    for p in ptrs {
        // SAFETY: allocated above with these arguments.
        unsafe { mr.deallocate(Stream::DEFAULT, p, KIB, 256).unwrap() };
    }
    assert!(start(Options {
        max_entries: 0,
        ..Options::default()
    })
    .is_err());
}

#[test]
fn a_stack_provider_gives_the_frames_of_blocks_and_entries() {
    let _serial = test_lock();
    let mr = RecordingResourceAdaptor::new(SystemMemoryResource::new());
    let stack: Stack = Arc::from(vec![Frame {
        filename: "model.py".to_owned(),
        line: 12,
        name: "forward".to_owned(),
    }]);
    let given = stack.clone();
    set_stack_provider(Some(Arc::new(move || Some(given.clone()))));
    fresh(Options::default());
    let p = mr.allocate(Stream::DEFAULT, KIB, 256).unwrap();
    let s = snapshot();
    stop();
    set_stack_provider(None);
    assert_eq!(segment_holding(&s, p).blocks[0].frames, stack);
    let entry = s.device_traces[0]
        .iter()
        .find(|e| e.addr == p as u64)
        .unwrap();
    assert_eq!(entry.frames, stack);
    // The pickle writes the shared stack once and reads it back equal.
    let back = Snapshot::from_pickle(&s.to_pickle()).unwrap();
    assert_eq!(back, s);
    // SAFETY: allocated above with these arguments.
    unsafe { mr.deallocate(Stream::DEFAULT, p, KIB, 256).unwrap() };
}

#[inline(never)]
fn allocate_from_a_named_function(mr: &RecordingResourceAdaptor) -> *mut u8 {
    mr.allocate(Stream::DEFAULT, KIB, 256).unwrap()
}

#[test]
fn native_stacks_name_the_caller() {
    let _serial = test_lock();
    let mr = RecordingResourceAdaptor::new(SystemMemoryResource::new());
    fresh(Options {
        native_stacks: true,
        ..Options::default()
    });
    let p = allocate_from_a_named_function(&mr);
    let s = snapshot();
    stop();
    let frames = &s.device_traces[0]
        .iter()
        .find(|e| e.addr == p as u64)
        .unwrap()
        .frames;
    assert!(
        frames
            .iter()
            .any(|f| f.name.contains("allocate_from_a_named_function")),
        "{frames:#?}"
    );
    assert!(
        !frames[0].name.contains("timeline::native"),
        "{:?}",
        frames[0]
    );
    // SAFETY: allocated above with these arguments.
    unsafe { mr.deallocate(Stream::DEFAULT, p, KIB, 256).unwrap() };
}

#[test]
fn out_of_memory_is_an_event_with_the_fragmentation_and_dumps_a_snapshot() {
    let _serial = test_lock();
    let dir = std::env::temp_dir().join(format!("rmm-timeline-oom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dump = dir.join("oom.pickle");
    let _ = std::fs::remove_file(&dump);
    let mr = pool_under_recorder(256 * KIB, Some(256 * KIB));
    fresh(Options {
        dump_on_oom: Some(dump.clone()),
        ..Options::default()
    });
    mr.note_segments();
    let held: Vec<_> = (0..4)
        .map(|_| mr.allocate(Stream::DEFAULT, 64 * KIB, 256).unwrap())
        .collect();
    // SAFETY: allocated above with these arguments.
    unsafe {
        mr.deallocate(Stream::DEFAULT, held[1], 64 * KIB, 256)
            .unwrap()
    };
    // SAFETY: as above.
    unsafe {
        mr.deallocate(Stream::DEFAULT, held[3], 64 * KIB, 256)
            .unwrap()
    };
    let err = mr.allocate(Stream::DEFAULT, 100 * KIB, 256).unwrap_err();
    let s = snapshot();
    stop();
    let text = err.to_string();
    assert!(text.contains("largest free block"), "{text}");
    assert!(text.contains("fragmentation"), "{text}");
    let oom = s.device_traces[0]
        .iter()
        .find(|e| e.action == TraceAction::Oom)
        .expect("an oom entry");
    assert_eq!(oom.size, 100 * KIB as u64);
    assert_eq!(oom.message.as_deref(), Some(text.as_str()));
    let dumped = Snapshot::read(&dump).unwrap();
    assert_eq!(
        segment_holding(&dumped, held[0]).total_size,
        256 * KIB as u64
    );
    assert!(dumped.device_traces[0]
        .iter()
        .any(|e| e.action == TraceAction::Oom));
    for p in [held[0], held[2]] {
        // SAFETY: allocated above with these arguments.
        unsafe { mr.deallocate(Stream::DEFAULT, p, 64 * KIB, 256).unwrap() };
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_replay_log_has_rmm_header_and_one_line_per_alloc_free_and_failure() {
    let _serial = test_lock();
    let mr = RecordingResourceAdaptor::new(SystemMemoryResource::new());
    fresh(Options::default());
    let p = mr.allocate(Stream::DEFAULT, 2 * KIB, 256).unwrap();
    // SAFETY: allocated above with these arguments.
    unsafe { mr.deallocate(Stream::DEFAULT, p, 2 * KIB, 256).unwrap() };
    let log = snapshot().to_replay_log();
    stop();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines[0], "Thread,Time,Action,Pointer,Size,Stream");
    let ours: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains(&format!(",{:#x},", p as usize)))
        .collect();
    assert_eq!(ours.len(), 2, "{log}");
    assert!(
        ours[0].ends_with(&format!(",allocate,{:#x},2048,0x0", p as usize)),
        "{log}"
    );
    assert!(
        ours[1].ends_with(&format!(",free,{:#x},2048,0x0", p as usize)),
        "{log}"
    );
}

// ---- files -----------------------------------------------------------------------------------

fn frame_strategy() -> impl Strategy<Value = Frame> {
    ("[a-z/._]{1,12}", 0u32..5000, "[a-zA-Z_:<>]{1,12}").prop_map(|(filename, line, name)| Frame {
        filename,
        line,
        name,
    })
}

fn stack_strategy() -> impl Strategy<Value = Stack> {
    prop::collection::vec(frame_strategy(), 0..4).prop_map(Stack::from)
}

fn entry_strategy() -> impl Strategy<Value = TraceEntry> {
    (
        0usize..9,
        0u64..1 << 48,
        0u64..1 << 40,
        0u64..1 << 20,
        0i64..1 << 52,
        stack_strategy(),
        proptest::option::of(0u64..1 << 40),
        proptest::option::of("[ -~]{0,20}"),
    )
        .prop_map(
            |(a, addr, size, stream, time_us, frames, device_free, message)| TraceEntry {
                action: TraceAction::ALL[a],
                addr,
                size,
                stream,
                time_us,
                frames,
                device_free,
                thread: Some(7),
                resource: Some("recording_resource_adaptor > system_memory_resource".into()),
                message,
            },
        )
}

fn snapshot_strategy() -> impl Strategy<Value = Snapshot> {
    let block = (1u64..1 << 20, 0usize..3, stack_strategy());
    let segment = (0i32..2, 0u64..1 << 40, prop::collection::vec(block, 1..4));
    (
        prop::collection::vec(segment, 0..3),
        prop::collection::vec(prop::collection::vec(entry_strategy(), 0..5), 1..3),
        0u64..100,
    )
        .prop_map(|(segments, device_traces, dropped_events)| {
            let segments = segments
                .into_iter()
                .map(|(device, address, blocks)| {
                    let mut at = address;
                    let blocks: Vec<Block> = blocks
                        .into_iter()
                        .map(|(size, state, frames)| {
                            let b = Block {
                                address: at,
                                size,
                                requested_size: size,
                                state: [
                                    BlockState::ActiveAllocated,
                                    BlockState::ActivePendingFree,
                                    BlockState::Inactive,
                                ][state],
                                frames,
                                resource: "r".into(),
                            };
                            at += size;
                            b
                        })
                        .collect();
                    let allocated = blocks
                        .iter()
                        .filter(|b| b.state == BlockState::ActiveAllocated)
                        .map(|b| b.size)
                        .sum();
                    Segment {
                        device,
                        address,
                        total_size: at - address,
                        allocated_size: allocated,
                        active_size: allocated,
                        requested_size: allocated,
                        stream: 0,
                        segment_type: "large".into(),
                        resource: "pool_memory_resource".into(),
                        blocks,
                    }
                })
                .collect();
            Snapshot {
                segments,
                device_traces,
                dropped_events,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn pickle_and_json_round_trip(s in snapshot_strategy()) {
        prop_assert_eq!(&Snapshot::from_pickle(&s.to_pickle()).unwrap(), &s);
        prop_assert_eq!(&Snapshot::from_json(&s.to_json()).unwrap(), &s);
        prop_assert_eq!(&Snapshot::from_value(&s.to_value()).unwrap(), &s);
    }

    #[test]
    fn every_truncated_file_is_a_typed_error(s in snapshot_strategy(), cut in 0.0f64..1.0) {
        for data in [s.to_pickle(), s.to_json().into_bytes()] {
            let n = ((data.len() as f64) * cut) as usize;
            let e = Snapshot::from_bytes(&data[..n.min(data.len() - 1)]).unwrap_err();
            prop_assert!(matches!(e, SnapshotError::Pickle(_) | SnapshotError::Json(_) | SnapshotError::Format(_)), "{e}");
        }
    }
}

#[test]
fn files_that_are_not_snapshots_give_errors_naming_the_file_and_the_field() {
    let dir = std::env::temp_dir().join(format!("rmm-timeline-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let s = Snapshot {
        segments: Vec::new(),
        device_traces: vec![Vec::new()],
        dropped_events: 0,
    };
    let good = dir.join("s.pickle");
    s.write(&good).unwrap();
    let data = std::fs::read(&good).unwrap();

    let truncated = dir.join("truncated.pickle");
    std::fs::write(&truncated, &data[..data.len() - 3]).unwrap();
    let e = Snapshot::read(&truncated).unwrap_err().to_string();
    assert!(
        e.contains("truncated.pickle") && e.contains("truncated file"),
        "{e}"
    );

    let missing = dir.join("missing.pickle");
    assert!(matches!(
        Snapshot::read(&missing),
        Err(SnapshotError::Io { .. })
    ));

    let wrong_shape = dir.join("shape.json");
    std::fs::write(
        &wrong_shape,
        r#"{"segments": [{"address": 1, "total_size": "big", "blocks": []}]}"#,
    )
    .unwrap();
    let e = Snapshot::read(&wrong_shape).unwrap_err().to_string();
    assert!(
        e.contains("segments[0].total_size: expected an int, found str"),
        "{e}"
    );

    let bad_state = dir.join("state.json");
    std::fs::write(&bad_state, r#"{"segments": [{"address": 0, "total_size": 1, "stream": 0, "blocks": [{"size": 1, "state": "busy"}]}]}"#).unwrap();
    let e = Snapshot::read(&bad_state).unwrap_err().to_string();
    assert!(
        e.contains("segments[0].blocks[0].state: unknown block state \"busy\""),
        "{e}"
    );

    let text = dir.join("notes.json");
    std::fs::write(&text, "hello").unwrap();
    let e = Snapshot::read(&text).unwrap_err().to_string();
    assert!(e.contains("neither a pickle"), "{e}");

    assert!(s
        .write(&dir.join("s.txt"))
        .unwrap_err()
        .to_string()
        .contains("unknown snapshot format"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_pytorch_style_snapshot_without_our_keys_reads() {
    // The shape torch.cuda.memory._snapshot() gives (abridged; blocks without addresses, as old
    // snapshots have them).
    let v = Value::dict([
        (
            "segments",
            Value::List(vec![Value::dict([
                ("device", Value::Int(0)),
                ("address", Value::Int(1 << 20)),
                ("total_size", Value::Int(2 << 20)),
                ("stream", Value::Int(0)),
                ("segment_type", Value::from("small")),
                (
                    "blocks",
                    Value::List(vec![
                        Value::dict([
                            ("size", Value::Int(512)),
                            ("requested_size", Value::Int(500)),
                            ("state", Value::from("active_allocated")),
                            ("frames", Value::List(vec![])),
                        ]),
                        Value::dict([
                            ("size", Value::Int((2 << 20) - 512)),
                            ("state", Value::from("inactive")),
                        ]),
                    ]),
                ),
            ])]),
        ),
        (
            "device_traces",
            Value::List(vec![Value::List(vec![Value::dict([
                ("action", Value::from("oom")),
                ("addr", Value::Int(0)),
                ("size", Value::Int(1 << 30)),
                ("stream", Value::Int(0)),
                ("device_free", Value::Int(1 << 20)),
            ])])]),
        ),
    ]);
    let s = Snapshot::from_pickle(&pickle::to_pickle(&v)).unwrap();
    assert_eq!(s.segments[0].blocks[1].address, (1 << 20) + 512);
    assert_eq!(s.segments[0].allocated_size, 512);
    assert_eq!(s.device_traces[0][0].device_free, Some(1 << 20));
}

#[test]
fn native_frames_come_before_the_providers_frames() {
    let _serial = test_lock();
    let mr = RecordingResourceAdaptor::new(SystemMemoryResource::new());
    let python: Stack = Arc::from(vec![Frame {
        filename: "main.py".to_owned(),
        line: 1,
        name: "<module>".to_owned(),
    }]);
    let given = python.clone();
    set_stack_provider(Some(Arc::new(move || Some(given.clone()))));
    fresh(Options {
        native_stacks: true,
        ..Options::default()
    });
    let p = allocate_from_a_named_function(&mr);
    let s = snapshot();
    stop();
    set_stack_provider(None);
    let frames = &s.device_traces[0]
        .iter()
        .find(|e| e.addr == p as u64)
        .unwrap()
        .frames;
    let named = frames
        .iter()
        .position(|f| f.name.contains("allocate_from_a_named_function"))
        .expect("the native caller");
    assert_eq!(frames.last(), python.first(), "{frames:#?}");
    assert!(named < frames.len() - 1);
    // SAFETY: allocated above with these arguments.
    unsafe { mr.deallocate(Stream::DEFAULT, p, KIB, 256).unwrap() };
}
