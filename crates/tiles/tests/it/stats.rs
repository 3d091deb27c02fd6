//! Band statistics against a direct computation over the same samples.

use tiles::{Raster, RasterData, StatsAccumulator};

use crate::common;

#[test]
#[allow(clippy::needless_range_loop)] // b picks the band in both the data and the stats
fn integer_stats_match_a_direct_computation() {
    let rasters = [
        common::u16_raster(13, 7, 4, 1),
        common::u16_raster(5, 9, 4, 2),
    ];
    let mut acc = StatsAccumulator::new(4, tiles::SampleKind::U16);
    for r in &rasters {
        acc.add(r, None);
    }
    let stats = acc.finish();
    for b in 0..4 {
        let mut v: Vec<f64> = rasters
            .iter()
            .flat_map(|r| {
                let RasterData::U16(d) = &r.data else {
                    panic!()
                };
                d.iter()
                    .skip(b)
                    .step_by(4)
                    .map(|&s| s as f64)
                    .collect::<Vec<_>>()
            })
            .collect();
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let std = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
        v.sort_by(f64::total_cmp);
        let rank = |q: f64| v[((q * n).ceil() as usize).max(1) - 1];
        let s = &stats[b];
        assert_eq!(s.count, v.len() as u64);
        assert!((s.mean - mean).abs() < 1e-6 * mean, "band {b}");
        assert!((s.std - std).abs() < 1e-6 * std, "band {b}");
        assert_eq!((s.min, s.max), (v[0], v[v.len() - 1]));
        assert_eq!((s.p2, s.p98), (Some(rank(0.02)), Some(rank(0.98))));
    }
}

#[test]
fn nodata_is_excluded_and_floats_have_no_percentiles() {
    let r = Raster::new(4, 1, 1, RasterData::U8(vec![0, 10, 20, 0])).unwrap();
    let mut acc = StatsAccumulator::new(1, tiles::SampleKind::U8);
    acc.add(&r, Some(0.0));
    let s = &acc.finish()[0];
    assert_eq!((s.count, s.mean, s.min, s.max), (2, 15.0, 10.0, 20.0));

    let f = Raster::new(3, 1, 1, RasterData::F32(vec![-1.5, 2.5, f32::NAN])).unwrap();
    let mut acc = StatsAccumulator::new(1, tiles::SampleKind::F32);
    acc.add(&f, None);
    let s = &acc.finish()[0];
    assert_eq!((s.count, s.mean, s.std, s.p2), (2, 0.5, 2.0, None));
}

#[test]
fn merged_accumulators_equal_one_over_all_rasters() {
    let rasters = [
        common::u8_raster(6, 6, 2, 4),
        common::u8_raster(3, 8, 2, 5),
        common::u8_raster(9, 2, 2, 6),
    ];
    let mut one = StatsAccumulator::new(2, tiles::SampleKind::U8);
    let (mut a, mut b) = (one.clone(), one.clone());
    for r in &rasters {
        one.add(r, None);
    }
    a.add(&rasters[0], None);
    b.add(&rasters[1], None);
    b.add(&rasters[2], None);
    a.merge(&b);
    assert_eq!(a.finish(), one.finish());
}
