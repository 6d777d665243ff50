//! SVG charts for the experiment chapters (11-14): time series and curves,
//! stacked in panels that share the x axis. plotters' SVG backend writes text
//! as `<text>` elements, so no font is needed here; the browser draws them.

use std::path::Path;

use anyhow::anyhow;
use plotters::prelude::*;

/// A named set of points; drawn as a line, or as dots when points are many
/// separate events (one per message) rather than a curve.
#[derive(Debug, Clone)]
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
#[derive(Debug, Clone)]
pub struct Panel {
    pub y_label: String,
    pub series: Vec<Series>,
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Draws `panels` one above the other, 720 pixels wide, all on the same x
/// range; each panel's y axis starts at 0.
pub fn panels(path: &Path, title: &str, x_label: &str, panels: &[Panel]) -> anyhow::Result<()> {
    draw(path, title, x_label, panels).map_err(|e| anyhow!("cannot draw {}: {e}", path.display()))
}

fn draw(
    path: &Path,
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
    let height = 60 + 260 * panels.len() as u32;
    let root = SVGBackend::new(path, (720, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 20))?;
    for (area, panel) in root.split_evenly((panels.len(), 1)).iter().zip(panels) {
        let y_max = panel
            .series
            .iter()
            .flat_map(|s| &s.points)
            .map(|p| p.1)
            .fold(0.0, f64::max);
        let y_max = if y_max > 0.0 { y_max * 1.08 } else { 1.0 };
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(x_min..x_max, 0.0..y_max)?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(&panel.y_label)
            .draw()?;
        for (i, series) in panel.series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let points = series.points.iter().copied();
            let drawn = if series.dots {
                chart.draw_series(points.map(|p| Circle::new(p, 1, color.filled())))?
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
        panels(&path, "Title", "time (s)", &[panel("top"), panel("bottom")]).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"));
        for text in ["Title", "time (s)", "top a", "top b", "bottom a", "depth"] {
            assert!(svg.contains(text), "{text} missing");
        }
    }
}
