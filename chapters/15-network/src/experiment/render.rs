//! The report: a Markdown table per part (`summary.md`) and the plots,
//! drawn from the records alone, so `--render DIR` draws them again. Each
//! table is under a bold caption, never a heading: the chapter's page
//! includes `summary.md`, and its headings would land in the page's outline.

use std::fmt::Write;

use harness::{
    Folder,
    plot::{Panel, Series, panels},
};
use perf::stats::{Summary, median};

use super::{
    Config, Part,
    dead_peer::{Outcome, Sent},
    handshake::{self, Call, Handshakes},
    hol::{self, Small},
    hops::Hop,
    window::{self, Transfer},
};

pub fn render(config: &Config, folder: &Folder) -> anyhow::Result<String> {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}\n",
        if config.lab {
            "Where: the lab. Servers in wk15-server, clients and delay proxies in \
             wk15-client, across a veth pair; the rate limit is tbf's (kernel)."
        } else {
            "Where: one process on loopback, every path through a delay proxy; \
             the rate limit is the proxy's (one wire per direction, served in turn)."
        }
    );
    for part in &config.parts {
        match part {
            Part::Handshake => handshakes(config, folder, &mut out)?,
            Part::Window => windows(config, folder, &mut out)?,
            Part::Hol => hol(config, folder, &mut out)?,
            Part::Hops => hops(config, folder, &mut out)?,
            Part::DeadPeer => dead_peer(config, folder, &mut out)?,
        }
    }
    folder.write_text("summary.md", &out)?;
    Ok(out)
}

fn header(out: &mut String, columns: &[String]) {
    let _ = writeln!(out, "| {} |", columns.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(columns.len()));
}

fn rtt_columns(config: &Config, first: &str) -> Vec<String> {
    std::iter::once(first.to_string())
        .chain(
            config
                .rtts
                .iter()
                .map(|r| format!("RTT {} ms", super::ms(*r))),
        )
        .collect()
}

fn handshakes(config: &Config, folder: &Folder, out: &mut String) -> anyhow::Result<()> {
    let calls: Vec<Call> = folder.read_csv("handshake.csv")?;
    let tls: Vec<Handshakes> = folder.read_csv("handshake-tls.csv")?;
    let p50 = |arm: &str, rtt: f64| {
        let samples: Vec<u64> = calls
            .iter()
            .filter(|c| c.arm == arm && c.rtt_ms == rtt)
            .map(|c| c.micros)
            .collect();
        Summary::of(&samples).map(|s| s.p50 as f64 / 1e3)
    };
    let rtts: Vec<f64> = config.rtts.iter().map(|r| super::ms(*r)).collect();
    let (low, high) = (
        rtts.iter().copied().fold(f64::MAX, f64::min),
        rtts.iter().copied().fold(0.0, f64::max),
    );
    let _ = writeln!(
        out,
        "**A call, reused or fresh: p50 in ms, and in round trips**\n"
    );
    let mut columns = rtt_columns(config, "arm");
    columns.push(format!("round trips ({high} vs {low} ms)"));
    header(out, &columns);
    for (arm, _) in handshake::ARMS {
        let cells: Vec<String> = rtts
            .iter()
            .map(|&r| p50(arm, r).map_or("-".into(), |v| format!("{v:.2}")))
            .collect();
        let trips = match (p50(arm, low), p50(arm, high)) {
            (Some(a), Some(b)) if high > low => format!("{:.2}", (b - a) / (high - low)),
            _ => "-".into(),
        };
        let _ = writeln!(out, "| {arm} | {} | {trips} |", cells.join(" | "));
    }
    let _ = writeln!(
        out,
        "\nTLS handshakes (warm-up included), per RTT: {}\n",
        tls.iter()
            .filter(|h| h.rtt_ms == high)
            .map(|h| format!("{}: {} full, {} resumed", h.arm, h.full, h.resumed))
            .collect::<Vec<_>>()
            .join("; ")
    );
    // What pure waiting would cost: k round trips and nothing else.
    let trips = |k: f64| {
        Series::line(
            format!("{k} round trips"),
            rtts.iter().map(|&r| (r, k * r)).collect(),
        )
    };
    let series = |grpc: bool| {
        handshake::ARMS
            .iter()
            .filter(|(arm, _)| arm.starts_with("gRPC") == grpc)
            .map(|(arm, _)| {
                Series::line(
                    *arm,
                    rtts.iter()
                        .filter_map(|&r| Some((r, p50(arm, r)?)))
                        .collect(),
                )
            })
            .chain([trips(1.0), trips(3.0)])
            .collect()
    };
    panels(
        &folder.join("handshake.svg"),
        "A call's p50 against the round-trip time",
        "round-trip time added by the proxy (ms)",
        &[
            Panel {
                y_label: "gRPC p50 (ms)".into(),
                series: series(true),
            },
            Panel {
                y_label: "REST p50 (ms)".into(),
                series: series(false),
            },
        ],
    )
}

fn windows(config: &Config, folder: &Folder, out: &mut String) -> anyhow::Result<()> {
    let transfers: Vec<Transfer> = folder.read_csv("window.csv")?;
    let rate = config.rate.map(|r| r as f64 * 8.0 / 1e6);
    let speed = |window: &str, rtt: f64| {
        median(
            &transfers
                .iter()
                .filter(|t| t.window == window && t.rtt_ms == rtt)
                .map(|t| t.mbit_per_s)
                .collect::<Vec<_>>(),
        )
    };
    let rtts: Vec<f64> = config.rtts.iter().map(|r| super::ms(*r)).collect();
    let _ = writeln!(
        out,
        "**A server stream's throughput (Mbit/s, median of {} transfers of {} bytes; link {})**\n",
        config.repeats,
        config.stream_bytes,
        rate.map_or("unlimited".into(), |r| format!("{r} Mbit/s"))
    );
    header(out, &rtt_columns(config, "client window"));
    for (window, _) in window::WINDOWS {
        let cells: Vec<String> = rtts
            .iter()
            .map(|&r| speed(window, r).map_or("-".into(), |v| format!("{v:.1}")))
            .collect();
        let _ = writeln!(out, "| {window} | {} |", cells.join(" | "));
    }
    let _ = writeln!(out);
    let mut series: Vec<Series> = window::WINDOWS
        .iter()
        .map(|(window, _)| {
            Series::line(
                *window,
                rtts.iter()
                    .filter_map(|&r| Some((r, speed(window, r)?)))
                    .collect(),
            )
        })
        .collect();
    if let Some(rate) = rate {
        series.push(Series::line(
            "the link's rate",
            rtts.iter().map(|&r| (r, rate)).collect(),
        ));
        // One 64 KiB window per round trip, or the link, whichever is less.
        let bound = |r: f64| {
            if r > 0.0 {
                (65_535.0 * 8.0 / (r / 1e3) / 1e6).min(rate)
            } else {
                rate
            }
        };
        // A curve (1 / RTT), so drawn at every millisecond, not only where
        // the run measured.
        let longest = rtts.iter().copied().fold(0.0, f64::max) as u32;
        series.push(Series::line(
            "bound: 64 KiB per round trip",
            (0..=longest).map(|r| (r as f64, bound(r as f64))).collect(),
        ));
    }
    panels(
        &folder.join("window.svg"),
        "A server stream's throughput against the round-trip time",
        "round-trip time added by the proxy (ms)",
        &[Panel {
            y_label: "throughput (Mbit/s)".into(),
            series,
        }],
    )
}

fn hol(config: &Config, folder: &Folder, out: &mut String) -> anyhow::Result<()> {
    let smalls: Vec<Small> = folder.read_csv("hol.csv")?;
    let _ = writeln!(
        out,
        "**Small calls beside a {}-byte transfer (RTT {} ms, link {} Mbit/s), ms from when each was due**\n",
        config.hol_bytes,
        super::ms(config.hol_rtt),
        config
            .hol_rate
            .map_or("unlimited".into(), |r| format!("{}", r as f64 * 8.0 / 1e6))
    );
    header(
        out,
        &[
            "small calls".into(),
            "n".into(),
            "p50".into(),
            "p99".into(),
            "max".into(),
        ],
    );
    for (arm, _) in hol::ARMS {
        let samples: Vec<u64> = smalls
            .iter()
            .filter(|s| s.arm == arm)
            .map(|s| s.micros)
            .collect();
        if let Some(s) = Summary::of(&samples) {
            let ms = |v: u64| format!("{:.1}", v as f64 / 1e3);
            let _ = writeln!(
                out,
                "| {arm} | {} | {} | {} | {} |",
                s.n,
                ms(s.p50),
                ms(s.p99),
                ms(s.max)
            );
        }
    }
    let _ = writeln!(out);
    Ok(())
}

fn hops(config: &Config, folder: &Folder, out: &mut String) -> anyhow::Result<()> {
    let hops: Vec<Hop> = folder.read_csv("hops.csv")?;
    let _ = writeln!(
        out,
        "**Deadlines across two hops (client deadline {} ms, frontend margin {} ms), medians in ms**\n",
        super::ms(config.deadline),
        super::ms(config.margin)
    );
    header(
        out,
        &[
            "RTT per hop".into(),
            "budget the backend got".into(),
            "really left on arrival".into(),
            "backend's deadline ends after the client's by".into(),
        ],
    );
    for rtt in config.rtts.iter().map(|r| super::ms(*r)) {
        let of = |f: fn(&Hop) -> f64| {
            median(
                &hops
                    .iter()
                    .filter(|h| h.rtt_ms == rtt)
                    .map(f)
                    .collect::<Vec<_>>(),
            )
        };
        if let (Some(budget), Some(left), Some(over)) = (
            of(|h| h.backend_budget_ms),
            of(|h| h.left_at_backend_ms),
            of(|h| h.overshoot_ms),
        ) {
            let _ = writeln!(out, "| {rtt} ms | {budget:.1} | {left:.1} | {over:.1} |");
        }
    }
    let _ = writeln!(out);
    Ok(())
}

fn dead_peer(config: &Config, folder: &Folder, out: &mut String) -> anyhow::Result<()> {
    let outcomes: Vec<Outcome> = folder.read_csv("dead-peer.csv")?;
    let sent: Vec<Sent> = folder.read_csv("dead-peer-sent.csv")?;
    let _ = writeln!(
        out,
        "**A call to a server behind a blackhole (RTT {} ms; keepalive every {} s, {} s to answer)**\n",
        super::ms(config.dead_rtt),
        config.keepalive_interval.as_secs_f64(),
        config.keepalive_timeout.as_secs_f64()
    );
    header(
        out,
        &[
            "client".into(),
            "the call failed after".into(),
            "chunks sent into the hole (client, server)".into(),
            "what it said".into(),
        ],
    );
    let mut series = Vec::new();
    for outcome in &outcomes {
        let of = |towards_server: bool| {
            sent.iter()
                .filter(|s| s.arm == outcome.arm && s.towards_server == towards_server)
                .count()
        };
        let after = outcome
            .failed_after_s
            .map_or(format!("not within {:.0} s", outcome.waited_s), |s| {
                format!("{s:.2} s")
            });
        let _ = writeln!(
            out,
            "| {} | {after} | {}, {} | {} |",
            outcome.arm,
            of(true),
            of(false),
            outcome.error
        );
        // A step for each chunk the client sent into the hole, until the
        // call failed or the run stopped waiting.
        let end = outcome.failed_after_s.unwrap_or(outcome.waited_s);
        let mut total = 0.0;
        let mut steps = vec![(0.0, 0.0)];
        for chunk in sent
            .iter()
            .filter(|s| s.arm == outcome.arm && s.towards_server)
        {
            steps.push((chunk.t_s, total));
            total += chunk.bytes as f64;
            steps.push((chunk.t_s, total));
        }
        steps.push((end, total));
        series.push(Series::line(
            format!("{}: bytes the client sent", outcome.arm),
            steps,
        ));
        if let Some(t) = outcome.failed_after_s {
            series.push(Series::line(
                format!("{}: the call fails", outcome.arm),
                vec![(t, 0.0), (t, total)],
            ));
        }
    }
    let _ = writeln!(out);
    panels(
        &folder.join("dead-peer.svg"),
        "What the client sent into the blackhole, and when the call failed",
        "seconds since the server went dark",
        &[Panel {
            y_label: "bytes sent into the hole (total)".into(),
            series,
        }],
    )
}
