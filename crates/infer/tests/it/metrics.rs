//! `ConfusionMatrix` against a hand-built matrix and the textbook definitions, written to kill
//! the mutants `crates/train/bench/mutants.sh` reports (issue #17).

use infer::ConfusionMatrix;

/// Truth/prediction pairs that make the matrix (rows truth, columns prediction)
/// `[[5, 1, 0], [2, 3, 1], [0, 0, 4]]`.
const MATRIX: [[u64; 3]; 3] = [[5, 1, 0], [2, 3, 1], [0, 0, 4]];

fn pairs() -> (Vec<i64>, Vec<i64>) {
    let (mut t, mut p) = (Vec::new(), Vec::new());
    for (i, row) in MATRIX.iter().enumerate() {
        for (j, &n) in row.iter().enumerate() {
            for _ in 0..n {
                t.push(i as i64);
                p.push(j as i64);
            }
        }
    }
    (t, p)
}

#[test]
fn counts_land_in_truth_rows_and_prediction_columns() {
    let (t, p) = pairs();
    let mut cm = ConfusionMatrix::new(3, 255);
    assert_eq!(cm.num_classes(), 3);
    assert_eq!(cm.update(&t, &p), 0);
    let rows: Vec<Vec<u64>> = MATRIX.iter().map(|r| r.to_vec()).collect();
    assert_eq!(cm.rows(), rows);
    for (i, row) in MATRIX.iter().enumerate() {
        for (j, &n) in row.iter().enumerate() {
            assert_eq!(cm.get(i, j), n, "({i}, {j})");
        }
    }
}

#[test]
fn ignored_and_out_of_range_pixels_are_not_counted() {
    let mut cm = ConfusionMatrix::new(3, 255);
    // ignored: 255 (whatever the prediction); out of range: label 3, label -1, prediction 3,
    // prediction -2; counted: (2, 2) and (0, 1)
    let labels = [255, 255, 3, -1, 0, 1, 2, 0];
    let preds = [0, 9, 0, 0, 3, -2, 2, 1];
    assert_eq!(cm.update(&labels, &preds), 4);
    let mut want = vec![vec![0u64; 3]; 3];
    want[2][2] = 1;
    want[0][1] = 1;
    assert_eq!(cm.rows(), want);
    assert_eq!(cm.metrics().pixels, 2);
}

#[test]
fn merge_adds_counts() {
    let (t, p) = pairs();
    let mut a = ConfusionMatrix::new(3, 255);
    a.update(&t[..7], &p[..7]);
    let mut b = ConfusionMatrix::new(3, 255);
    b.update(&t[7..], &p[7..]);
    b.update(&[1], &[2]);
    a.merge(&b);
    let mut want = MATRIX;
    want[1][2] += 1;
    for (i, row) in want.iter().enumerate() {
        assert_eq!(a.rows()[i], row.to_vec());
    }
}

#[test]
fn metrics_follow_the_definitions_on_a_hand_built_matrix() {
    let (t, p) = pairs();
    let mut cm = ConfusionMatrix::new(3, 255);
    cm.update(&t, &p);
    let m = cm.metrics();
    // tp, row sums (truth), column sums (prediction)
    let tp = [5.0, 3.0, 4.0];
    let truth = [6.0, 6.0, 4.0];
    let pred = [7.0, 4.0, 5.0];
    for c in 0..3 {
        let iou = tp[c] / (truth[c] + pred[c] - tp[c]);
        let f1 = 2.0 * tp[c] / (truth[c] + pred[c]);
        assert!((m.iou[c] - iou).abs() < 1e-12, "iou {c}");
        assert!((m.f1[c] - f1).abs() < 1e-12, "f1 {c}");
        assert!(
            (m.precision[c] - tp[c] / pred[c]).abs() < 1e-12,
            "precision {c}"
        );
        assert!((m.recall[c] - tp[c] / truth[c]).abs() < 1e-12, "recall {c}");
    }
    let miou = (5.0 / 8.0 + 3.0 / 7.0 + 4.0 / 5.0) / 3.0;
    assert!((m.miou - miou).abs() < 1e-12);
    let mean_f1 = (10.0 / 13.0 + 6.0 / 10.0 + 8.0 / 9.0) / 3.0;
    assert!((m.mean_f1 - mean_f1).abs() < 1e-12);
    assert!((m.pixel_accuracy - 12.0 / 16.0).abs() < 1e-12);
    assert_eq!(m.pixels, 16);
}

#[test]
fn empty_matrix_has_undefined_metrics() {
    let m = ConfusionMatrix::new(2, 255).metrics();
    assert_eq!(m.pixels, 0);
    assert!(m.miou.is_nan() && m.mean_f1.is_nan() && m.pixel_accuracy.is_nan());
    assert!(m.iou.iter().chain(&m.precision).all(|v| v.is_nan()));
}
