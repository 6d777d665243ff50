//! `cargo xtask browser`: look at the built book the way a reader does.
//!
//! mdBook checks that pages build, not that they work. A quiz is drawn by
//! JavaScript after the page loads, and a plot or a diagram is an SVG the
//! browser must parse; any of them can be present in the HTML and still show
//! nothing. So this opens pages in headless Chromium, lets their scripts run,
//! and checks the rendered DOM, then saves a screenshot of each for a person
//! to look at.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

/// What must be on a page once the browser has rendered it.
enum Expect {
    /// mdbook-quiz replaced its placeholder with a live quiz.
    Quiz,
    /// An inline SVG plot with drawn lines.
    Plot,
    /// Images (`![...](diagrams/x.svg)`), every one loaded and decoded.
    Images,
}

/// Each page, and what must render on it.
const PAGES: [(&str, Expect); 6] = [
    ("ch01-getting-started.html", Expect::Quiz),
    ("ch02-protobuf.html", Expect::Plot),
    ("ch03-tls.html", Expect::Images),
    ("ch04-grpc-greeter.html", Expect::Images),
    ("ch10-performance.html", Expect::Images),
    ("ch11-backpressure.html", Expect::Images),
];

/// Added to a copy of a page: once everything has loaded, it writes on the
/// root element which images the browser could not decode. A broken image
/// (missing, or an SVG that is not well-formed) has no natural width.
const IMAGE_PROBE: &str = "<script>window.addEventListener('load', () => {\
    const imgs = [...document.images];\
    const broken = imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src'));\
    document.documentElement.dataset.images = broken.length ? 'broken ' + broken.join(' ') : 'loaded ' + imgs.length;\
});</script>";

/// The flags a headless Chromium needs on a machine with no network beyond
/// loopback and no GPU, running as root.
const FLAGS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

pub fn check(root: &Path) -> anyhow::Result<()> {
    let chromium = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| {
            Command::new(name)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok()
        })
        .ok_or_else(|| {
            anyhow::anyhow!("no Chromium found (on Debian: apt-get install chromium)")
        })?;
    let book = root.join("book/book");
    anyhow::ensure!(
        book.join("index.html").exists(),
        "no built book in {}; run `mdbook build book` first",
        book.display()
    );
    let shots = root.join("target/browser");
    std::fs::create_dir_all(&shots)?;
    let profile = shots.join("profile");

    for (page, expect) in PAGES {
        let url = format!("file://{}", book.join(page).display());
        // The page itself cannot report on its images, so a copy that can is
        // what the browser reads; the screenshot below is of the page itself.
        let read = match expect {
            Expect::Images => image_probe(&book, page, &shots)?,
            _ => url.clone(),
        };
        let dom = run(
            chromium,
            &profile,
            &["--virtual-time-budget=10000", "--dump-dom", &read],
        )?;
        match expect {
            Expect::Quiz => {
                let counter = dom
                    .find("class=\"counter\"")
                    .map(|i| &dom[i..(i + 60).min(dom.len())]);
                anyhow::ensure!(
                    dom.contains("class=\"mdbook-quiz\"")
                        && counter.is_some_and(|c| c.contains("questions")),
                    "{page}: the quiz did not render (no live mdbook-quiz element after scripts ran)"
                );
            }
            Expect::Plot => {
                let lines = dom.matches("<polyline").count();
                anyhow::ensure!(
                    dom.contains("<svg") && lines >= 2,
                    "{page}: the plot did not render (found {lines} drawn lines)"
                );
            }
            Expect::Images => {
                let report = dom
                    .split_once("data-images=\"")
                    .and_then(|(_, rest)| rest.split_once('"'))
                    .map(|(report, _)| report);
                anyhow::ensure!(
                    report.is_some_and(|r| r.starts_with("loaded ") && r != "loaded 0"),
                    "{page}: its images did not all render ({})",
                    report.unwrap_or("no report: the probe's script did not run")
                );
            }
        }
        let shot = shots.join(page.replace(".html", ".png"));
        let screenshot = format!("--screenshot={}", shot.display());
        // The whole page in one tall image (scrolling to a heading first leaves
        // headless Chromium's screenshot blank).
        run(
            chromium,
            &profile,
            &[
                "--virtual-time-budget=10000",
                "--window-size=1280,12000",
                &screenshot,
                &url,
            ],
        )?;
        anyhow::ensure!(shot.exists(), "{page}: Chromium wrote no screenshot");
        println!("{page}: rendered; screenshot {}", shot.display());
    }
    Ok(())
}

/// Writes a copy of `page` with [`IMAGE_PROBE`] into `shots`, its relative
/// links still leading into the book; returns its URL.
fn image_probe(book: &Path, page: &str, shots: &Path) -> anyhow::Result<String> {
    let html = std::fs::read_to_string(book.join(page))?;
    anyhow::ensure!(
        html.contains("<head>") && html.contains("</body>"),
        "{page}: no <head> or </body> to add the image probe to"
    );
    let base = format!("<head><base href=\"file://{}/\">", book.display());
    let html =
        html.replacen("<head>", &base, 1)
            .replacen("</body>", &format!("{IMAGE_PROBE}</body>"), 1);
    let probe = shots.join(format!("probe-{page}"));
    std::fs::write(&probe, html)?;
    Ok(format!("file://{}", probe.display()))
}

/// Runs Chromium with a fresh profile and a time limit; returns its stdout.
fn run(chromium: &str, profile: &Path, args: &[&str]) -> anyhow::Result<String> {
    let _ = std::fs::remove_dir_all(profile);
    let out = PathBuf::from(format!("{}.out", profile.display()));
    let mut child = Command::new(chromium)
        .args(FLAGS)
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdout(std::fs::File::create(&out)?)
        .stderr(Stdio::null())
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(status) = child.try_wait()? {
            anyhow::ensure!(status.success(), "Chromium exited with {status}");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            anyhow::bail!("Chromium did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(std::fs::read_to_string(&out)?)
}
