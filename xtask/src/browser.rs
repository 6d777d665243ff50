//! `cargo xtask browser`: look at the built book the way a reader does.
//!
//! mdBook checks that pages build, not that they work. A quiz is drawn by
//! JavaScript after the page loads, and a plot or a diagram is an SVG the
//! browser must parse; any of them can be present in the HTML and still show
//! nothing. So this opens pages in headless Chromium, lets their scripts run,
//! and checks the rendered DOM, then saves a screenshot of each for a person
//! to look at.

use std::{
    io::{BufRead, BufReader},
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
    ("ch10-deadlines.html", Expect::Images),
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

/// The first Chromium on the PATH.
fn find_chromium() -> anyhow::Result<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| {
            Command::new(name)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok()
        })
        .ok_or_else(|| anyhow::anyhow!("no Chromium found (on Debian: apt-get install chromium)"))
}

pub fn check(root: &Path) -> anyhow::Result<()> {
    let chromium = find_chromium()?;
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
        let dom = run_chromium(
            chromium,
            &profile,
            &["--virtual-time-budget=10000", "--dump-dom", &read],
        )?;
        match expect {
            Expect::Quiz => {
                // Every quiz on the page drew its counter ("1 question", "6 questions").
                let placeholders = std::fs::read_to_string(book.join(page))?
                    .matches("quiz-placeholder")
                    .count();
                let counters = dom
                    .match_indices("class=\"counter\"")
                    .filter(|(i, _)| dom[*i..(*i + 60).min(dom.len())].contains(" question"))
                    .count();
                anyhow::ensure!(
                    dom.contains("class=\"mdbook-quiz\"")
                        && placeholders > 0
                        && counters == placeholders,
                    "{page}: {counters} of its {placeholders} quizzes rendered (a live mdbook-quiz draws a question counter)"
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
        run_chromium(
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

/// Chapter 11's `--live` page during a quick run: looked at twice a few
/// seconds apart, the second look must draw more points than the first (the
/// page sets `data-points` on its root element); then a screenshot into
/// `shot`, and the run must still end well.
pub fn live_page(root: &Path, shot: &Path) -> anyhow::Result<()> {
    let chromium = find_chromium()?;
    let shots = root.join("target/browser");
    std::fs::create_dir_all(&shots)?;
    if let Some(dir) = shot.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let profile = shots.join("live-profile");
    let built = Command::new(env!("CARGO"))
        .args(["build", "-q", "-p", "ingest"])
        .current_dir(root)
        .status()?;
    anyhow::ensure!(built.success(), "cannot build ingest");
    let mut run = Command::new(root.join("target/debug/ingest"))
        .args(["compare", "--quick", "--live", "127.0.0.1:0", "--out"])
        .arg(shots.join("ch11-live"))
        .current_dir(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut lines = BufReader::new(run.stdout.take().expect("piped")).lines();
    let url = lines
        .next()
        .transpose()?
        .and_then(|line| Some(line.split_whitespace().nth(2)?.to_string()))
        .filter(|url| url.starts_with("http://"))
        .ok_or_else(|| anyhow::anyhow!("ingest compare --live did not say where its page is"))?;
    // Read the rest, so a full pipe never stops the run.
    std::thread::spawn(move || lines.for_each(drop));
    // Two seconds of the page's own time is four frames it asks for.
    let look = |extra: &[&str]| {
        let mut args = vec!["--virtual-time-budget=2000"];
        args.extend(extra);
        args.push(&url);
        run_chromium(chromium, &profile, &args)
    };
    let points = |dom: &str| -> Option<u64> {
        let (_, rest) = dom.split_once("data-points=\"")?;
        rest.split('"').next()?.parse().ok()
    };
    std::thread::sleep(Duration::from_secs(3));
    let first = points(&look(&["--dump-dom"])?);
    std::thread::sleep(Duration::from_secs(3));
    let second = points(&look(&["--dump-dom"])?);
    anyhow::ensure!(
        matches!((first, second), (Some(a), Some(b)) if 0 < a && a < b),
        "the live page did not draw more as the run went on: {first:?} points, then {second:?}"
    );
    let _ = std::fs::remove_file(shot);
    let screenshot = format!("--screenshot={}", shot.display());
    look(&["--window-size=800,1240", &screenshot])?;
    anyhow::ensure!(
        shot.exists(),
        "Chromium wrote no screenshot of the live page"
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = run.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = run.kill();
            anyhow::bail!("ingest compare --quick --live did not end within 120 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    anyhow::ensure!(
        status.success(),
        "ingest compare --quick --live failed: {status}"
    );
    println!(
        "live page: {} points drawn, then {}; screenshot {}",
        first.unwrap_or(0),
        second.unwrap_or(0),
        shot.display()
    );
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
fn run_chromium(chromium: &str, profile: &Path, args: &[&str]) -> anyhow::Result<String> {
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
