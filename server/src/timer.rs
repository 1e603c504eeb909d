//! A lazy timer wheel for connection deadlines.
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
//! Slots are [`TICK`] wide; a deadline fires up to one tick late, never early.

use std::time::{Duration, Instant};

/// Width of one slot.
pub(crate) const TICK: Duration = Duration::from_millis(100);
/// Number of slots; deadlines further out than `SLOTS * TICK` wait in the last slot and
/// are re-filed when it comes due.
const SLOTS: usize = 1024;

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
    origin: Instant,
    /// The next tick to process (ticks since `origin`).
    current: u64,
    slots: Vec<Vec<Entry>>,
    len: usize,
}

impl Wheel {
    pub(crate) fn new(now: Instant) -> Wheel {
        Wheel {
            origin: now,
            current: 0,
            slots: vec![Vec::new(); SLOTS],
            len: 0,
        }
    }

    fn tick_of(&self, t: Instant) -> u64 {
        (t.saturating_duration_since(self.origin).as_nanos() / TICK.as_nanos()) as u64
    }

    /// The tick an entry for `deadline` would be filed for (the wheel's horizon at most).
    pub(crate) fn tick_for(&self, deadline: Instant) -> u64 {
        self.tick_of(deadline)
            .max(self.current)
            .min(self.current + SLOTS as u64 - 1)
    }

    /// Files an entry for connection `index` of `generation` to come due at `deadline`
    /// (or at the wheel's horizon, if later); returns the tick it was filed for.
    pub(crate) fn insert(&mut self, index: usize, generation: u32, deadline: Instant) -> u64 {
        let tick = self.tick_for(deadline);
        self.slots[(tick % SLOTS as u64) as usize].push(Entry {
            index,
            generation,
            tick,
        });
        self.len += 1;
        tick
    }

    /// Number of entries filed.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// When the earliest non-empty slot comes due, if that is before `limit`: looks at
    /// the slots up to `limit` only, so a loop about to sleep for at most a second
    /// checks at most ten of them.
    pub(crate) fn next_due(&self, limit: Instant) -> Option<Instant> {
        if self.len == 0 {
            return None;
        }
        let last = self.tick_of(limit).min(self.current + SLOTS as u64 - 1);
        (self.current..=last)
            .find(|t| !self.slots[(t % SLOTS as u64) as usize].is_empty())
            .map(|t| self.origin + TICK * (t + 1) as u32)
    }

    /// Takes every entry of the slots that are due at `now` into `out` (cleared first).
    pub(crate) fn take_due(&mut self, now: Instant, out: &mut Vec<Entry>) {
        out.clear();
        let until = self.tick_of(now);
        // A slot is due once its whole tick has passed.
        while self.current < until {
            let slot = &mut self.slots[(self.current % SLOTS as u64) as usize];
            self.len -= slot.len();
            out.append(slot);
            self.current += 1;
            if self.len == 0 {
                self.current = until;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_due_after_their_deadline_and_never_before() {
        let t0 = Instant::now();
        let mut w = Wheel::new(t0);
        let t1 = w.insert(1, 0, t0 + Duration::from_millis(250));
        let t2 = w.insert(2, 0, t0 + Duration::from_secs(5));
        let e = |i, tick| Entry {
            index: i,
            generation: 0,
            tick,
        };
        let mut out = Vec::new();
        w.take_due(t0 + Duration::from_millis(200), &mut out);
        assert!(out.is_empty());
        w.take_due(t0 + Duration::from_millis(300), &mut out);
        assert_eq!(out, vec![e(1, t1)]);
        assert_eq!(w.len(), 1);
        assert_eq!(w.next_due(t0 + Duration::from_secs(1)), None);
        let due = w.next_due(t0 + Duration::from_secs(10)).unwrap();
        assert!(due >= t0 + Duration::from_secs(5) && due <= t0 + Duration::from_millis(5100));
        w.take_due(t0 + Duration::from_millis(5100), &mut out);
        assert_eq!(out, vec![e(2, t2)]);
        assert_eq!(w.next_due(t0 + Duration::from_secs(100)), None);
    }

    #[test]
    fn deadlines_past_the_horizon_wait_in_the_last_slot() {
        let t0 = Instant::now();
        let mut w = Wheel::new(t0);
        w.insert(7, 3, t0 + Duration::from_secs(3600));
        let mut out = Vec::new();
        w.take_due(t0 + TICK * (SLOTS as u32 + 1), &mut out);
        // Due at the horizon: the caller sees the deadline has not passed and re-files.
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn past_deadlines_are_due_on_the_next_tick() {
        let t0 = Instant::now();
        let mut w = Wheel::new(t0);
        let mut out = Vec::new();
        w.take_due(t0 + Duration::from_secs(2), &mut out);
        w.insert(1, 0, t0);
        w.take_due(t0 + Duration::from_millis(2150), &mut out);
        assert_eq!(out.len(), 1);
    }
}
