//! The command line: arguments, the run, and the exit codes.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

use crate::log::read_log;
use crate::plot::{self, XAxis};
use crate::replay::{replay_on, DEFAULT_MAX_THREADS};
use crate::report::Report;
use crate::resources::{self, RESOURCES};
use crate::streams::StreamMap;

/// The replay ran and the resource served every event.
pub const EXIT_OK: u8 = 0;
/// The replay ran and the resource failed an allocation (or rejected a free).
pub const EXIT_REPLAY_FAILED: u8 = 1;
/// Nothing was replayed, or its results could not be written: an unreadable or malformed log, bad
/// arguments (clap's own errors are 2 as well), a resource that cannot run here, an unwritable
/// `--json` or `--plot` file.
pub const EXIT_BAD_INPUT: u8 = 2;

/// Replays an RMM memory-event log (the CSV of RMM's `logging_resource_adaptor`, or ours) against
/// a memory resource, on a GPU or on a simulated device, and reports peak memory, fragmentation
/// and failures.
///
/// Exit codes: 0 when every allocation succeeded, 1 when one failed, 2 for an unreadable or
/// malformed log, bad arguments, or a resource that cannot run here.
#[derive(Debug, Parser)]
#[command(name = "rmm-replay", version, about, long_about, group = clap::ArgGroup::new("input").required(true).args(["log", "file"]))]
pub struct Args {
    /// The log to replay.
    #[arg(value_name = "LOG")]
    pub log: Option<PathBuf>,

    /// The log to replay (RMM's REPLAY_BENCH spelling; same as LOG).
    #[arg(short = 'f', long = "file", value_name = "LOG")]
    pub file: Option<PathBuf>,

    /// The resource to replay on. Default: `simulated` with --simulate-gib, `cuda` without.
    #[arg(short, long, value_parser = resource_parser())]
    pub resource: Option<String>,

    /// Replay on a simulated device of this many GiB (fractions allowed) instead of the GPU: no
    /// CUDA is called, so it runs anywhere. Sub-allocators are stacked on it.
    #[arg(short = 's', long, value_name = "GIB", value_parser = parse_gib)]
    pub simulate_gib: Option<usize>,

    /// Also write the report as JSON to this file (`-` for stdout, instead of the text report).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Draw live and reserved memory over time to this PNG file.
    #[arg(long, value_name = "FILE.png")]
    pub plot: Option<PathBuf>,

    /// Write live and reserved bytes after every event to this CSV file
    /// (`event,seconds,live_bytes,reserved_bytes`).
    #[arg(long, value_name = "FILE.csv")]
    pub series: Option<PathBuf>,

    /// The plot's horizontal axis.
    #[arg(long, value_enum, default_value_t = XAxis::Time)]
    pub x_axis: XAxis,

    /// Replay on at most this many OS threads; logged threads beyond it share them, each logged
    /// thread's events staying on one OS thread, in order.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_THREADS as u64, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub max_threads: u64,

    /// No progress bar (it is also hidden when stdout is not a terminal).
    #[arg(short, long)]
    pub quiet: bool,
}

impl Args {
    /// The log's path, however it was given.
    pub fn log_path(&self) -> &Path {
        self.log
            .as_deref()
            .or(self.file.as_deref())
            .unwrap_or(Path::new(""))
    }
}

fn resource_parser() -> PossibleValuesParser {
    PossibleValuesParser::new(RESOURCES.iter().map(|e| {
        let value = PossibleValue::new(e.name);
        match e.make {
            resources::Make::Unavailable => {
                value.help(format!("{} [not available in this build]", e.about))
            }
            _ => value.help(e.about),
        }
    }))
}

/// `--simulate-gib`: a positive number of GiB, to bytes.
fn parse_gib(text: &str) -> Result<usize, String> {
    let gib: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of GiB"))?;
    let bytes = gib * (1u64 << 30) as f64;
    if !bytes.is_finite() || bytes < 256.0 || bytes > (usize::MAX / 4) as f64 {
        return Err(format!(
            "`{text}` GiB is not a device size (at least 256 bytes, at most 4 EiB)"
        ));
    }
    Ok(bytes as usize)
}

/// Runs the replay `args` describe, printing the report to `out` and errors to `err`; returns the
/// exit code.
pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    match try_run(args, out) {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(err, "rmm-replay: error: {e}");
            EXIT_BAD_INPUT
        }
    }
}

fn try_run(args: &Args, out: &mut dyn Write) -> anyhow::Result<u8> {
    let path = args.log_path();
    let events = read_log(path)?;
    let setup = resources::setup(args.resource.as_deref(), args.simulate_gib)?;
    let streams = StreamMap::new(events.iter().map(|e| e.stream), &setup.target)
        .map_err(|e| anyhow::anyhow!("cannot create the replay's streams: {e}"))?;

    let replayed = events
        .iter()
        .filter(|e| e.action != crate::log::Action::AllocateFailure)
        .count() as u64;
    let progress = if args.quiet || !std::io::stdout().is_terminal() {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::new(replayed);
        if let Ok(style) = ProgressStyle::with_template(
            "{spinner} replaying [{bar:40}] {human_pos}/{human_len} events, {eta} left",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar
    };
    let outcome = replay_on(
        &events,
        &setup,
        &streams,
        &progress,
        args.max_threads as usize,
    )?;
    progress.finish_and_clear();

    let log_name = path.display().to_string();
    let report = Report::new(
        &log_name,
        setup.name,
        &setup.target.to_string(),
        events.len(),
        &outcome,
        streams.info(),
    );
    let json_to_stdout = args.json.as_deref() == Some(Path::new("-"));
    if json_to_stdout {
        report.write_json(out)?;
    } else {
        report.write_text(out)?;
    }
    if let Some(json) = args.json.as_deref().filter(|_| !json_to_stdout) {
        let mut file = std::fs::File::create(json)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", json.display()))?;
        report
            .write_json(&mut file)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", json.display()))?;
    }
    if let Some(csv) = &args.series {
        plot::write_series_csv(csv, &outcome.series)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e:#}", csv.display()))?;
    }
    if let Some(png) = &args.plot {
        let file_name = path
            .file_name()
            .map_or(log_name.clone(), |n| n.to_string_lossy().into_owned());
        let title = format!("{file_name} replayed on {} ({})", setup.name, setup.target);
        plot::draw(png, &outcome.series, &title, args.x_axis)
            .map_err(|e| anyhow::anyhow!("cannot draw {}: {e:#}", png.display()))?;
    }
    Ok(report.exit_code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gib_sizes_are_checked() {
        assert_eq!(parse_gib("1"), Ok(1 << 30));
        assert_eq!(parse_gib("0.5"), Ok(1 << 29));
        for bad in ["0", "-1", "nan", "inf", "1e30", "lots"] {
            assert!(parse_gib(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn arguments_parse_and_bad_ones_are_usage_errors() {
        let args = Args::try_parse_from([
            "rmm-replay",
            "-f",
            "x.csv",
            "-r",
            "simulated",
            "-s",
            "2",
            "--x-axis",
            "index",
        ])
        .unwrap();
        assert_eq!(
            (args.log_path(), args.simulate_gib, args.x_axis),
            (Path::new("x.csv"), Some(2 << 30), XAxis::Index)
        );
        for bad in [
            vec!["rmm-replay"],
            vec!["rmm-replay", "x.csv", "-r", "bogus"],
            vec!["rmm-replay", "x.csv", "-s", "zero"],
            vec!["rmm-replay", "x.csv", "-f", "y.csv"],
        ] {
            let e = Args::try_parse_from(&bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
    }
}
