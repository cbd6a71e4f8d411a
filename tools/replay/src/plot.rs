//! Memory over time as a PNG (`--plot`): live bytes (from the log) and reserved bytes (what the
//! resource held from the device), against the log's time or the event index; and the same series
//! as CSV (`--series`), for figures that put several replays side by side.
//!
//! Drawn with plotters' bitmap backend; text uses DejaVu Sans, embedded in the binary (see
//! `assets/LICENSE-DejaVu.txt`), so no system font library is needed.

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;

use crate::replay::Series;

/// The embedded font (DejaVu Sans 2.37, Bitstream Vera licence).
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Lines longer than this are thinned to at most this many points, keeping each bucket's maximum.
pub const MAX_POINTS: usize = 4000;

/// The picture's size in pixels.
pub const SIZE: (u32, u32) = (1280, 720);

/// Writes `series` as CSV: `event,seconds,live_bytes,reserved_bytes`, one row per replayed event
/// (`seconds` empty when the log has no times).
///
/// # Errors
/// The file cannot be written.
pub fn write_series_csv(path: &Path, series: &Series) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_path(path)?;
    w.write_record(["event", "seconds", "live_bytes", "reserved_bytes"])?;
    for (i, (live, reserved)) in series.live.iter().zip(&series.reserved).enumerate() {
        let seconds = series
            .seconds
            .as_ref()
            .and_then(|s| s.get(i))
            .map_or(String::new(), |s| s.to_string());
        w.write_record([
            i.to_string(),
            seconds,
            live.to_string(),
            reserved.to_string(),
        ])?;
    }
    w.flush()?;
    Ok(())
}

/// What the horizontal axis shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum XAxis {
    /// Seconds since the first event, from the log's `Time` column (the event index when the log
    /// has no times, or they do not move).
    #[default]
    Time,
    /// The index of the replayed event.
    Index,
}

/// Draws `series` to the PNG at `path`, titled `title`.
///
/// # Errors
/// When the font cannot be loaded or the file cannot be written.
pub fn draw(path: &Path, series: &Series, title: &str, x_axis: XAxis) -> anyhow::Result<()> {
    register_font()?;
    let seconds = series
        .seconds
        .as_ref()
        .filter(|s| x_axis == XAxis::Time && s.last().is_some_and(|&last| last > 0.0));
    let (x, x_desc): (Vec<f64>, &str) = match seconds {
        Some(s) => (s.clone(), "time since the first event (s)"),
        None => ((0..series.live.len()).map(|i| i as f64).collect(), "event"),
    };
    let y_max = series
        .live
        .iter()
        .chain(&series.reserved)
        .copied()
        .max()
        .unwrap_or(0);
    let (unit, scale) = unit_for(y_max);
    let points = |values: &[usize]| steps(&thin(&x, values, scale));
    let (live, reserved) = (points(&series.live), points(&series.reserved));
    let x_max = x.last().copied().filter(|&last| last > 0.0).unwrap_or(1.0);
    // Headroom above the peak keeps the legend off the lines.
    let y_top = (y_max as f64 / scale * 1.2).max(1.0);

    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(20)
        .x_label_area_size(56)
        .y_label_area_size(90)
        .build_cartesian_2d(0f64..x_max, 0f64..y_top)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(format!("memory ({unit})"))
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    // Reserved as a shaded area under a line, so it shows even where live covers it exactly.
    let reserved_style = RED.stroke_width(2);
    chart
        .draw_series(AreaSeries::new(reserved, 0.0, RED.mix(0.2)).border_style(reserved_style))?
        .label("reserved (taken from the device)")
        .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 24, y + 6)], RED.mix(0.2).filled()));
    let live_style = BLUE.stroke_width(2);
    chart
        .draw_series(LineSeries::new(live, live_style))?
        .label("live (from the log)")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], live_style));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 16))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

fn register_font() -> anyhow::Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok()
    });
    anyhow::ensure!(ok, "the embedded font could not be loaded");
    Ok(())
}

/// The binary unit that shows `max` best, and its size in bytes.
fn unit_for(max: usize) -> (&'static str, f64) {
    const UNITS: [(&str, f64); 5] = [
        ("TiB", 1099511627776.0),
        ("GiB", 1073741824.0),
        ("MiB", 1048576.0),
        ("KiB", 1024.0),
        ("bytes", 1.0),
    ];
    UNITS
        .iter()
        .copied()
        .find(|&(_, size)| max as f64 >= size)
        .unwrap_or(("bytes", 1.0))
}

/// Memory changes at events and stays put in between: a staircase through `points`.
fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for (i, &(x, y)) in points.iter().enumerate() {
        if i > 0 {
            out.push((x, points[i - 1].1));
        }
        out.push((x, y));
    }
    out
}

/// `(x, value / scale)` points, at most about [`MAX_POINTS`]: each bucket keeps its maximum, so
/// peaks survive the thinning.
fn thin(x: &[f64], values: &[usize], scale: f64) -> Vec<(f64, f64)> {
    let bucket = values.len().div_ceil(MAX_POINTS).max(1);
    x.chunks(bucket)
        .zip(values.chunks(bucket))
        .filter_map(|(xs, vs)| {
            let (i, v) = vs.iter().enumerate().max_by_key(|&(_, v)| *v)?;
            Some((xs[i], *v as f64 / scale))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_the_peaks() {
        let x: Vec<f64> = (0..100_000).map(f64::from).collect();
        let mut values = vec![1usize; 100_000];
        values[54_321] = 99;
        let points = thin(&x, &values, 1.0);
        assert!(points.len() <= MAX_POINTS);
        assert!(points.contains(&(54_321.0, 99.0)));
        assert_eq!(thin(&[0.0, 1.0], &[5, 6], 2.0), [(0.0, 2.5), (1.0, 3.0)]);
        assert_eq!(
            steps(&[(0.0, 1.0), (2.0, 3.0)]),
            [(0.0, 1.0), (2.0, 1.0), (2.0, 3.0)]
        );
    }

    #[test]
    fn units_fit_the_range() {
        assert_eq!(unit_for(0).0, "bytes");
        assert_eq!(unit_for(1536 << 20).0, "GiB");
        assert_eq!(unit_for(10 << 20).0, "MiB");
    }

    #[test]
    fn a_png_is_drawn_with_and_without_times() {
        let dir = std::env::temp_dir().join(format!("rmm-replay-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let live: Vec<usize> = (0..5000).map(|i| (i % 700) << 20).collect();
        let reserved: Vec<usize> = live.iter().map(|b| b + (64 << 20)).collect();
        for (name, seconds) in [
            (
                "time.png",
                Some((0..5000).map(|i| f64::from(i) / 100.0).collect()),
            ),
            ("index.png", None),
        ] {
            let path = dir.join(name);
            let series = Series {
                seconds,
                live: live.clone(),
                reserved: reserved.clone(),
            };
            draw(&path, &series, "rmm-replay test", XAxis::Time).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            assert!(bytes.len() > 10_000, "{name}: {} bytes", bytes.len());
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{name}");
        }
        draw(
            &dir.join("empty.png"),
            &Series::default(),
            "empty",
            XAxis::Index,
        )
        .unwrap();
        assert!(draw(
            &dir.join("no/such/dir.png"),
            &Series::default(),
            "x",
            XAxis::Index
        )
        .is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
