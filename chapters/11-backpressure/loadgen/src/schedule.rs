//! When each send is due: absolute times fixed before the run starts.
//!
//! An open-loop generator decides *when* to send from the clock alone, never
//! from how fast the server answered. A closed loop ("send, wait for the
//! answer, send again") slows down exactly when the server does and so hides
//! the delay it should be measuring (coordinated omission).

use std::{fmt, iter::FusedIterator, slice, str::FromStr, sync::Arc, time::Duration, vec};

use program::duration::Show;

use crate::open_loop::SlotRecord;

/// The most sends a second a step may ask for: one every microsecond. The
/// timing thread hands the slots over one at a time, and a hand-over alone
/// takes a microsecond or more (a send takes more again), so slots closer
/// together than that would all start late, each later than the one before,
/// and the run would measure the generator instead of the server. Where a
/// machine falls behind below this bound, `loadgen calibrate` shows.
pub const MAX_RATE: f64 = 1e6;

/// The most slots one run of the `loadgen` program may hold. It keeps every
/// slot's record until the run ends, then writes them all to `sends.csv`:
/// ten million records take about a gigabyte of memory.
pub const MAX_SLOTS: u64 = 10_000_000;

/// How a step is written, for the errors that refuse one.
const STEP_FORM: &str = "write RATE/s:DURATION, e.g. 80/s:36s";

/// `rate` sends per second for `duration`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    pub rate: f64,
    pub duration: Duration,
}

/// One send opportunity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slot {
    /// Position in the whole schedule, from 0.
    pub index: u64,
    /// Which step it belongs to.
    pub step: usize,
    /// When it is due, from the start of the run.
    pub due: Duration,
}

/// Steps run one after the other: one step is a constant rate, several are a ramp.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub steps: Vec<Step>,
}

impl Step {
    /// How many slots it holds: `rate x duration`, rounded.
    pub fn count(&self) -> u64 {
        // `as` saturates: an absurd product is refused by `check`, not wrapped.
        (self.rate * self.duration.as_secs_f64()).round() as u64
    }

    /// Refuses a step the generator cannot keep: no rate, no time, no slot,
    /// slots too close together to time, or more than a run can hold.
    pub fn check(&self) -> Result<(), String> {
        self.check_as(&self.to_string())
    }

    /// [`Step::check`], naming the step as the user wrote it.
    fn check_as(&self, text: &str) -> Result<(), String> {
        check_rate(self.rate).map_err(|e| match self.rate > MAX_RATE {
            true => format!("rate in `{text}` {e}"),
            false => format!("rate in `{text}` {e}; {STEP_FORM}"),
        })?;
        if self.duration.is_zero() {
            return Err(format!(
                "duration in `{text}` must be above 0: a step of no time holds no slot"
            ));
        }
        match self.count() {
            0 => Err(format!(
                "`{text}` holds no slot: RATE x DURATION is {}, which rounds to 0; \
                 lengthen the step or raise its rate",
                self.rate * self.duration.as_secs_f64()
            )),
            n if n > MAX_SLOTS => Err(too_many(n, &format!("`{text}` holds"))),
            _ => Ok(()),
        }
    }
}

/// Refuses a rate the generator cannot keep, saying why: "must be above 0".
pub fn check_rate(rate: f64) -> Result<(), String> {
    if !(rate.is_finite() && rate > 0.0) {
        return Err("must be above 0".into());
    }
    if rate > MAX_RATE {
        return Err(format!(
            "is above {MAX_RATE}/s, the most the generator can time: its timing thread \
             hands the slots over one at a time, a microsecond or more each, so slots \
             less than 1 µs apart would all start late"
        ));
    }
    Ok(())
}

/// The error for a run of `count` slots, more than [`MAX_SLOTS`].
pub fn too_many(count: u64, what: &str) -> String {
    let record = size_of::<SlotRecord>();
    format!(
        "{what} {count} slots, more than the {MAX_SLOTS} a run can hold: the generator \
         keeps every slot's record until the run ends, {record} bytes each ({:.1} GB for \
         {MAX_SLOTS}); shorten the run or lower the rate",
        (MAX_SLOTS as f64 * record as f64) / 1e9
    )
}

impl Schedule {
    pub fn constant(rate: f64, duration: Duration) -> Schedule {
        Schedule {
            steps: vec![Step { rate, duration }],
        }
    }

    /// How many slots the whole run holds, computed without making them.
    pub fn count(&self) -> u64 {
        self.steps
            .iter()
            .map(Step::count)
            .fold(0, u64::saturating_add)
    }

    /// Refuses a schedule the generator cannot keep: each of its steps
    /// ([`Step::check`]), and all of them together (at most [`MAX_SLOTS`]).
    pub fn check(&self) -> Result<(), String> {
        for step in &self.steps {
            step.check()?;
        }
        match self.count() {
            n if n > MAX_SLOTS => Err(too_many(n, "the steps hold")),
            _ => Ok(()),
        }
    }

    /// Every slot of the run, in order, each made when it is asked for: a
    /// run holds no list of them, however long and fast it is.
    pub fn iter(&self) -> Iter {
        Iter {
            steps: self.steps.iter().copied().collect(),
            step: 0,
            i: 0,
            start: Duration::ZERO,
            index: 0,
            left: self.count(),
        }
    }

    /// Every slot of the run, in a list: for short schedules (tests, a
    /// stream's share of one); a run itself takes the schedule ([`Slots`]).
    pub fn slots(&self) -> Vec<Slot> {
        self.iter().collect()
    }

    pub fn duration(&self) -> Duration {
        self.steps.iter().map(|s| s.duration).sum()
    }

    /// Multiplies every rate by `factor` (a ramp expressed in units of capacity).
    pub fn scaled(&self, factor: f64) -> Schedule {
        Schedule {
            steps: self
                .steps
                .iter()
                .map(|s| Step {
                    rate: s.rate * factor,
                    duration: s.duration,
                })
                .collect(),
        }
    }
}

/// The slots of a [`Schedule`] in order, made one at a time ([`Schedule::iter`]).
#[derive(Debug, Clone)]
pub struct Iter {
    steps: Arc<[Step]>,
    /// The next slot's step, its position in that step, and when that step starts.
    step: usize,
    i: u64,
    start: Duration,
    /// The next slot's position in the whole schedule, and how many are left.
    index: u64,
    left: u64,
}

impl Iterator for Iter {
    type Item = Slot;

    // ANCHOR: slots
    /// The next slot, made only when the run asks for it, so that a run
    /// never holds a list of its slots. Step `k` starting at `T` has slots at
    /// `T + i / rate` for `i = 0, 1, ...` while that is before the step ends:
    /// computed from the index, not by adding intervals, so rounding never
    /// accumulates into drift over a long run.
    fn next(&mut self) -> Option<Slot> {
        loop {
            let step = self.steps.get(self.step)?;
            if self.i < step.count() {
                let slot = Slot {
                    index: self.index,
                    step: self.step,
                    due: self.start + Duration::from_secs_f64(self.i as f64 / step.rate),
                };
                self.i += 1;
                self.index += 1;
                self.left -= 1;
                return Some(slot);
            }
            self.start += step.duration;
            self.step += 1;
            self.i = 0;
        }
    }
    // ANCHOR_END: slots

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize::try_from(self.left).unwrap_or(usize::MAX);
        (left, Some(left))
    }

    /// Skips whole steps without making their slots.
    fn nth(&mut self, mut n: usize) -> Option<Slot> {
        while let Some(step) = self.steps.get(self.step) {
            let rest = step.count() - self.i;
            if (n as u64) < rest {
                self.i += n as u64;
                self.index += n as u64;
                self.left -= n as u64;
                return self.next();
            }
            n -= rest as usize;
            self.index += rest;
            self.left -= rest;
            self.start += step.duration;
            self.step += 1;
            self.i = 0;
        }
        None
    }
}

impl ExactSizeIterator for Iter {}
impl FusedIterator for Iter {}

/// The slots a run sends, in order: a schedule's, made as the run asks for
/// them, or a list of them (chapter 12 deals one schedule's slots out to
/// several streams). Everything that runs slots takes `impl Into<Slots>`: a
/// [`Schedule`] (or its [`Iter`]), a `&[Slot]`, a `&Vec<Slot>` or a `Vec<Slot>`.
#[derive(Debug, Clone)]
pub struct Slots<'a>(Source<'a>);

#[derive(Debug, Clone)]
enum Source<'a> {
    Scheduled(Iter),
    Borrowed(slice::Iter<'a, Slot>),
    Owned(vec::IntoIter<Slot>),
}

impl Slots<'_> {
    /// The same slots, owning whatever they borrowed (a list is copied; a
    /// schedule's slots are made as they were).
    pub fn into_owned(self) -> Slots<'static> {
        Slots(match self.0 {
            Source::Scheduled(iter) => Source::Scheduled(iter),
            Source::Borrowed(list) => Source::Owned(list.as_slice().to_vec().into_iter()),
            Source::Owned(list) => Source::Owned(list),
        })
    }
}

impl Iterator for Slots<'_> {
    type Item = Slot;

    fn next(&mut self) -> Option<Slot> {
        match &mut self.0 {
            Source::Scheduled(iter) => iter.next(),
            Source::Borrowed(list) => list.next().copied(),
            Source::Owned(list) => list.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            Source::Scheduled(iter) => iter.size_hint(),
            Source::Borrowed(list) => list.size_hint(),
            Source::Owned(list) => list.size_hint(),
        }
    }

    fn nth(&mut self, n: usize) -> Option<Slot> {
        match &mut self.0 {
            Source::Scheduled(iter) => iter.nth(n),
            Source::Borrowed(list) => list.nth(n).copied(),
            Source::Owned(list) => list.nth(n),
        }
    }
}

impl ExactSizeIterator for Slots<'_> {}
impl FusedIterator for Slots<'_> {}

impl From<Iter> for Slots<'static> {
    fn from(iter: Iter) -> Self {
        Slots(Source::Scheduled(iter))
    }
}

impl From<&Schedule> for Slots<'static> {
    fn from(schedule: &Schedule) -> Self {
        schedule.iter().into()
    }
}

impl From<Schedule> for Slots<'static> {
    fn from(schedule: Schedule) -> Self {
        schedule.iter().into()
    }
}

impl<'a> From<&'a [Slot]> for Slots<'a> {
    fn from(slots: &'a [Slot]) -> Self {
        Slots(Source::Borrowed(slots.iter()))
    }
}

impl<'a> From<&'a Vec<Slot>> for Slots<'a> {
    fn from(slots: &'a Vec<Slot>) -> Self {
        slots.as_slice().into()
    }
}

impl From<Vec<Slot>> for Slots<'static> {
    fn from(slots: Vec<Slot>) -> Self {
        Slots(Source::Owned(slots.into_iter()))
    }
}

impl FromStr for Step {
    type Err = String;

    /// `80/s:36s`, `2.5/s:500ms`.
    fn from_str(text: &str) -> Result<Step, String> {
        let usage = || format!("`{text}` is not a step; {STEP_FORM}");
        let (rate, duration) = text.split_once(':').ok_or_else(usage)?;
        let rate: f64 = rate
            .trim()
            .strip_suffix("/s")
            .ok_or_else(usage)?
            .parse()
            .map_err(|_| usage())?;
        let duration = program::duration::parse(duration)
            .map_err(|e| format!("in `{text}`: {e}; {STEP_FORM}"))?;
        let step = Step { rate, duration };
        step.check_as(text)?;
        Ok(step)
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/s:{}", self.rate, Show(self.duration))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_rate_of_each_step() {
        let schedule = Schedule {
            steps: vec!["10/s:1s".parse().unwrap(), "20/s:500ms".parse().unwrap()],
        };
        let slots = schedule.slots();
        assert_eq!(slots.len(), 20);
        assert_eq!(slots[1].due, Duration::from_millis(100));
        assert_eq!(slots[10].step, 1);
        assert_eq!(slots[10].due, Duration::from_secs(1));
        assert_eq!(slots[11].due, Duration::from_millis(1050));
        assert_eq!(slots[19].index, 19);
        assert_eq!(schedule.duration(), Duration::from_millis(1500));
    }

    #[test]
    fn the_seed_schedule_has_2880_slots() {
        let slots = Schedule::constant(80.0, Duration::from_secs(36)).slots();
        assert_eq!(slots.len(), 2880);
        assert!(slots.last().unwrap().due < Duration::from_secs(36));
    }

    #[test]
    fn bad_steps_say_what_is_wrong() {
        for bad in [
            "80:36s",
            "80/s",
            "0/s:1s",
            "-5/s:1s",
            "80/s:ten",
            "80/s:10m",
            "80/s:0s",
            "0.4/s:1s",
            "1e9/s:1s",
            "NaN/s:1s",
            "inf/s:1s",
            "1e6/s:11s",
        ] {
            let error = bad.parse::<Step>().unwrap_err();
            assert!(
                error.contains(bad) || error.contains("must be"),
                "{bad}: {error}"
            );
        }
    }

    /// A billion slots: counted, and the first of them made, without a list
    /// of them ever existing (which would take 32 GB).
    #[test]
    fn a_long_fast_schedule_makes_its_slots_as_they_are_asked_for() {
        let schedule = Schedule::constant(1e6, Duration::from_secs(1000));
        assert_eq!(schedule.count(), 1_000_000_000);
        let mut slots = schedule.iter();
        assert_eq!(slots.len(), 1_000_000_000);
        let first: Vec<Slot> = slots.by_ref().take(100_000).collect();
        assert_eq!(first[99_999].index, 99_999);
        assert_eq!(first[99_999].due, Duration::from_micros(99_999));
        assert_eq!(slots.len(), 1_000_000_000 - 100_000);
        // Skipping ahead makes none of the slots in between.
        let last = slots.nth(1_000_000_000 - 100_000 - 1).unwrap();
        assert_eq!(last.index, 999_999_999);
        assert_eq!(last.due, Duration::from_micros(999_999_999));
        assert_eq!((slots.next(), slots.len()), (None, 0));
        assert!(schedule.check().unwrap_err().contains("1000000000 slots"));
    }

    /// The slots made one at a time are the slots of the list, whichever
    /// way they are walked, and across steps.
    #[test]
    fn made_slots_are_the_listed_slots() {
        let schedule = Schedule {
            steps: ["10/s:1s", "3/s:1s", "20/s:500ms", "2.5/s:2s"]
                .map(|s| s.parse().unwrap())
                .to_vec(),
        };
        let listed = schedule.slots();
        assert_eq!(listed.len() as u64, schedule.count());
        assert_eq!(listed.len(), 10 + 3 + 10 + 5);
        for n in 0..=listed.len() {
            assert_eq!(schedule.iter().nth(n), listed.get(n).copied(), "nth({n})");
            let rest: Vec<Slot> = Slots::from(&schedule).skip(n).collect();
            assert_eq!(rest, listed[n..], "after {n}");
        }
        for slots in [
            Slots::from(&listed),
            Slots::from(&listed[..]),
            Slots::from(listed.clone()),
            Slots::from(&listed).into_owned(),
            Slots::from(schedule.clone()),
        ] {
            assert_eq!(slots.len(), listed.len());
            assert_eq!(slots.collect::<Vec<_>>(), listed);
        }
    }
}
