//! The decoded chunks (strips or tiles) a [`ChunkedReader`](crate::ChunkedReader) keeps for
//! the windows that overlap them.

use tiff::decoder::DecodingResult;

/// The most bytes of decoded chunks a [`ChunkedReader`](crate::ChunkedReader) keeps.
pub(crate) const CACHE_MOST_BYTES: usize = 128 << 20;

/// Decoded chunks, the least recently used dropped first beyond a byte budget. Sliding
/// windows overlap each other and the chunks: without it, windows smaller than a chunk, or
/// not aligned to them, decode the same chunk again and again (a 512² tile read by 128²
/// windows was decoded up to 16 times).
#[derive(Default)]
pub(crate) struct ChunkCache {
    /// `(chunk index, decoded samples)`, most recently used last.
    chunks: std::collections::VecDeque<(u32, DecodingResult)>,
    bytes: usize,
    budget: usize,
    /// An evicted buffer, decoded into next instead of a new allocation.
    spare: Option<DecodingResult>,
}

impl ChunkCache {
    pub(crate) fn set_budget(&mut self, bytes: usize) {
        self.budget = bytes;
    }

    pub(crate) fn holds(&self, chunk: u32) -> bool {
        self.chunks.iter().any(|(c, _)| *c == chunk)
    }

    /// The decoded chunk, marked as used most recently.
    pub(crate) fn get(&mut self, chunk: u32) -> Option<&DecodingResult> {
        let at = self.chunks.iter().position(|(c, _)| *c == chunk)?;
        let entry = self.chunks.remove(at)?;
        self.chunks.push_back(entry);
        self.chunks.back().map(|(_, d)| d)
    }

    /// A buffer to decode the next chunk into.
    pub(crate) fn spare(&mut self) -> DecodingResult {
        self.spare.take().unwrap_or(DecodingResult::U8(Vec::new()))
    }

    /// Keeps `decoded` as `chunk`, dropping the least recently used beyond the budget (the
    /// newest always stays).
    pub(crate) fn insert(&mut self, chunk: u32, decoded: DecodingResult) {
        self.bytes += decoded_bytes(&decoded);
        self.chunks.push_back((chunk, decoded));
        while self.bytes > self.budget && self.chunks.len() > 1 {
            let (_, old) = self.chunks.pop_front().expect("more than one chunk");
            self.bytes -= decoded_bytes(&old);
            self.spare = Some(old);
        }
    }
}

/// Bytes of decoded samples.
fn decoded_bytes(d: &DecodingResult) -> usize {
    match d {
        DecodingResult::U8(v) => v.len(),
        DecodingResult::U16(v) => 2 * v.len(),
        DecodingResult::F32(v) => 4 * v.len(),
        other => std::mem::size_of_val(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(n: usize) -> DecodingResult {
        DecodingResult::U16(vec![7; n])
    }

    #[test]
    fn the_least_recently_used_goes_first_and_the_newest_always_stays() {
        let mut cache = ChunkCache::default();
        cache.set_budget(3 * 200);
        for c in 0..3 {
            cache.insert(c, chunk(100));
        }
        assert!((0..3).all(|c| cache.holds(c)));
        // Using 0 makes 1 the least recently used.
        assert!(cache.get(0).is_some());
        cache.insert(3, chunk(100));
        assert!(!cache.holds(1) && cache.holds(0) && cache.holds(2) && cache.holds(3));
        // The evicted buffer is decoded into next.
        assert!(matches!(cache.spare(), DecodingResult::U16(v) if v.len() == 100));
        // A chunk over the whole budget still stays, alone.
        cache.insert(9, chunk(1000));
        assert!(cache.holds(9) && !cache.holds(0) && !cache.holds(3));
    }
}
