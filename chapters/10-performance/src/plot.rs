//! The chapter's two pictures, as SVG: the retry storm over time
//! ([`timeline`]) and each latency arm's p50 and p99 ([`dots`]). plotters
//! writes text as `<text>` elements, so no font is needed here; the browser
//! draws them. Chapter 11's harness draws the later chapters' figures in the
//! same style; this chapter comes before it, so it has its own two.

use std::{fs::File, io::Write, ops::Range, path::Path};

use anyhow::{Context, anyhow};
use plotters::{
    coord::ranged1d::SegmentValue,
    prelude::*,
    style::text_anchor::{HPos, Pos, VPos},
};

/// Creates (empty) the file a plot will go to, before the run that feeds it:
/// a path that cannot be written fails now, not after minutes of measuring.
pub fn create(path: &Path) -> anyhow::Result<File> {
    File::create(path).with_context(|| format!("cannot write the plot to {}", path.display()))
}

fn write(mut file: File, path: &Path, svg: &str) -> anyhow::Result<()> {
    file.write_all(svg.as_bytes())
        .with_context(|| format!("cannot write the plot to {}", path.display()))
}

/// A tick's label: `1400`, `0.5`, `0.25`, never `1400.0` or `0.30000000000000004`.
fn tick(v: &f64) -> String {
    let text = format!("{v:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" { "0" } else { text }.to_string()
}

/// The legend's column, right of the plots: plotters keeps its own legend
/// inside a plot, where it may hide the data.
const LEGEND_WIDTH: u32 = 160;

/// Writes legend entry `i`'s label in the legend's column of `area` (as
/// `width` pixels wide) and returns where its mark goes, for the caller to draw.
fn legend_entry(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    width: u32,
    i: i32,
    label: &str,
) -> Result<(i32, i32), Box<dyn std::error::Error>> {
    let mark = ((width - LEGEND_WIDTH) as i32 + 20, 30 + 20 * i);
    let style =
        TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    area.draw_text(label, &style, (mark.0 + 16, mark.1))?;
    Ok(mark)
}

/// One line of a [`Panel`]; a `bold` line is one the reader should compare,
/// the others are there for context.
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub color: RGBColor,
    pub bold: bool,
}

impl Line {
    fn style(&self) -> ShapeStyle {
        if self.bold {
            self.color.stroke_width(3)
        } else {
            self.color.mix(0.7).stroke_width(1)
        }
    }
}

/// One chart of a [`timeline`]: a y axis from 0, and its lines.
pub struct Panel {
    pub y_label: String,
    pub lines: Vec<Line>,
}

/// Panels one above the other on one time axis (seconds), with the span
/// `shade` (named `shade_name` in the top panel's legend) shaded in every one.
pub fn timeline(
    file: File,
    path: &Path,
    title: &str,
    shade: (Range<f64>, &str),
    panels: &[Panel],
) -> anyhow::Result<()> {
    let mut svg = String::new();
    draw_timeline(&mut svg, title, shade, panels).map_err(|e| anyhow!("cannot draw: {e}"))?;
    write(file, path, &svg)
}

fn draw_timeline(
    svg: &mut String,
    title: &str,
    (shade, shade_name): (Range<f64>, &str),
    panels: &[Panel],
) -> Result<(), Box<dyn std::error::Error>> {
    let points = || panels.iter().flat_map(|p| &p.lines).flat_map(|l| &l.points);
    let x_max = points().map(|p| p.0).fold(shade.end, f64::max);
    let width = 720 + LEGEND_WIDTH;
    let root =
        SVGBackend::with_string(svg, (width, 60 + 260 * panels.len() as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 20))?;
    let shading = BLACK.mix(0.08);
    for (area, panel) in root.split_evenly((panels.len(), 1)).iter().zip(panels) {
        let y_max = panel
            .lines
            .iter()
            .flat_map(|l| &l.points)
            .map(|p| p.1)
            .fold(0.0, f64::max);
        let y_max = if y_max > 0.0 { y_max * 1.08 } else { 1.0 };
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .margin_right(LEGEND_WIDTH)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
        chart
            .configure_mesh()
            .max_light_lines(1)
            .x_desc("time (s)")
            .y_desc(&panel.y_label)
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .draw()?;
        // Under the lines, so that none is hidden.
        chart.draw_series(std::iter::once(Rectangle::new(
            [(shade.start, 0.0), (shade.end, y_max)],
            shading.filled(),
        )))?;
        // The bold lines last, on top of the others.
        let mut lines: Vec<&Line> = panel.lines.iter().collect();
        lines.sort_by_key(|l| l.bold);
        for line in lines {
            chart.draw_series(LineSeries::new(line.points.clone(), line.style()))?;
        }
    }
    // One legend for all the panels, beside the top one, in the panels' order.
    for (i, line) in panels.iter().take(1).flat_map(|p| &p.lines).enumerate() {
        let (x, y) = legend_entry(&root, width, i as i32, &line.name)?;
        root.draw(&PathElement::new(
            vec![(x - 10, y), (x + 10, y)],
            line.style(),
        ))?;
    }
    let i = panels.first().map_or(0, |p| p.lines.len()) as i32;
    let (x, y) = legend_entry(&root, width, i, shade_name)?;
    root.draw(&Rectangle::new(
        [(x - 10, y - 6), (x + 10, y + 6)],
        shading.filled(),
    ))?;
    root.present()?;
    Ok(())
}

/// One row of a [`dots`] plot, in milliseconds.
pub struct Row {
    pub label: String,
    pub p50: f64,
    pub p99: f64,
}

/// One row per arm, top to bottom: a dot at p50 and a cross at p99, on a
/// log-scale latency axis (the arms span two orders of magnitude), with a
/// vertical line at `reference` (the floor's p50) if there is one.
pub fn dots(
    file: File,
    path: &Path,
    title: &str,
    rows: &[Row],
    reference: Option<f64>,
) -> anyhow::Result<()> {
    let mut svg = String::new();
    draw_dots(&mut svg, title, rows, reference).map_err(|e| anyhow!("cannot draw: {e}"))?;
    write(file, path, &svg)
}

fn draw_dots(
    svg: &mut String,
    title: &str,
    rows: &[Row],
    reference: Option<f64>,
) -> Result<(), Box<dyn std::error::Error>> {
    let n = rows.len().max(1) as i32;
    let values = || rows.iter().flat_map(|r| [r.p50, r.p99]).chain(reference);
    // From just below a power of ten: plotters' log axis draws no line below
    // the first power of ten in its range (and 10^-2 computed is not 0.01).
    let min = values().fold(f64::INFINITY, f64::min).max(1e-3);
    let lo = 10f64.powf((min / 1.2).log10().floor()) * 0.99;
    let hi = values().fold(0.0, f64::max).max(lo * 10.0) * 1.5;
    let width = 740 + LEGEND_WIDTH;
    let root = SVGBackend::with_string(svg, (width, 110 + 30 * n as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 20))?;
    let mut chart = ChartBuilder::on(&root)
        .margin(12)
        .margin_right(LEGEND_WIDTH)
        .x_label_area_size(40)
        .y_label_area_size(270)
        .build_cartesian_2d((lo..hi).log_scale(), (0..n - 1).into_segmented())?;
    // Row 0 is drawn at the top: arms read in the order the run prints them.
    let y = |i: usize| SegmentValue::CenterOf(n - 1 - i as i32);
    // Asked for ten labels per decade, plotters' log axis gives a line at
    // each of 1..9 times a power of ten: the usual log grid. Labels at 1, 2
    // and 5 only; nine to a decade would overlap.
    let decades = (hi / lo).log10().floor().max(1.0) as usize;
    chart
        .configure_mesh()
        .x_labels(10 * decades)
        // Not 0: asked for no light lines, plotters' integer axis (the rows)
        // multiplies its step until it overflows.
        .max_light_lines(1)
        .x_label_formatter(&|v| {
            let mantissa = v / 10f64.powf(v.log10().floor());
            if [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-6) {
                tick(v)
            } else {
                String::new()
            }
        })
        .y_labels(n as usize)
        .disable_y_mesh()
        .x_desc("latency (ms, log scale)")
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(k) => rows
                .get((n - 1 - k) as usize)
                .map_or(String::new(), |r| r.label.clone()),
            _ => String::new(),
        })
        .draw()?;
    let (p50, p99) = (RGBColor(31, 119, 180), RGBColor(214, 39, 40));
    let floor_style = RGBColor(44, 160, 44).stroke_width(2);
    if let Some(floor) = reference {
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(floor, SegmentValue::Exact(0)), (floor, SegmentValue::Last)],
            floor_style,
        )))?;
    }
    // The spread from p50 to p99, thin and grey: the markers carry the values.
    chart.draw_series(
        rows.iter()
            .enumerate()
            .map(|(i, r)| PathElement::new(vec![(r.p50, y(i)), (r.p99, y(i))], BLACK.mix(0.3))),
    )?;
    chart.draw_series(
        rows.iter()
            .enumerate()
            .map(|(i, r)| Circle::new((r.p50, y(i)), 4, p50.filled())),
    )?;
    chart.draw_series(
        rows.iter()
            .enumerate()
            .map(|(i, r)| Cross::new((r.p99, y(i)), 4, p99.stroke_width(2))),
    )?;
    let (x, y) = legend_entry(&root, width, 0, "p50")?;
    root.draw(&Circle::new((x, y), 4, p50.filled()))?;
    let (x, y) = legend_entry(&root, width, 1, "p99")?;
    root.draw(&Cross::new((x, y), 4, p99.stroke_width(2)))?;
    if let Some(floor) = reference {
        let (x, y) = legend_entry(&root, width, 2, &format!("floor p50, {} ms", tick(&floor)))?;
        root.draw(&PathElement::new(vec![(x, y - 7), (x, y + 7)], floor_style))?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draw(draw: impl FnOnce(File, &Path) -> anyhow::Result<()>) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plot.svg");
        draw(create(&path).unwrap(), &path).unwrap();
        std::fs::read_to_string(&path).unwrap()
    }

    #[test]
    fn a_timeline_names_its_panels_lines_and_shaded_span() {
        let line = |name: &str, bold| Line {
            name: name.into(),
            points: vec![(0.0, 1.0), (2.0, 5.0), (4.0, 0.0)],
            color: RGBColor(0, 0, 0),
            bold,
        };
        let panel = |y_label: &str| Panel {
            y_label: y_label.into(),
            lines: vec![line("naive", true), line("backoff", false)],
        };
        let svg = draw(|file, path| {
            let panels = [panel("attempts/s"), panel("queued")];
            timeline(file, path, "storm", (1.0..2.0, "slow"), &panels)
        });
        for text in [
            "storm",
            "attempts/s",
            "queued",
            "naive",
            "backoff",
            "slow",
            "time (s)",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
    }

    #[test]
    fn a_dot_plot_names_every_row_and_the_floor() {
        let row = |label: &str, p50, p99| Row {
            label: label.into(),
            p50,
            p99,
        };
        let rows = [row("gRPC reused", 0.2, 0.3), row("floor", 0.03, 0.05)];
        let svg = draw(|file, path| dots(file, path, "arms", &rows, Some(0.03)));
        for text in [
            "arms",
            "gRPC reused",
            "floor",
            "p50",
            "p99",
            "floor p50, 0.03 ms",
            "log scale",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        assert!(svg.len() < 300_000);
    }

    #[test]
    fn a_plot_that_cannot_be_written_is_an_error_that_names_it() {
        let err = create(Path::new("/no such directory/plot.svg")).unwrap_err();
        assert!(
            format!("{err:#}").contains("/no such directory/plot.svg"),
            "{err:#}"
        );
    }
}
