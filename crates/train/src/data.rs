//! Parallel, deterministic batch loading: decode (tiles) → augment → process, in worker threads.
//!
//! The sample order of an epoch and every sample's augmentation depend only on
//! `(seed, epoch, index)`, so the batches are the same whatever the number of workers, and a
//! resumed run can start at any batch of an epoch.
//!
//! Samples are read through burn-dataset's [`Dataset`] trait: the split is any dataset of
//! [`SampleResult`]s, a [`SegDataset`] or a composition of it (`PartialDataset`,
//! `ComposedDataset`…). Order and parallelism stay here, on top of that trait: burn's own
//! shuffling would tie the order to the dataset instead of to `(seed, epoch)`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;

use augment::{Batch, Pipeline, Processed, SegformerProcessor, collate};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use tiles::{Dataset, SampleError, SampleResult, SegDataset, TilesError};

use crate::error::TrainError;

/// Everything a worker needs to turn an index into a processed sample.
///
/// `D` is the split: by default a [`SegDataset`], or any burn-dataset [`Dataset`] of
/// [`SampleResult`]s (`Send + Sync`, as the trait requires: workers share it).
#[derive(Clone, Debug)]
pub struct SampleSource<D = SegDataset> {
    /// The split, decoded lazily.
    pub dataset: D,
    /// Augmentation (empty for validation).
    pub pipeline: Pipeline,
    /// Resize/rescale/normalise.
    pub processor: SegformerProcessor,
    /// The run's seed.
    pub seed: u64,
}

impl<D: Dataset<SampleResult>> SampleSource<D> {
    /// Decodes, augments (with the stream of `(seed, epoch, index)`) and processes sample `index`.
    pub fn load(&self, epoch: u64, index: usize) -> Result<Processed, TrainError> {
        let sample = self
            .dataset
            .get(index)
            .ok_or(TilesError::IndexOutOfRange {
                index,
                len: self.dataset.len(),
            })?
            .map_err(data_error)?;
        let (image, mask) = self.pipeline.apply_seeded(
            sample.image,
            sample.mask,
            self.seed,
            epoch,
            index as u64,
        )?;
        Ok(self.processor.process(&image, mask.as_ref())?)
    }
}

/// The dataset's error itself when the item held the only handle to it (always, for a
/// [`SegDataset`] and burn's transforms, which forward items), else the shared error.
fn data_error(e: SampleError) -> TrainError {
    match e.into_inner() {
        Ok(e) => TrainError::Data(e),
        Err(shared) => TrainError::SharedData(shared),
    }
}

/// The order samples are visited in during `epoch`: a permutation seeded by `(seed, epoch)`
/// when `shuffle`, the identity otherwise.
pub fn epoch_order(len: usize, seed: u64, epoch: u64, shuffle: bool) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    if shuffle {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(
            seed ^ epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        order.shuffle(&mut rng);
    }
    order
}

/// Batches of one epoch, produced by `workers` threads with up to `prefetch` samples ready ahead.
///
/// Iterating yields the batches in order; dropping the loader stops the workers.
pub struct Loader {
    rx: mpsc::Receiver<(usize, Result<Processed, TrainError>)>,
    pending: BTreeMap<usize, Result<Processed, TrainError>>,
    next: usize,
    end: usize,
    batch_size: usize,
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<()>>,
}

/// How a [`Loader`] batches and parallelises: batch size, where to start, worker threads and
/// read-ahead. None of these change the batches' contents except `batch_size` and `start_batch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoaderOptions {
    /// Samples per batch (at least 1; the last batch of an epoch may be short).
    pub batch_size: usize,
    /// First batch to yield: a resumed run skips the batches it already trained on.
    pub start_batch: usize,
    /// Worker threads decoding and augmenting (at least 1).
    pub workers: usize,
    /// Samples ready ahead of the consumer (at least 1).
    pub prefetch: usize,
}

impl Default for LoaderOptions {
    /// Batches of 1 from the start of the epoch, one worker, two samples ahead.
    fn default() -> Self {
        Self {
            batch_size: 1,
            start_batch: 0,
            workers: 1,
            prefetch: 2,
        }
    }
}

impl Loader {
    /// Starts loading `order[start_batch * batch_size..]` of `epoch` (the last batch may be
    /// short).
    pub fn new<D: Dataset<SampleResult> + 'static>(
        source: Arc<SampleSource<D>>,
        order: Vec<usize>,
        epoch: u64,
        options: LoaderOptions,
    ) -> Self {
        let LoaderOptions {
            batch_size,
            start_batch,
            workers,
            prefetch,
        } = options;
        let batch_size = batch_size.max(1);
        let start = (start_batch * batch_size).min(order.len());
        let end = order.len();
        let order = Arc::new(order);
        let cursor = Arc::new(AtomicUsize::new(start));
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::sync_channel(prefetch.max(1));
        let handles = (0..workers.max(1))
            .map(|_| {
                let (source, order, cursor, stop, tx) = (
                    source.clone(),
                    order.clone(),
                    cursor.clone(),
                    stop.clone(),
                    tx.clone(),
                );
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let pos = cursor.fetch_add(1, Ordering::Relaxed);
                        if pos >= order.len() {
                            break;
                        }
                        let item = source.load(epoch, order[pos]);
                        if tx.send((pos, item)).is_err() {
                            break;
                        }
                    }
                })
            })
            .collect();
        Self {
            rx,
            pending: BTreeMap::new(),
            next: start,
            end,
            batch_size,
            stop,
            handles,
        }
    }

    /// Number of batches left to yield.
    pub fn remaining_batches(&self) -> usize {
        (self.end - self.next).div_ceil(self.batch_size)
    }

    fn next_sample(&mut self) -> Option<Result<Processed, TrainError>> {
        loop {
            if let Some(item) = self.pending.remove(&self.next) {
                self.next += 1;
                return Some(item);
            }
            match self.rx.recv() {
                Ok((pos, item)) => {
                    self.pending.insert(pos, item);
                }
                Err(_) => return None,
            }
        }
    }
}

impl Iterator for Loader {
    type Item = Result<Batch, TrainError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        let n = self.batch_size.min(self.end - self.next);
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            match self.next_sample()? {
                Ok(p) => items.push(p),
                Err(e) => return Some(Err(e)),
            }
        }
        Some(collate(&items).map_err(TrainError::from))
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Unblock workers waiting on a full channel, then join them.
        while self.rx.try_recv().is_ok() {}
        for h in self.handles.drain(..) {
            while !h.is_finished() {
                while self.rx.try_recv().is_ok() {}
                std::thread::yield_now();
            }
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiles::{SyntheticOptions, prepare_synthetic};

    fn source(dir: &std::path::Path) -> Arc<SampleSource> {
        let opts = SyntheticOptions {
            count: 10,
            size: 32,
            out: dir.to_path_buf(),
            ..Default::default()
        };
        prepare_synthetic(&opts).unwrap();
        let pipeline = Pipeline::from_toml_str(
            "[[transforms]]\nname = \"HorizontalFlip\"\np = 0.5\n[[transforms]]\nname = \"RandomRotate90\"\np = 0.5\n",
        )
        .unwrap();
        Arc::new(SampleSource {
            dataset: SegDataset::open(dir, "train").unwrap(),
            pipeline,
            processor: SegformerProcessor {
                size: Some((32, 32)),
                ..Default::default()
            },
            seed: 3,
        })
    }

    #[test]
    fn batches_do_not_depend_on_worker_count_and_resume_mid_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let src = source(dir.path());
        let len = src.dataset.len();
        let order = epoch_order(len, 3, 1, true);
        let one: Vec<Batch> = Loader::new(
            src.clone(),
            order.clone(),
            1,
            LoaderOptions {
                batch_size: 3,
                start_batch: 0,
                workers: 1,
                prefetch: 2,
            },
        )
        .map(|b| b.unwrap())
        .collect();
        let many: Vec<Batch> = Loader::new(
            src.clone(),
            order.clone(),
            1,
            LoaderOptions {
                batch_size: 3,
                start_batch: 0,
                workers: 4,
                prefetch: 8,
            },
        )
        .map(|b| b.unwrap())
        .collect();
        assert_eq!(one.len(), len.div_ceil(3));
        assert_eq!(one, many);
        let resumed: Vec<Batch> = Loader::new(
            src.clone(),
            order,
            1,
            LoaderOptions {
                batch_size: 3,
                start_batch: 1,
                workers: 2,
                prefetch: 2,
            },
        )
        .map(|b| b.unwrap())
        .collect();
        assert_eq!(&one[1..], &resumed[..]);
        // each batch is exactly the collated samples it should hold
        let direct = collate(&[src.load(1, epoch_order(len, 3, 1, true)[0]).unwrap()]).unwrap();
        assert_eq!(
            &one[0].pixel_values[..direct.pixel_values.len()],
            &direct.pixel_values[..]
        );
    }

    #[test]
    fn any_dataset_of_sample_results_loads_like_the_split_itself() {
        let dir = tempfile::tempdir().unwrap();
        let src = source(dir.path());
        // The same split behind the trait object burn's transforms compose into.
        let dataset: Arc<dyn Dataset<SampleResult>> = Arc::new(src.dataset.clone());
        let dyn_src = Arc::new(SampleSource {
            dataset,
            pipeline: src.pipeline.clone(),
            processor: src.processor.clone(),
            seed: src.seed,
        });
        let order = epoch_order(src.dataset.len(), 3, 2, true);
        let options = LoaderOptions {
            batch_size: 4,
            workers: 3,
            ..Default::default()
        };
        let plain: Vec<Batch> = Loader::new(src.clone(), order.clone(), 2, options)
            .map(|b| b.unwrap())
            .collect();
        let through_trait: Vec<Batch> = Loader::new(dyn_src.clone(), order, 2, options)
            .map(|b| b.unwrap())
            .collect();
        assert_eq!(plain, through_trait);
        assert!(matches!(
            dyn_src.load(0, src.dataset.len()),
            Err(TrainError::Data(TilesError::IndexOutOfRange { .. }))
        ));
        // A file that fails to decode is the dataset's error, naming the file.
        let id = src.dataset.ids().next().unwrap().to_string();
        let image = dir.path().join("images/train").join(format!("{id}.png"));
        std::fs::write(&image, b"not a png").unwrap();
        match dyn_src.load(0, 0) {
            Err(TrainError::Data(e)) => assert!(e.to_string().contains(&id), "{e}"),
            other => panic!("expected a data error, got {:?}", other.map(|_| ())),
        }
    }

    #[test]
    fn epoch_order_is_a_seeded_permutation() {
        let a = epoch_order(50, 1, 0, true);
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        assert_eq!(a, epoch_order(50, 1, 0, true));
        assert_ne!(a, epoch_order(50, 1, 1, true));
        assert_eq!(epoch_order(5, 1, 0, false), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn dropping_mid_epoch_stops_workers() {
        let dir = tempfile::tempdir().unwrap();
        let src = source(dir.path());
        let order = epoch_order(src.dataset.len(), 3, 0, true);
        let mut l = Loader::new(
            src,
            order,
            0,
            LoaderOptions {
                batch_size: 1,
                start_batch: 0,
                workers: 2,
                prefetch: 1,
            },
        );
        assert!(l.next().unwrap().is_ok());
        drop(l); // must not hang
    }
}
