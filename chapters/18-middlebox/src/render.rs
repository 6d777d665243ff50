//! The report: the grid of setups against middleboxes in words, the
//! details behind every cell, the ping part's table and its timeline.

use std::fmt::Write;

use harness::Folder;
use plotters::prelude::*;

use crate::run::{
    Behaviour, Cell, Config, PINGERS, Part, PingCall, PingConnection, PingSeen, Setup,
};

pub fn render(config: &Config, folder: &Folder) -> anyhow::Result<String> {
    let mut report = String::new();
    let mut shown = String::new();
    if config.parts.contains(&Part::Idle) {
        let cells: Vec<Cell> = folder.read_csv("cells.csv")?;
        let grid = grid(config, &cells);
        writeln!(
            report,
            "**The first call after {} of quiet** (T = {}, deadline {}; every cell: `cells.md`)\n\n{grid}",
            program::duration::Show(crate::run::idle_spell(config)),
            program::duration::Show(config.idle),
            program::duration::Show(config.deadline),
        )?;
        folder.write_text("cells.md", &details(&cells))?;
        shown.push_str(&grid);
    }
    if config.parts.contains(&Part::Pings) {
        let calls: Vec<PingCall> = folder.read_csv("ping_calls.csv")?;
        let connections: Vec<PingConnection> = folder.read_csv("ping_connections.csv")?;
        let table = pings_table(config, &calls, &connections);
        writeln!(
            report,
            "**A8: pings against a server that allows one every {}**\n\n{table}",
            program::duration::Show(config.min_time)
        )?;
        shown.push_str(&format!("\n{table}"));
        let pings: Vec<PingSeen> = folder.read_csv("pings.csv")?;
        timeline(&calls, &connections, &pings, &folder.join("pings.svg"))?;
    }
    folder.write_text("results.md", &report)?;
    Ok(shown)
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied()
}

/// A cell in words: whether the first call after the quiet worked, and if
/// not, how it failed and how long the channel took to work again.
fn verdict(config: &Config, cells: &[&Cell]) -> String {
    if cells.is_empty() {
        return "(no HTTP/2)".into();
    }
    let ms = median(cells.iter().map(|c| c.ms).collect()).unwrap_or(0.0);
    let failed: Vec<&&Cell> = cells
        .iter()
        .filter(|c| c.outcome != "OK" && c.outcome != "200")
        .collect();
    if failed.is_empty() {
        // More than one connection: the old one was found dead and replaced
        // before the call, which paid for the new one's handshake.
        return if cells.iter().all(|c| c.connections > 1) {
            format!("works, new connection ({ms:.0} ms)")
        } else {
            format!("works ({ms:.0} ms)")
        };
    }
    let mut outcomes: Vec<&str> = failed.iter().map(|c| c.outcome.as_str()).collect();
    outcomes.dedup();
    let how = if ms >= config.deadline.as_secs_f64() * 1e3 * 0.9 {
        "hangs"
    } else {
        "fails fast"
    };
    let of = if failed.len() < cells.len() {
        format!(" ({} of {})", failed.len(), cells.len())
    } else {
        String::new()
    };
    let recovered: Vec<f64> = failed.iter().filter_map(|c| c.recovered_s).collect();
    let after = if recovered.len() < failed.len() {
        format!(
            "still broken after {}",
            program::duration::Show(config.recover_within)
        )
    } else {
        format!("works again in {:.1} s", median(recovered).unwrap_or(0.0))
    };
    format!("{how}: {}{of}, {after}", outcomes.join(" / "))
}

fn grid(config: &Config, cells: &[Cell]) -> String {
    let mut table = String::from("| setup |");
    for b in Behaviour::ALL {
        write!(table, " {} |", b.label()).unwrap();
    }
    table.push_str("\n|---|");
    table.push_str(&"---|".repeat(Behaviour::ALL.len()));
    table.push('\n');
    for setup in Setup::ALL {
        write!(table, "| {} |", setup.label()).unwrap();
        for b in Behaviour::ALL {
            let these: Vec<&Cell> = cells
                .iter()
                .filter(|c| c.setup == setup.label() && c.middlebox == b.label())
                .collect();
            write!(table, " {} |", verdict(config, &these)).unwrap();
        }
        table.push('\n');
    }
    table
}

fn details(cells: &[Cell]) -> String {
    let mut table = String::from(
        "| setup | middlebox | repeat | first call | ms | works again, s | connections | forgotten | RSTs | PINGs passed | PINGs eaten |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for c in cells {
        writeln!(
            table,
            "| {} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {} |",
            c.setup,
            c.middlebox,
            c.repeat + 1,
            c.outcome,
            c.ms,
            c.recovered_s.map_or("no".into(), |s| format!("{s:.2}")),
            c.connections,
            c.expired,
            c.resets,
            c.pings_passed,
            c.pings_eaten
        )
        .unwrap();
    }
    table
}

fn pings_table(config: &Config, calls: &[PingCall], connections: &[PingConnection]) -> String {
    let mut table = String::from(
        "| client | pings every | calls | failed | connections | GOAWAYs | first ping to GOAWAY, s | ping gap on the first / last connection, ms |\n|---|---|---|---|---|---|---|---|\n",
    );
    for pinger in PINGERS {
        let calls: Vec<&PingCall> = calls.iter().filter(|c| c.client == pinger.name).collect();
        let conns: Vec<&PingConnection> = connections
            .iter()
            .filter(|c| c.client == pinger.name)
            .collect();
        let failed: Vec<&str> = calls
            .iter()
            .filter(|c| c.outcome != "OK")
            .map(|c| c.outcome.as_str())
            .collect();
        let goaways: Vec<f64> = conns
            .iter()
            .filter_map(|c| Some(c.goaway_s? - c.first_ping_s?))
            .collect();
        let gap = |c: Option<&&PingConnection>| {
            c.and_then(|c| c.median_gap_ms)
                .map_or("-".into(), |g| format!("{g:.0}"))
        };
        let every = pinger
            .interval_of_min_time
            .map_or(config.ping_interval, |n| config.min_time.mul_f64(n));
        writeln!(
            table,
            "| {} | {} | {} | {} | {} | {} | {} | {} / {} |",
            pinger.name,
            program::duration::Show(every),
            calls.len(),
            if failed.is_empty() {
                "0".into()
            } else {
                format!("{} ({})", failed.len(), failed.join(", "))
            },
            conns.len(),
            goaways.len(),
            median(goaways).map_or("-".into(), |s| format!("{s:.2}")),
            gap(conns.first()),
            gap(conns.last()),
        )
        .unwrap();
    }
    table
}

/// One panel per client: each connection's pings on its own line (numbered
/// from 1), its GOAWAY as a cross, the calls along the bottom line. Events
/// are few, so each gets a marker a reader can see.
fn timeline(
    calls: &[PingCall],
    connections: &[PingConnection],
    pings: &[PingSeen],
    path: &std::path::Path,
) -> anyhow::Result<()> {
    let x_max = pings
        .iter()
        .map(|p| p.t_s)
        .chain(calls.iter().map(|c| c.t_s))
        .fold(1.0, f64::max)
        // Room on the right for the legend, clear of the last events.
        * 1.3;
    let mut svg = String::new();
    draw(&mut svg, x_max, calls, connections, pings).map_err(|e| anyhow::anyhow!("{e}"))?;
    harness::records::write(path, svg.as_bytes())
}

fn draw(
    svg: &mut String,
    x_max: f64,
    calls: &[PingCall],
    connections: &[PingConnection],
    pings: &[PingSeen],
) -> Result<(), Box<dyn std::error::Error>> {
    let (blue, red, green) = (
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
    );
    let root =
        SVGBackend::with_string(svg, (720, 60 + 220 * PINGERS.len() as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        "Pings, GOAWAYs and calls, per connection",
        ("sans-serif", 20),
    )?;
    for (area, pinger) in root.split_evenly((PINGERS.len(), 1)).iter().zip(PINGERS) {
        let mine = |client: &str| client == pinger.name;
        let lines = connections
            .iter()
            .filter(|c| mine(&c.client))
            .map(|c| c.connection + 1)
            .max()
            .unwrap_or(1);
        let mut chart = ChartBuilder::on(area)
            .caption(pinger.name, ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..x_max, -0.5..lines as f64 + 0.5)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("connection")
            .y_labels(lines as usize + 2)
            .y_label_formatter(&|y| {
                if *y >= 0.5 && y.fract() == 0.0 {
                    format!("{y:.0}")
                } else if *y == 0.0 {
                    "calls".into()
                } else {
                    String::new()
                }
            })
            .draw()?;
        chart
            .draw_series(
                pings
                    .iter()
                    .filter(|p| mine(&p.client))
                    .map(|p| Circle::new((p.t_s, p.connection as f64 + 1.0), 3, blue.filled())),
            )?
            .label("PING")
            .legend(move |(x, y)| Circle::new((x, y), 3, blue.filled()));
        chart
            .draw_series(
                connections
                    .iter()
                    .filter(|c| mine(&c.client))
                    .filter_map(|c| {
                        Some(Cross::new(
                            (c.goaway_s?, c.connection as f64 + 1.0),
                            7,
                            red.stroke_width(2),
                        ))
                    }),
            )?
            .label("GOAWAY")
            .legend(move |(x, y)| Cross::new((x, y), 5, red.stroke_width(2)));
        chart
            .draw_series(
                calls
                    .iter()
                    .filter(|c| mine(&c.client))
                    .map(|c| TriangleMarker::new((c.t_s, 0.0), 6, green.filled())),
            )?
            .label("call")
            .legend(move |(x, y)| TriangleMarker::new((x, y), 5, green.filled()));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE)
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
