//! Keeping a mirror's log readable: failures are logged on the 1st, 2nd,
//! 4th, 8th, ... only, and comparison lines at most ten in a second of the
//! clock, the others counted into the next line's `skipped`.

use std::time::Duration;

use tokio::time::Instant;

/// Whether the `count`th failure (from 1) is logged.
pub fn logs_failure(count: u64) -> bool {
    count.is_power_of_two()
}

/// How many lines a second may carry.
const LINES_PER_SECOND: u32 = 10;

/// Ten lines a second, the rest counted.
#[derive(Debug, Default)]
pub struct LineThrottle {
    /// The start of the current second and the lines logged in it.
    window: Option<(Instant, u32)>,
    /// Lines not logged since the last one that was.
    skipped: u64,
}

impl LineThrottle {
    /// At `now`, may a line be logged? `Some(skipped)` (the lines dropped
    /// since the last one) if so, `None` if it is dropped and counted.
    pub fn admit(&mut self, now: Instant) -> Option<u64> {
        let (start, lines) = match self.window {
            Some((start, lines)) if now.duration_since(start) < Duration::from_secs(1) => (start, lines),
            _ => (now, 0),
        };
        if lines >= LINES_PER_SECOND {
            self.window = Some((start, lines));
            self.skipped += 1;
            return None;
        }
        self.window = Some((start, lines + 1));
        Some(std::mem::take(&mut self.skipped))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_logged_on_powers_of_two() {
        let logged: Vec<u64> = (1..=100).filter(|&n| logs_failure(n)).collect();
        assert_eq!(logged, [1, 2, 4, 8, 16, 32, 64]);
        assert!(!logs_failure(0));
    }

    #[tokio::test(start_paused = true)]
    async fn ten_lines_a_second_and_the_next_says_how_many_were_skipped() {
        let mut throttle = LineThrottle::default();
        let start = Instant::now();
        let admitted: Vec<Option<u64>> = (0..25).map(|_| throttle.admit(start)).collect();
        assert_eq!(admitted.iter().filter(|a| a.is_some()).count(), 10);
        assert!(admitted[..10].iter().all(|a| *a == Some(0)));
        assert_eq!(throttle.admit(start + Duration::from_millis(999)), None);
        assert_eq!(throttle.admit(start + Duration::from_secs(1)), Some(16), "15 + 1 skipped in the first second");
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(throttle.admit(Instant::now()), Some(0));
    }
}
