//! Measuring a GPU honestly: when it has run long enough to be timed.
//!
//! A GPU that has idled, or has had only short bursts of work, runs at a low clock, and its
//! governor raises the clock only after some time of steady load, sometimes in steps, and how
//! long that takes is the driver's affair (docs/PERFORMANCE.md, "Method"). A fixed warm-up is
//! therefore too short for some sizes or wasted on others, and a time that is flat for a while
//! can still drop, so [`WarmUp`] has a floor and past it keeps the GPU busy until a sort's time
//! has stopped falling.

use std::time::{Duration, Instant};

/// The rule for when warming up can stop, counted from the end of the first batch: at least
/// [`WarmUp::AT_LEAST`] of work, then until the median time of a batch of sorts has not improved
/// by more than 5 % for [`WarmUp::SETTLED`] and the latest batch is within 5 % of the best; never
/// more than [`WarmUp::AT_MOST`] (a GPU whose clock never rises for this work is then timed as it
/// runs it).
///
/// ```
/// use bitonic_vk::WarmUp;
/// use std::time::Duration;
///
/// let mut warm = WarmUp::new();
/// loop {
///     // Run a batch of untimed sorts (about 0.1 s of GPU work) and take their median time.
///     std::thread::sleep(Duration::from_millis(50));
///     let median = Duration::from_micros(85);
///     if warm.settled(median) {
///         break;
///     }
/// }
/// assert!(warm.elapsed() >= WarmUp::AT_LEAST);
/// ```
#[derive(Clone, Debug, Default)]
pub struct WarmUp {
    /// When the first batch ended: the warm-up counts from there, since that batch's wall time
    /// also holds one-off costs (buffers allocated, pipelines made for a new length), which keep
    /// the GPU idle.
    start: Option<Instant>,
    best: Option<Duration>,
    /// The median that last improved on the one before it by more than 5 %, and when.
    improved: Option<(Duration, Instant)>,
}

impl WarmUp {
    /// The least warm-up, whatever the times read: a GPU that had idled for seconds ran small sorts
    /// at a low clock for all of a first second of them; two seconds leave room for a step that
    /// comes late.
    pub const AT_LEAST: Duration = Duration::from_secs(2);
    /// How long the best time must stand before the clock counts as settled.
    pub const SETTLED: Duration = Duration::from_millis(500);
    /// The most warm-up.
    pub const AT_MOST: Duration = Duration::from_secs(4);

    /// A warm-up with no batch run yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the median sort time of the batch just run and says whether warming can stop.
    pub fn settled(&mut self, median: Duration) -> bool {
        self.settled_at(median, Instant::now())
    }

    /// How long the warm-up has run since its first batch.
    pub fn elapsed(&self) -> Duration {
        self.start.map_or(Duration::ZERO, |start| start.elapsed())
    }

    fn settled_at(&mut self, median: Duration, now: Instant) -> bool {
        let start = *self.start.get_or_insert(now);
        let best = self.best.map_or(median, |best| best.min(median));
        self.best = Some(best);
        let improved_at = match self.improved {
            Some((reference, at)) if median.as_secs_f64() >= reference.as_secs_f64() * 0.95 => at,
            _ => {
                self.improved = Some((median, now));
                now
            }
        };
        let elapsed = now.saturating_duration_since(start);
        let still = now.saturating_duration_since(improved_at);
        elapsed >= Self::AT_MOST
            || (elapsed >= Self::AT_LEAST
                && still >= Self::SETTLED
                && median.as_secs_f64() <= best.as_secs_f64() * 1.05)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(us: u64) -> Duration {
        Duration::from_micros(us)
    }

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    /// Feeds `medians` one every 100 ms, the first after 5 s (a batch that made pipelines), and
    /// returns after how many batches the rule stopped.
    fn batches_until_settled(medians: impl IntoIterator<Item = Duration>) -> Option<usize> {
        let mut warm = WarmUp::new();
        let base = Instant::now() + Duration::from_secs(5);
        medians
            .into_iter()
            .enumerate()
            .find_map(|(i, median)| warm.settled_at(median, base + ms(100) * i as u32).then_some(i + 1))
    }

    #[test]
    fn the_first_batch_never_settles_it() {
        let mut warm = WarmUp::new();
        assert!(!warm.settled_at(us(85), Instant::now() + Duration::from_secs(10)));
    }

    #[test]
    fn a_steady_clock_stops_after_the_least_warm_up_and_the_settling_time() {
        // Counted from the first batch, settled from 0.5 s, but not before 2 s.
        assert_eq!(batches_until_settled(std::iter::repeat_n(us(85), 60)), Some(21));
    }

    #[test]
    fn a_clock_that_rises_late_keeps_it_warming() {
        // 248 us for 1.7 s, then 84 us: the drop at batch 19 (1.8 s) restarts the settling time.
        let medians = (1..=60).map(|i| if i <= 18 { us(248) } else { us(84) });
        assert_eq!(batches_until_settled(medians), Some(24));
    }

    #[test]
    fn small_wobbles_do_not_count_as_improvement() {
        // 100 us, then 4 % less from batch 20 (1.9 s): less than 5 %, so it settles as if steady
        // (a rule that restarted on any improvement would wait until 2.4 s).
        let medians = (1..=60).map(|i| if i < 20 { us(100) } else { us(96) });
        assert_eq!(batches_until_settled(medians), Some(21));
    }

    #[test]
    fn a_batch_slower_than_the_best_waits_for_a_good_one() {
        // Steady at 100 us, but batch 21 reads 150 us: stop at the next batch back near the best.
        let medians = (1..=60).map(|i| if i == 21 { us(150) } else { us(100) });
        assert_eq!(batches_until_settled(medians), Some(22));
    }

    #[test]
    fn a_clock_that_keeps_falling_stops_at_the_most() {
        let medians = (1..=60).map(|i| us(1000 - 15 * i));
        assert_eq!(batches_until_settled(medians), Some(41));
    }
}
