//! `--live`: watch a run while it goes on. A small page, served by the
//! experiment itself, draws the part of the run being measured now (an arm,
//! an attempt, a cell) from the records that part is writing: the same typed
//! rows the report reads at the end, read while they grow
//! ([`records::Growing`](crate::records::Growing)), drawn by the same
//! [`plot`](crate::plot) code as the report's SVGs. Nothing is fetched from
//! the internet; the page works offline.
//!
//! The page asks for a fresh [`Frame`] twice a second. Asking, rather than
//! holding a stream open, keeps the server stateless per viewer, and lets a
//! headless browser settle long enough to take a screenshot (CI does), which
//! it cannot do while a response is still arriving.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Instant,
};

use anyhow::Context;
use axum::{
    Json, Router,
    extract::State,
    http::StatusCode,
    response::{Html, IntoResponse, Response},
    routing::get,
};
use serde::{Deserialize, Serialize};

use crate::plot::{Panel, panels_svg};

/// Where `--live` serves when given no address.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8700";

/// The flag of an experiment with a live view (flatten it into its `Args`).
#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct LiveArgs {
    /// Serve a page that plots the run while it goes on, from the records it
    /// writes (address optional: 127.0.0.1:8700; port 0 takes any free port)
    #[arg(
        long,
        value_name = "ADDR",
        num_args = 0..=1,
        default_missing_value = DEFAULT_ADDR,
        conflicts_with = "render"
    )]
    pub live: Option<SocketAddr>,
}

/// What a view draws from the records in one folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub title: String,
    pub x_label: String,
    pub panels: Vec<Panel>,
}

impl Figure {
    /// Points drawn, over every series: what grows while the run goes on.
    pub fn points(&self) -> usize {
        self.panels
            .iter()
            .flat_map(|p| &p.series)
            .map(|s| s.points.len())
            .sum()
    }
}

/// Reads the records a part of the run has written so far and makes a figure
/// of them. Called for every frame, so it reads with
/// [`read_csv_so_far`](crate::records::read_csv_so_far).
pub type View = fn(&Path) -> anyhow::Result<Figure>;

/// What the page gets each time it asks (`GET /frame`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Frame {
    /// The part of the run being drawn (`reserve`, `[3/30] b1 fixed-8`, ...).
    pub label: String,
    /// Seconds since the live view started.
    pub elapsed_s: f64,
    /// The run has ended: this is its last frame.
    pub done: bool,
    /// `None` until the run starts its first part.
    pub figure: Option<Figure>,
    /// The figure drawn, as the report would draw it.
    pub svg: String,
}

/// The live view of a running experiment.
pub struct Live {
    shared: Arc<Shared>,
    addr: SocketAddr,
}

struct Shared {
    view: View,
    started: Instant,
    now: Mutex<Now>,
}

#[derive(Clone, Default)]
struct Now {
    label: String,
    dir: Option<PathBuf>,
    done: bool,
}

const PAGE: &str = include_str!("live.html");

/// With `--live`, serves the page and says where to open it.
pub async fn start(args: &LiveArgs, view: View) -> anyhow::Result<Option<Live>> {
    let Some(addr) = args.live else {
        return Ok(None);
    };
    let live = serve(addr, view).await?;
    println!(
        "live view: {} (open it in a browser; it follows the run)",
        live.url()
    );
    Ok(Some(live))
}

/// How long the page stays up after the run, to fetch its last frame.
pub const LINGER: std::time::Duration = std::time::Duration::from_secs(2);

/// Marks the run ended and gives the page [`LINGER`] to draw its last frame.
pub async fn finish(live: Option<Live>) {
    if let Some(live) = live {
        live.done();
        tokio::time::sleep(LINGER).await;
    }
}

/// Starts serving the page on `addr`; the run then says which folder it is
/// writing into with [`Live::watch`].
pub async fn serve(addr: SocketAddr, view: View) -> anyhow::Result<Live> {
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| {
        format!("cannot serve the live view on {addr} (in use? try --live 127.0.0.1:0)")
    })?;
    let addr = listener.local_addr()?;
    let shared = Arc::new(Shared {
        view,
        started: Instant::now(),
        now: Mutex::default(),
    });
    let app = Router::new()
        .route("/", get(|| async { Html(PAGE) }))
        .route("/frame", get(frame))
        .with_state(shared.clone());
    // The page lives as long as the experiment: the task ends with the process.
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(Live { shared, addr })
}

impl Live {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where to open the page.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// The part of the run now being measured, and the folder its records
    /// are growing in.
    pub fn watch(&self, label: impl Into<String>, dir: &Path) {
        *self.shared.now.lock().expect("live lock") = Now {
            label: label.into(),
            dir: Some(dir.to_path_buf()),
            done: false,
        };
    }

    /// The run has ended; the page keeps its last frame and stops asking.
    pub fn done(&self) {
        self.shared.now.lock().expect("live lock").done = true;
    }
}

async fn frame(State(shared): State<Arc<Shared>>) -> Response {
    let now = shared.now.lock().expect("live lock").clone();
    let elapsed_s = shared.started.elapsed().as_secs_f64();
    let Some(dir) = now.dir else {
        return Json(Frame {
            label: "waiting for the run's first part".into(),
            elapsed_s,
            done: now.done,
            figure: None,
            svg: String::new(),
        })
        .into_response();
    };
    // Reading CSV files and drawing SVG is blocking work: off the runtime's
    // threads, which the measurement is using.
    let view = shared.view;
    let drawn = tokio::task::spawn_blocking(move || {
        let figure = view(&dir)?;
        let svg = panels_svg(&figure.title, &figure.x_label, &figure.panels)?;
        anyhow::Ok((figure, svg))
    })
    .await;
    match drawn {
        Ok(Ok((figure, svg))) => Json(Frame {
            label: now.label,
            elapsed_s,
            done: now.done,
            figure: Some(figure),
            svg,
        })
        .into_response(),
        Ok(Err(e)) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot draw {}: {e:#}", now.label),
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}")).into_response(),
    }
}
