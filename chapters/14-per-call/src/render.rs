//! From the records to the report: the per-arm summaries, `results.json`,
//! `results.md` (tables only; the chapter says what they mean) and the plots.
//! Each table is under a bold caption, never a heading: the chapter's page
//! includes `results.md`, and its headings would land in the page's outline.
//!
//! It is the longest file of the chapter because the report is: every table
//! the page reads (capacity, CPU per unit, p99 and lateness per shape, the
//! quota's throttling, REST beside gRPC and past its knee, system calls), each
//! a short function in the order the report prints them, and then the plots.
//! Nothing here measures; `--render` runs exactly this.

use std::fmt::Write as _;

use harness::{
    Folder,
    plot::{Bar, BarPanel, Panel, Series, bars, panels},
    report::table,
};
use serde::Serialize;

use crate::{
    config::Config,
    h2load::CrossCheck,
    placement::Placement,
    ramp::{Shape, Spread, StepResult},
    records::{H2LOAD, PLACEMENT, RAMPS, RampRecord, STEPS, SYSCALLS, Syscalls},
    summary::{ArmSummary, RampResult, SEED_RATIO, p99_curves, summarize},
};

/// `results.json`: the settings and the per-arm summaries the tables are
/// made of (each step's figures are in `steps.csv` already).
#[derive(Debug, Serialize)]
pub struct Results<'a> {
    pub config: &'a Config,
    pub placement: &'a Placement,
    pub arms: &'a [ArmSummary],
    pub h2load: &'a CrossCheck,
    pub syscalls: &'a Syscalls,
}

pub fn render(config: &Config, folder: &Folder) -> anyhow::Result<String> {
    let placement: Placement = folder.read_json(PLACEMENT)?;
    let records: Vec<RampRecord> = folder.read_json(RAMPS)?;
    // A server that found itself in a quota it was not given here (its
    // pod's, with --target) is judged against that quota.
    let found = records.iter().find_map(|r| r.server.quota_cpus);
    let config = &Config {
        server_cpus: config.server_cpus.or(found),
        ..config.clone()
    };
    let steps: Vec<StepResult> = folder.read_csv(STEPS)?;
    let check: CrossCheck = folder.read_json(H2LOAD)?;
    let syscalls: Syscalls = folder.read_json(SYSCALLS)?;
    let build = folder.meta()?.build;
    let ramps = RampResult::assemble(&records, &steps);
    let summaries: Vec<ArmSummary> = config
        .arms
        .iter()
        .map(|arm| summarize(&arm.to_string(), &ramps))
        .collect();
    folder.write_json(
        "results.json",
        &Results {
            config,
            placement: &placement,
            arms: &summaries,
            h2load: &check,
            syscalls: &syscalls,
        },
    )?;
    let md = markdown(
        config, &build, &placement, &summaries, &check, &syscalls, &ramps,
    );
    folder.write_text("results.md", &md)?;
    plots(config, &summaries, &ramps, folder)?;
    Ok(md)
}

/// How a table's caption names a shape.
fn caption(shape: Shape) -> &'static str {
    match shape {
        Shape::Unary => "Unary",
        Shape::Stream => "Streams",
        Shape::RestH1 => "REST over HTTP/1.1",
        Shape::RestH2 => "REST over HTTP/2",
    }
}

/// p99, goodput and deferred share of every arm at every offered rate of
/// one shape: one row per rate, one column per arm.
fn p99_table(md: &mut String, config: &Config, shape: Shape, ramps: &[RampResult]) {
    let _ = writeln!(
        md,
        "**{}: p99 (ms) / goodput (per s) / deferred+shed (%) against offered load**\n",
        caption(shape)
    );
    let curves = p99_curves(config, shape, ramps);
    let mut rates: Vec<f64> = curves
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.0))
        .collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    let mut header = vec!["offered/s"];
    header.extend(curves.iter().map(|(arm, _)| arm.as_str()));
    table(
        md,
        &header,
        rates.iter().map(|rate| {
            let mut row = vec![rate.to_string()];
            row.extend(curves.iter().map(
                |(_, points)| match points.iter().find(|p| p.0 == *rate) {
                    Some((_, p99, goodput, queued)) => {
                        format!("{:.2} / {:.0} / {:.1}", p99.median, goodput.median, queued)
                    }
                    None => "–".to_string(),
                },
            ));
            row
        }),
    );
}

/// Who filled its share first at a plateau step: the server (its CPU at 0.9
/// of its quota, or of its core), the generator (0.9 of its core), or neither.
fn bound((server, client): &(Spread, Spread), server_share: f64) -> &'static str {
    if server.median >= 0.9 * server_share {
        "server-bound"
    } else if client.median >= 0.9 {
        "generator-bound"
    } else {
        "neither at 0.9"
    }
}

/// The server's CPU and the generator's at a plateau step, as fractions of
/// one core, and who filled its share first.
fn limit(cpu: &(Spread, Spread), server_share: f64) -> String {
    let who = bound(cpu, server_share);
    format!("{:.2} / {:.2} ({who})", cpu.0.median, cpu.1.median)
}

/// The generator's own lateness (p99 of how late it started sends) at each
/// offered rate, to set beside the p99 it measured; with a quota, the share
/// of the server's periods that ended throttled. Runs made before either
/// was kept have no such table.
fn lateness_table(md: &mut String, config: &Config, shape: Shape, ramps: &[RampResult]) {
    let steps: Vec<&StepResult> = ramps
        .iter()
        .filter(|r| r.ramp.shape == shape)
        .flat_map(|r| &r.steps)
        .collect();
    if steps.iter().all(|s| s.late_p99_ms.is_none()) {
        return;
    }
    let quota = config.server_cpus.is_some();
    let _ = writeln!(
        md,
        "**{}: the generator's lateness p99 (ms, median over repeats){}, against offered load**\n",
        caption(shape),
        if quota {
            " / the server's periods throttled (%)"
        } else {
            ""
        }
    );
    let mut rates: Vec<f64> = steps.iter().map(|s| s.offered).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    let arms: Vec<String> = config.arms.iter().map(|a| a.to_string()).collect();
    let header: Vec<&str> = std::iter::once("offered/s")
        .chain(arms.iter().map(String::as_str))
        .collect();
    let rows = rates.iter().map(|&rate| {
        let mut row = vec![rate.to_string()];
        row.extend(arms.iter().map(|arm| {
            let at: Vec<&&StepResult> = steps
                .iter()
                .filter(|s| &s.arm == arm && s.offered == rate)
                .collect();
            if at.is_empty() {
                return "–".to_string();
            }
            let late = Spread::of(at.iter().filter_map(|s| s.late_p99_ms));
            let periods: u64 = at.iter().filter_map(|s| s.periods).sum();
            let throttled: u64 = at.iter().filter_map(|s| s.throttled_periods).sum();
            if quota {
                format!(
                    "{:.2} / {:.0}",
                    late.median,
                    100.0 * throttled as f64 / periods.max(1) as f64
                )
            } else {
                format!("{:.2}", late.median)
            }
        }));
        row
    });
    table(md, &header, rows);
}

/// One line: how many of the run's plateaus (each arm's unary, stream and
/// REST ramps) the server set, and who set the others.
fn plateaus_line(md: &mut String, config: &Config, summaries: &[ArmSummary]) {
    let all: Vec<&str> = summaries
        .iter()
        .flat_map(|s| {
            [&s.unary_cpu_at_plateau, &s.stream_cpu_at_plateau]
                .into_iter()
                .chain(s.rest.iter().map(|r| &r.cpu_at_plateau))
        })
        .map(|cpu| bound(cpu, config.server_share()))
        .collect();
    let count = |who: &str| all.iter().filter(|b| **b == who).count();
    let _ = writeln!(
        md,
        "**Plateaus set by the server: {} of {}** (generator-bound {}, neither at 0.9 {})\n",
        count("server-bound"),
        all.len(),
        count("generator-bound"),
        count("neither at 0.9"),
    );
}

/// At each offered rate that every arm reached, the arm with the lowest p99
/// and the runner-up: does the best arm depend on the load?
fn lowest_p99_table(md: &mut String, config: &Config, shape: Shape, ramps: &[RampResult]) {
    let curves = p99_curves(config, shape, ramps);
    let Some((_, first)) = curves.first() else {
        return;
    };
    let _ = writeln!(
        md,
        "**{}: the arm with the lowest p99 at each load every arm reached (median over repeats; apart: in every repeat)**\n",
        caption(shape)
    );
    let rows = first.iter().filter_map(|&(rate, ..)| {
        let mut at: Vec<(&str, Spread)> = curves
            .iter()
            .map(|(arm, points)| {
                let p = points.iter().find(|p| p.0 == rate)?;
                Some((arm.as_str(), p.1))
            })
            .collect::<Option<_>>()?;
        at.sort_by(|a, b| a.1.median.total_cmp(&b.1.median));
        let (best, next) = (at[0], *at.get(1)?);
        Some(vec![
            rate.to_string(),
            best.0.to_string(),
            format!("{:.2}", best.1.median),
            next.0.to_string(),
            format!("{:.2}", next.1.median),
            if best.1.max < next.1.min { "yes" } else { "no" }.to_string(),
        ])
    });
    table(
        md,
        &["offered/s", "lowest p99", "ms", "next", "ms", "apart"],
        rows,
    );
}

/// The REST shapes beside the gRPC ones, and what the server saw of their
/// connections past the knee.
fn rest_tables(md: &mut String, config: &Config, summaries: &[ArmSummary], ramps: &[RampResult]) {
    let _ = writeln!(
        md,
        "**REST beside gRPC: units per server CPU-second at each plateau step**\n"
    );
    let per_cpu_s = |s: &ArmSummary, shape: Shape| {
        s.rest
            .iter()
            .find(|r| r.shape == shape)
            .map_or("–".to_string(), |r| r.cpu_capacity.to_string())
    };
    table(
        md,
        &[
            "arm",
            "gRPC unary calls",
            "gRPC streamed msg",
            "REST HTTP/1.1 requests",
            "REST HTTP/2 requests",
        ],
        summaries.iter().map(|s| {
            vec![
                s.arm.clone(),
                s.unary_cpu_capacity.to_string(),
                s.stream_cpu_capacity.to_string(),
                per_cpu_s(s, Shape::RestH1),
                per_cpu_s(s, Shape::RestH2),
            ]
        }),
    );
    let _ = writeln!(md, "**REST capacity**\n");
    table(
        md,
        &[
            "arm",
            "shape",
            "plateau (req/s)",
            "knee (offered/s)",
            "server / generator CPU at plateau",
        ],
        summaries.iter().flat_map(|s| {
            s.rest.iter().map(|r| {
                vec![
                    s.arm.clone(),
                    r.shape.to_string(),
                    r.plateau.to_string(),
                    r.knee.to_string(),
                    limit(&r.cpu_at_plateau, config.server_share()),
                ]
            })
        }),
    );
    for shape in [Shape::RestH1, Shape::RestH2] {
        if config.shapes.contains(&shape) {
            p99_table(md, config, shape, ramps);
        }
    }
    let _ = writeln!(
        md,
        "**REST past the knee: first repeat, from the step before the knee (HTTP/1.1 pool: {} connections)**\n",
        config.h1_connections
    );
    table(
        md,
        &[
            "arm",
            "shape",
            "step",
            "offered/s",
            "goodput/s",
            "p99 ms",
            "server CPU",
            "connections opened",
            "open at end",
            "ended by error",
            "listen overflows",
            "failed requests by kind",
        ],
        ramps
            .iter()
            .filter(|r| r.ramp.repeat == 0 && r.ramp.shape.http().is_some())
            .flat_map(|r| {
                let knee = r
                    .knee_offered
                    .and_then(|k| r.steps.iter().position(|s| s.offered == k));
                // Without a knee, the last two steps: the highest load it saw.
                let from = knee
                    .unwrap_or(r.steps.len().saturating_sub(1))
                    .saturating_sub(1);
                let last = r.steps.len().saturating_sub(1);
                r.steps.iter().enumerate().skip(from).map(move |(i, s)| {
                    let place = match knee {
                        Some(k) if i < k => "before the knee",
                        Some(k) if i == k => "the knee",
                        Some(_) => "past the knee",
                        None => "no knee",
                    };
                    let place = if i == last {
                        format!("{place}, last step")
                    } else {
                        place.to_string()
                    };
                    vec![
                        s.arm.clone(),
                        s.shape.to_string(),
                        place,
                        s.offered.to_string(),
                        format!("{:.0}", s.goodput),
                        format!("{:.2}", s.p99_ms),
                        format!("{:.2}", s.server_cpu),
                        s.connections_opened.to_string(),
                        s.connections_open.to_string(),
                        s.connections_failed.to_string(),
                        s.listen_overflows.to_string(),
                        if s.errors.is_empty() {
                            "none".to_string()
                        } else {
                            s.errors.clone()
                        },
                    ]
                })
            }),
    );
}

/// The tables the chapter shows.
pub fn markdown(
    config: &Config,
    build: &str,
    placement: &Placement,
    summaries: &[ArmSummary],
    check: &CrossCheck,
    syscalls: &Syscalls,
    ramps: &[RampResult],
) -> String {
    let mut md = String::new();
    let load = Spread::of(ramps.iter().map(|r| r.ramp.loadavg_1m));
    let throttled: Vec<_> = ramps.iter().filter_map(|r| r.ramp.throttling).collect();
    let quota = (!throttled.is_empty()).then(|| {
        let share = Spread::of(
            throttled
                .iter()
                .map(|t| t.throttled as f64 / t.periods.max(1) as f64 * 100.0),
        );
        (
            "server throttled (share of its periods, per ramp)",
            format!(
                "median {:.0}%, {:.0}% to {:.0}%",
                share.median, share.min, share.max
            ),
        )
    });
    table(
        &mut md,
        &["run", ""],
        [
            ("placement", placement.note.clone()),
            (
                "steps",
                format!(
                    "{} s, {} repeat(s) interleaved",
                    config.step.as_secs_f64(),
                    config.repeats
                ),
            ),
            ("streams", config.streams.to_string()),
            (
                "in flight at most",
                format!(
                    "{} ({:?} when full)",
                    config.max_in_flight, config.when_full
                ),
            ),
            ("deadline", format!("{} s", config.deadline.as_secs_f64())),
            ("build", build.to_string()),
            (
                "1-minute load average at each ramp's start",
                format!(
                    "median {:.2}, {:.2} to {:.2}",
                    load.median, load.min, load.max
                ),
            ),
            (
                "h2load cross-check",
                match check.calls_per_s {
                    Some(r) => format!(
                        "{r:.0} unary calls/s against {} ({})",
                        config.arms[0], check.note
                    ),
                    None => check.note.clone(),
                },
            ),
        ]
        .into_iter()
        .chain(quota)
        .map(|(k, v)| vec![k.to_string(), v]),
    );
    let _ = writeln!(md, "**Capacity**\n");
    let mut rows: Vec<Vec<String>> = summaries
        .iter()
        .map(|s| {
            vec![
                s.arm.clone(),
                s.unary_plateau.to_string(),
                s.unary_knee.to_string(),
                s.stream_plateau.to_string(),
                s.stream_knee.to_string(),
                s.ratio.to_string(),
            ]
        })
        .collect();
    rows.push(
        [
            "the grpc-java report's 1-CPU pod",
            "~2,060-2,140",
            "~2,000-2,200",
            "~15,000-16,000",
            "-",
            &format!("~{SEED_RATIO}x"),
        ]
        .map(String::from)
        .to_vec(),
    );
    table(
        &mut md,
        &[
            "arm",
            "unary plateau (calls/s)",
            "unary knee (offered/s)",
            "stream plateau (msg/s)",
            "stream knee (offered/s)",
            "stream / unary",
        ],
        rows,
    );
    let _ = writeln!(
        md,
        "**Capacity from CPU cost (one core / server CPU per unit at the plateau step)**\n"
    );
    table(
        &mut md,
        &[
            "arm",
            "unary calls per CPU-s",
            "streamed msg per CPU-s",
            "ratio",
            "server / generator CPU at unary plateau",
            "same, stream plateau",
        ],
        summaries.iter().map(|s| {
            vec![
                s.arm.clone(),
                s.unary_cpu_capacity.to_string(),
                s.stream_cpu_capacity.to_string(),
                s.cpu_ratio.to_string(),
                limit(&s.unary_cpu_at_plateau, config.server_share()),
                limit(&s.stream_cpu_at_plateau, config.server_share()),
            ]
        }),
    );
    plateaus_line(&mut md, config, summaries);
    for shape in [Shape::Unary, Shape::Stream] {
        p99_table(&mut md, config, shape, ramps);
        if config.arms.len() > 1 {
            lowest_p99_table(&mut md, config, shape, ramps);
        }
        lateness_table(&mut md, config, shape, ramps);
    }
    let _ = writeln!(
        md,
        "**Server cost per unit (a unary call, one streamed message, or one REST request)**\n"
    );
    table(
        &mut md,
        &[
            "arm",
            "shape",
            "load",
            "CPU µs",
            "worker busy µs",
            "context switches",
            "worker parks",
            "tasks we spawned",
        ],
        summaries.iter().flat_map(|s| {
            let grpc = [
                (Shape::Unary, "lowest step", s.unary_low),
                (Shape::Unary, "plateau", s.unary_high),
                (Shape::Stream, "lowest step", s.stream_low),
                (Shape::Stream, "plateau", s.stream_high),
            ];
            let rest = s.rest.iter().flat_map(|r| {
                [
                    (r.shape, "lowest step", r.low),
                    (r.shape, "plateau", r.high),
                ]
            });
            // Only the shapes this run ramped.
            grpc.into_iter()
                .filter(|(shape, _, _)| config.shapes.contains(shape))
                .chain(rest)
                .map(|(shape, load, p)| {
                    vec![
                        s.arm.clone(),
                        shape.to_string(),
                        load.to_string(),
                        format!("{:.2}", p.cpu_us),
                        format!("{:.2}", p.busy_us),
                        format!("{:.3}", p.context_switches),
                        format!("{:.3}", p.parks),
                        format!("{:.2}", p.spawned),
                    ]
                })
                .collect::<Vec<_>>()
        }),
    );
    let _ = writeln!(md, "**System calls per unit (server process)**\n");
    if syscalls.counts.is_empty() {
        table(&mut md, &["not counted"], [vec![syscalls.note.clone()]]);
    } else {
        table(
            &mut md,
            &[
                "arm",
                "shape",
                "offered/s",
                "syscalls per unit",
                "most frequent (per unit)",
            ],
            syscalls.counts.iter().map(|c| {
                let top: Vec<String> = c.top.iter().map(|(n, v)| format!("{n} {v:.2}")).collect();
                vec![
                    c.arm.clone(),
                    c.shape.to_string(),
                    c.rate.to_string(),
                    format!("{:.2}", c.per_unit),
                    top.join(", "),
                ]
            }),
        );
    }
    if summaries.iter().any(|s| !s.rest.is_empty()) {
        rest_tables(&mut md, config, summaries, ramps);
    }
    md.truncate(md.trim_end().len());
    md.push('\n');
    md
}

/// Which side filled first at each plateau: a dot per ramp at the
/// generator's CPU (its core) and the server's (of its share: its core, or
/// its quota in a pod), one series per shape; two lines mark 0.9
/// of each, where the report calls a side full.
fn filled_first(config: &Config, ramps: &[RampResult], folder: &Folder) -> anyhow::Result<()> {
    let share = config.server_share();
    let mut series: Vec<Series> = config
        .shapes
        .iter()
        .map(|&shape| {
            let points = ramps
                .iter()
                .filter(|r| r.ramp.shape == shape)
                .filter_map(|r| r.top())
                .map(|s| (s.client_cpu, s.server_cpu / share))
                .collect();
            Series::dots(caption(shape), points)
        })
        .collect();
    series.push(Series::line(
        "server full (0.9 of its share)",
        vec![(0.0, 0.9), (1.1, 0.9)],
    ));
    // Drawn up to 2, which leaves the legend (upper left) room above the dots.
    series.push(Series::line(
        "generator full (0.9 of its core)",
        vec![(0.9, 0.0), (0.9, 2.0)],
    ));
    panels(
        &folder.join("filled-first.svg"),
        "At each plateau, which side filled first (a dot per ramp)",
        "generator CPU (fraction of its core)",
        &[Panel {
            y_label: "server CPU (fraction of its share)".into(),
            series,
        }],
    )
}

/// p99 against offered load, every arm on one chart per shape (p99 spans
/// three orders of magnitude, so the chart shows its logarithm), and the
/// plateaus as bars with the spread over repeats.
fn plots(
    config: &Config,
    summaries: &[ArmSummary],
    ramps: &[RampResult],
    folder: &Folder,
) -> anyhow::Result<()> {
    let log_panel = |shape: Shape, label: &str| Panel {
        y_label: label.into(),
        series: p99_curves(config, shape, ramps)
            .into_iter()
            .map(|(arm, points)| {
                Series::line(
                    arm,
                    points
                        .iter()
                        .map(|(rate, p99, _, _)| {
                            (rate / 1000.0, (p99.median.max(0.01)).log10() + 2.0)
                        })
                        .collect(),
                )
            })
            .collect(),
    };
    panels(
        &folder.join("p99-unary.svg"),
        "Unary: p99 against offered load (median of repeats)",
        "offered unary calls per second (thousands)",
        &[log_panel(
            Shape::Unary,
            "p99, log10(ms) + 2 (2 = 1 ms, 5 = 1 s)",
        )],
    )?;
    panels(
        &folder.join("p99-stream.svg"),
        "Streams: p99 against offered load (median of repeats)",
        "offered streamed messages per second (thousands)",
        &[log_panel(
            Shape::Stream,
            "p99, log10(ms) + 2 (2 = 1 ms, 5 = 1 s)",
        )],
    )?;
    // The REST shapes on one chart, a panel each, when the run ramped them.
    let rest: Vec<Panel> = [Shape::RestH1, Shape::RestH2]
        .into_iter()
        .filter(|shape| config.shapes.contains(shape))
        .map(|shape| {
            let label = match shape {
                Shape::RestH1 => "HTTP/1.1 p99, log10(ms) + 2",
                _ => "HTTP/2 p99, log10(ms) + 2",
            };
            log_panel(shape, label)
        })
        .collect();
    if !rest.is_empty() {
        panels(
            &folder.join("p99-rest.svg"),
            "REST: p99 against offered load (median of repeats; 2 = 1 ms, 5 = 1 s)",
            "offered REST requests per second (thousands)",
            &rest,
        )?;
    }
    filled_first(config, ramps, folder)?;
    let bar = |label: &str, s: &Spread| Bar {
        label: label.into(),
        value: s.median,
        low: s.min,
        high: s.max,
    };
    bars(
        &folder.join("capacity.svg"),
        "Plateau goodput per arm (bar: median of repeats; whisker: min to max)",
        &[
            BarPanel {
                y_label: "gRPC unary calls/s".into(),
                bars: summaries
                    .iter()
                    .map(|s| bar(&s.arm, &s.unary_plateau))
                    .collect(),
            },
            BarPanel {
                y_label: "streamed messages/s".into(),
                bars: summaries
                    .iter()
                    .map(|s| bar(&s.arm, &s.stream_plateau))
                    .collect(),
            },
        ]
        .into_iter()
        .chain(
            [Shape::RestH1, Shape::RestH2]
                .into_iter()
                .filter_map(|shape| {
                    let bars: Vec<Bar> = summaries
                        .iter()
                        .filter_map(|s| {
                            let r = s.rest.iter().find(|r| r.shape == shape)?;
                            Some(bar(&s.arm, &r.plateau))
                        })
                        .collect();
                    (!bars.is_empty()).then(|| BarPanel {
                        y_label: match shape {
                            Shape::RestH1 => "REST HTTP/1.1 requests/s".into(),
                            _ => "REST HTTP/2 requests/s".into(),
                        },
                        bars,
                    })
                }),
        )
        .collect::<Vec<_>>(),
    )
}
