//! Two processes share a span: the parent fills it, exports it and sends the handles over a Unix
//! socket (`SCM_RIGHTS`); the child, this test executable run again for the same test with
//! [`SOCKET_VAR`] set, imports it, checks every byte where it lies (no copy on the way) and writes
//! its answer into the same bytes, which the parent then reads through its own range.
//!
//! A child process is a fresh `exec`, not a `fork`: CUDA cannot be used in a child forked after the
//! parent initialised it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::*;
use crate::testing::{require_gpu, skip};

/// Set in the child: the path of the parent's socket.
const SOCKET_VAR: &str = "RMM_VMM_IPC_SOCKET";
/// What the child says once it has read the parent's bytes and written its answer.
const VERDICT: &str = "read the parent's bytes, wrote the answer";
const PATIENCE: Duration = Duration::from_secs(120);

pub(crate) fn pattern(k: usize) -> u8 {
    (k.wrapping_mul(7) + 3) as u8
}

pub(crate) fn answer(k: usize) -> u8 {
    (k.wrapping_mul(13) + 1) as u8
}

/// Writes `bytes` at `ptr`: a plain store for host memory, a copy for device memory (finished when
/// this returns).
pub(crate) fn put(memory: MemoryKind, ptr: *mut u8, bytes: &[u8]) {
    match memory {
        // SAFETY: the callers' spans are mapped, accessible and `bytes.len()` long.
        MemoryKind::Host => unsafe { ptr.copy_from_nonoverlapping(bytes.as_ptr(), bytes.len()) },
        // SAFETY: as above; copy_sync waits for the copy.
        MemoryKind::Device => unsafe {
            cuda::copy_sync(ptr, bytes.as_ptr(), bytes.len(), Stream::DEFAULT).unwrap()
        },
    }
}

/// Reads `len` bytes at `ptr` (see [`put`]).
pub(crate) fn get(memory: MemoryKind, ptr: *const u8, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    match memory {
        // SAFETY: the callers' spans are mapped, accessible and `len` long.
        MemoryKind::Host => unsafe { out.as_mut_ptr().copy_from_nonoverlapping(ptr, len) },
        // SAFETY: as above.
        MemoryKind::Device => unsafe {
            cuda::copy_sync(out.as_mut_ptr(), ptr, len, Stream::DEFAULT).unwrap()
        },
    }
    out
}

/// The socket path the parent gave, when this process is the child.
pub(crate) fn child_socket() -> Option<String> {
    std::env::var(SOCKET_VAR).ok()
}

/// The full name of test `name` of `module` (its `module_path!()`), as libtest's `--exact` wants it.
pub(crate) fn test_path(module: &str, name: &str) -> String {
    let module = module.split_once("::").map_or(module, |(_, rest)| rest);
    format!("{module}::{name}")
}

/// The child's side: import, check, answer.
pub(crate) fn child(path: &str) {
    let socket = UnixStream::connect(path).expect("connect to the parent's socket");
    let tell = |line: &str| writeln!(&socket, "{line}").expect("answer the parent");
    let span = ExportedSpan::receive(&socket).expect("receive the span");
    let memory = span.memory;
    let imported = ImportedSpan::new(&span).expect("import the span");
    drop(span);
    let seen = get(memory, imported.as_ptr(), imported.len());
    if let Some(k) = (0..seen.len()).find(|&k| seen[k] != pattern(k)) {
        tell(&format!(
            "byte {k} differs: {} instead of {}",
            seen[k],
            pattern(k)
        ));
        panic!("the child saw other bytes than the parent wrote (byte {k})");
    }
    let reply: Vec<u8> = (0..imported.len()).map(answer).collect();
    put(memory, imported.as_ptr(), &reply);
    tell(VERDICT);
}

/// The parent's side: fill a span of `range` crossing three granules, export it, run the child of
/// test `name`, and read its answer.
fn share_with_a_child(name: &str, range: &VirtualRange) {
    let granule = range.granularity();
    let (offset, len) = (granule / 2 + 100, 2 * granule);
    range.ensure_mapped(offset, len).unwrap();
    let memory = range.memory();
    // SAFETY: inside the reservation.
    let ptr = unsafe { range.base().add(offset) };
    put(memory, ptr, &(0..len).map(pattern).collect::<Vec<_>>());
    let kind = range
        .preferred_export()
        .expect("the range has a shareable handle kind");
    let span = range.export(offset, len, Stream::DEFAULT, kind).unwrap();
    assert_eq!(span.handles.len(), 3);
    hand_to_a_child(&test_path(module_path!(), name), memory, ptr, span);
}

/// The parent's side once `span` (the `span.size` bytes at `ptr`, filled with [`pattern`]) is
/// exported: runs the child of the test at `test` (see [`test_path`]), sends the span, and checks
/// the child's answer in the same bytes.
pub(crate) fn hand_to_a_child(test: &str, memory: MemoryKind, ptr: *mut u8, span: ExportedSpan) {
    let len = span.size;
    let path = std::env::temp_dir().join(format!(
        "rmm-vmm-{}-{}.sock",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            test,
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SOCKET_VAR, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + PATIENCE;
    let socket = loop {
        match listener.accept() {
            Ok((socket, _)) => break socket,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if child.try_wait().unwrap().is_some() || Instant::now() > deadline {
                    let _ = child.kill();
                    let out = child.wait_with_output().unwrap();
                    panic!(
                        "the child never connected: {}\n{}",
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    let _ = std::fs::remove_file(&path);
    socket.set_nonblocking(false).unwrap();
    socket.set_read_timeout(Some(PATIENCE)).unwrap();
    span.send(&socket).unwrap();
    let mut verdict = String::new();
    let _ = BufReader::new(&socket).read_line(&mut verdict);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && verdict.trim() == VERDICT,
        "the child said {verdict:?} and ended with {}:\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The child wrote into the same memory: the parent sees the answer through its own range.
    let seen = get(memory, ptr, len);
    assert!(
        (0..len).all(|k| seen[k] == answer(k)),
        "the parent does not see the child's answer"
    );
}

#[test]
fn a_second_process_reads_an_exported_host_span() {
    if let Some(path) = child_socket() {
        return child(&path);
    }
    let range = VirtualRange::with_backend(
        Backend::Host(HostBackend {
            capacity: Some(16 * MIB),
            granularity: MIB,
        }),
        VirtualRangeOptions::default(),
    )
    .unwrap();
    share_with_a_child("a_second_process_reads_an_exported_host_span", &range);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn on_a_gpu_a_second_process_reads_an_exported_device_span() {
    const NAME: &str = "on_a_gpu_a_second_process_reads_an_exported_device_span";
    if let Some(path) = child_socket() {
        return child(&path);
    }
    require_gpu();
    let range = VirtualRange::new(VirtualRangeOptions::default().reserve(256 * MIB)).unwrap();
    eprintln!(
        "device {:?}: granularity {}, shareable handles {:?}",
        range.device(),
        range.granularity(),
        range.shareable()
    );
    if range.preferred_export().is_none() {
        skip(
            NAME,
            "the device's memory cannot be exported (neither POSIX fd nor fabric handles)",
        );
        return;
    }
    share_with_a_child(NAME, &range);
}
