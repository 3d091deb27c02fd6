//! What the user sees: a progress bar, one line per epoch, `metrics.jsonl`, `metrics.csv`, PNG
//! plots of the curves, an overlay grid of validation predictions, and the same scalars and
//! overlays as TensorBoard event files in `tb/` ([`crate::tensorboard`]).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::module::Module;
use burn::tensor::backend::Backend;
use indicatif::{ProgressBar, ProgressStyle};
use infer::{SegMetrics, batch_tensors, overlay_pixel, predict_classes};
use segformer::Segformer;
use serde::Serialize;
use tiles::Raster;

use crate::config::TrainConfig;
use crate::data::SampleSource;
use crate::error::TrainError;
use crate::io::write_atomic;
use crate::plot::{Canvas, line_chart};
use crate::run_data::RunPreprocessing;
use crate::tensorboard::EventWriter;

/// One logged optimizer step.
#[derive(Clone, Debug, Serialize)]
pub struct StepRecord {
    /// Epoch (0-based).
    pub epoch: usize,
    /// Optimizer step (1-based).
    pub step: u64,
    /// Training loss of the step (mean over its micro-batches).
    pub loss: f64,
    /// Learning rate used.
    pub lr: f64,
    /// Training throughput so far in the epoch.
    pub images_per_s: f64,
    /// Wall time since the previous step (or the epoch's start), data loading included.
    pub step_seconds: f64,
    /// The process's resident memory when the step was logged, MiB (Linux; the device
    /// memory of a GPU run is not in it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_rss_mib: Option<f64>,
}

/// One epoch's summary.
#[derive(Clone, Debug, Serialize)]
pub struct EpochRecord {
    /// Epoch (0-based).
    pub epoch: usize,
    /// Optimizer steps at its end.
    pub step: u64,
    /// Mean training loss.
    pub train_loss: f64,
    /// Mean validation loss.
    pub val_loss: f64,
    /// Validation metrics.
    pub metrics: SegMetrics,
    /// Wall time of the epoch, validation included.
    pub seconds: f64,
}

/// Writes the run's logs and shows progress.
pub struct Reporter {
    dir: PathBuf,
    class_names: Vec<String>,
    show: bool,
    log_every: u64,
    steps_per_epoch: u64,
    bar: Option<ProgressBar>,
    jsonl: File,
    /// Epoch records as logged (the plots and the CSV are derived from them).
    epochs: Vec<serde_json::Value>,
    steps: Vec<(u64, f64)>,
    /// `None` once a write failed (reported once; the other logs go on).
    tb: Option<EventWriter>,
    /// `optimizer.head_lr_mult` when it is not 1: the decode head is a second parameter
    /// group with its own learning rate.
    head_lr_mult: Option<f64>,
}

impl Reporter {
    /// Writes the run's `config.toml` and `preprocessing.json` and opens its logs; on resume,
    /// drops log records past `resume_step` (the killed run may have logged steps the
    /// checkpoint does not hold).
    pub fn new(
        dir: &Path,
        cfg: &TrainConfig,
        class_names: &[String],
        preprocessing: &RunPreprocessing,
        resume: bool,
        resume_step: u64,
    ) -> Result<Self, TrainError> {
        write_atomic(&dir.join("config.toml"), cfg.to_toml_string().as_bytes())
            .map_err(|e| TrainError::io(dir, e))?;
        preprocessing.save(dir)?;
        let path = dir.join("metrics.jsonl");
        let mut epochs = Vec::new();
        let mut steps = Vec::new();
        if resume && path.exists() {
            let text = std::fs::read_to_string(&path).map_err(|e| TrainError::io(&path, e))?;
            let mut kept = String::new();
            for line in text.lines() {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                if v["step"].as_u64().unwrap_or(u64::MAX) > resume_step {
                    continue;
                }
                match v["kind"].as_str() {
                    Some("epoch") => epochs.push(v.clone()),
                    Some("step") => steps.push((
                        v["step"].as_u64().unwrap_or(0),
                        v["loss"].as_f64().unwrap_or(f64::NAN),
                    )),
                    _ => {}
                }
                kept.push_str(line);
                kept.push('\n');
            }
            write_atomic(&path, kept.as_bytes()).map_err(|e| TrainError::io(&path, e))?;
        } else if path.exists() {
            std::fs::remove_file(&path).map_err(|e| TrainError::io(&path, e))?;
        }
        let jsonl = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| TrainError::io(&path, e))?;
        let tb = EventWriter::open(&dir.join("tb"), resume.then_some(resume_step))?;
        let mult = cfg.optimizer.head_lr_mult;
        Ok(Self {
            dir: dir.to_path_buf(),
            class_names: class_names.to_vec(),
            show: cfg.train.progress,
            log_every: cfg.train.log_every.max(1) as u64,
            steps_per_epoch: 0,
            bar: None,
            jsonl,
            epochs,
            steps,
            tb: Some(tb),
            head_lr_mult: (mult != 1.0).then_some(mult),
        })
    }

    /// A message above the progress bar.
    pub fn note(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.println(msg),
            None => eprintln!("{msg}"),
        }
    }

    fn bar(&mut self, len: u64, prefix: String) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        if self.show {
            let b = ProgressBar::new(len);
            b.set_style(
                ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg} ETA {eta}")
                    .expect("static template")
                    .progress_chars("=> "),
            );
            b.set_prefix(prefix);
            self.bar = Some(b);
        }
    }

    /// A new training epoch of `steps` optimizer steps.
    pub fn start_epoch(&mut self, epoch: usize, steps: usize) {
        self.steps_per_epoch = steps as u64;
        self.bar(steps as u64, format!("epoch {epoch}"));
    }

    /// Validation over `batches` batches.
    pub fn start_eval(&mut self, batches: usize) {
        self.bar(batches as u64, "val".to_string());
    }

    /// One validation batch done.
    pub fn eval_batch(&mut self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    /// One optimizer step done.
    pub fn step(&mut self, mut rec: StepRecord) {
        if let Some(b) = &self.bar {
            b.inc(1);
            b.set_message(format!(
                "loss {:.4} lr {:.2e} {:.1} img/s",
                rec.loss, rec.lr, rec.images_per_s
            ));
        }
        self.steps.push((rec.step, rec.loss));
        if rec.step.is_multiple_of(self.log_every) {
            rec.host_rss_mib = host_rss_mib();
            let _ = self.append("step", &rec);
            let mut values = vec![("train/loss".to_string(), rec.loss)];
            match self.head_lr_mult {
                None => values.push(("train/lr".to_string(), rec.lr)),
                Some(m) => values.extend([
                    ("train/lr/encoder".to_string(), rec.lr),
                    ("train/lr/decode_head".to_string(), rec.lr * m),
                ]),
            }
            values.push(("train/images_per_s".to_string(), rec.images_per_s));
            values.push(("train/step_seconds".to_string(), rec.step_seconds));
            if let Some(m) = rec.host_rss_mib {
                values.push(("memory/host_rss_mib".to_string(), m));
            }
            self.tb_write(|tb| tb.scalars(rec.step, &values));
        }
    }

    /// Writes to the event file; the first failure is reported and ends TensorBoard logging
    /// for the run (a full disk must not kill training, and one warning is enough).
    fn tb_write(&mut self, f: impl FnOnce(&mut EventWriter) -> std::io::Result<()>) {
        let Some(tb) = &mut self.tb else {
            return;
        };
        if let Err(e) = f(tb) {
            let msg = format!(
                "warning: cannot write {}: {e}; TensorBoard logging stops, metrics.jsonl goes on",
                tb.path().display()
            );
            self.tb = None;
            self.note(&msg);
        }
    }

    /// Writes the buffered TensorBoard events to disk (at checkpoints and evaluations).
    pub fn flush(&mut self) {
        self.tb_write(|tb| tb.flush());
    }

    /// Appends `rec` to `metrics.jsonl` as a `kind` record and returns that record.
    fn append<T: Serialize>(&mut self, kind: &str, rec: &T) -> serde_json::Value {
        let mut v = serde_json::to_value(rec).unwrap_or_default();
        v["kind"] = kind.into();
        // NOTE: a failed log write must not kill a training run; it is reported once per line.
        if let Err(e) = writeln!(self.jsonl, "{v}") {
            self.note(&format!("warning: cannot append to metrics.jsonl: {e}"));
        }
        v
    }

    /// An epoch's summary: printed, logged, and the CSV and plots refreshed.
    pub fn epoch(&mut self, rec: &EpochRecord) -> Result<(), TrainError> {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        let per_class: Vec<String> = self
            .class_names
            .iter()
            .zip(&rec.metrics.iou)
            .map(|(n, v)| format!("{n} {v:.3}"))
            .collect();
        eprintln!(
            "epoch {:>3}  step {:>6}  train_loss {:.4}  val_loss {:.4}  mIoU {:.4}  acc {:.4}  IoU [{}]  ({:.1} s)",
            rec.epoch,
            rec.step,
            rec.train_loss,
            rec.val_loss,
            rec.metrics.miou,
            rec.metrics.pixel_accuracy,
            per_class.join(", "),
            rec.seconds
        );
        let v = self.append("epoch", rec);
        let _ = self.jsonl.flush();
        self.epochs.push(v);
        let m = &rec.metrics;
        let mut values = vec![
            ("train/epoch_loss".to_string(), rec.train_loss),
            ("train/epoch_seconds".to_string(), rec.seconds),
            ("val/loss".to_string(), rec.val_loss),
            ("val/miou".to_string(), m.miou),
            ("val/pixel_accuracy".to_string(), m.pixel_accuracy),
            ("val/mean_f1".to_string(), m.mean_f1),
        ];
        for (name, iou) in self.class_names.iter().zip(&m.iou) {
            values.push((format!("val/iou/{name}"), *iou));
        }
        self.tb_write(|tb| tb.scalars(rec.step, &values));
        let mut csv = String::from("epoch,step,train_loss,val_loss,miou,pixel_accuracy,mean_f1");
        for n in &self.class_names {
            csv.push_str(&format!(",iou_{n}"));
        }
        csv.push('\n');
        for v in &self.epochs {
            let m = &v["metrics"];
            csv.push_str(&format!(
                "{},{},{},{},{},{},{}",
                v["epoch"],
                v["step"],
                v["train_loss"],
                v["val_loss"],
                m["miou"],
                m["pixel_accuracy"],
                m["mean_f1"]
            ));
            for i in 0..self.class_names.len() {
                csv.push_str(&format!(",{}", m["iou"][i]));
            }
            csv.push('\n');
        }
        let path = self.dir.join("metrics.csv");
        write_atomic(&path, csv.replace("null", "").as_bytes())
            .map_err(|e| TrainError::io(&path, e))?;
        self.plots()
    }

    fn plots(&self) -> Result<(), TrainError> {
        let spe = self.steps_per_epoch.max(1) as f64;
        let step_loss: Vec<(f64, f64)> = self
            .steps
            .iter()
            .map(|&(s, l)| (s as f64 / spe, l))
            .collect();
        let series = |field: &dyn Fn(&serde_json::Value) -> &serde_json::Value| -> Vec<(f64, f64)> {
            self.epochs
                .iter()
                .map(|e| {
                    (
                        e["epoch"].as_f64().unwrap_or(0.0) + 1.0,
                        field(e).as_f64().unwrap_or(f64::NAN),
                    )
                })
                .collect()
        };
        let train = series(&|e| &e["train_loss"]);
        let val = series(&|e| &e["val_loss"]);
        let miou = series(&|e| &e["metrics"]["miou"]);
        let loss = line_chart(
            "loss",
            &[("step", step_loss), ("train", train), ("val", val)],
        );
        self.write_png("loss.png", &loss)?;
        self.write_png("miou.png", &line_chart("miou", &[("val", miou)]))
    }

    fn write_png(&self, name: &str, r: &Raster) -> Result<(), TrainError> {
        let dir = self.dir.join("plots");
        std::fs::create_dir_all(&dir).map_err(|e| TrainError::io(&dir, e))?;
        tiles::write_png(&dir.join(name), r)?;
        Ok(())
    }

    /// A grid of image | ground truth | prediction for the first `n` validation tiles, the
    /// classes painted over the image as `segfit predict --overlay` paints them
    /// ([`infer::overlay_pixel`]): `plots/overlays.png`, and the same PNG as TensorBoard's
    /// `val/overlays` image at `step`.
    pub fn overlays<B: Backend>(
        &mut self,
        model: &Segformer<B>,
        val: &Arc<SampleSource>,
        n: usize,
        step: u64,
    ) -> Result<(), TrainError> {
        let n = n.min(val.dataset.len());
        if n == 0 {
            return Ok(());
        }
        let device = model.devices().into_iter().next().unwrap_or_default();
        let items = (0..n)
            .map(|i| val.load(0, i))
            .collect::<Result<Vec<_>, _>>()?;
        let (h, w) = (items[0].height, items[0].width);
        let cell = 160usize;
        let mut canvas = Canvas::new(cell * 3 + 8, (cell + 4) * n + 4);
        for (row, item) in items.iter().enumerate() {
            let batch = augment::collate(std::slice::from_ref(item))?;
            let (x, _) = batch_tensors::<B>(&batch, &device);
            let pred: Vec<i64> = predict_classes(model.forward(x), [h, w])
                .into_data()
                .convert::<i64>()
                .to_vec()
                .unwrap_or_default();
            let p = &val.processor;
            let rgb = |yy: usize, xx: usize| -> [u8; 3] {
                let mut c = [0u8; 3];
                for (k, v) in c.iter_mut().enumerate() {
                    let band = k.min(item.channels - 1);
                    let z = item.pixel_values[(band * h + yy) * w + xx];
                    let (m, s) = (
                        p.image_mean.get(band).copied().unwrap_or(0.0),
                        p.image_std.get(band).copied().unwrap_or(1.0),
                    );
                    *v = ((z * s + m) * 255.0).clamp(0.0, 255.0) as u8;
                }
                c
            };
            let top = row * (cell + 4) + 4;
            for cy in 0..cell {
                for cx in 0..cell {
                    let (yy, xx) = (cy * h / cell, cx * w / cell);
                    let img = rgb(yy, xx);
                    let gt = item.labels.as_ref().map(|l| l[yy * w + xx]).unwrap_or(255);
                    let pr = pred.get(yy * w + xx).copied().unwrap_or(0).clamp(0, 254) as u8;
                    let (x, y) = (cx as i64, (top + cy) as i64);
                    canvas.set(x, y, img);
                    canvas.set(x + cell as i64 + 4, y, overlay_pixel(img, gt));
                    canvas.set(x + 2 * cell as i64 + 8, y, overlay_pixel(img, pr));
                }
            }
        }
        let grid = canvas.into_raster();
        self.write_png("overlays.png", &grid)?;
        let path = self.dir.join("plots").join("overlays.png");
        let png = std::fs::read(&path).map_err(|e| TrainError::io(&path, e))?;
        self.tb_write(|tb| tb.image(step, "val/overlays", &png, (grid.width, grid.height)));
        Ok(())
    }

    /// Clears the progress bar and writes the last TensorBoard events.
    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        self.flush();
    }
}

/// The process's resident set (`VmRSS` of `/proc/self/status`), MiB; `None` off Linux.
fn host_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}
