//! A lazy timer wheel for connection deadlines.
//!
//! Time here is [`Millis`]: milliseconds since the worker started, read from the
//! monotonic clock once per loop turn, so deadlines are plain integers.
//!
//! Every connection has one deadline at a time (the timeout that applies to what it is
//! doing), kept in the connection itself and updated with a plain store as it makes
//! progress. The connection's live entry in the wheel sits in the slot of a time at or
//! before that deadline; the connection remembers that slot's tick. Moving the deadline
//! later costs nothing: when the entry comes due, the connection is looked at, and goes
//! back into the wheel at its current deadline unless that has passed. Moving it earlier
//! files a new entry and the old one becomes stale (its tick no longer matches; it is
//! dropped when it comes due). The work per turn is proportional to the entries that
//! come due, never to the number of connections.
//!
//! Slots are [`TICK_MS`] wide; a deadline fires up to one tick late, never early. (The
//! worker's clock trails the time by a few milliseconds: it lengthens every deadline
//! it files by that margin.)

/// Milliseconds since the worker started.
pub(crate) type Millis = u64;

/// Width of one slot, in milliseconds.
pub(crate) const TICK_MS: Millis = 100;
/// Number of slots (a power of two, a multiple of 64); deadlines further out than
/// `SLOTS` ticks wait in the last slot and are re-filed when it comes due.
const SLOTS: u64 = 1024;

/// A connection's place in the slab, its generation (so a reused slot is told apart),
/// and the tick the entry was filed for (so a superseded entry is told apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) index: usize,
    pub(crate) generation: u32,
    pub(crate) tick: u64,
}

/// The tick of a connection with no live entry.
pub(crate) const NOT_FILED: u64 = u64::MAX;

pub(crate) struct Wheel {
    /// The next tick to process.
    current: u64,
    slots: Vec<Vec<Entry>>,
    /// Bit `s` is set when slot `s` holds entries.
    occupied: [u64; (SLOTS / 64) as usize],
    len: usize,
}

impl Wheel {
    pub(crate) fn new() -> Wheel {
        Wheel {
            current: 0,
            slots: vec![Vec::new(); SLOTS as usize],
            occupied: [0; (SLOTS / 64) as usize],
            len: 0,
        }
    }

    /// The tick an entry for `deadline` would be filed for (the wheel's horizon at most).
    #[inline]
    pub(crate) fn tick_for(&self, deadline: Millis) -> u64 {
        // `max` then `min` rather than `clamp`, which is not inlined.
        (deadline / TICK_MS)
            .max(self.current)
            .min(self.current + SLOTS - 1)
    }

    /// Files an entry for connection `index` of `generation` to come due at `deadline`
    /// (or at the wheel's horizon, if later); returns the tick it was filed for.
    pub(crate) fn insert(&mut self, index: usize, generation: u32, deadline: Millis) -> u64 {
        let tick = self.tick_for(deadline);
        let s = (tick % SLOTS) as usize;
        self.slots[s].push(Entry {
            index,
            generation,
            tick,
        });
        self.occupied[s / 64] |= 1 << (s % 64);
        self.len += 1;
        tick
    }

    /// Number of entries filed.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// When the earliest occupied slot comes due (the end of its tick), if that is at or
    /// before `limit`. Looks at occupancy bits, a word (64 slots) at a time.
    pub(crate) fn next_due(&self, limit: Millis) -> Option<Millis> {
        if self.len == 0 {
            return None;
        }
        let last = (limit / TICK_MS).min(self.current + SLOTS - 1);
        let mut t = self.current;
        while t <= last {
            let s = (t % SLOTS) as usize;
            let word = self.occupied[s / 64] >> (s % 64);
            if word != 0 {
                let found = t + u64::from(word.trailing_zeros());
                return (found <= last).then_some((found + 1) * TICK_MS);
            }
            // Skip to the next word.
            t += 64 - (s % 64) as u64;
        }
        None
    }

    /// Whether [`Wheel::take_due`] at `now` would do anything: a tick has passed since
    /// the last one it processed. Most loop turns end well inside a tick, and this
    /// spares them the call.
    #[inline(always)]
    pub(crate) fn tick_passed(&self, now: Millis) -> bool {
        now >= (self.current + 1) * TICK_MS
    }

    /// Takes every entry of the slots that are due at `now` into `out` (cleared first).
    pub(crate) fn take_due(&mut self, now: Millis, out: &mut Vec<Entry>) {
        out.clear();
        let until = now / TICK_MS;
        // A slot is due once its whole tick has passed.
        while self.current < until && self.len > 0 {
            let s = (self.current % SLOTS) as usize;
            if self.occupied[s / 64] & (1 << (s % 64)) != 0 {
                self.occupied[s / 64] &= !(1 << (s % 64));
                let slot = &mut self.slots[s];
                self.len -= slot.len();
                out.append(slot);
            }
            self.current += 1;
        }
        if self.current < until {
            self.current = until;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_due_after_their_deadline_and_never_before() {
        let mut w = Wheel::new();
        let t1 = w.insert(1, 0, 250);
        let t2 = w.insert(2, 0, 5000);
        let e = |i, tick| Entry {
            index: i,
            generation: 0,
            tick,
        };
        let mut out = Vec::new();
        w.take_due(200, &mut out);
        assert!(out.is_empty());
        w.take_due(300, &mut out);
        assert_eq!(out, vec![e(1, t1)]);
        assert_eq!(w.len(), 1);
        assert_eq!(w.next_due(1000), None);
        assert_eq!(w.next_due(10_000), Some(5100));
        w.take_due(5099, &mut out);
        assert!(out.is_empty());
        w.take_due(5100, &mut out);
        assert_eq!(out, vec![e(2, t2)]);
        assert_eq!(w.next_due(100_000), None);
    }

    /// The worker skips re-filing a deadline that moved later, which is right only
    /// if `tick_for` never falls as the deadline or the current tick grows.
    #[test]
    fn tick_for_never_falls_as_the_deadline_or_the_current_tick_grows() {
        let times = [
            0, 1, 99, 100, 101, 5_000, 60_000, 102_299, 102_400, 102_500, 3_600_000,
        ];
        let mut out = Vec::new();
        for now0 in times {
            for now1 in times.into_iter().filter(|&t| t >= now0) {
                for d0 in times {
                    for d1 in times.into_iter().filter(|&d| d >= d0) {
                        let mut w = Wheel::new();
                        w.take_due(now0, &mut out);
                        let before = w.tick_for(d0);
                        w.take_due(now1, &mut out);
                        let after = w.tick_for(d1);
                        assert!(
                            before <= after,
                            "{d0}@{now0} {before} > {d1}@{now1} {after}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn deadlines_past_the_horizon_wait_in_the_last_slot() {
        let mut w = Wheel::new();
        w.insert(7, 3, 3_600_000);
        let mut out = Vec::new();
        w.take_due(TICK_MS * (SLOTS + 1), &mut out);
        // Due at the horizon: the caller sees the deadline has not passed and re-files.
        assert_eq!(out.len(), 1);
    }

    /// `tick_passed` is false exactly when `take_due` would take nothing and leave the
    /// wheel as it is (so the worker may skip the call).
    #[test]
    fn tick_passed_is_false_only_when_take_due_would_do_nothing() {
        let mut out = Vec::new();
        for start in [0, 99, 100, 250, 102_400] {
            for now in [start, start + 1, start + 99, start + 100, start + 250] {
                let mut w = Wheel::new();
                w.take_due(start, &mut out);
                w.insert(1, 0, now);
                w.insert(2, 0, start);
                let passed = w.tick_passed(now);
                let (current, len) = (w.current, w.len);
                w.take_due(now, &mut out);
                assert_eq!(
                    passed,
                    !out.is_empty() || w.current != current || w.len != len,
                    "start {start}, now {now}"
                );
            }
        }
    }

    #[test]
    fn past_deadlines_are_due_on_the_next_tick() {
        let mut w = Wheel::new();
        let mut out = Vec::new();
        w.take_due(2000, &mut out);
        w.insert(1, 0, 0);
        assert_eq!(w.next_due(5000), Some(2100));
        w.take_due(2150, &mut out);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn next_due_finds_slots_across_words_and_the_wrap() {
        let mut w = Wheel::new();
        let mut out = Vec::new();
        // Move `current` near the end of the ring so the next entry wraps around.
        w.take_due(TICK_MS * (SLOTS - 3), &mut out);
        w.insert(1, 0, TICK_MS * (SLOTS + 70));
        assert_eq!(
            w.next_due(TICK_MS * (SLOTS + 100)),
            Some(TICK_MS * (SLOTS + 71))
        );
        assert_eq!(w.next_due(TICK_MS * (SLOTS + 60)), None);
        w.take_due(TICK_MS * (SLOTS + 71), &mut out);
        assert_eq!(out.len(), 1);
    }
}
