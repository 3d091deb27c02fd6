//! Streaming polygonization: 4-connected regions of equal class, traced along pixel edges.
//!
//! Rows arrive top to bottom. Each row's pixels are labelled against the row above (union-find
//! over labels, so U shapes that meet lower down merge), and the boundary edges between a
//! region and anything else (another class, nodata, the image border) are appended to the
//! region as they appear. A region none of whose pixels are in the newest row is complete: its
//! edges are joined into rings and it is handed out. Memory is the two current rows plus the
//! boundary edges of the open regions.

use crate::rings::assemble;

/// The class code of "outside the image" on the other side of an edge.
pub(crate) const OUTSIDE: u16 = 257;
const NONE: u32 = u32::MAX;

/// One 4-connected region of one class, as closed rings along pixel edges.
#[derive(Clone, Debug, PartialEq)]
pub struct Region {
    /// Its class index.
    pub class: u8,
    /// Closed rings (first point repeated last) in pixel-corner coordinates `(col, row)`: the
    /// outer ring first, then the holes. Rows go down, so the outer ring has a positive
    /// shoelace sum in these coordinates and the holes a negative one.
    pub rings: Vec<Vec<[f64; 2]>>,
    /// Its pixel count.
    pub pixels: u64,
    /// The sum of its pixels' (finite) probabilities.
    pub confidence_sum: f64,
    /// How many of its pixels had a finite probability.
    pub confidence_count: u64,
    /// Per ring, per edge `i` (point `i` to `i + 1`): the class on the other side
    /// (a class index, 255 for nodata, `OUTSIDE` for the image border).
    pub(crate) neighbours: Vec<Vec<u16>>,
    /// Per ring, per point (without the closing repeat): a saddle vertex, which simplification
    /// must keep.
    pub(crate) saddle: Vec<Vec<bool>>,
}

impl Region {
    /// The mean probability of its pixels, `None` when none was finite.
    pub fn mean_probability(&self) -> Option<f64> {
        (self.confidence_count > 0).then(|| self.confidence_sum / self.confidence_count as f64)
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Edge {
    pub(crate) from: [u32; 2],
    pub(crate) to: [u32; 2],
    pub(crate) other: u16,
}

impl Edge {
    /// The unit direction `(dx, dy)`.
    pub(crate) fn dir(&self) -> [i64; 2] {
        [
            (self.to[0] as i64 - self.from[0] as i64).signum(),
            (self.to[1] as i64 - self.from[1] as i64).signum(),
        ]
    }
}

#[derive(Debug, Default)]
pub(crate) struct Open {
    pub(crate) class: u8,
    pub(crate) pixels: u64,
    pub(crate) confidence_sum: f64,
    pub(crate) confidence_count: u64,
    pub(crate) edges: Vec<Edge>,
    pub(crate) saddles: Vec<[u32; 2]>,
    /// Labels merged into this one (freed with it).
    members: Vec<u32>,
    last_row: usize,
    checked_row: usize,
}

impl Open {
    /// Appends an edge, extending the last one when it continues it.
    fn push_edge(&mut self, e: Edge) {
        if let Some(last) = self.edges.last_mut()
            && last.other == e.other
            && last.dir() == e.dir()
        {
            if last.to == e.from {
                last.to = e.to;
                return;
            }
            if e.to == last.from {
                last.from = e.from;
                return;
            }
        }
        self.edges.push(e);
    }
}

/// Turns a class map streamed as rows into [`Region`]s, in bounded memory.
///
/// Connectivity is 4-connected (as GDAL's polygonize default): pixels of a class that touch
/// only diagonally belong to separate regions; where they do, the rings touch at that corner
/// but do not cross. No ring passes through a corner twice: where a region's own pixels meet
/// diagonally (joined elsewhere), its rings are split there into an outer ring and a hole, or
/// two holes, touching at the corner (valid OGC polygons, no figure-eight rings). Nodata (255)
/// and classes not selected are never polygonized.
#[derive(Debug)]
pub struct Polygonizer {
    width: usize,
    height: usize,
    selected: [bool; 256],
    row: usize,
    prev: Vec<u8>,
    prev_labels: Vec<u32>,
    cur_labels: Vec<u32>,
    parent: Vec<u32>,
    open: Vec<Option<Open>>,
    free: Vec<u32>,
    /// Vertical runs still growing: slot `2x` the +y run at `x`, `2x + 1` the −y run.
    runs: Vec<Option<Run>>,
}

/// A vertical boundary run from row `y0` down to the current row.
#[derive(Clone, Copy, Debug)]
struct Run {
    label: u32,
    other: u16,
    y0: u32,
}

impl Polygonizer {
    /// A polygonizer for a `width × height` class map; `selected[k]` says whether class `k` is
    /// polygonized (missing entries are not; 255 never is).
    pub fn new(width: usize, height: usize, selected: Vec<bool>) -> Self {
        let mut sel = [false; 256];
        for (k, &s) in selected.iter().enumerate().take(255) {
            sel[k] = s;
        }
        Polygonizer {
            width,
            height,
            selected: sel,
            row: 0,
            prev: Vec::new(),
            prev_labels: Vec::new(),
            cur_labels: vec![NONE; width],
            parent: Vec::new(),
            open: Vec::new(),
            free: Vec::new(),
            runs: vec![None; 2 * (width + 1)],
        }
    }

    /// Feeds the next rows (row-major, `width` values each; `confidence` the same length) and
    /// returns the regions they completed.
    ///
    /// # Panics
    /// When the lengths are not a whole number of rows, differ, or go past `height`.
    pub fn push_rows(&mut self, classes: &[u8], confidence: &[f32]) -> Vec<Region> {
        let w = self.width;
        assert_eq!(
            classes.len(),
            confidence.len(),
            "classes and confidence differ in length"
        );
        if w == 0 {
            return Vec::new();
        }
        assert_eq!(classes.len() % w, 0, "rows must be {w} values wide");
        let rows = classes.len() / w;
        assert!(
            self.row + rows <= self.height,
            "more rows than the grid's {}",
            self.height
        );
        let mut done = Vec::new();
        for r in 0..rows {
            let span = r * w..(r + 1) * w;
            self.push_row(&classes[span.clone()], &confidence[span], &mut done);
        }
        done
    }

    /// Closes the last row and returns every region still open.
    pub fn finish(mut self) -> Vec<Region> {
        for slot in 0..self.runs.len() {
            self.end_run(slot);
        }
        let y = self.row as u32;
        for c in 0..self.prev.len() {
            let k = self.prev[c];
            if self.selected[k as usize] {
                let id = self.find(self.prev_labels[c]);
                let e = Edge {
                    from: [c as u32 + 1, y],
                    to: [c as u32, y],
                    other: OUTSIDE,
                };
                self.region(id).push_edge(e);
            }
        }
        let mut done = Vec::new();
        for id in 0..self.open.len() {
            if self.parent[id] == id as u32 && self.open[id].is_some() {
                let reg = self.open[id].take().unwrap();
                done.push(assemble(reg));
            }
        }
        done
    }

    fn region(&mut self, id: u32) -> &mut Open {
        self.open[id as usize]
            .as_mut()
            .expect("label of an open region")
    }

    fn find(&mut self, mut id: u32) -> u32 {
        let mut root = id;
        while self.parent[root as usize] != root {
            root = self.parent[root as usize];
        }
        while self.parent[id as usize] != root {
            let next = self.parent[id as usize];
            self.parent[id as usize] = root;
            id = next;
        }
        root
    }

    fn new_label(&mut self, class: u8) -> u32 {
        let reg = Open {
            class,
            checked_row: usize::MAX,
            ..Open::default()
        };
        if let Some(id) = self.free.pop() {
            self.parent[id as usize] = id;
            self.open[id as usize] = Some(reg);
            id
        } else {
            let id = self.open.len() as u32;
            self.parent.push(id);
            self.open.push(Some(reg));
            id
        }
    }

    /// Merges the regions of labels `a` and `b`, the larger absorbing the smaller; the root.
    fn union(&mut self, a: u32, b: u32) -> u32 {
        let (a, b) = (self.find(a), self.find(b));
        if a == b {
            return a;
        }
        let size = |s: &Self, id: u32| s.open[id as usize].as_ref().map_or(0, |r| r.edges.len());
        let (big, small) = if size(self, a) >= size(self, b) {
            (a, b)
        } else {
            (b, a)
        };
        let s = self.open[small as usize].take().expect("open region");
        self.parent[small as usize] = big;
        let r = self.region(big);
        r.pixels += s.pixels;
        r.confidence_sum += s.confidence_sum;
        r.confidence_count += s.confidence_count;
        r.edges.extend(s.edges);
        r.saddles.extend(s.saddles);
        r.members.push(small);
        r.members.extend(s.members);
        r.last_row = r.last_row.max(s.last_row);
        big
    }

    /// Extends the run in `slot` by this row's edge (label, other class), or ends it there.
    fn continue_run(&mut self, slot: usize, edge: Option<(u32, u16)>) {
        if let (Some(run), Some((label, other))) = (self.runs[slot], edge)
            && run.other == other
            && self.find(run.label) == self.find(label)
        {
            return;
        }
        self.end_run(slot);
        self.runs[slot] = edge.map(|(label, other)| Run {
            label,
            other,
            y0: self.row as u32,
        });
    }

    /// Hands the run in `slot`, which ended above the current row, to its region.
    fn end_run(&mut self, slot: usize) {
        let Some(run) = self.runs[slot].take() else {
            return;
        };
        let (x, y1) = ((slot / 2) as u32, self.row as u32);
        let (from, to) = if slot.is_multiple_of(2) {
            ([x, run.y0], [x, y1])
        } else {
            ([x, y1], [x, run.y0])
        };
        let id = self.find(run.label);
        self.region(id).push_edge(Edge {
            from,
            to,
            other: run.other,
        });
    }

    fn push_row(&mut self, cur: &[u8], conf: &[f32], done: &mut Vec<Region>) {
        let (w, y) = (self.width, self.row);
        let (yu, sel) = (y as u32, self.selected);
        let has_prev = y > 0;
        // Labels: left neighbour first, then the one above (merging when both match).
        for c in 0..w {
            let k = cur[c];
            if !sel[k as usize] {
                self.cur_labels[c] = NONE;
                continue;
            }
            let left = (c > 0 && cur[c - 1] == k).then(|| self.cur_labels[c - 1]);
            let up = (has_prev && self.prev[c] == k).then(|| self.prev_labels[c]);
            let id = match (left, up) {
                (Some(l), Some(u)) => self.union(l, u),
                (Some(l), None) => self.find(l),
                (None, Some(u)) => self.find(u),
                (None, None) => self.new_label(k),
            };
            self.cur_labels[c] = id;
            let r = self.region(id);
            r.pixels += 1;
            r.last_row = y;
            if conf[c].is_finite() {
                r.confidence_sum += conf[c] as f64;
                r.confidence_count += 1;
            }
        }
        let code = |k: u8| k as u16;
        // Top edges (+x) of this row's pixels; the interior is on the right-hand side when
        // walking an edge with rows going down.
        for (c, &k) in cur.iter().enumerate() {
            if !sel[k as usize] || (has_prev && self.prev[c] == k) {
                continue;
            }
            let id = self.find(self.cur_labels[c]);
            let other = if has_prev {
                code(self.prev[c])
            } else {
                OUTSIDE
            };
            let cu = c as u32;
            self.region(id).push_edge(Edge {
                from: [cu, yu],
                to: [cu + 1, yu],
                other,
            });
        }
        // Vertical edges at x = 0..=w: the right edge of pixel x − 1 (+y) and the left edge of
        // pixel x (−y). They are kept as runs over rows and handed to their region only when
        // the run ends, so a straight side costs one edge, not one per row.
        for x in 0..=w {
            let left = (x > 0).then(|| cur[x - 1]);
            let right = (x < w).then(|| cur[x]);
            let boundary = left != right;
            let down = left
                .filter(|&k| boundary && sel[k as usize])
                .map(|_| (self.cur_labels[x - 1], right.map_or(OUTSIDE, code)));
            let up = right
                .filter(|&k| boundary && sel[k as usize])
                .map(|_| (self.cur_labels[x], left.map_or(OUTSIDE, code)));
            self.continue_run(2 * x, down);
            self.continue_run(2 * x + 1, up);
        }
        if has_prev {
            // Bottom edges (−x) of the row above.
            for (c, &below) in cur.iter().enumerate() {
                let k = self.prev[c];
                if sel[k as usize] && below != k {
                    let id = self.find(self.prev_labels[c]);
                    let cu = c as u32;
                    let e = Edge {
                        from: [cu + 1, yu],
                        to: [cu, yu],
                        other: code(cur[c]),
                    };
                    self.region(id).push_edge(e);
                }
            }
            // Saddles on the line between the two rows: a diagonal pair of one class whose
            // other two pixels are both of other classes.
            for x in 1..w {
                let (tl, tr, bl, br) = (self.prev[x - 1], self.prev[x], cur[x - 1], cur[x]);
                let saddle =
                    (tl == br && tr != tl && bl != tl) || (tr == bl && tl != tr && br != tr);
                if !saddle {
                    continue;
                }
                let labels = [
                    self.prev_labels[x - 1],
                    self.prev_labels[x],
                    self.cur_labels[x - 1],
                    self.cur_labels[x],
                ];
                for l in labels {
                    if l != NONE {
                        let id = self.find(l);
                        let r = self.region(id);
                        if r.saddles.last() != Some(&[x as u32, yu]) {
                            r.saddles.push([x as u32, yu]);
                        }
                    }
                }
            }
            // Regions of the row above that did not reach this row are complete.
            let mut freed = Vec::new();
            for c in 0..w {
                let l = self.prev_labels[c];
                if l == NONE {
                    continue;
                }
                let id = self.find(l);
                let Some(r) = self.open[id as usize].as_mut() else {
                    continue; // completed by an earlier pixel of this row
                };
                if r.checked_row == y {
                    continue;
                }
                r.checked_row = y;
                if r.last_row < y {
                    let reg = self.open[id as usize].take().unwrap();
                    freed.push(id);
                    freed.extend(reg.members.iter().copied());
                    done.push(assemble(reg));
                }
            }
            self.free.extend(freed);
        }
        self.prev.clear();
        self.prev.extend_from_slice(cur);
        std::mem::swap(&mut self.prev_labels, &mut self.cur_labels);
        self.cur_labels.resize(w, NONE);
        self.row += 1;
    }
}
