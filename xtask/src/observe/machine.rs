//! `chNN-machine.txt`: the machine a chapter's observed outputs come from,
//! since a figure means little without where it ran (and how busy it was).

use std::process::Command;

use anyhow::Context;

/// Four lines: OS and kernel, CPUs, the Rust compiler, the date (UTC).
pub fn describe() -> anyhow::Result<String> {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let os = os_name(&read("/etc/os-release"));
    let kernel = read("/proc/sys/kernel/osrelease");
    let system = read("/proc/sys/kernel/ostype");
    let cpus = cpu_count(&program::proc::cpus_allowed());
    let model = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
        .map(|(_, m)| m.trim().to_string())
        .unwrap_or_else(|| "unknown model".into());
    let rustc = Command::new("rustc")
        .arg("--version")
        .output()
        .context("cannot run rustc --version")?;
    let today = time::OffsetDateTime::now_utc().date();
    Ok(format!(
        "{os}, {} {}, kernel {}\n{cpus} CPUs: {model}\n{}observed on {today}\n",
        system.trim(),
        std::env::consts::ARCH,
        kernel.trim(),
        String::from_utf8_lossy(&rustc.stdout),
    ))
}

/// `PRETTY_NAME` of os-release, unquoted.
fn os_name(os_release: &str) -> String {
    os_release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| "unknown OS".into())
}

/// How many CPUs a list such as `0-3,6` names (what `nproc` would count).
fn cpu_count(list: &str) -> usize {
    list.split(',')
        .filter_map(|range| match range.trim().split_once('-') {
            Some((a, b)) => Some(b.parse::<usize>().ok()? + 1 - a.parse::<usize>().ok()?),
            None => range.trim().parse::<usize>().ok().map(|_| 1),
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_os_and_counts_cpus() {
        let release = "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n";
        assert_eq!(os_name(release), "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(cpu_count("0-1"), 2);
        assert_eq!(cpu_count("0-3,6"), 5);
        assert_eq!(cpu_count("unknown"), 0);
    }

    #[test]
    fn describes_the_machine_in_four_lines() {
        let text = describe().unwrap();
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(text.lines().nth(2).unwrap().starts_with("rustc "), "{text}");
        assert!(
            text.lines().nth(3).unwrap().starts_with("observed on 20"),
            "{text}"
        );
    }
}
