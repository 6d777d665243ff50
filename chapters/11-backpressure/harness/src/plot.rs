//! SVG charts for the experiment chapters (11-14): time series and curves,
//! and bar charts with whiskers ([`bars`]),
//! stacked in panels that share the x axis. plotters' SVG backend writes text
//! as `<text>` elements, so no font is needed here; the browser draws them.

use std::path::Path;

use anyhow::anyhow;
use plotters::{
    coord::{Shift, types::RangedCoordf64},
    prelude::*,
    style::text_anchor::{HPos, Pos, VPos},
};

/// A named set of points; drawn as a line, or as dots when points are many
/// separate events (one per message) rather than a curve.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub dots: bool,
}

impl Series {
    pub fn line(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
            dots: false,
        }
    }

    pub fn dots(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            dots: true,
            ..Series::line(name, points)
        }
    }
}

/// One chart of a figure.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Panel {
    pub y_label: String,
    pub series: Vec<Series>,
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The size of a figure with room for `panels` charts under its title.
fn size(panels: usize) -> (u32, u32) {
    (720, 60 + 260 * panels as u32)
}

/// A white SVG figure with its `title` on top.
fn figure<'a>(
    backend: SVGBackend<'a>,
    title: &str,
) -> Result<Area<'a>, Box<dyn std::error::Error>> {
    let root = backend.into_drawing_area();
    root.fill(&WHITE)?;
    Ok(root.titled(title, ("sans-serif", 20))?)
}

/// The top of a y axis that starts at 0: `headroom` above the highest value,
/// or 1 when every value is 0.
fn y_top(highest: f64, headroom: f64) -> f64 {
    if highest > 0.0 {
        highest * headroom
    } else {
        1.0
    }
}

/// A tick's label: `1400`, `0.5`, `0.25`, never `1400.0`. The ticks plotters
/// picks are round numbers, so the shortest decimal that gives the value back
/// (to a billionth of its size) is the whole of it.
pub fn tick(value: &f64) -> String {
    let v = *value;
    let tolerance = 1e-9 * v.abs().max(1e-12);
    let text = (0..=9)
        .map(|decimals| format!("{v:.decimals$}"))
        .find(|t| t.parse::<f64>().is_ok_and(|p| (p - v).abs() <= tolerance))
        .unwrap_or_else(|| v.to_string());
    // `-0` is 0.
    if text
        .trim_start_matches('-')
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        "0".into()
    } else {
        text
    }
}

/// One chart's axes in `area`.
fn axes<'a, 'b>(
    area: &'a Area<'b>,
    x_label_area: u32,
    x: std::ops::Range<f64>,
    y_top: f64,
) -> Result<Chart<'a, 'b>, Box<dyn std::error::Error>> {
    Ok(ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(x_label_area)
        .y_label_area_size(64)
        .build_cartesian_2d(x, 0.0..y_top)?)
}

/// Draws `panels` one above the other, 720 pixels wide, all on the same x
/// range; each panel's y axis starts at 0.
pub fn panels(path: &Path, title: &str, x_label: &str, panels: &[Panel]) -> anyhow::Result<()> {
    // Drawn in memory, then written whole (records::write), so a full disk
    // never leaves half a picture under the plot's name.
    let svg = panels_svg(title, x_label, panels)?;
    crate::records::write(path, svg.as_bytes())
}

/// [`panels`], as SVG text instead of a file (the live view sends it).
pub fn panels_svg(title: &str, x_label: &str, panels: &[Panel]) -> anyhow::Result<String> {
    let mut svg = String::new();
    let backend = SVGBackend::with_string(&mut svg, size(panels.len()));
    draw(backend, title, x_label, panels).map_err(|e| anyhow!("cannot draw {title}: {e}"))?;
    // plotters spells out SVG's defaults on every dot; a third of a dot's
    // bytes, in a file that may hold thousands.
    Ok(svg
        .replace(r#" opacity="1""#, "")
        .replace(r#" stroke="none" stroke-width="1""#, r#" stroke="none""#))
}

fn draw(
    backend: SVGBackend<'_>,
    title: &str,
    x_label: &str,
    panels: &[Panel],
) -> Result<(), Box<dyn std::error::Error>> {
    let all = || {
        panels
            .iter()
            .flat_map(|p| &p.series)
            .flat_map(|s| &s.points)
    };
    let x_max = all().map(|p| p.0).fold(0.0, f64::max).max(1e-9);
    let x_min = all().map(|p| p.0).fold(f64::INFINITY, f64::min).min(0.0);
    let root = figure(backend, title)?;
    for (area, panel) in root.split_evenly((panels.len(), 1)).iter().zip(panels) {
        let y_max = panel
            .series
            .iter()
            .flat_map(|s| &s.points)
            .map(|p| p.1)
            .fold(0.0, f64::max);
        let mut chart = axes(area, 36, x_min..x_max, y_top(y_max, 1.08))?;
        // Dots are thinned before the axes are labelled, so that the x label
        // can say so; a longer legend would hide the top-left of the data.
        let shown: Vec<Vec<(f64, f64)>> = panel
            .series
            .iter()
            .map(|s| {
                if s.dots {
                    one_per_cell(&s.points, |p| chart.backend_coord(p))
                } else {
                    s.points.clone()
                }
            })
            .collect();
        let (drawn, all): (usize, usize) = panel
            .series
            .iter()
            .zip(&shown)
            .filter(|(s, _)| s.dots)
            .fold((0, 0), |(d, a), (s, shown)| {
                (d + shown.len(), a + s.points.len())
            });
        let x_desc = if drawn < all {
            format!("{x_label}; dots thinned to one per 2x2 pixels: {drawn} of {all} drawn")
        } else {
            x_label.to_string()
        };
        chart
            .configure_mesh()
            // One light line between labelled ones, not plotters' ten: a
            // grid a reader can follow, and a tenth of the lines in the file.
            .max_light_lines(1)
            .x_desc(x_desc)
            .y_desc(&panel.y_label)
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .draw()?;
        for (i, (series, points)) in panel.series.iter().zip(shown).enumerate() {
            let color = COLORS[i % COLORS.len()];
            let drawn = if series.dots {
                let dots = points
                    .into_iter()
                    .map(|p| Circle::new(p, 1, color.filled()));
                chart.draw_series(dots)?
            } else {
                chart.draw_series(LineSeries::new(points, color.stroke_width(2)))?
            };
            drawn.label(series.name.as_str()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
            });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// A dot is 3 pixels across; one per 2x2-pixel cell covers every pixel that
/// a dot of its series covers.
const DOT_CELL: i32 = 2;

/// The dots that change the picture: of the points that land in the same
/// [`DOT_CELL`] (`pixel` maps a point to its pixel), only the first is kept.
/// A dot drawn again where one of its own colour already is adds bytes, not
/// ink: chapter 12's thirteen thousand sends made an SVG of 1.4 MB.
fn one_per_cell(
    points: &[(f64, f64)],
    pixel: impl Fn(&(f64, f64)) -> (i32, i32),
) -> Vec<(f64, f64)> {
    let mut seen = std::collections::HashSet::new();
    points
        .iter()
        .copied()
        .filter(|p| {
            let (x, y) = pixel(p);
            seen.insert((x.div_euclid(DOT_CELL), y.div_euclid(DOT_CELL)))
        })
        .collect()
}

/// One bar: a value (say a median) and the range around it (say min to max
/// over repeats), drawn as a whisker.
#[derive(Debug, Clone)]
pub struct Bar {
    pub label: String,
    pub value: f64,
    pub low: f64,
    pub high: f64,
}

/// One bar chart of a figure; bars are drawn left to right in order.
#[derive(Debug, Clone)]
pub struct BarPanel {
    pub y_label: String,
    pub bars: Vec<Bar>,
}

/// Draws bar charts one above the other, 720 pixels wide; each bar's label
/// is written under it, and each y axis starts at 0.
pub fn bars(path: &Path, title: &str, panels: &[BarPanel]) -> anyhow::Result<()> {
    let mut svg = String::new();
    draw_bars(
        SVGBackend::with_string(&mut svg, size(panels.len())),
        title,
        panels,
    )
    .map_err(|e| anyhow!("cannot draw {}: {e}", path.display()))?;
    crate::records::write(path, svg.as_bytes())
}

/// The bar labels' font size, as plotters takes it (it writes 13 as about
/// 10.5 pixels).
const LABEL_SIZE: u32 = 13;
/// Pixels from one line of a bar label to the next.
const LABEL_LINE: i32 = 14;
/// A generous width for one character of a bar label, in pixels: no font is
/// at hand to measure with, and a sans-serif letter or digit at 10.5 pixels
/// is about 6 wide on average (DejaVu Sans, a wide face: digits 6.7, `i` 3).
const LABEL_CHAR: f64 = 6.5;

/// Bar labels laid out so that no two overlap: each wrapped at its spaces to
/// the width of its bar's slot and centred under the bar. When a single word
/// is still wider than a slot, every other bar's label moves down below its
/// neighbours'.
#[derive(Debug, PartialEq)]
struct BarLabels {
    /// Each bar's lines, and the row (from the axis down) of its first line.
    lines: Vec<(Vec<String>, usize)>,
    /// How many rows of text the labels take.
    rows: usize,
}

impl BarLabels {
    fn lay_out(labels: &[&str], slot_px: f64) -> BarLabels {
        let fits = (slot_px / LABEL_CHAR).floor().max(1.0) as usize;
        let wrapped: Vec<Vec<String>> = labels.iter().map(|l| wrap(l, fits)).collect();
        let tallest = wrapped.iter().map(Vec::len).max().unwrap_or(0);
        let stagger = wrapped.iter().flatten().any(|l| l.chars().count() > fits);
        let lines = wrapped
            .into_iter()
            .enumerate()
            .map(|(i, lines)| (lines, if stagger && i % 2 == 1 { tallest } else { 0 }))
            .collect();
        BarLabels {
            lines,
            rows: if stagger { 2 * tallest } else { tallest },
        }
    }

    /// The height of the band under the axis that holds the labels.
    fn height(&self) -> u32 {
        8 + LABEL_LINE as u32 * self.rows as u32
    }
}

/// `text` in lines of at most `width` characters, broken at spaces; a word
/// longer than that keeps a line to itself.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

fn draw_bars(
    backend: SVGBackend<'_>,
    title: &str,
    panels: &[BarPanel],
) -> Result<(), Box<dyn std::error::Error>> {
    let root = figure(backend, title)?;
    for (area, panel) in root.split_evenly((panels.len(), 1)).iter().zip(panels) {
        let n = panel.bars.len().max(1);
        let y_max = panel
            .bars
            .iter()
            .map(|b| b.high.max(b.value))
            .fold(0.0, f64::max);
        let y_max = y_top(y_max, 1.15);
        // The plot's width: the area less the y labels (64) and margins (12 each side).
        let plot_px = f64::from(area.dim_in_pixel().0) - 64.0 - 24.0;
        let labels = BarLabels::lay_out(
            &panel
                .bars
                .iter()
                .map(|b| b.label.as_str())
                .collect::<Vec<_>>(),
            plot_px / n as f64,
        );
        let mut chart = axes(area, labels.height(), 0.0..n as f64, y_max)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .disable_x_axis()
            .y_desc(&panel.y_label)
            .y_label_formatter(&tick)
            .draw()?;
        let style = TextStyle::from(("sans-serif", LABEL_SIZE).into_font())
            .pos(Pos::new(HPos::Center, VPos::Top));
        for (i, (bar, (lines, row))) in panel.bars.iter().zip(&labels.lines).enumerate() {
            let color = COLORS[i % COLORS.len()];
            let x = i as f64;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(x + 0.15, 0.0), (x + 0.85, bar.value)],
                color.mix(0.8).filled(),
            )))?;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(x + 0.5, bar.low), (x + 0.5, bar.high)],
                BLACK.stroke_width(2),
            )))?;
            for y in [bar.low, bar.high] {
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(x + 0.4, y), (x + 0.6, y)],
                    BLACK.stroke_width(2),
                )))?;
            }
            // Under the bar, in the band below the axis: it never hides a
            // bar or a whisker, and wrapped to its slot it never meets a
            // neighbour's label.
            for (j, line) in lines.iter().enumerate() {
                let down = 6 + LABEL_LINE * (row + j) as i32;
                chart.draw_series(std::iter::once(
                    EmptyElement::at((x + 0.5, 0.0))
                        + Text::new(line.clone(), (0, down), style.clone()),
                ))?;
            }
        }
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_svg_with_every_series_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chart.svg");
        let panel = |name: &str| Panel {
            y_label: "depth".into(),
            series: vec![
                Series::line(format!("{name} a"), vec![(0.0, 1.0), (1.0, 3.0)]),
                Series::dots(format!("{name} b"), vec![(0.5, 2.0)]),
            ],
        };
        let both = [panel("top"), panel("bottom")];
        panels(&path, "Title", "time (s)", &both).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"));
        // The live view's text is the file's.
        assert_eq!(panels_svg("Title", "time (s)", &both).unwrap(), svg);
        for text in ["Title", "time (s)", "top a", "top b", "bottom a", "depth"] {
            assert!(svg.contains(text), "{text} missing");
        }
    }

    #[test]
    fn dots_on_the_same_pixel_are_drawn_once_and_the_legend_says_so() {
        // 200,000 sends over 10 s on 5 levels of duration: one dot per two
        // pixel columns and level is all that can show.
        let many: Vec<(f64, f64)> = (0..200_000)
            .map(|i| (i as f64 * 5e-5, (i % 5) as f64))
            .collect();
        let few = vec![(1.0, 1.0), (5.0, 2.0), (9.0, 3.0)];
        let svg = panels_svg(
            "sends",
            "time (s)",
            &[Panel {
                y_label: "ms".into(),
                series: vec![Series::dots("many", many), Series::dots("few", few)],
            }],
        )
        .unwrap();
        let circles = svg.matches("<circle").count();
        assert!(circles <= 5 * 330 + 3, "{circles} circles");
        assert!(svg.len() < 300_000, "{} bytes", svg.len());
        let says = format!(
            "dots thinned to one per 2x2 pixels: {} of 200003 drawn",
            circles
        );
        assert!(svg.contains(&says), "the x label says what was thinned");
    }

    #[test]
    fn ticks_print_no_useless_decimals() {
        let ticks: Vec<String> = [
            0.0,
            -0.0,
            1400.0,
            0.5,
            0.25,
            2.5,
            100000.0,
            -20.0,
            0.1 + 0.2,
        ]
        .iter()
        .map(tick)
        .collect();
        assert_eq!(
            ticks,
            [
                "0", "0", "1400", "0.5", "0.25", "2.5", "100000", "-20", "0.3"
            ]
        );
    }

    #[test]
    fn bar_labels_wrap_to_their_slot_or_take_turns() {
        // Twelve bars in 632 pixels: 52 each, room for 8 characters.
        let roomy = BarLabels::lay_out(&["ct-inline", "mt2-spawn"], 315.0);
        assert_eq!(roomy.rows, 1);
        let tight = BarLabels::lay_out(&["fixed-32 pool", "fixed-32 slow", "target"], 60.0);
        assert_eq!(
            tight.lines,
            [
                (vec!["fixed-32".into(), "pool".into()], 0),
                (vec!["fixed-32".into(), "slow".into()], 0),
                (vec!["target".into()], 0),
            ]
        );
        assert_eq!(tight.rows, 2);
        // A word wider than its slot: every other label moves down a block.
        let long = BarLabels::lay_out(&["a very-long-word", "b", "c"], 40.0);
        assert_eq!(long.lines[0].1, 0);
        assert_eq!(long.lines[1].1, 2);
        assert_eq!(long.lines[2].1, 0);
        assert_eq!(long.rows, 4);
    }

    #[test]
    fn bar_charts_name_every_bar() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bars.svg");
        let bar = |label: &str, value: f64| Bar {
            label: label.into(),
            value,
            low: value * 0.9,
            high: value * 1.1,
        };
        let panel = BarPanel {
            y_label: "calls/s".into(),
            bars: vec![bar("arm a", 100.0), bar("arm b", 750.0)],
        };
        bars(&path, "Capacity", &[panel]).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for text in ["Capacity", "calls/s", "arm a", "arm b"] {
            assert!(svg.contains(text), "{text} missing");
        }
    }
}
