//! One SVG line chart, drawn with plotters' SVG backend into a `String`.
//!
//! The chart is rendered to a string rather than a file so the same text can be written as
//! a `.svg` file and embedded inline in `report.html`. It keeps these invariants:
//! - the axes are chosen here, not by plotters: ~5 "nice" ticks (1, 2 or 5 × 10^k) covering
//!   the data, y starting at 0 unless the data is negative, a lone value centred — so the
//!   ticks, and the labels formatted from them, are the same whatever the backend's layout;
//! - each series is exactly one `<polyline>` (empty if it has no drawable point) plus a
//!   `<circle>` marker per point, and nothing else in the chart is a polyline (the axes and
//!   tick marks are thin rects), so a reader of the SVG can count and find the series;
//! - each series keeps its colour (Tableau 10, colour-blind friendly) in the line, its
//!   markers and its legend entry; the legend lists every series in a panel right of the
//!   plot;
//! - non-finite points are skipped and the rest drawn sorted by x; a chart with no point at
//!   all still draws its axes, with a "no data" note; no `NaN` or `inf` reaches the SVG.

use std::io;
use std::ops::Range;

use plotters::coord::cartesian::Cartesian2d;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::dubbo::group_thousands;

/// Series colours (Tableau 10), in series order.
const PALETTE: [RGBColor; 10] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0xe1, 0x57, 0x59),
    RGBColor(0x76, 0xb7, 0xb2),
    RGBColor(0x59, 0xa1, 0x4f),
    RGBColor(0xed, 0xc9, 0x48),
    RGBColor(0xb0, 0x7a, 0xa1),
    RGBColor(0xff, 0x9d, 0xa7),
    RGBColor(0x9c, 0x75, 0x5f),
    RGBColor(0xba, 0xb0, 0xac),
];

const WIDTH: u32 = 720;
const HEIGHT: u32 = 420;
/// Width of the legend panel at the right edge.
const LEGEND_WIDTH: u32 = 160;
/// Stroke width of a series line.
const SERIES_STROKE: u32 = 2;
const MARKER_RADIUS: u32 = 3;
/// Length of a tick mark outside the plot, in pixels.
const TICK_LENGTH: i32 = 5;
const AXIS_COLOUR: RGBColor = RGBColor(0x33, 0x33, 0x33);
const GRID_COLOUR: RGBColor = RGBColor(0xe5, 0xe5, 0xe5);
const NOTE_COLOUR: RGBColor = RGBColor(0x88, 0x88, 0x88);
/// More ticks than this on one axis means the step computation went wrong; stop there.
const MAX_TICKS: u32 = 50;

/// A "nice" step (1, 2 or 5 × 10^k) close to `raw`.
pub(super) fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let exp = 10f64.powf(raw.log10().floor());
    let f = raw / exp;
    let nf = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nf * exp
}

/// An axis covering `[min, max]` with ~5 nice ticks: (lo, hi, step).
pub(super) fn nice_axis(min: f64, max: f64) -> (f64, f64, f64) {
    let (mut min, mut max) = (min, max);
    if max - min <= f64::EPSILON * max.abs().max(1.0) {
        // A single value: centre it.
        let pad = if min == 0.0 { 1.0 } else { min.abs() * 0.5 };
        min -= pad;
        max += pad;
    }
    let step = nice_step((max - min) / 5.0);
    let lo = (min / step).floor() * step;
    let hi = (max / step).ceil() * step;
    (lo, hi, step)
}

/// The tick values of an axis from [`nice_axis`]: `lo`, `lo + step`, … up to `hi`.
fn ticks(lo: f64, hi: f64, step: f64) -> Vec<f64> {
    (0..=MAX_TICKS)
        .map(|i| lo + f64::from(i) * step)
        .take_while(|v| *v <= hi + step * 1e-6)
        .collect()
}

/// A linear f64 axis whose ticks are exactly the given values, so plotters lays out what
/// [`nice_axis`] chose. (plotters' own `with_key_points` on an f64 range loses the label
/// formatter, hence this small coordinate type.)
struct TickedAxis {
    linear: RangedCoordf64,
    ticks: Vec<f64>,
}

impl TickedAxis {
    fn new((lo, hi, step): (f64, f64, f64)) -> Self {
        Self {
            linear: (lo..hi).into(),
            ticks: ticks(lo, hi, step),
        }
    }
}

impl Ranged for TickedAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.linear.map(value, limit)
    }

    /// The ticks as the bold points (labels, tick marks, grid lines); no light points.
    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.linear.range()
    }
}

/// A tick label: whole numbers (thousands grouped from 10,000) for steps of 1 or more,
/// otherwise as many decimals as the step needs.
pub(super) fn fmt_tick(v: f64, step: f64) -> String {
    let v = if v.abs() < step * 1e-9 { 0.0 } else { v };
    if step >= 1.0 {
        let r = v.round();
        if r.abs() >= 10_000.0 {
            let sign = if r < 0.0 { "-" } else { "" };
            format!("{sign}{}", group_thousands(r.abs() as u64))
        } else {
            format!("{r:.0}")
        }
    } else {
        let decimals = (-step.log10()).ceil().clamp(0.0, 6.0) as usize;
        format!("{v:.decimals$}")
    }
}

/// A plotters failure as an I/O error (drawing into a string fails only on a plotters bug).
fn drawing_error(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("drawing a chart: {e}"))
}

/// A self-contained SVG line chart, starting `<svg ` and ending `</svg>\n`.
///
/// Each series is `(name, points)`; points are `(x, y)`, drawn sorted by x as one line in
/// the series' colour with a marker per point. See the module docs for the axes, the legend
/// and what happens to missing or non-finite data.
pub fn svg_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> io::Result<String> {
    let series: Vec<(&str, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(name, points)| {
            let mut finite: Vec<(f64, f64)> = points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .collect();
            finite.sort_by(|a, b| a.0.total_cmp(&b.0));
            (name.as_str(), finite)
        })
        .collect();
    let all = || series.iter().flat_map(|(_, p)| p.iter().copied());
    let has_data = all().next().is_some();
    let span = |f: fn((f64, f64)) -> f64| {
        all()
            .map(f)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                (lo.min(v), hi.max(v))
            })
    };
    let (xmin, xmax) = if has_data { span(|p| p.0) } else { (0.0, 1.0) };
    let (ymin, ymax) = if has_data { span(|p| p.1) } else { (0.0, 1.0) };
    let x_axis = nice_axis(xmin, xmax);
    let y_floor = if ymin >= 0.0 { 0.0 } else { ymin };
    let y_top = if ymax <= y_floor { y_floor + 1.0 } else { ymax };
    let y_axis = nice_axis(y_floor, y_top);
    let ((x_lo, x_hi, x_step), (y_lo, y_hi, y_step)) = (x_axis, y_axis);

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing_error)?;
        let (plot_area, legend_area) = root.split_horizontally(WIDTH - LEGEND_WIDTH);

        let mut chart = ChartBuilder::on(&plot_area)
            .caption(title, ("sans-serif", 18).into_font().style(FontStyle::Bold))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(TickedAxis::new(x_axis), TickedAxis::new(y_axis))
            .map_err(drawing_error)?;
        let x_tick_label = |v: &f64| fmt_tick(*v, x_step);
        let y_tick_label = |v: &f64| fmt_tick(*v, y_step);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .bold_line_style(GRID_COLOUR)
            // plotters draws axes and tick marks as polylines; [`draw_axes`] draws them
            // as rects instead, so the series lines stay the only polylines.
            .axis_style(TRANSPARENT)
            .x_desc(x_label)
            .y_desc(y_label)
            .x_label_formatter(&x_tick_label)
            .y_label_formatter(&y_tick_label)
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 15))
            .draw()
            .map_err(drawing_error)?;

        draw_axes(&chart, &root, x_axis, y_axis)?;
        for (idx, (_, points)) in series.iter().enumerate() {
            let colour = PALETTE[idx % PALETTE.len()];
            let line = colour.stroke_width(SERIES_STROKE);
            chart
                .draw_series(std::iter::once(PathElement::new(points.clone(), line)))
                .map_err(drawing_error)?;
            chart
                .draw_series(
                    points
                        .iter()
                        .map(|p| Circle::new(*p, MARKER_RADIUS, colour.filled())),
                )
                .map_err(drawing_error)?;
        }
        if !has_data {
            let note = ("sans-serif", 17)
                .into_font()
                .color(&NOTE_COLOUR)
                .pos(Pos::new(HPos::Center, VPos::Center));
            let centre = ((x_lo + x_hi) / 2.0, (y_lo + y_hi) / 2.0);
            chart
                .draw_series(std::iter::once(Text::new("no data", centre, note)))
                .map_err(drawing_error)?;
        }

        let names: Vec<&str> = series.iter().map(|(name, _)| *name).collect();
        draw_legend(&legend_area, &names)?;
        root.present().map_err(drawing_error)?;
    }
    Ok(svg)
}

/// The two axis lines and their tick marks, as thin filled rects at the plot's left and
/// bottom edges.
fn draw_axes(
    chart: &ChartContext<'_, SVGBackend<'_>, Cartesian2d<TickedAxis, TickedAxis>>,
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    (x_lo, x_hi, x_step): (f64, f64, f64),
    (y_lo, y_hi, y_step): (f64, f64, f64),
) -> io::Result<()> {
    let (left, bottom) = chart.backend_coord(&(x_lo, y_lo));
    let (right, top) = chart.backend_coord(&(x_hi, y_hi));
    let mut rects = vec![
        [(left - 1, top), (left, bottom + 1)],
        [(left - 1, bottom), (right + 1, bottom + 1)],
    ];
    for x in ticks(x_lo, x_hi, x_step) {
        let (px, _) = chart.backend_coord(&(x, y_lo));
        rects.push([(px, bottom), (px + 1, bottom + TICK_LENGTH)]);
    }
    for y in ticks(y_lo, y_hi, y_step) {
        let (_, py) = chart.backend_coord(&(x_lo, y));
        rects.push([(left - TICK_LENGTH, py), (left, py + 1)]);
    }
    for corners in rects {
        root.draw(&Rectangle::new(corners, AXIS_COLOUR.filled()))
            .map_err(drawing_error)?;
    }
    Ok(())
}

/// The legend panel: per series, top-down, a swatch and a marker in its colour and its name.
fn draw_legend(area: &DrawingArea<SVGBackend<'_>, Shift>, names: &[&str]) -> io::Result<()> {
    let name_style = ("sans-serif", 14)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (idx, name) in names.iter().enumerate() {
        let colour = PALETTE[idx % PALETTE.len()];
        let y = 52 + 18 * idx as i32;
        area.draw(&Rectangle::new([(8, y - 1), (30, y + 1)], colour.filled()))
            .map_err(drawing_error)?;
        area.draw(&Circle::new((19, y), MARKER_RADIUS, colour.filled()))
            .map_err(drawing_error)?;
        area.draw(&Text::new(name.to_string(), (36, y), name_style.clone()))
            .map_err(drawing_error)?;
    }
    Ok(())
}
