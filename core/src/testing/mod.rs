//! Helpers for the tests (compiled for this crate's tests, and for the tests of the bindings with
//! the `testing` feature; not part of the API).
//!
//! GPU tests are marked `#[ignore = "needs a CUDA GPU"]`, so CPU runs list them as ignored with that
//! reason; the GPU runner (scripts/gpu-run.sh) runs them with `--include-ignored`.

/// Fails loudly when a GPU test is run without a GPU (instead of passing silently).
pub fn require_gpu() {
    assert!(
        crate::cuda::is_available(),
        "this test needs a CUDA GPU (it is #[ignore]d on CPU; run scripts/gpu-run.sh on a GPU machine)"
    );
}

/// For a GPU test that needs two devices: true when two are visible; otherwise records the skip of
/// `test` ("needs 2 devices"). Fails loudly without a GPU, as [`require_gpu`].
pub fn two_devices(test: &str) -> bool {
    require_gpu();
    if crate::cuda::device_count().unwrap() < 2 {
        skip(test, "needs 2 devices");
        return false;
    }
    true
}

/// The number of cases of a property test: `PROPTEST_CASES` when it is set (so a long run is one
/// variable away), else `default` (an explicit `cases` in a proptest config overrides the variable).
pub fn proptest_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// splitmix64, the generator of RMM's random-allocations benchmark (and of
/// `benches/allocations.rs` and `benchmarks/peer/rmm_peer_bench.cpp`), so tests run the same
/// sequence of sizes and choices as the benchmarks.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform number in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Records that a GPU test skipped itself for a reason only known at run time (for example
/// "System memory not supported"). The line goes to stderr and, when `RMM_TEST_SKIP_LOG` names a
/// file, is appended there so the GPU runner counts it as skipped, not passed.
pub fn skip(test: &str, reason: &str) {
    use std::io::Write;
    eprintln!("SKIPPED {test}: {reason}");
    if let Ok(path) = std::env::var("RMM_TEST_SKIP_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{test}: {reason}");
        }
    }
}

/// A host-memory resource for tests: claims whatever access it is given, counts allocations and
/// live blocks, and records its drop in a shared flag (so tests can see when the last owner, in any
/// language, let go).
pub struct Probe {
    pub access: crate::Access,
    pub allocations: std::sync::atomic::AtomicUsize,
    pub live: std::sync::atomic::AtomicIsize,
    pub dropped: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Probe {
    /// A probe with `access`.
    pub fn new(access: crate::Access) -> Self {
        Self {
            access,
            allocations: Default::default(),
            live: Default::default(),
            dropped: Default::default(),
        }
    }

    /// Allocations so far.
    pub fn allocations(&self) -> usize {
        self.allocations.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.dropped
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

impl crate::MemoryResource for Probe {
    fn allocate(
        &self,
        stream: crate::cuda::Stream,
        bytes: usize,
        alignment: usize,
    ) -> crate::Result<*mut u8> {
        let p = crate::mr::SystemMemoryResource::new().allocate(stream, bytes, alignment)?;
        self.allocations
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.live.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(p)
    }
    unsafe fn deallocate(
        &self,
        stream: crate::cuda::Stream,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
    ) -> crate::Result<()> {
        self.live.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        // SAFETY: forwarded; the probe allocates from the system resource.
        unsafe { crate::mr::SystemMemoryResource::new().deallocate(stream, ptr, bytes, alignment) }
    }
    fn access(&self) -> crate::Access {
        self.access
    }
    fn name(&self) -> &str {
        "probe"
    }
    fn is_equal(&self, other: &dyn crate::MemoryResource) -> bool {
        crate::resource::downcast::<Probe>(other).is_some_and(|o| std::ptr::eq(self, o))
    }
}

/// The checks every base resource makes before it asks the driver for anything: alignments that
/// are not powers of two (or above the 256 bytes a base resource guarantees) are invalid, 0 bytes
/// gives null, and freeing null is a no-op on both the stream-ordered and the synchronous path.
pub fn assert_arguments_checked_before_the_driver(mr: &dyn crate::MemoryResource) {
    use crate::cuda::Stream;
    for align in [0usize, 3, 48, 512] {
        let result = mr.allocate(Stream::DEFAULT, 64, align);
        assert!(
            matches!(result, Err(crate::Error::InvalidArgument(_))),
            "{}: alignment {align}",
            mr.name()
        );
    }
    assert!(
        mr.allocate(Stream::DEFAULT, 0, 256).unwrap().is_null(),
        "{}: 0 bytes",
        mr.name()
    );
    // SAFETY: freeing null is a no-op.
    unsafe {
        mr.deallocate(Stream::DEFAULT, std::ptr::null_mut(), 0, 256)
            .unwrap();
        mr.deallocate_sync(std::ptr::null_mut(), 0, 256).unwrap();
    }
}

/// An in-memory writer whose bytes a test can read while something else still holds a clone.
#[derive(Clone, Default)]
pub struct SharedBuffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl SharedBuffer {
    /// Everything written so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(
            &self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
        .into_owned()
    }
}

impl std::io::Write for SharedBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A command that runs this test executable again on one test, `test` (its path without the
/// crate name), with `env` set: for tests that need a process of their own (resource limits,
/// nothing installed, a crash to observe). The test checks one of `env`'s variables to know it is
/// the child.
pub fn rerun_test(test: &str, env: &[(&str, &str)]) -> std::process::Command {
    let mut command =
        std::process::Command::new(std::env::current_exe().expect("the test executable"));
    command.args([test, "--exact", "--nocapture", "--test-threads=1"]);
    for (k, v) in env {
        command.env(k, v);
    }
    command
}

pub mod c_resource;
