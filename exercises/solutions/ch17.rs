//! Chapter 17's exercise, solved: the rule of std's `available_parallelism`.

// ANCHOR: workers
/// The worker threads for a process whose cgroup's `cpu.max` reads
/// `cpu_max` and which may run on `cpus_allowed` CPUs.
pub fn workers(cpu_max: &str, cpus_allowed: usize) -> usize {
    let mut words = cpu_max.split_whitespace();
    let quota = match (words.next(), words.next()) {
        (Some(quota), Some(period)) => match (quota.parse::<usize>(), period.parse::<usize>()) {
            // Whole CPUs only, rounded down: a thread cannot run half the time.
            (Ok(quota), Ok(period)) if period > 0 => quota / period,
            // `max` (no limit) or something unreadable: no quota to respect.
            _ => usize::MAX,
        },
        _ => usize::MAX,
    };
    cpus_allowed.min(quota).max(1)
}
// ANCHOR_END: workers
