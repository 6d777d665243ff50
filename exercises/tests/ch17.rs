//! Chapter 17's exercise, `exercises::ch17::workers`: `cpu.max` lines as a
//! pod's cgroup holds them, on machines of several sizes.

use exercises::ch17::workers;

#[test]
fn no_limit_means_every_allowed_cpu() {
    assert_eq!(workers("max 100000", 8), 8);
    assert_eq!(workers("max 100000", 1), 1);
}

#[test]
fn a_one_cpu_pod_on_an_eight_core_node_gets_one_worker() {
    let n = workers("100000 100000", 8);
    assert_eq!(
        n,
        1,
        "still to do (ch17): {n} workers in a 1-CPU pod spend its 100 ms of CPU time in \
         {:.1} ms of every 100 ms period, then all wait; read the quota from `cpu.max` \
         (QUOTA PERIOD) and start no more workers than whole CPUs it allows",
        100.0 / n as f64
    );
}

#[test]
fn fractions_of_a_cpu_round_down_but_never_to_zero() {
    let n = workers("150000 100000", 16);
    assert_eq!(
        n, 1,
        "still to do (ch17): 1.5 CPUs got {n} workers; the quota over the period is \
         rounded down to whole CPUs"
    );
    let n = workers("50000 100000", 16);
    assert_eq!(
        n, 1,
        "still to do (ch17): half a CPU got {n} workers; a runtime needs at least one"
    );
    assert_eq!(workers("250000 100000", 16), 2);
}

#[test]
fn the_allowed_cpus_cap_a_generous_quota() {
    assert_eq!(workers("400000 100000", 2), 2);
}

#[test]
fn an_unreadable_line_leaves_the_cpus_alone() {
    assert_eq!(workers("", 4), 4);
    assert_eq!(workers("lots 100000", 4), 4);
    assert_eq!(workers("100000 0", 4), 4);
}
