//! The lab: rates parse as tc reads them; under root, the lab goes up and
//! down idempotently and carries a TCP connection from one namespace to the
//! other. Without root the lab's tests are skipped (and pass).

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    process::Command,
    thread,
    time::Duration,
};

use network::lab::{self, CLIENT_ADDR, InArgs, Rate, SERVER_ADDR, SERVER_NAMESPACE, Side, UpArgs};

#[test]
fn rates_parse_as_tc_reads_them() {
    for (text, rate) in [
        ("100mbit", Rate::BitsPerSec(100_000_000)),
        ("1gbit", Rate::BitsPerSec(1_000_000_000)),
        ("500kbit", Rate::BitsPerSec(500_000)),
        ("20Mbit", Rate::BitsPerSec(20_000_000)),
        ("OFF", Rate::Off),
        ("off", Rate::Off),
    ] {
        assert_eq!(text.parse::<Rate>(), Ok(rate), "{text}");
    }
}

#[test]
fn rates_display_in_tcs_syntax_and_parse_back() {
    for (rate, text) in [
        (Rate::BitsPerSec(100_000_000), "100mbit"),
        (Rate::BitsPerSec(1_000_000_000), "1gbit"),
        (Rate::BitsPerSec(1_500_000_000), "1500mbit"),
        (Rate::BitsPerSec(500_000), "500kbit"),
        (Rate::BitsPerSec(1_234), "1234bit"),
        (Rate::Off, "off"),
    ] {
        assert_eq!(rate.to_string(), text);
        assert_eq!(text.parse::<Rate>(), Ok(rate));
    }
    assert_eq!(
        Rate::BitsPerSec(80_000_000).bytes_per_sec(),
        Some(10_000_000)
    );
    assert_eq!(Rate::Off.bytes_per_sec(), None);
}

#[test]
fn bad_rates_say_what_was_wrong() {
    for text in ["-1mbit", "100", "mbit", "10 mbps", "10mbps", "1.5gbit", ""] {
        let message = text.parse::<Rate>().unwrap_err();
        assert!(
            message.starts_with(&format!("`{text}` is not a rate")),
            "{text}: {message}"
        );
        assert!(
            message.contains("write a number and a unit, like 100mbit"),
            "{text}: {message}"
        );
    }
    let zero = "0mbit".parse::<Rate>().unwrap_err();
    assert!(
        zero.contains("`0mbit` is not a rate") && zero.contains("zero"),
        "{zero}"
    );
    let huge = "99999999999gbit".parse::<Rate>().unwrap_err();
    assert!(huge.contains("too large"), "{huge}");
}

/// Removes the lab when the test ends, also when an assertion fails.
struct TearDown;

impl Drop for TearDown {
    fn drop(&mut self) {
        let _ = lab::down();
    }
}

/// One test for the whole sequence: the lab's names are fixed, so two tests
/// making and removing it at once would pull it from under each other.
#[test]
fn the_lab_goes_up_carries_tcp_and_comes_down() {
    if !lab::have_root() {
        let error = lab::up(&UpArgs { rate: Rate::Off }).unwrap_err();
        assert!(
            format!("{error}").contains("network namespaces need root"),
            "{error}"
        );
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    if !Command::new("ip")
        .args(["netns", "list"])
        .output()
        .is_ok_and(|output| output.status.success())
    {
        eprintln!("skipped: `ip netns list` does not work here (is iproute2 installed?)");
        return;
    }
    let _tear_down = TearDown;

    // Twice, the second time over a complete lab with another rate.
    lab::up(&UpArgs {
        rate: "100mbit".parse().unwrap(),
    })
    .unwrap();
    lab::up(&UpArgs {
        rate: "20mbit".parse().unwrap(),
    })
    .unwrap();
    let status = lab::status().unwrap();
    for expected in [
        "wk15-client: present",
        "wk15-server: present",
        "10.15.0.1/24",
        "10.15.0.2/24",
        "tbf",
        "rate 20Mbit",
        "the lab is up",
    ] {
        assert!(status.contains(expected), "{expected:?} not in:\n{status}");
    }

    lab::run_in(&in_args(Side::Server, &["ip", "addr", "show", "wk15-s"])).unwrap();
    let error = lab::run_in(&in_args(Side::Client, &["sh", "-c", "exit 3"])).unwrap_err();
    assert_eq!(format!("{error}"), "`sh -c exit 3` exited with status 3");

    // A TCP connection from one namespace to the other: the link, the
    // addresses and tbf's queue all work.
    let listener = in_namespace(Side::Server, || {
        TcpListener::bind((SERVER_ADDR, 0)).unwrap()
    });
    let server = listener.local_addr().unwrap();
    let echo = thread::spawn(move || {
        let (mut stream, peer) = listener.accept().unwrap();
        let mut buf = [0; 5];
        stream.read_exact(&mut buf).unwrap();
        stream.write_all(&buf).unwrap();
        peer
    });
    let mut stream = in_namespace(Side::Client, move || {
        TcpStream::connect_timeout(&server, Duration::from_secs(5)).unwrap()
    });
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream.write_all(b"hello").unwrap();
    let mut back = [0; 5];
    stream.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"hello");
    let peer: SocketAddr = echo.join().unwrap();
    assert_eq!(peer.ip(), CLIENT_ADDR, "the connection came over the veth");

    // The experiment in the lab: servers in one end, clients and proxies in
    // the other; each part sets tbf's rate (the window part 100mbit, then
    // the head-of-line part --hol-rate).
    let out = std::env::temp_dir().join(format!("network-lab-run-{}", std::process::id()));
    let run = Command::new(env!("CARGO_BIN_EXE_network"))
        .args(["run", "--lab", "--parts", "window,hol", "--rtts", "0ms,2ms"])
        .args(["--repeats", "1", "--calls", "2", "--stream-bytes", "65536"])
        .args([
            "--hol-bytes",
            "65536",
            "--hol-rate",
            "30mbit",
            "--certs-dir",
        ])
        .arg(out.with_extension("certs"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    let transfers = std::fs::read_to_string(out.join("window.csv")).unwrap();
    assert_eq!(transfers.lines().count(), 1 + 2 * 4, "{transfers}");
    let status = lab::status().unwrap();
    assert!(status.contains("rate 30Mbit"), "{status}");
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_dir_all(out.with_extension("certs")).unwrap();

    // A half-made lab (one namespace left by a crash) is made again.
    lab::down().unwrap();
    ip(&["netns", "add", SERVER_NAMESPACE]);
    lab::up(&UpArgs { rate: Rate::Off }).unwrap();
    let status = lab::status().unwrap();
    assert!(
        status.contains("the lab is up") && !status.contains("tbf"),
        "{status}"
    );

    // Down twice; a stray veth in the root namespace goes too.
    lab::down().unwrap();
    ip(&[
        "link", "add", "wk15-c", "type", "veth", "peer", "name", "wk15-s",
    ]);
    lab::down().unwrap();
    lab::down().unwrap();
    let status = lab::status().unwrap();
    assert!(
        status.contains("wk15-client: absent") && status.contains("wk15-server: absent"),
        "{status}"
    );
    let links = ip(&["link", "show"]);
    assert!(!links.contains("wk15-"), "a veth is left:\n{links}");

    let error = lab::run_in(&in_args(Side::Server, &["true"])).unwrap_err();
    assert_eq!(
        format!("{error}"),
        "the lab is not up (no namespace wk15-server): run `sudo cargo run -p network -- up` first"
    );
}

fn in_args(side: Side, command: &[&str]) -> InArgs {
    InArgs {
        side,
        command: command.iter().map(|s| s.to_string()).collect(),
    }
}

/// Runs `make` on a thread moved into the namespace: a socket belongs to the
/// network stack it was made in, whichever thread uses it afterwards.
fn in_namespace<T: Send + 'static>(side: Side, make: impl FnOnce() -> T + Send + 'static) -> T {
    thread::spawn(move || {
        lab::enter(side).unwrap();
        make()
    })
    .join()
    .unwrap()
}

fn ip(args: &[&str]) -> String {
    let output = Command::new("ip").args(args).output().unwrap();
    assert!(output.status.success(), "ip {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}
