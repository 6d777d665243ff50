//! The live view serves the records of a folder as they grow: each frame the
//! page asks for holds what the run had written by then, drawn.

use std::{path::Path, time::Duration};

use harness::{
    live::{self, Figure, Frame},
    plot::{Panel, Series},
    records::{Growing, read_csv_so_far},
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Sample {
    at_s: f64,
    queued: u64,
}

/// A view of `samples.csv`: queue depth over time.
fn view(dir: &Path) -> anyhow::Result<Figure> {
    let rows: Vec<Sample> = read_csv_so_far(&dir.join("samples.csv"))?;
    Ok(Figure {
        title: "queue".into(),
        x_label: "s".into(),
        panels: vec![Panel {
            y_label: "queued".into(),
            series: vec![Series::line(
                "queue",
                rows.iter().map(|r| (r.at_s, r.queued as f64)).collect(),
            )],
        }],
    })
}

/// `GET path` over plain HTTP/1.0: the status line and the body.
async fn get(addr: &str, path: &str) -> (String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nhost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut answer))
        .await
        .expect("the live view answers within 10 s")
        .unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

async fn frame(addr: &str) -> Frame {
    let (status, body) = get(addr, "/frame").await;
    assert!(status.contains("200"), "{status}: {body}");
    serde_json::from_str(&body).unwrap()
}

#[tokio::test]
async fn each_frame_holds_the_rows_written_so_far() {
    let dir = tempfile::tempdir().unwrap();
    let live = live::serve("127.0.0.1:0".parse().unwrap(), view)
        .await
        .unwrap();
    let addr = live.addr().to_string();

    let (status, page) = get(&addr, "/").await;
    assert!(
        status.contains("200") && page.contains("fetch('frame'"),
        "{status}"
    );
    // Before the run names a folder: a frame that says so, with nothing drawn.
    let first = frame(&addr).await;
    assert!(first.figure.is_none() && !first.done, "{first:?}");

    let table = Growing::<Sample>::create(&dir.path().join("samples.csv")).unwrap();
    live.watch("arm one", dir.path());
    let mut seen = Vec::new();
    for i in 0..3u64 {
        table.push(&Sample {
            at_s: i as f64,
            queued: 10 * i,
        });
        // Past the flush interval, the row is on disk for the next frame.
        tokio::time::sleep(Growing::<Sample>::FLUSH_EVERY + Duration::from_millis(50)).await;
        table.push(&Sample {
            at_s: i as f64 + 0.5,
            queued: 10 * i + 5,
        });
        let frame = frame(&addr).await;
        assert_eq!(frame.label, "arm one");
        let figure = frame.figure.unwrap();
        seen.push(figure.points());
        // Every point drawn is a row the table holds, in order.
        let points = &figure.panels[0].series[0].points;
        assert_eq!(points[0], (0.0, 0.0));
        assert!(points.windows(2).all(|w| w[0].0 < w[1].0), "{points:?}");
        assert!(frame.svg.starts_with("<svg") && frame.svg.contains("queued"));
    }
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "frames did not grow: {seen:?}"
    );
    table.finish().unwrap();
    assert_eq!(frame(&addr).await.figure.unwrap().points(), 6);

    live.done();
    assert!(frame(&addr).await.done);
}

#[tokio::test]
async fn a_folder_the_view_cannot_read_is_an_error_that_says_which_part() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("samples.csv"), "at_s,queued\nsoon,1\n").unwrap();
    let live = live::serve("127.0.0.1:0".parse().unwrap(), view)
        .await
        .unwrap();
    live.watch("arm two", dir.path());
    let addr = live.addr().to_string();
    let (status, body) = get(&addr, "/frame").await;
    assert!(status.contains("500"), "{status}");
    assert!(body.contains("arm two") && body.contains("row 1"), "{body}");
}

#[tokio::test]
async fn a_busy_address_is_refused_with_the_way_out() {
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let error = live::serve(taken.local_addr().unwrap(), view)
        .await
        .err()
        .expect("the address is in use")
        .to_string();
    assert!(error.contains("--live 127.0.0.1:0"), "{error}");
}
