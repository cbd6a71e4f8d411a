//! The report of a replay: printed for people, written as JSON for scripts (`--json`).

use std::io::{self, Write};

use serde::Serialize;

use crate::replay::{Counts, Failure, Outcome, Problem, ThreadStats};
use crate::streams::StreamInfo;

/// Everything a replay found. Its JSON form is what `--json` writes.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The log replayed.
    pub log: String,
    /// The resource replayed on (its `--resource` name).
    pub resource: String,
    /// Where it ran (GPU, simulated device or host).
    pub target: String,
    /// Lines of the log (events, the header not counted).
    pub log_events: usize,
    /// `allocate failure` lines of the log (counted, not replayed).
    pub failures_in_log: usize,
    /// Events replayed.
    pub events_replayed: usize,
    /// Allocations that failed in the replay.
    pub allocation_failures: usize,
    /// The most bytes live at once, from the log's sizes.
    pub peak_live_bytes: usize,
    /// The most bytes the resource held from its base at once.
    pub peak_reserved_bytes: usize,
    /// `1 − peak live / peak reserved`; null when an allocation failed.
    pub fragmentation: Option<f64>,
    /// Seconds the replay took.
    pub wall_time_s: f64,
    /// Events per second of the replay.
    pub events_per_second: f64,
    /// The log's time span in seconds (null without a `Time` column).
    pub log_duration_s: Option<f64>,
    /// Every count of the replay.
    pub counts: Counts,
    /// Per logged thread.
    pub threads: Vec<ThreadStats>,
    /// The OS threads that replayed them (fewer than the logged threads when the log has more
    /// than the replay's bound: see `replay`'s "Threads").
    pub replay_threads: usize,
    /// How each logged stream was replayed.
    pub streams: Vec<StreamInfo>,
    /// The first allocation failures, with the live and reserved bytes at the time.
    pub failures: Vec<Failure>,
    /// The first problems of the log (unknown frees, duplicates, size mismatches) or of the resource.
    pub problems: Vec<Problem>,
    /// The process's exit code: 0, or 1 when the resource failed an allocation or rejected a free.
    pub exit_code: u8,
}

impl Report {
    /// The report of `outcome`, replayed from `log` on `resource` on `target`.
    pub fn new(
        log: &str,
        resource: &str,
        target: &str,
        log_events: usize,
        outcome: &Outcome,
        streams: &[StreamInfo],
    ) -> Self {
        let seconds = outcome.wall_time.as_secs_f64();
        Self {
            log: log.to_string(),
            resource: resource.to_string(),
            target: target.to_string(),
            log_events,
            failures_in_log: outcome.failures_in_log,
            events_replayed: outcome.events,
            allocation_failures: outcome.counts.allocation_failures,
            peak_live_bytes: outcome.peak_live_bytes,
            peak_reserved_bytes: outcome.peak_reserved_bytes,
            fragmentation: outcome.fragmentation(),
            wall_time_s: seconds,
            events_per_second: if seconds > 0.0 {
                outcome.events as f64 / seconds
            } else {
                0.0
            },
            log_duration_s: outcome
                .series
                .seconds
                .as_ref()
                .and_then(|s| s.last().copied()),
            counts: outcome.counts.clone(),
            threads: outcome.threads.clone(),
            replay_threads: outcome.replay_threads,
            streams: streams.to_vec(),
            failures: outcome.failures.clone(),
            problems: outcome.problems.clone(),
            exit_code: u8::from(outcome.failed()),
        }
    }

    /// Writes the report for people.
    ///
    /// # Errors
    /// The writer's.
    pub fn write_text(&self, w: &mut dyn Write) -> io::Result<()> {
        let c = &self.counts;
        writeln!(w, "replay of {}", self.log)?;
        writeln!(
            w,
            "  resource              {} on {}",
            self.resource, self.target
        )?;
        if self.exit_code == 0 {
            writeln!(w, "  result                ok")?;
        } else {
            let rejected = if c.deallocation_errors > 0 {
                format!(", {} frees rejected", c.deallocation_errors)
            } else {
                String::new()
            };
            writeln!(
                w,
                "  result                FAILED: {} of {} allocations failed{rejected} (exit code {})",
                c.allocation_failures, c.allocations, self.exit_code
            )?;
        }
        writeln!(
            w,
            "  events replayed       {} of {} in {:.3} s ({:.0} events/s)",
            self.events_replayed, self.log_events, self.wall_time_s, self.events_per_second
        )?;
        writeln!(
            w,
            "  allocation failures   {} in the replay, {} recorded in the log",
            c.allocation_failures, self.failures_in_log
        )?;
        writeln!(
            w,
            "  peak live bytes       {} (from the log)",
            human_and_exact(self.peak_live_bytes)
        )?;
        writeln!(
            w,
            "  peak reserved bytes   {} (taken from the device)",
            human_and_exact(self.peak_reserved_bytes)
        )?;
        match self.fragmentation {
            Some(f) => writeln!(
                w,
                "  fragmentation         {:.2}% (1 - peak live / peak reserved)",
                f * 100.0
            )?,
            None => writeln!(
                w,
                "  fragmentation         n/a (the replay never held the log's peak)"
            )?,
        }
        if let Some(d) = self.log_duration_s {
            writeln!(w, "  log time span         {d:.6} s")?;
        }
        if c.deallocation_errors > 0 {
            writeln!(w, "  rejected frees        {}", c.deallocation_errors)?;
        }
        let log_issues = [
            (c.unknown_frees, "frees of pointers not live in the log"),
            (
                c.duplicate_pointers,
                "pointers allocated twice without a free",
            ),
            (
                c.size_mismatches,
                "frees with another size than their allocation",
            ),
            (
                c.frees_of_failed_allocations,
                "frees skipped (their allocation failed in the replay)",
            ),
        ];
        for (n, what) in log_issues.iter().filter(|(n, _)| *n > 0) {
            writeln!(w, "  {n:<21} {what}")?;
        }
        if c.leaked_allocations > 0 {
            writeln!(
                w,
                "  leaks                 {} allocations, {} never freed by the log",
                c.leaked_allocations,
                human_bytes(c.leaked_bytes)
            )?;
        }
        if self.replay_threads < self.threads.len() {
            writeln!(
                w,
                "  threads               {} (replayed on {} OS threads)",
                self.threads.len(),
                self.replay_threads
            )?;
        } else {
            writeln!(w, "  threads               {}", self.threads.len())?;
        }
        for t in &self.threads {
            write!(
                w,
                "    thread {:<20} {:>9} events ({} allocations, {} frees)",
                t.thread, t.events, t.allocations, t.frees
            )?;
            if t.allocation_failures + t.failures_in_log > 0 {
                write!(
                    w,
                    "; allocation failures: {} in the replay, {} in the log",
                    t.allocation_failures, t.failures_in_log
                )?;
            }
            writeln!(w)?;
        }
        writeln!(w, "  streams               {}", self.streams.len())?;
        for s in &self.streams {
            writeln!(w, "    {:<22} -> {}", s.logged, s.replayed_as)?;
        }
        const SHOWN: usize = 10;
        if !self.failures.is_empty() {
            writeln!(w, "  first allocation failures:")?;
            for f in self.failures.iter().take(SHOWN) {
                writeln!(
                    w,
                    "    line {}: thread {} asked for {} on stream {} with {} live and {} reserved: {}",
                    f.line,
                    f.thread,
                    human_and_exact(f.size),
                    f.stream,
                    human_bytes(f.live_bytes),
                    human_bytes(f.reserved_bytes),
                    f.error
                )?;
            }
        }
        if !self.problems.is_empty() {
            writeln!(w, "  first problems:")?;
            for p in self.problems.iter().take(SHOWN) {
                writeln!(w, "    line {}: {}", p.line, p.what)?;
            }
        }
        Ok(())
    }

    /// Writes the report as pretty JSON.
    ///
    /// # Errors
    /// The writer's.
    pub fn write_json(&self, w: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *w, self)?;
        writeln!(w)
    }
}

/// `bytes` in binary units with two decimals: `1.50 GiB`.
///
/// ```
/// assert_eq!(rmm_replay::report::human_bytes(1536 << 20), "1.50 GiB");
/// assert_eq!(rmm_replay::report::human_bytes(100), "100 B");
/// ```
pub fn human_bytes(bytes: usize) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", UNITS[unit])
}

fn human_and_exact(bytes: usize) -> String {
    if bytes < 1024 {
        human_bytes(bytes)
    } else {
        format!("{} ({bytes} B)", human_bytes(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::Series;

    #[test]
    fn text_and_json_carry_the_numbers() {
        let outcome = Outcome {
            events: 10,
            failures_in_log: 1,
            counts: Counts {
                allocations: 5,
                frees: 5,
                unknown_frees: 2,
                ..Default::default()
            },
            threads: vec![ThreadStats {
                thread: 7,
                events: 10,
                allocations: 5,
                frees: 5,
                ..Default::default()
            }],
            replay_threads: 1,
            peak_live_bytes: 3 << 20,
            peak_reserved_bytes: 4 << 20,
            wall_time: std::time::Duration::from_millis(5),
            series: Series {
                seconds: Some(vec![0.0, 2.5]),
                ..Default::default()
            },
            ..Default::default()
        };
        let streams = [StreamInfo {
            logged: "0x0".into(),
            replayed_as: "default stream".into(),
        }];
        let report = Report::new(
            "a.csv",
            "simulated",
            "a simulated device",
            11,
            &outcome,
            &streams,
        );
        let mut text = Vec::new();
        report.write_text(&mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("resource              simulated on a simulated device\n  result                ok\n"), "{text}");
        assert!(
            text.contains("peak live bytes       3.00 MiB (3145728 B)"),
            "{text}"
        );
        assert!(text.contains("fragmentation         25.00%"), "{text}");
        assert!(
            text.contains("2                     frees of pointers not live"),
            "{text}"
        );
        assert!(
            text.contains("0x0                    -> default stream"),
            "{text}"
        );
        let mut json = Vec::new();
        report.write_json(&mut json).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(json["peak_reserved_bytes"], 4 << 20);
        assert_eq!(json["fragmentation"], 0.25);
        assert_eq!(json["log_duration_s"], 2.5);
        assert_eq!(json["counts"]["unknown_frees"], 2);
        assert_eq!(json["threads"][0]["thread"], 7);
        assert_eq!(json["exit_code"], 0);
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1024), "1.00 KiB");
        assert_eq!(human_bytes(80 << 30), "80.00 GiB");
        assert_eq!(human_bytes(usize::MAX), "16.00 EiB");
    }
}
