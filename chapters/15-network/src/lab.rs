//! The lab: two network namespaces joined by a veth pair, with a `tbf` rate
//! limit on each end (root only).
//!
//! ```text
//!      namespace wk15-client                 namespace wk15-server
//!   +------------------------+            +------------------------+
//!   | client, delay proxy    |            | server                 |
//!   | lo      127.0.0.1      |            | lo      127.0.0.1      |
//!   | wk15-c  10.15.0.1/24   |            | wk15-s  10.15.0.2/24   |
//!   |   tbf -----------------+--- veth ---+----------------> in    |
//!   |   in <-----------------+--- pair ---+----------------- tbf   |
//!   +------------------------+            +------------------------+
//! ```
//!
//! A qdisc shapes what leaves through a device, so a `tbf` on each end of the
//! pair limits each direction on its own.
//!
//! On loopback a client and a server share one network stack: the kernel
//! hands bytes from one socket to the other with no link, no queue to fill
//! and no rate. In the lab each end has its own stack, so a call crosses a
//! real (virtual) link: real TCP between two hosts, real kernel queues, and a
//! kernel rate limit that makes a large message take time to send. The
//! machines we run on have no `sch_netem`, so delay comes from the user-space
//! proxy ([`crate::proxy`]), run inside the client's namespace.
//!
//! Everything here shells out to `ip` and `tc` (iproute2), the commands a
//! reader would type, so each step can be repeated by hand.

use std::{
    fmt,
    io::ErrorKind,
    net::Ipv4Addr,
    path::{Path, PathBuf},
    process::Command,
    str::FromStr,
};

use anyhow::{Context, bail};

pub const CLIENT_NAMESPACE: &str = "wk15-client";
pub const SERVER_NAMESPACE: &str = "wk15-server";
pub const CLIENT_VETH: &str = "wk15-c";
pub const SERVER_VETH: &str = "wk15-s";
pub const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(10, 15, 0, 1);
pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 15, 0, 2);
pub const PREFIX_LEN: u8 = 24;

const NEEDS_ROOT: &str = "network namespaces need root: run it with sudo, or use the delay \
     proxy on loopback, which needs no privileges (`cargo run -p network -- proxy --help`)";

/// A link rate, parsed from `100mbit`, `20mbit`, `1gbit`, `500kbit`
/// (case-insensitive, bits per second, SI units as tc reads them), or `off`
/// (no tbf).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    Off,
    BitsPerSec(u64),
}

/// tc's units of bits per second, largest first (for [`Rate`]'s `Display`).
const UNITS: [(&str, u64); 4] = [
    ("gbit", 1_000_000_000),
    ("mbit", 1_000_000),
    ("kbit", 1_000),
    ("bit", 1),
];

impl Rate {
    /// Bytes per second, or `None` for no limit.
    pub fn bytes_per_sec(self) -> Option<u64> {
        match self {
            Rate::Off => None,
            Rate::BitsPerSec(bits) => Some(bits / 8),
        }
    }
}

impl FromStr for Rate {
    type Err = String;

    fn from_str(text: &str) -> Result<Rate, String> {
        let lower = text.to_ascii_lowercase();
        if lower == "off" {
            return Ok(Rate::Off);
        }
        let not_a_rate = |why: &str| {
            format!(
                "`{text}` is not a rate{why}: write a number and a unit, like 100mbit, \
                 500kbit or 1gbit, or off"
            )
        };
        let split = lower
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(lower.len());
        let (digits, unit) = lower.split_at(split);
        // tc reads `mbps` as megabytes per second, eight times what it looks
        // like; we accept bits only, so a rate means one thing here and in tc.
        let Some(&(_, scale)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            return Err(not_a_rate(""));
        };
        let Ok(number) = digits.parse::<u64>() else {
            return Err(not_a_rate(""));
        };
        match number.checked_mul(scale) {
            Some(0) => Err(not_a_rate(
                " (a link of zero bits per second carries nothing)",
            )),
            Some(bits) => Ok(Rate::BitsPerSec(bits)),
            None => Err(not_a_rate(" (too large)")),
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Rate::Off => f.write_str("off"),
            Rate::BitsPerSec(bits) => {
                let (name, scale) = UNITS
                    .iter()
                    .find(|(_, scale)| bits % scale == 0)
                    .expect("every rate is a whole number of bits");
                write!(f, "{}{name}", bits / scale)
            }
        }
    }
}

/// Which end of the lab a command runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Side {
    Client,
    Server,
}

impl Side {
    pub fn namespace(self) -> &'static str {
        match self {
            Side::Client => CLIENT_NAMESPACE,
            Side::Server => SERVER_NAMESPACE,
        }
    }

    pub fn addr(self) -> Ipv4Addr {
        match self {
            Side::Client => CLIENT_ADDR,
            Side::Server => SERVER_ADDR,
        }
    }

    /// This side's end of the veth pair.
    pub fn veth(self) -> &'static str {
        match self {
            Side::Client => CLIENT_VETH,
            Side::Server => SERVER_VETH,
        }
    }
}

const SIDES: [Side; 2] = [Side::Client, Side::Server];

#[derive(clap::Args, Debug, Clone)]
pub struct UpArgs {
    /// The link's rate in each direction (tbf), or `off`
    #[arg(long, default_value = "100mbit")]
    pub rate: Rate,
}

#[derive(clap::Args, Debug, Clone)]
pub struct InArgs {
    /// Which namespace: client or server
    pub side: Side,
    /// The command to run there, after `--`
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Whether this process may build the lab.
pub fn have_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn need_root() -> anyhow::Result<()> {
    if have_root() {
        Ok(())
    } else {
        bail!(NEEDS_ROOT)
    }
}

/// Creates the lab; idempotent: an existing lab (complete or half made by a
/// crash) is removed first and made again. Needs root.
pub fn up(args: &UpArgs) -> anyhow::Result<()> {
    need_root()?;
    remove()?;
    // A lab half made is harder to reason about than none: undo a failed build.
    if let Err(e) = build(args.rate) {
        let _ = remove();
        return Err(e);
    }
    let link = match args.rate {
        Rate::Off => "no rate limit".to_string(),
        rate => format!("tbf {rate} each way"),
    };
    println!(
        "lab up: {CLIENT_NAMESPACE} ({CLIENT_ADDR}) <-- veth, {link} --> {SERVER_NAMESPACE} ({SERVER_ADDR})
run a server in one end and a client in the other, for example:
  sudo cargo run -p network -- in server -- cargo run -p stack -- --grpc-addr {SERVER_ADDR}:50051 --rest-addr {SERVER_ADDR}:8443
  sudo cargo run -p network -- in client -- cargo run -p network -- proxy --listen 127.0.0.1:50051 --upstream {SERVER_ADDR}:50051 --delay 10ms
  sudo cargo run -p network -- in client -- cargo run -p grpc-client -- hello --name Ada
remove it with: sudo cargo run -p network -- down"
    );
    Ok(())
}

fn build(rate: Rate) -> anyhow::Result<()> {
    for side in SIDES {
        ip(&["netns", "add", side.namespace()])?;
    }
    // Both ends are born in their namespaces: no moment where a veth sits in
    // the root namespace, where a crash would leave it behind.
    ip(&[
        "link",
        "add",
        CLIENT_VETH,
        "netns",
        CLIENT_NAMESPACE,
        "type",
        "veth",
        "peer",
        "name",
        SERVER_VETH,
        "netns",
        SERVER_NAMESPACE,
    ])?;
    for side in SIDES {
        let (ns, veth) = (side.namespace(), side.veth());
        let addr = format!("{}/{PREFIX_LEN}", side.addr());
        ip(&["-n", ns, "addr", "add", &addr, "dev", veth])?;
        // A fresh namespace's loopback is down: servers there could not even
        // talk to themselves (or to a proxy on 127.0.0.1).
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
        ip(&["-n", ns, "link", "set", veth, "up"])?;
    }
    set_rate(rate)
}

/// Sets the rate of both ends of the lab's link (`off` removes the limit).
/// Needs root and the lab up.
pub fn set_rate(rate: Rate) -> anyhow::Result<()> {
    for side in SIDES {
        let (ns, veth) = (side.namespace(), side.veth());
        let Rate::BitsPerSec(bits) = rate else {
            // No qdisc of ours is not an error: `off` after `off`.
            let _ = tc(&["-n", ns, "qdisc", "del", "dev", veth, "root"]);
            continue;
        };
        // tbf refills its bucket once per timer tick, so tc-tbf(8) asks
        // for a bucket of at least rate/HZ bytes or the link falls short
        // of its rate: rate/100 covers the slowest kernel clock (HZ=100).
        // The floor of 32 KiB lets slow links pass full-size packets
        // (tbf drops a packet larger than its bucket). The price: after
        // a pause, one bucket (10 ms of the rate) leaves at veth speed,
        // so the limit shows on transfers longer than that.
        let burst = (bits / 8 / 100).max(32 * 1024).to_string();
        // latency caps how long a packet may wait in tbf's queue (tc turns
        // it into a byte limit): 50 ms is a modest bottleneck buffer,
        // enough to absorb TCP's bursts, small enough to keep queueing
        // delay bounded instead of hiding the proxy's delay.
        tc(&[
            "-n",
            ns,
            "qdisc",
            "replace",
            "dev",
            veth,
            "root",
            "tbf",
            "rate",
            &rate.to_string(),
            "burst",
            &burst,
            "latency",
            "50ms",
        ])?;
    }
    Ok(())
}

/// Moves the calling thread into one end of the lab. Sockets it opens from
/// then on live in that namespace's network stack, and so do those of every
/// thread it starts afterwards (a Tokio runtime's workers, say). Needs root
/// and the lab up.
pub fn enter(side: Side) -> anyhow::Result<()> {
    need_root()?;
    let ns = side.namespace();
    let file = std::fs::File::open(format!("/run/netns/{ns}")).with_context(|| {
        format!(
            "the lab is not up (no namespace {ns}): run `sudo cargo run -p network -- up` first"
        )
    })?;
    rustix::thread::move_into_link_name_space(
        std::os::fd::AsFd::as_fd(&file),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )
    .with_context(|| format!("cannot enter the namespace {ns}"))
}

/// Removes everything the lab made; idempotent. Needs root.
pub fn down() -> anyhow::Result<()> {
    need_root()?;
    let removed = remove()?;
    if removed.is_empty() {
        println!("the lab was not up; nothing to remove");
    } else {
        println!("lab down: removed {}", removed.join(", "));
    }
    Ok(())
}

/// Removes the namespaces and any stray veth; returns what it removed.
fn remove() -> anyhow::Result<Vec<String>> {
    let mut removed = Vec::new();
    let existing = namespaces()?;
    for side in SIDES {
        let ns = side.namespace();
        if !existing.iter().any(|name| name == ns) {
            continue;
        }
        // `ip netns del` only drops the name: a process still running inside
        // keeps the namespace (and its veth end) alive, unseen, until it exits.
        let pids = ip(&["netns", "pids", ns])?;
        let pids: Vec<&str> = pids.split_whitespace().collect();
        if !pids.is_empty() {
            eprintln!(
                "warning: processes still run in {ns} (pids {}); its network lives on until they exit",
                pids.join(" ")
            );
        }
        // Deleting a namespace deletes the veth end inside it, and so its peer.
        ip(&["netns", "del", ns])?;
        removed.push(ns.to_string());
    }
    // A pair left in the root namespace (made there by hand, or by a run that
    // crashed before moving it) bears the lab's names: it goes too.
    for veth in [CLIENT_VETH, SERVER_VETH] {
        if ip(&["link", "show", "dev", veth]).is_ok() {
            ip(&["link", "del", "dev", veth])?;
            removed.push(veth.to_string());
        }
    }
    Ok(removed)
}

/// Whether each namespace exists, and the qdisc on each veth, as a report.
pub fn status() -> anyhow::Result<String> {
    let existing = namespaces()?;
    let mut report = String::new();
    let mut up = 0;
    for side in SIDES {
        let (ns, veth) = (side.namespace(), side.veth());
        if !existing.iter().any(|name| name == ns) {
            report += &format!("{ns}: absent\n");
            continue;
        }
        up += 1;
        // Looking inside a namespace (setns) needs root even to read.
        let inside = if have_root() {
            let addr = ip(&["-n", ns, "-brief", "addr", "show", "dev", veth]);
            let qdisc = tc(&["-n", ns, "qdisc", "show", "dev", veth]);
            match (addr, qdisc) {
                (Ok(addr), Ok(qdisc)) => {
                    // `ip -brief` pads its columns; one space reads better here.
                    let addr = addr.split_whitespace().collect::<Vec<_>>().join(" ");
                    format!("{addr}\n  {}", qdisc.trim())
                }
                (Err(e), _) | (_, Err(e)) => format!("cannot read {veth}: {e:#}"),
            }
        } else {
            format!("reading {veth} and its qdisc needs root: sudo cargo run -p network -- status")
        };
        report += &format!("{ns}: present\n  {inside}\n");
    }
    report += match up {
        0 => "the lab is down; make it with: sudo cargo run -p network -- up\n",
        1 => "the lab is half made; make it again with: sudo cargo run -p network -- up\n",
        _ => "the lab is up\n",
    };
    Ok(report)
}

/// Runs `command` inside the side's namespace, inheriting stdio. Needs root.
pub fn run_in(args: &InArgs) -> anyhow::Result<()> {
    need_root()?;
    let ns = args.side.namespace();
    if !namespaces()?.iter().any(|name| name == ns) {
        bail!("the lab is not up (no namespace {ns}): run `sudo cargo run -p network -- up` first");
    }
    let shown = args.command.join(" ");
    let status = Command::new(tool("ip"))
        .args(["netns", "exec", ns])
        .args(&args.command)
        .status()
        .with_context(|| format!("could not run `ip netns exec {ns} {shown}`"))?;
    match status.code() {
        Some(0) => Ok(()),
        Some(code) => bail!("`{shown}` exited with status {code}"),
        None => bail!("`{shown}` was killed by a signal ({status})"),
    }
}

/// The namespaces `ip netns list` shows (no root needed: it reads /run/netns).
fn namespaces() -> anyhow::Result<Vec<String>> {
    // Lines look like `wk15-server (id: 1)` once a namespace has a peer.
    Ok(ip(&["netns", "list"])?
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

fn ip(args: &[&str]) -> anyhow::Result<String> {
    run("ip", args)
}

fn tc(args: &[&str]) -> anyhow::Result<String> {
    run("tc", args)
}

/// Runs an iproute2 command; its failure names the command and its stderr.
fn run(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let shown = format!("{program} {}", args.join(" "));
    let output = match Command::new(tool(program)).args(args).output() {
        Ok(output) => output,
        Err(e) if e.kind() == ErrorKind::NotFound => bail!(
            "`{program}` not found: the lab needs iproute2 (on Debian: sudo apt-get install iproute2)"
        ),
        Err(e) => return Err(e).with_context(|| format!("could not run `{shown}`")),
    };
    if !output.status.success() {
        bail!(
            "`{shown}` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `ip` and `tc` live in /usr/sbin or /sbin, which a normal user's PATH may
/// lack (and `status` runs without root); otherwise trust PATH.
fn tool(name: &str) -> PathBuf {
    ["/usr/sbin", "/sbin"]
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|path| path.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}
