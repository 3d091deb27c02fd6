//! The picked assets of a STAC item as one multi-band windowed raster, resampled onto one
//! asset's grid when asked.

use std::collections::BTreeMap;

use raster::{GeoRef, Raster, RasterData, SampleKind};
use remote::Remote;

use super::resample::{GridMap, OUTSIDE, fill_only, grid_map, place};
use super::{StacItem, StackBand};
use crate::error::TilesError;
use crate::tiff_read::ChunkedReader;
use crate::window::WindowSource;

/// Which assets to stack, and onto which grid.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StackOptions {
    /// Assets by key or band common name (`["red", "green", "blue", "nir"]`), in the order
    /// the model sees them ([`StacItem::select`]).
    pub assets: Vec<String>,
    /// The asset (a name from `assets`, or an asset key) whose grid the others are resampled
    /// to, nearest neighbour as GDAL's `-r near` does it: each pixel takes the source pixel
    /// that contains its centre; pixels outside a source get its nodata value (else 0).
    /// `None`: the assets must share one grid.
    pub resample_to: Option<String>,
}

/// One opened asset and the stack bands it fills.
struct Part {
    reader: ChunkedReader,
    /// `(stack band, asset band)`.
    picks: Vec<(usize, usize)>,
    /// `None` when the asset is on the stack's grid.
    map: Option<GridMap>,
    /// The value of stack pixels outside the asset: its nodata, else 0.
    fill: f64,
}

/// A STAC item's assets stacked into one raster: band `i` is the `i`-th band
/// [`BandStack::band_sources`] lists, every asset on one grid (the first asset's, or the one
/// [`StackOptions::resample_to`] names). Assets are opened once (local paths or URLs, read
/// with [`ChunkedReader`]); a window reads the assets' windows in parallel.
pub struct BandStack {
    label: String,
    parts: Vec<Part>,
    bands: Vec<StackBand>,
    width: usize,
    height: usize,
    kind: SampleKind,
    geo: Option<GeoRef>,
    chunk: (usize, usize),
}

impl std::fmt::Debug for BandStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BandStack")
            .field("item", &self.label)
            .field("bands", &self.bands)
            .field("width", &self.width)
            .field("height", &self.height)
            .finish_non_exhaustive()
    }
}

/// An asset's size and geotransform.
#[derive(Clone, Copy, Debug)]
struct Grid {
    width: usize,
    height: usize,
    transform: Option<[f64; 6]>,
}

impl Grid {
    fn of(reader: &ChunkedReader, item: &StacItem, key: &str) -> Self {
        let asset = item.asset(key);
        let transform = reader
            .geo()
            .map(|g| g.transform)
            .or_else(|| asset.and_then(|a| a.proj_transform));
        Grid {
            width: reader.width(),
            height: reader.height(),
            transform,
        }
    }

    /// Same size, and corners within a thousandth of a pixel.
    fn same(&self, other: &Grid) -> bool {
        if (self.width, self.height) != (other.width, other.height) {
            return false;
        }
        match (self.transform, other.transform) {
            (Some(a), Some(b)) => {
                let px = a[1].abs().max(a[5].abs());
                let scale_ok = (1..3)
                    .chain(4..6)
                    .all(|i| (a[i] - b[i]).abs() <= 1e-9 * a[i].abs().max(b[i].abs()).max(1e-12));
                scale_ok && (a[0] - b[0]).abs() <= 1e-3 * px && (a[3] - b[3]).abs() <= 1e-3 * px
            }
            (None, None) => true,
            _ => false,
        }
    }

    fn describe(&self, key: &str) -> String {
        match self.transform {
            Some(t) => format!(
                "{key} ({}x{} px of {} x {})",
                self.width,
                self.height,
                t[1].abs(),
                t[5].abs()
            ),
            None => format!(
                "{key} ({}x{} px, no georeferencing)",
                self.width, self.height
            ),
        }
    }
}

impl BandStack {
    /// Opens the assets `options` picks from `item` (local paths, or URLs through `remote`)
    /// and checks that they stack: one sample type, one grid (or `resample_to`), bands that
    /// exist.
    ///
    /// # Errors
    /// [`TilesError::Stac`] for a name no asset matches or a band an asset's file lacks;
    /// [`TilesError::GridMismatch`] naming each asset's size and pixel size when they lie on
    /// different grids and `resample_to` is not set; read errors naming the asset's file.
    pub fn open(
        item: &StacItem,
        options: &StackOptions,
        remote: &Remote,
    ) -> Result<Self, TilesError> {
        let selected = item.select(&options.assets)?;
        // One reader per asset, in the order the assets are first asked for.
        let mut order: Vec<String> = Vec::new();
        for b in &selected {
            if !order.contains(&b.asset) {
                order.push(b.asset.clone());
            }
        }
        let mut readers: BTreeMap<String, ChunkedReader> = BTreeMap::new();
        for key in &order {
            let asset = item.asset(key).expect("selected from the item");
            let reader = ChunkedReader::open_location(&asset.href, remote)?;
            readers.insert(key.clone(), reader);
        }
        // Expand whole assets into their bands and check the bands exist.
        let mut bands = Vec::new();
        for b in selected {
            let available = readers[&b.asset].bands();
            match b.band {
                Some(i) if i >= available => {
                    return Err(item.error(format!(
                        "`{}` is band {} of asset `{}`, but {} has {available} band(s)",
                        b.requested,
                        i + 1,
                        b.asset,
                        item.asset(&b.asset).expect("selected").href
                    )));
                }
                Some(_) => bands.push(b),
                None => bands.extend((0..available).map(|i| StackBand {
                    band: Some(i),
                    ..b.clone()
                })),
            }
        }
        let kinds: Vec<String> = order
            .iter()
            .map(|k| format!("{k} ({})", readers[k].kind()))
            .collect();
        let kind = readers[&order[0]].kind();
        if order.iter().any(|k| readers[k].kind() != kind) {
            return Err(item.error(format!(
                "the assets have different sample types: {}; stack assets of one type",
                kinds.join(", ")
            )));
        }
        let grids: BTreeMap<&String, Grid> = order
            .iter()
            .map(|k| (k, Grid::of(&readers[k], item, k)))
            .collect();
        let target = match &options.resample_to {
            None => order[0].clone(),
            Some(name) => bands
                .iter()
                .find(|b| &b.requested == name)
                .map(|b| b.asset.clone())
                .or_else(|| item.asset(name).map(|a| a.key.clone()))
                .filter(|k| order.contains(k))
                .ok_or_else(|| {
                    item.error(format!(
                        "resample_to `{name}` is not one of the stacked assets ({})",
                        order.join(", ")
                    ))
                })?,
        };
        let on_grid = |k: &String| grids[k].same(&grids[&target]);
        if options.resample_to.is_none() && !order.iter().all(on_grid) {
            return Err(TilesError::GridMismatch {
                item: item.label(),
                grids: order.iter().map(|k| grids[k].describe(k)).collect(),
            });
        }
        let target_reader = &readers[&target];
        let geo = target_reader.geo().cloned();
        let (width, height) = (target_reader.width(), target_reader.height());
        let chunk = target_reader.chunk_size();
        // Every map before any reader moves into its part: they read the target's grid.
        let mut maps = Vec::new();
        for key in &order {
            maps.push(if on_grid(key) {
                None
            } else {
                Some(grid_map(
                    item,
                    key,
                    &readers[key],
                    &target,
                    &readers[&target],
                )?)
            });
        }
        let mut parts = Vec::new();
        for (key, map) in order.iter().zip(maps) {
            let picks = bands
                .iter()
                .enumerate()
                .filter(|(_, b)| &b.asset == key)
                .map(|(i, b)| (i, b.band.expect("expanded above")))
                .collect();
            let reader = readers.remove(key).expect("opened above");
            let fill = reader.geo().and_then(|g| g.nodata).unwrap_or(0.0);
            parts.push(Part {
                reader,
                picks,
                map,
                fill,
            });
        }
        Ok(Self {
            label: item.label(),
            parts,
            bands,
            width,
            height,
            kind,
            geo,
            chunk,
        })
    }

    /// Where the stack's bands come from, in order: which asset and band each is, and its
    /// names (what a run's band order is checked against).
    pub fn band_sources(&self) -> &[StackBand] {
        &self.bands
    }

    /// Reads one asset's share of a window.
    fn read_part(
        part: &mut Part,
        x: usize,
        y: usize,
        w: usize,
        h: usize,
    ) -> Result<Piece, TilesError> {
        let Some(map) = &part.map else {
            let r = part.reader.read_window(x, y, w, h)?;
            let cols = (0..w as u32).collect();
            let rows = (0..h as u32).collect();
            return Ok(Piece {
                raster: Some(r),
                cols,
                rows,
            });
        };
        let span = |v: &[u32]| {
            let inside = v.iter().copied().filter(|&i| i != OUTSIDE);
            Some((inside.clone().min()?, inside.max()?))
        };
        let (cs, rs) = (&map.cols[x..x + w], &map.rows[y..y + h]);
        let (Some((c0, c1)), Some((r0, r1))) = (span(cs), span(rs)) else {
            return Ok(Piece {
                raster: None,
                cols: vec![OUTSIDE; w],
                rows: vec![OUTSIDE; h],
            });
        };
        let r = part.reader.read_window(
            c0 as usize,
            r0 as usize,
            (c1 - c0 + 1) as usize,
            (r1 - r0 + 1) as usize,
        )?;
        let shift = |v: &[u32], o: u32| {
            v.iter()
                .map(|&i| if i == OUTSIDE { OUTSIDE } else { i - o })
                .collect()
        };
        Ok(Piece {
            raster: Some(r),
            cols: shift(cs, c0),
            rows: shift(rs, r0),
        })
    }
}

/// An asset's window and where each stack column and row finds its pixel in it.
struct Piece {
    raster: Option<Raster>,
    cols: Vec<u32>,
    rows: Vec<u32>,
}

impl WindowSource for BandStack {
    fn width(&self) -> usize {
        self.width
    }

    fn height(&self) -> usize {
        self.height
    }

    fn bands(&self) -> usize {
        self.bands.len()
    }

    fn kind(&self) -> SampleKind {
        self.kind
    }

    fn geo(&self) -> Option<&GeoRef> {
        self.geo.as_ref()
    }

    fn chunk_size(&self) -> (usize, usize) {
        self.chunk
    }

    fn read_window(
        &mut self,
        x: usize,
        y: usize,
        w: usize,
        h: usize,
    ) -> Result<Raster, TilesError> {
        if w == 0 || h == 0 || x.saturating_add(w) > self.width || y.saturating_add(h) > self.height
        {
            return Err(TilesError::Window {
                path: self.label.clone().into(),
                x,
                y,
                w,
                h,
                width: self.width,
                height: self.height,
            });
        }
        // Each asset's window in its own thread: remote assets wait on the network together.
        let pieces: Vec<Result<Piece, TilesError>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .parts
                .iter_mut()
                .map(|p| s.spawn(move || Self::read_part(p, x, y, w, h)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("an asset read does not panic"))
                .collect()
        });
        let nb = self.bands.len();
        let n = w * h * nb;
        let mut out = match self.kind {
            SampleKind::U8 => RasterData::U8(vec![0; n]),
            SampleKind::U16 => RasterData::U16(vec![0; n]),
            SampleKind::F32 => RasterData::F32(vec![0.0; n]),
        };
        for (part, piece) in self.parts.iter().zip(pieces) {
            let piece = piece?;
            let (picks, fill) = (&part.picks, part.fill);
            let Some(r) = &piece.raster else {
                // The window lies wholly outside this asset.
                fill_only(&mut out, nb, picks, fill);
                continue;
            };
            let (sw, sb, cols, rows) = (r.width, r.bands, &piece.cols, &piece.rows);
            match (&mut out, &r.data) {
                (RasterData::U8(o), RasterData::U8(s)) => {
                    place(o, nb, s, sw, sb, picks, cols, rows, fill as u8)
                }
                (RasterData::U16(o), RasterData::U16(s)) => {
                    place(o, nb, s, sw, sb, picks, cols, rows, fill as u16)
                }
                (RasterData::F32(o), RasterData::F32(s)) => {
                    place(o, nb, s, sw, sb, picks, cols, rows, fill as f32)
                }
                _ => {
                    let path = part.reader.location().to_path_buf();
                    return Err(TilesError::decode(
                        &path,
                        "window sample type differs from the header's",
                    ));
                }
            }
        }
        Ok(Raster::new(w, h, nb, out).expect("window buffer sized from its dimensions"))
    }
}
