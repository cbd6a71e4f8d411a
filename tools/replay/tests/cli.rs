//! End-to-end: the `rmm-replay` binary on small logs, its output files and its exit codes.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;
use rmm_replay::cli::{self, Args};
use rmm_replay::resources::{Make, RESOURCES};

/// `tests/data/sample.csv`: 3 threads, 4 streams (0x0, 0x2 and two created ones), 108 events and
/// one recorded `allocate failure`; 520093796 bytes live at the peak.
const SAMPLE: &str = include_str!("data/sample.csv");
const SAMPLE_PEAK: u64 = 520_093_796;

/// The binary cargo built for this test, or a staged copy beside the test executable (or in
/// `../bin`); `None` when neither exists (a test executable copied to another machine alone).
fn binary() -> Option<PathBuf> {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_rmm-replay"));
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [built, dir.join("rmm-replay"), dir.join("../bin/rmm-replay")]
        .into_iter()
        .find(|p| p.exists())
}

/// Runs `rmm-replay args`: the binary when there is one, else the same code in this process
/// (`main` is `Args::parse` + `cli::run`), so the tests still run where only they were copied.
fn run_args(args: &[OsString]) -> (Option<i32>, Vec<u8>, Vec<u8>) {
    if let Some(binary) = binary() {
        let out = Command::new(binary)
            .args(args)
            .output()
            .expect("rmm-replay runs");
        return (out.status.code(), out.stdout, out.stderr);
    }
    eprintln!("note: no rmm-replay binary here; running its code in-process");
    let argv = std::iter::once(OsString::from("rmm-replay")).chain(args.iter().cloned());
    match Args::try_parse_from(argv) {
        Ok(args) => {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let code = cli::run(&args, &mut out, &mut err);
            (Some(i32::from(code)), out, err)
        }
        Err(e) if e.use_stderr() => (Some(e.exit_code()), Vec::new(), e.to_string().into_bytes()),
        Err(e) => (Some(e.exit_code()), e.to_string().into_bytes(), Vec::new()),
    }
}

/// A scratch directory of this test, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("rmm-replay-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn file(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a run of the command gave.
struct Output {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

fn run(args: &[&dyn AsRef<OsStr>]) -> Output {
    let args: Vec<OsString> = args.iter().map(|a| a.as_ref().to_os_string()).collect();
    let (code, stdout, stderr) = run_args(&args);
    Output {
        code,
        stdout,
        stderr,
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn the_expandable_pool_replays_with_its_mapped_bytes_as_reserved_and_writes_the_series() {
    let dir = Scratch::new("expandable");
    let log = dir.file("sample.csv", SAMPLE);
    let (report, series) = (dir.path("report.json"), dir.path("series.csv"));
    let out = run(&[
        &log,
        &"--simulate-gib",
        &"1",
        &"--resource",
        &"expandable_pool",
        &"--json",
        &report,
        &"--series",
        &series,
        &"--quiet",
    ]);
    assert_eq!(
        out.code,
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let r = json(&report);
    assert_eq!(r["peak_live_bytes"], SAMPLE_PEAK);
    let mapped = r["peak_reserved_bytes"].as_u64().unwrap();
    // Whole 2 MiB granules over what is live at the peak, and far below the pool's half-device start.
    assert!(
        mapped >= SAMPLE_PEAK && mapped as f64 <= 1.10 * SAMPLE_PEAK as f64,
        "peak mapped {mapped}"
    );
    assert_eq!(mapped % (2 << 20), 0, "mapped in whole granules");
    let rows = std::fs::read_to_string(&series).unwrap();
    let mut lines = rows.lines();
    assert_eq!(
        lines.next(),
        Some("event,seconds,live_bytes,reserved_bytes")
    );
    let peak_live = lines
        .map(|l| l.split(',').nth(2).unwrap().parse::<u64>().unwrap())
        .max()
        .unwrap();
    assert_eq!(peak_live, SAMPLE_PEAK);
}

#[test]
fn a_replay_that_fits_exits_0_and_writes_json_and_a_png() {
    let dir = Scratch::new("fits");
    let log = dir.file("sample.csv", SAMPLE);
    let (report, png) = (dir.path("report.json"), dir.path("memory.png"));
    let out = run(&[
        &log,
        &"--simulate-gib",
        &"1",
        &"--json",
        &report,
        &"--plot",
        &png,
        &"--quiet",
    ]);
    assert_eq!(
        out.code,
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let stdout = text(&out.stdout);
    assert!(stdout.contains("result                ok"), "{stdout}");
    assert!(
        stdout.contains("peak live bytes       496.00 MiB (520093796 B)"),
        "{stdout}"
    );

    let r = json(&report);
    assert_eq!(r["events_replayed"], 108);
    assert_eq!(r["failures_in_log"], 1);
    assert_eq!(r["allocation_failures"], 0);
    assert_eq!(r["peak_live_bytes"], SAMPLE_PEAK);
    assert_eq!(
        r["peak_reserved_bytes"], SAMPLE_PEAK,
        "the simulated device is counted exactly"
    );
    assert_eq!(r["fragmentation"], 0.0);
    assert_eq!(r["threads"].as_array().unwrap().len(), 3);
    assert_eq!(r["streams"].as_array().unwrap().len(), 4);
    assert_eq!(r["counts"]["leaked_allocations"], 0);
    assert_eq!(r["exit_code"], 0);

    let png = std::fs::read(&png).unwrap();
    assert!(png.len() > 10_000, "a real picture: {} bytes", png.len());
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn a_log_bigger_than_the_device_exits_1_with_its_failures() {
    let dir = Scratch::new("too-big");
    let log = dir.file("sample.csv", SAMPLE);
    let report = dir.path("report.json");
    let out = run(&[
        &"-f",
        &log,
        &"-r",
        &"simulated",
        &"-s",
        &"0.25",
        &"--json",
        &report,
    ]);
    assert_eq!(
        out.code,
        Some(1),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let stdout = text(&out.stdout);
    assert!(stdout.contains("FAILED"), "{stdout}");
    assert!(stdout.contains("first allocation failures:"), "{stdout}");
    let r = json(&report);
    let failures = r["allocation_failures"].as_u64().unwrap();
    assert!(failures > 0);
    assert_eq!(
        r["failures"].as_array().unwrap().len() as u64,
        failures.min(100)
    );
    assert!(r["failures"][0]["line"].as_u64().unwrap() > 1);
    assert!(r["fragmentation"].is_null());
    assert_eq!(r["exit_code"], 1);
}

#[test]
fn json_can_go_to_stdout() {
    let dir = Scratch::new("stdout");
    let log = dir.file("sample.csv", SAMPLE);
    let out = run(&[&log, &"-s", &"1", &"--json", &"-"]);
    assert_eq!(out.code, Some(0));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["peak_live_bytes"], SAMPLE_PEAK);
}

#[test]
fn malformed_and_unreadable_logs_exit_2_naming_the_line() {
    let dir = Scratch::new("malformed");
    let bad = dir.file("bad.csv", "Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.0,allocate,0x10,64,0x0\n1,10:00:00.1,free,0x10,sixty-four,0x0\n");
    let out = run(&[&bad, &"-s", &"1"]);
    assert_eq!(out.code, Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("bad.csv:3: bad Size `sixty-four`"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no report for a bad log");

    let out = run(&[&dir.path("missing.csv"), &"-s", &"1"]);
    assert_eq!(out.code, Some(2));
    assert!(
        text(&out.stderr).contains("cannot read"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn bad_arguments_exit_2() {
    let dir = Scratch::new("args");
    let log = dir.file("sample.csv", SAMPLE);
    for args in [
        vec![],
        vec![log.as_os_str(), "-r".as_ref(), "bogus".as_ref()],
        vec![log.as_os_str(), "-s".as_ref(), "-3".as_ref()],
        vec![log.as_os_str(), "-r".as_ref(), "simulated".as_ref()],
        vec![
            log.as_os_str(),
            "-r".as_ref(),
            "cuda".as_ref(),
            "-s".as_ref(),
            "1".as_ref(),
        ],
    ] {
        let args: Vec<OsString> = args.iter().map(|a| a.to_os_string()).collect();
        let (code, _, stderr) = run_args(&args);
        assert_eq!(code, Some(2), "{args:?}: {}", text(&stderr));
        assert!(!stderr.is_empty(), "{args:?} says why");
    }
    // Resources RMM offers that this build lacks say so.
    if let Some(missing) = RESOURCES
        .iter()
        .find(|e| matches!(e.make, Make::Unavailable))
    {
        let out = run(&[&log, &"-r", &missing.name, &"-s", &"1"]);
        assert_eq!(out.code, Some(2));
        assert!(
            text(&out.stderr).contains("not available in this build"),
            "{}",
            text(&out.stderr)
        );
    }
    let help = run(&[&"--help"]);
    assert_eq!(help.code, Some(0));
    assert!(
        text(&help.stdout).contains("cuda_async"),
        "the help lists the resources"
    );
}

#[test]
fn without_a_gpu_the_default_resource_points_to_the_simulator() {
    if rmm_core::cuda::is_available() {
        return; // On a GPU the default replays on it: see `replays_on_the_gpu`.
    }
    let dir = Scratch::new("no-gpu");
    let log = dir.file("sample.csv", SAMPLE);
    let out = run(&[&log]);
    assert_eq!(out.code, Some(2));
    assert!(
        text(&out.stderr).contains("--simulate-gib"),
        "{}",
        text(&out.stderr)
    );
    // Host memory needs no GPU.
    let out = run(&[&log, &"-r", &"system"]);
    assert_eq!(out.code, Some(0), "{}", text(&out.stderr));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn replays_on_the_gpu() {
    assert!(
        rmm_core::cuda::is_available(),
        "this test needs a CUDA GPU (it is #[ignore]d on CPU)"
    );
    let dir = Scratch::new("gpu");
    let log = dir.file("sample.csv", SAMPLE);
    for resource in ["cuda", "cuda_async", "managed", "system"] {
        let report = dir.path(&format!("{resource}.json"));
        let out = run(&[&log, &"-r", &resource, &"--json", &report, &"-q"]);
        assert_eq!(
            out.code,
            Some(0),
            "{resource}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        let r = json(&report);
        assert_eq!(r["peak_live_bytes"], SAMPLE_PEAK, "{resource}");
        assert!(
            r["peak_reserved_bytes"].as_u64().unwrap() >= SAMPLE_PEAK,
            "{resource}"
        );
        let streams = r["streams"].as_array().unwrap();
        assert!(
            streams.iter().any(|s| s["replayed_as"]
                .as_str()
                .unwrap()
                .starts_with("new non-blocking stream")),
            "{resource}"
        );
    }
}

/// The memory timeline's CSV log (`rmm_core::timeline::Snapshot::to_replay_log`, what
/// `rmm.timeline.dump_snapshot("x.csv")` writes) replays: its peak is what was recorded.
#[test]
fn a_timeline_snapshot_log_replays() {
    use rmm_core::mr::{RecordingResourceAdaptor, SystemMemoryResource};
    use rmm_core::{cuda::Stream, timeline, MemoryResource};

    let mr = RecordingResourceAdaptor::new(SystemMemoryResource::new());
    timeline::start(timeline::Options {
        clear: true,
        ..Default::default()
    })
    .unwrap();
    let a = mr.allocate(Stream::DEFAULT, 1 << 20, 256).unwrap();
    let b = mr.allocate(Stream::DEFAULT, 3 << 20, 256).unwrap();
    // SAFETY: allocated above with these arguments.
    unsafe { mr.deallocate(Stream::DEFAULT, a, 1 << 20, 256).unwrap() };
    let c = mr.allocate(Stream::DEFAULT, 1 << 19, 256).unwrap();
    let log = timeline::snapshot().to_replay_log();
    timeline::stop();
    for (p, n) in [(b, 3 << 20), (c, 1 << 19)] {
        // SAFETY: allocated above with these arguments.
        unsafe { mr.deallocate(Stream::DEFAULT, p, n, 256).unwrap() };
    }

    let dir = Scratch::new("timeline");
    let path = dir.file("timeline.csv", &log);
    let out = run(&[&path, &"-s", &"1", &"--json", &"-"]);
    assert_eq!(
        out.code,
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["peak_live_bytes"], 4 << 20, "{log}");
}
