//! Plots of experiment and tuner results with plotters: panels of series
//! over an x axis whose ticks sit at given positions with given labels
//! (option values, log-spaced sizes, or categories such as preset names).

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::bail;
use crate::error::{BenchError, Result};
use crate::plot::register_font;

use super::figures::format_number;

const PANEL_WIDTH: u32 = 640;
const PANEL_HEIGHT: u32 = 420;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A line through the points, with markers and min–max bars.
    LineWithRange,
    /// Markers only.
    Dots,
    /// Markers with min–max bars, no line (categories side by side).
    DotsWithRange,
    /// A step line (best so far).
    Steps,
    /// A horizontal dashed line at the first point's y (a baseline).
    Horizontal,
}

/// One series of a panel.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// How it is drawn.
    pub style: Style,
    /// (x, y, y_min, y_max).
    pub points: Vec<(f64, f64, f64, f64)>,
}

/// One chart.
#[derive(Debug, Clone)]
pub struct Panel {
    /// Title.
    pub title: String,
    /// X axis description.
    pub x_desc: String,
    /// Y axis description.
    pub y_desc: String,
    /// X tick positions and labels; empty = plotters' own ticks.
    pub x_ticks: Vec<(f64, String)>,
    /// The series.
    pub series: Vec<Series>,
}

const COLORS: &[RGBColor] = &[
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn plot_error(e: impl std::fmt::Display) -> BenchError {
    BenchError::new(format!("plot: {e}"))
}

/// Draws `panels` in a grid of `cols` columns into `out` (`.svg` or `.png`).
pub fn draw(panels: &[Panel], cols: usize, out: &Path) -> Result<()> {
    draw_wide(panels, cols, out, PANEL_WIDTH)
}

/// As [`draw`], each panel `panel_width` pixels wide (at least the usual
/// width): room for long category labels side by side.
pub fn draw_wide(panels: &[Panel], cols: usize, out: &Path, panel_width: u32) -> Result<()> {
    if panels.is_empty() {
        bail!("plot {}: nothing to draw", out.display());
    }
    register_font()?;
    let cols = cols.clamp(1, panels.len());
    let rows = panels.len().div_ceil(cols);
    let size = (panel_width.max(PANEL_WIDTH) * cols as u32, PANEL_HEIGHT * rows as u32);
    match out.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
        Some("svg") => draw_on(SVGBackend::new(out, size).into_drawing_area(), panels, rows, cols),
        Some("png") => draw_on(BitMapBackend::new(out, size).into_drawing_area(), panels, rows, cols),
        _ => bail!("plot: output {} must end in .svg or .png", out.display()),
    }
}

fn draw_on<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, panels: &[Panel], rows: usize, cols: usize) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(plot_error)?;
    let areas = root.split_evenly((rows, cols));
    for (area, panel) in areas.iter().zip(panels) {
        draw_panel(area, panel)?;
    }
    root.present().map_err(plot_error)?;
    Ok(())
}

fn padded(lo: f64, hi: f64) -> (f64, f64) {
    if (hi - lo).abs() < f64::EPSILON {
        (lo - 0.5, hi + 0.5)
    } else {
        let pad = (hi - lo) * 0.06;
        (lo - pad, hi + pad)
    }
}

fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, panel: &Panel) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let xs = panel.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).chain(panel.x_ticks.iter().map(|t| t.0));
    let (x_lo, x_hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)));
    if !x_lo.is_finite() {
        bail!("plot {}: no data", panel.title);
    }
    let (x_lo, x_hi) = padded(x_lo, x_hi);
    let ys = panel.series.iter().flat_map(|s| s.points.iter().flat_map(|p| [p.1, p.2, p.3]));
    let (y_lo, y_hi) = ys.fold((0.0f64, f64::NEG_INFINITY), |(lo, hi), y| (lo.min(y), hi.max(y)));
    let y_hi = if y_hi.is_finite() && y_hi > y_lo { y_hi + (y_hi - y_lo) * 0.12 } else { y_lo + 1.0 };
    let ticks = panel.x_ticks.clone();
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
        .map_err(plot_error)?;
    // Ticks fall where plotters puts them; a tick at one of the given
    // positions shows its label, another one none.
    let label_of = move |x: &f64| -> String {
        ticks.iter().find(|t| (t.0 - *x).abs() < 1e-6).map(|t| t.1.clone()).unwrap_or_default()
    };
    let plain = |v: &f64| format_number(*v);
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(panel.x_desc.as_str()).y_desc(panel.y_desc.as_str()).y_label_formatter(&plain);
    if panel.x_ticks.is_empty() {
        mesh.x_label_formatter(&plain);
    } else {
        let span = (x_hi - x_lo).ceil() as usize + 1;
        mesh.x_labels(span.clamp(2, 40)).x_label_formatter(&label_of);
    }
    mesh.draw().map_err(plot_error)?;
    for (i, s) in panel.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points = s.points.clone();
        match s.style {
            Style::LineWithRange => {
                chart
                    .draw_series(LineSeries::new(points.iter().map(|p| (p.0, p.1)), color.stroke_width(2)))
                    .map_err(plot_error)?
                    .label(&s.label)
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 15, y)], color.stroke_width(2)));
                chart
                    .draw_series(points.iter().map(|p| Circle::new((p.0, p.1), 3, color.filled())))
                    .map_err(plot_error)?;
                chart
                    .draw_series(
                        points.iter().filter(|p| p.3 > p.2).map(|p| PathElement::new([(p.0, p.2), (p.0, p.3)], color)),
                    )
                    .map_err(plot_error)?;
            }
            Style::DotsWithRange => {
                chart
                    .draw_series(points.iter().map(|p| Circle::new((p.0, p.1), 4, color.filled())))
                    .map_err(plot_error)?
                    .label(&s.label)
                    .legend(move |(x, y)| Circle::new((x + 7, y), 4, color.filled()));
                chart
                    .draw_series(
                        points
                            .iter()
                            .filter(|p| p.3 > p.2)
                            .map(|p| PathElement::new([(p.0, p.2), (p.0, p.3)], color.stroke_width(2))),
                    )
                    .map_err(plot_error)?;
            }
            Style::Dots => {
                chart
                    .draw_series(points.iter().map(|p| Circle::new((p.0, p.1), 3, color.filled())))
                    .map_err(plot_error)?
                    .label(&s.label)
                    .legend(move |(x, y)| Circle::new((x + 7, y), 3, color.filled()));
            }
            Style::Steps => {
                let mut path = Vec::new();
                for (j, p) in points.iter().enumerate() {
                    if j > 0 {
                        path.push((p.0, points[j - 1].1));
                    }
                    path.push((p.0, p.1));
                }
                chart
                    .draw_series(LineSeries::new(path, color.stroke_width(2)))
                    .map_err(plot_error)?
                    .label(&s.label)
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 15, y)], color.stroke_width(2)));
            }
            Style::Horizontal => {
                let Some(y) = points.first().map(|p| p.1) else { continue };
                chart
                    .draw_series(DashedLineSeries::new([(x_lo, y), (x_hi, y)], 6, 4, color.stroke_width(1)))
                    .map_err(plot_error)?
                    .label(&s.label)
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 15, y)], color));
            }
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
