//! Helpers for the GPU tests (compiled only for tests).
//!
//! GPU tests are marked `#[ignore = "needs a CUDA GPU"]`, so CPU runs list them as ignored with that
//! reason; the GPU runner (scripts/gpu-run.sh) runs them with `--include-ignored`.

/// Fails loudly when a GPU test is run without a GPU (instead of passing silently).
pub(crate) fn require_gpu() {
    assert!(
        crate::cuda::is_available(),
        "this test needs a CUDA GPU (it is #[ignore]d on CPU; run scripts/gpu-run.sh on a GPU machine)"
    );
}

/// Records that a GPU test skipped itself for a reason only known at run time (for example
/// "System memory not supported"). The line goes to stderr and, when `RMM_TEST_SKIP_LOG` names a
/// file, is appended there so the GPU runner counts it as skipped, not passed.
pub(crate) fn skip(test: &str, reason: &str) {
    use std::io::Write;
    eprintln!("SKIPPED {test}: {reason}");
    if let Ok(path) = std::env::var("RMM_TEST_SKIP_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(f, "{test}: {reason}");
        }
    }
}
