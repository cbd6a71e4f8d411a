//! Logs written by rmm-core's `LoggingResourceAdaptor` parse back and replay: the same run recorded
//! on a simulated device (CPU) and on a real GPU (ignored without one).

use std::path::{Path, PathBuf};

use clap::Parser;
use rmm_core::cuda::{OwnedStream, Stream, StreamFlags};
use rmm_core::mr::{CudaMemoryResource, LoggingResourceAdaptor, SimulatedMemoryResource};
use rmm_core::{AnyResource, MemoryResource, DEFAULT_ALIGNMENT};
use rmm_replay::cli::{run, Args};
use rmm_replay::log::{read_log, Action};

/// A scratch folder removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("rmm-replay-logged-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
    fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Four threads allocate and free through `logged`, each on its own stream, with sizes that make a
/// known peak: every thread holds 1, 2, 3 then 4 MiB blocks (10 MiB) before it frees them.
/// Returns the number of events and the peak live bytes.
fn record_run(logged: &AnyResource, streams: &[Stream]) -> (usize, u64) {
    const MIB: usize = 1 << 20;
    let barrier = std::sync::Barrier::new(streams.len());
    std::thread::scope(|scope| {
        for &stream in streams {
            let barrier = &barrier;
            scope.spawn(move || {
                let blocks: Vec<(*mut u8, usize)> = (1..=4)
                    .map(|k| {
                        (
                            logged.allocate(stream, k * MIB, DEFAULT_ALIGNMENT).unwrap(),
                            k * MIB,
                        )
                    })
                    .collect();
                // Every thread holds its 10 MiB at once: the peak is exactly threads × 10 MiB.
                barrier.wait();
                for (p, bytes) in blocks {
                    // SAFETY: from `logged` with these arguments.
                    unsafe {
                        logged
                            .deallocate(stream, p, bytes, DEFAULT_ALIGNMENT)
                            .unwrap()
                    };
                }
            });
        }
    });
    (streams.len() * 8, (streams.len() * 10 * MIB) as u64)
}

fn replay_report(log: &Path, extra: &[&str], dir: &Scratch) -> (u8, serde_json::Value) {
    let report = dir.path("report.json");
    let mut argv = vec![
        "rmm-replay".to_string(),
        log.display().to_string(),
        "-q".into(),
        "--json".into(),
    ];
    argv.push(report.display().to_string());
    argv.extend(extra.iter().map(|s| s.to_string()));
    let args = Args::try_parse_from(argv).expect("arguments parse");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run(&args, &mut out, &mut err);
    assert!(
        err.is_empty() || code != 0,
        "{}",
        String::from_utf8_lossy(&err)
    );
    let json =
        serde_json::from_slice(&std::fs::read(&report).unwrap_or_default()).unwrap_or_default();
    (code, json)
}

#[test]
fn a_logged_run_on_a_simulated_device_parses_back_and_replays() {
    let dir = Scratch::new("simulated");
    let log = dir.path("run.csv");
    let device = SimulatedMemoryResource::new(1 << 30).unwrap();
    let logged = AnyResource::new(LoggingResourceAdaptor::new(device.clone(), &log).unwrap());
    // Opaque handles are fine here: the simulated device never passes a stream to CUDA.
    // SAFETY: these handles only label streams in the log; nothing hands them to the driver.
    let streams: Vec<Stream> = (0..4)
        .map(|t| unsafe { Stream::from_raw(0x1000 + t) })
        .collect();
    let (events, peak) = record_run(&logged, &streams);
    drop(logged); // flushes and closes the log

    let parsed = read_log(&log).expect("our log parses with the replay parser");
    assert_eq!(parsed.len(), events);
    assert_eq!(
        parsed
            .iter()
            .filter(|e| e.action == Action::Allocate)
            .count(),
        events / 2
    );
    assert_eq!(
        parsed
            .iter()
            .map(|e| e.stream)
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        4
    );
    assert_eq!(device.usage().allocated_bytes, 0);

    let (code, report) = replay_report(&log, &["--simulate-gib", "1"], &dir);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["peak_live_bytes"], peak);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_logged_run_on_the_gpu_replays_on_the_gpu_and_on_a_simulated_device() {
    assert!(
        rmm_core::cuda::is_available(),
        "this test needs a CUDA GPU (it is #[ignore]d on CPU)"
    );
    let dir = Scratch::new("gpu");
    let log = dir.path("gpu-run.csv");
    let logged =
        AnyResource::new(LoggingResourceAdaptor::new(CudaMemoryResource::new(), &log).unwrap());
    let owned: Vec<OwnedStream> = (0..3)
        .map(|_| OwnedStream::new(StreamFlags::NonBlocking).unwrap())
        .collect();
    let mut streams: Vec<Stream> = owned.iter().map(|s| s.stream()).collect();
    streams.push(Stream::DEFAULT);
    let (events, peak) = record_run(&logged, &streams);
    drop(logged);

    let parsed = read_log(&log).expect("a GPU run's log parses");
    assert_eq!(parsed.len(), events);
    for resource in ["cuda", "pool", "arena", "cuda_async"] {
        let (code, report) = replay_report(&log, &["-r", resource], &dir);
        assert_eq!(code, 0, "{resource}: {report}");
        assert_eq!(report["peak_live_bytes"], peak, "{resource}");
    }
    let (code, report) = replay_report(&log, &["--simulate-gib", "1", "-r", "pool"], &dir);
    assert_eq!(code, 0, "simulated pool: {report}");
}
