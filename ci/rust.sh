#!/usr/bin/env bash
# Rust suite: cargo test on CPU (GPU tests are #[ignore = "needs a CUDA GPU"] and listed as ignored);
# with a GPU (nvidia-smi -L succeeds) also the ignored ones. Clippy (-D warnings) gates when available.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$RMM_ROOT" || exit 1

if ! command -v cargo >/dev/null 2>&1; then
    fail "cargo not found: install Rust (https://rustup.rs) first"
    finish rust
    exit
fi

step "rust cpu: cargo test --workspace" cargo test --workspace --locked

if has_gpu; then
    # One test at a time on the GPU: see docs/testing.md ("One test at a time on the GPU").
    step "rust gpu: cargo test --workspace -- --include-ignored --test-threads=1" \
        cargo test --workspace --locked -- --include-ignored --test-threads=1
else
    note "rust gpu: no GPU (nvidia-smi -L failed); GPU tests listed as ignored above"
fi

if cargo fmt --version >/dev/null 2>&1 || timeout 120 rustup component add rustfmt >/dev/null 2>&1; then
    step "rust fmt: cargo fmt --all --check (rustfmt.toml)" cargo fmt --all -- --check
else
    note "rust fmt: not available"
fi

if cargo clippy --version >/dev/null 2>&1 || timeout 120 rustup component add clippy >/dev/null 2>&1; then
    step "rust clippy: -D warnings" cargo clippy --workspace --all-targets --locked -- -D warnings
else
    note "rust clippy: not available"
fi

finish rust
