//! The `rmm-replay` command: see the crate documentation of `rmm_replay` and `tools/replay/README.md`.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Usage errors exit with 2 (and --help / --version with 0) inside `parse`.
    let args = rmm_replay::cli::Args::parse();
    // Unlocked handles: the progress bar draws to stderr from the replay threads meanwhile.
    let code = rmm_replay::cli::run(&args, &mut std::io::stdout(), &mut std::io::stderr());
    ExitCode::from(code)
}
