//! `ebb-bench plot REPORT.json... -o FIG.svg|FIG.png`: the thesis figure
//! (seed 000, §4.2.1) from the JSON reports' interval series, one panel per
//! benchmark per report, side by side: interval writes against the write cap,
//! cumulative writes, cumulative compaction (flushes included, as in the
//! thesis), and grey shading where compaction was disabled. When a report has
//! `--readers` series, a second row of panels shows the reads beside the
//! writes: read ops/s, and read p99 on a logarithmic axis of its own.
//!
//! Labels need a TrueType font: `$EBB_BENCH_FONT`, else DejaVu Sans or
//! Liberation Sans from the usual system paths (Debian: fonts-dejavu-core).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::bail;
use crate::error::{BenchError, Result};
use crate::report::{IntervalSample, Report};

/// A plotted series: label, colour, value of a sample.
type Line = (&'static str, RGBColor, fn(&IntervalSample) -> f64);

const PANEL_WIDTH: u32 = 640;
const PANEL_HEIGHT: u32 = 480;
/// The bottom of the read-latency axis (µs): a logarithmic axis needs one above 0.
const P99_FLOOR: f64 = 0.1;

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation/LiberationSans-Regular.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
    "/Library/Fonts/Arial.ttf",
];

/// Registers a TrueType font for labels (once per process).
pub(crate) fn register_font() -> Result<()> {
    static REGISTERED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let candidates: Vec<PathBuf> = std::env::var_os("EBB_BENCH_FONT")
                .map(PathBuf::from)
                .into_iter()
                .chain(FONT_PATHS.iter().map(PathBuf::from))
                .collect();
            for path in &candidates {
                let Ok(bytes) = std::fs::read(path) else { continue };
                // plotters keeps registered fonts for the life of the process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return Ok(());
                }
            }
            Err("plot needs a TrueType font for its labels: install fonts-dejavu-core (Debian) \
                 or point EBB_BENCH_FONT at a .ttf file"
                .to_string())
        })
        .clone()
        .map_err(BenchError::new)
}

/// One panel: a benchmark's series from one report.
#[derive(Debug, Clone)]
pub struct Panel {
    /// Panel title.
    pub title: String,
    /// The series.
    pub intervals: Vec<IntervalSample>,
}

/// The panels of some reports: every benchmark with an interval series.
pub fn panels(reports: &[(String, Report)]) -> Vec<Panel> {
    let mut out = Vec::new();
    for (label, report) in reports {
        for r in &report.results {
            if !r.intervals.is_empty() {
                out.push(Panel {
                    title: format!("{label}: {} ({})", r.name, report.engine),
                    intervals: r.intervals.clone(),
                });
            }
        }
    }
    out
}

fn plot_error(e: impl std::fmt::Display) -> BenchError {
    BenchError::new(format!("plot: {e}"))
}

/// Draws the panels into `out` (`.svg` or `.png`).
pub fn draw(panels: &[Panel], out: &Path) -> Result<()> {
    if panels.is_empty() {
        bail!("plot: the reports have no interval series (run benchmarks with --json=FILE)");
    }
    register_font()?;
    let rows = if panels.iter().any(has_reads) { 2 } else { 1 };
    let size = (PANEL_WIDTH * panels.len() as u32, PANEL_HEIGHT * rows);
    match out.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
        Some("svg") => draw_on(SVGBackend::new(out, size).into_drawing_area(), panels),
        Some("png") => draw_on(BitMapBackend::new(out, size).into_drawing_area(), panels),
        _ => bail!("plot: output {} must end in .svg or .png", out.display()),
    }
}

fn has_reads(panel: &Panel) -> bool {
    panel.intervals.iter().any(|i| i.reads.is_some())
}

fn draw_on<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, panels: &[Panel]) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(plot_error)?;
    let reads = panels.iter().any(has_reads);
    let areas = root.split_evenly((if reads { 2 } else { 1 }, panels.len()));
    // Row-major: the write panels, then (with reads) the read panels below them.
    let (top, bottom) = areas.split_at(panels.len());
    for (area, panel) in top.iter().zip(panels) {
        draw_panel(area, panel)?;
    }
    for (area, panel) in bottom.iter().zip(panels) {
        draw_reads_panel(area, panel)?;
    }
    root.present().map_err(plot_error)?;
    Ok(())
}

/// The points of `value` over the series, split where it is missing.
fn stretches(s: &[IntervalSample], value: impl Fn(&IntervalSample) -> Option<f64>) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for i in s {
        match value(i) {
            Some(v) => {
                if let Some(last) = out.last_mut() {
                    last.push((i.t_secs, v));
                }
            }
            None => out.push(Vec::new()),
        }
    }
    out.retain(|v| !v.is_empty());
    out
}

/// The reads beside the writes of one panel: read ops/s (left axis) and read
/// p99 (right axis, logarithmic: a stall's milliseconds beside the
/// microseconds of a quiet interval), with the same compaction shading.
fn draw_reads_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, panel: &Panel) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let title = format!("{}: reads beside the writes", panel.title);
    if !has_reads(panel) {
        area.titled(&format!("{title} (none: run without --readers)"), ("sans-serif", 16)).map_err(plot_error)?;
        return Ok(());
    }
    let s = &panel.intervals;
    let x_max = s.iter().map(|i| i.t_secs).fold(1.0, f64::max);
    let ops_top = s.iter().filter_map(|i| i.reads.as_ref()).map(|r| r.ops_per_sec).fold(1.0, f64::max) * 1.1;
    let p99 = |i: &IntervalSample| i.reads.as_ref().and_then(|r| r.p99_latency_micros).map(|p| p.max(P99_FLOOR));
    let p99_top = s.iter().filter_map(p99).fold(10.0, f64::max) * 2.0;
    let mut chart = ChartBuilder::on(area)
        .caption(&title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .right_y_label_area_size(60)
        .build_cartesian_2d(0f64..x_max, 0f64..ops_top)
        .map_err(plot_error)?
        .set_secondary_coord(0f64..x_max, (P99_FLOOR..p99_top).log_scale());
    chart.configure_mesh().x_desc("seconds").y_desc("reads/s").draw().map_err(plot_error)?;
    chart.configure_secondary_axes().y_desc("read p99 µs (log)").draw().map_err(plot_error)?;
    let grey = RGBColor(190, 190, 190).mix(0.5);
    chart
        .draw_series(s.iter().filter(|i| !i.compaction_enabled).map(|i| {
            Rectangle::new([((i.t_secs - i.interval_secs).max(0.0), 0.0), (i.t_secs, ops_top)], grey.filled())
        }))
        .map_err(plot_error)?;
    let (ops_color, p99_color) = (RGBColor(120, 40, 160), RGBColor(230, 120, 0));
    let mut labelled = false;
    // Dots as well as lines: a short run has a single interval, which a line does not show.
    for stretch in stretches(s, |i| i.reads.as_ref().map(|r| r.ops_per_sec)) {
        chart.draw_series(stretch.iter().map(|p| Circle::new(*p, 3, ops_color.filled()))).map_err(plot_error)?;
        let series = chart.draw_series(LineSeries::new(stretch, ops_color.stroke_width(2))).map_err(plot_error)?;
        if !labelled {
            series
                .label("read ops/s")
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 15, y)], ops_color.stroke_width(2)));
            labelled = true;
        }
    }
    labelled = false;
    for stretch in stretches(s, p99) {
        chart
            .draw_secondary_series(stretch.iter().map(|p| Circle::new(*p, 3, p99_color.filled())))
            .map_err(plot_error)?;
        let series =
            chart.draw_secondary_series(LineSeries::new(stretch, p99_color.stroke_width(2))).map_err(plot_error)?;
        if !labelled {
            series
                .label("read p99 (right axis)")
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 15, y)], p99_color.stroke_width(2)));
            labelled = true;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(plot_error)?;
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, panel: &Panel) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let s = &panel.intervals;
    let x_max = s.iter().map(|i| i.t_secs).fold(1.0, f64::max);
    let y_top = s
        .iter()
        .flat_map(|i| {
            [
                i.ingest_mb_per_sec,
                i.cap_mb_per_sec.unwrap_or(0.0),
                i.cumulative_ingest_mb_per_sec,
                i.cumulative_compaction_mb_per_sec,
            ]
        })
        .fold(1.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..x_max, 0f64..y_top)
        .map_err(plot_error)?;
    chart.configure_mesh().x_desc("seconds").y_desc("MB/s").draw().map_err(plot_error)?;
    let grey = RGBColor(190, 190, 190).mix(0.5);
    chart
        .draw_series(
            s.iter().filter(|i| !i.compaction_enabled).map(|i| {
                Rectangle::new([((i.t_secs - i.interval_secs).max(0.0), 0.0), (i.t_secs, y_top)], grey.filled())
            }),
        )
        .map_err(plot_error)?
        .label("compaction disabled")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], grey.filled()));
    // The cap may be missing (unlimited) in places: draw each capped stretch separately.
    let mut stretches: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for i in s {
        match i.cap_mb_per_sec {
            Some(c) => {
                if let Some(last) = stretches.last_mut() {
                    last.push((i.t_secs - i.interval_secs, c));
                    last.push((i.t_secs, c));
                }
            }
            None => stretches.push(Vec::new()),
        }
    }
    let mut labelled = false;
    for stretch in stretches.into_iter().filter(|v| !v.is_empty()) {
        let series = chart.draw_series(LineSeries::new(stretch, BLACK.stroke_width(1))).map_err(plot_error)?;
        if !labelled {
            series.label("write cap").legend(|(x, y)| PathElement::new([(x, y), (x + 15, y)], BLACK));
            labelled = true;
        }
    }
    let lines: [Line; 3] = [
        ("interval writes", RED, |i| i.ingest_mb_per_sec),
        ("cumulative writes", BLUE, |i| i.cumulative_ingest_mb_per_sec),
        ("cumulative compaction", RGBColor(0, 140, 0), |i| i.cumulative_compaction_mb_per_sec),
    ];
    for (label, color, value) in lines {
        chart
            .draw_series(LineSeries::new(s.iter().map(|i| (i.t_secs, value(i))), color.stroke_width(2)))
            .map_err(plot_error)?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 15, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(plot_error)?;
    Ok(())
}

/// The `plot` subcommand.
pub fn run(args: &[String]) -> Result<()> {
    let mut inputs = Vec::new();
    let mut out: Option<PathBuf> = None;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "-o" || a == "--output" || a == "-output" {
            let Some(path) = args.get(i) else { bail!("plot: -o needs a file name") };
            out = Some(PathBuf::from(path));
            i += 1;
        } else if let Some(path) = a.strip_prefix("--output=").or_else(|| a.strip_prefix("-o=")) {
            out = Some(PathBuf::from(path));
        } else if a == "--help" || a == "-h" {
            println!("usage: ebb-bench plot REPORT.json... -o FIG.svg|FIG.png");
            return Ok(());
        } else if a.starts_with('-') {
            bail!("plot: unknown option {a:?} (usage: ebb-bench plot REPORT.json... -o FIG.svg|FIG.png)");
        } else {
            inputs.push(PathBuf::from(a));
        }
    }
    let Some(out) = out else {
        bail!("plot: no output file (usage: ebb-bench plot REPORT.json... -o FIG.svg|FIG.png)")
    };
    if inputs.is_empty() {
        bail!("plot: no reports given (usage: ebb-bench plot REPORT.json... -o FIG.svg|FIG.png)");
    }
    let reports: Vec<(String, Report)> = inputs
        .iter()
        .map(|p| {
            let label = p.file_stem().map_or_else(|| p.display().to_string(), |s| s.to_string_lossy().into_owned());
            Report::read(p).map(|r| (label, r))
        })
        .collect::<Result<_>>()?;
    draw(&panels(&reports), &out)?;
    println!("wrote {}", out.display());
    Ok(())
}
