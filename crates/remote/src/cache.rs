//! The bytes of one object fetched so far: non-overlapping extents, least recently used ones
//! evicted past a byte budget, except those of the current read (pinned until the next one).

use std::collections::BTreeMap;
use std::ops::Range;

use bytes::Bytes;

struct Extent {
    data: Bytes,
    /// Last use, on a counter that ticks once per lookup.
    used: u64,
    /// The read (see [`Cache::begin`]) that last used it.
    read: u64,
}

/// Fetched byte extents keyed by their first byte; they never overlap.
pub(crate) struct Cache {
    extents: BTreeMap<u64, Extent>,
    bytes: usize,
    budget: usize,
    tick: u64,
    read: u64,
}

impl Cache {
    /// A cache that keeps at most `budget` bytes besides those of the current read.
    pub(crate) fn new(budget: usize) -> Self {
        Self {
            extents: BTreeMap::new(),
            bytes: 0,
            budget,
            tick: 0,
            read: 0,
        }
    }

    /// Starts a new read: what the previous one pinned may now be evicted.
    pub(crate) fn begin(&mut self) {
        self.read += 1;
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Copies the bytes at `pos` into `buf` from the extent holding `pos`; `None` on a miss.
    pub(crate) fn read_at(&mut self, pos: u64, buf: &mut [u8]) -> Option<usize> {
        let (&start, extent) = self.extents.range_mut(..=pos).next_back()?;
        let offset = (pos - start) as usize;
        if offset >= extent.data.len() {
            return None;
        }
        self.tick += 1;
        extent.used = self.tick;
        extent.read = self.read;
        let n = buf.len().min(extent.data.len() - offset);
        buf[..n].copy_from_slice(&extent.data[offset..offset + n]);
        Some(n)
    }

    /// The parts of `range` no extent holds, in order; the extents that hold the rest are
    /// pinned to the current read.
    pub(crate) fn missing(&mut self, range: Range<u64>) -> Vec<Range<u64>> {
        let mut gaps = Vec::new();
        let mut at = range.start;
        // The extent that starts before the range may reach into it.
        let first = self
            .extents
            .range(..range.start)
            .next_back()
            .map_or(range.start, |(&s, _)| s);
        for (&start, extent) in self.extents.range_mut(first..range.end) {
            let end = start + extent.data.len() as u64;
            if end <= at {
                continue;
            }
            if start > at {
                gaps.push(at..start);
            }
            extent.read = self.read;
            at = end;
        }
        if at < range.end {
            gaps.push(at..range.end);
        }
        gaps
    }

    /// The largest range around `pos` inside `block` that no extent holds (`pos` must be
    /// missing): where a read outside every fetched range fetches.
    pub(crate) fn gap_around(&self, pos: u64, block: Range<u64>) -> Range<u64> {
        let start = self
            .extents
            .range(..=pos)
            .next_back()
            .map_or(block.start, |(&s, e)| {
                (s + e.data.len() as u64).max(block.start)
            });
        let end = self
            .extents
            .range(pos + 1..)
            .next()
            .map_or(block.end, |(&s, _)| s.min(block.end));
        start..end
    }

    /// Adds the bytes starting at `start` (a range [`Cache::missing`] or
    /// [`Cache::gap_around`] returned), pinned to the current read, then evicts the least
    /// recently used unpinned extents past the budget.
    pub(crate) fn insert(&mut self, start: u64, data: Bytes) {
        if data.is_empty() {
            return;
        }
        self.tick += 1;
        self.bytes += data.len();
        let extent = Extent {
            data,
            used: self.tick,
            read: self.read,
        };
        if let Some(old) = self.extents.insert(start, extent) {
            self.bytes -= old.data.len();
        }
        while self.bytes > self.budget {
            let victim = self
                .extents
                .iter()
                .filter(|(_, e)| e.read != self.read)
                .min_by_key(|(_, e)| e.used)
                .map(|(&s, _)| s);
            let Some(start) = victim else { break };
            let old = self.extents.remove(&start).expect("the victim is held");
            self.bytes -= old.data.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(start: u64, len: usize) -> Bytes {
        Bytes::from(
            (0..len)
                .map(|i| (start as usize + i) as u8)
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn reads_come_from_the_extent_holding_the_position() {
        let mut c = Cache::new(1 << 20);
        c.insert(10, filled(10, 5));
        let mut buf = [0u8; 8];
        assert_eq!(c.read_at(12, &mut buf), Some(3));
        assert_eq!(&buf[..3], &[12, 13, 14]);
        assert_eq!(c.read_at(15, &mut buf), None);
        assert_eq!(c.read_at(9, &mut buf), None);
    }

    #[test]
    fn missing_lists_the_gaps_between_extents() {
        let mut c = Cache::new(1 << 20);
        c.insert(10, filled(10, 5)); // 10..15
        c.insert(20, filled(20, 5)); // 20..25
        assert_eq!(c.missing(0..30), vec![0..10, 15..20, 25..30]);
        assert_eq!(c.missing(12..22), vec![15..20]);
        assert_eq!(c.missing(11..14), Vec::<Range<u64>>::new());
        assert_eq!(c.missing(25..26), vec![25..26]);
        assert_eq!(c.gap_around(17, 0..64), 15..20);
        assert_eq!(c.gap_around(30, 0..64), 25..64);
        assert_eq!(c.gap_around(3, 0..8), 0..8);
    }

    #[test]
    fn eviction_drops_the_least_recently_used_but_never_the_current_read() {
        let mut c = Cache::new(10);
        c.insert(0, filled(0, 4));
        c.insert(100, filled(100, 4));
        c.begin();
        let mut buf = [0u8; 1];
        assert!(c.read_at(0, &mut buf).is_some()); // 0..4 is now the more recent
        c.insert(200, filled(200, 4)); // 12 bytes > 10: 100..104 goes
        assert_eq!(c.bytes(), 8);
        assert_eq!(c.missing(100..104), vec![100..104]);
        // A read larger than the budget keeps all of its own extents.
        c.begin();
        c.insert(300, filled(300, 8));
        c.insert(400, filled(400, 8));
        assert_eq!(c.bytes(), 16);
        assert!(c.missing(300..308).is_empty() && c.missing(400..408).is_empty());
    }
}
