//! How many windows `segfit predict` runs through the model at once: `--batch-size`, or the
//! most whose predicted peak memory ([`train::InferenceEstimate`]) fits a budget, chosen per
//! scene since a wider scene blends more.

use std::cell::Cell;

use anyhow::{Result, anyhow};
use segformer::SegformerConfig;
use train::{Host, InferenceEstimate, InferenceInput, fit_inference_batch, human_bytes};

use infer::Windows;

/// The most windows a batch chosen from the budget holds. 16 128² windows ran 1.4–1.8× faster
/// than 4 on the CPU (`crates/cli/BENCH-predict.md`); larger batches were not measured.
pub const MOST_AUTO: usize = 16;

/// The batch of a `segfit predict` run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchChoice {
    /// `--batch-size N`, or the GPU default.
    Fixed(usize),
    /// The most windows (up to [`MOST_AUTO`]) that fit this many bytes.
    Budget(u64),
}

/// Windows per batch on a GPU without `--memory-budget`: the estimate counts the host's
/// heap, not a device's pool.
const GPU_DEFAULT: usize = 4;

impl BatchChoice {
    /// From `--batch-size` and `--memory-budget`; without either, a quarter of `host`'s memory
    /// on the CPU and [`GPU_DEFAULT`] windows on a GPU.
    pub fn new(
        batch_size: Option<usize>,
        budget: Option<u64>,
        device: train::Device,
        host: &Host,
    ) -> Self {
        match (batch_size, budget) {
            (Some(n), _) => Self::Fixed(n),
            (None, Some(bytes)) => Self::Budget(bytes),
            (None, None) if device == train::Device::Cpu => Self::Budget(host.memory / 4),
            (None, None) => Self::Fixed(GPU_DEFAULT),
        }
    }

    /// `windows` with the batch for a scene `width` pixels wide, and the estimate it was
    /// chosen by (none for a fixed batch); an error when not even one window fits the budget.
    pub fn windows(
        self,
        windows: &Windows,
        config: &SegformerConfig,
        width: usize,
    ) -> Result<(Windows, Option<InferenceEstimate>)> {
        let budget = match self {
            Self::Fixed(n) => {
                return Ok((
                    Windows {
                        batch: n,
                        ..*windows
                    },
                    None,
                ));
            }
            Self::Budget(bytes) => bytes,
        };
        let input = InferenceInput {
            config,
            tile: [windows.tile[0], windows.tile[1].min(width.max(1))],
            batch: 1,
            overlap: windows.overlap,
            scene_width: width,
        };
        let estimate = fit_inference_batch(budget, MOST_AUTO, &input)
            .map_err(|e| anyhow!("--memory-budget: {e}"))?;
        Ok((
            Windows {
                batch: estimate.batch,
                ..*windows
            },
            Some(estimate),
        ))
    }
}

/// A run's [`BatchChoice`], saying the batch a given budget picks whenever it changes.
pub struct Batches {
    choice: BatchChoice,
    /// Whether the budget's batches are said.
    tell: bool,
    /// The last batch said.
    said: Cell<Option<usize>>,
}

impl Batches {
    /// Batches by `choice`; `tell` says the batches a budget picks (a `--memory-budget` the
    /// user gave), a default budget picks quietly.
    pub fn new(choice: BatchChoice, tell: bool) -> Self {
        Self {
            choice,
            tell,
            said: Cell::new(None),
        }
    }

    /// [`BatchChoice::windows`]; when telling, the first batch the budget picks, and every
    /// change after it, is said through `say`: `batch of 8 windows: predicted peak 1.4 GiB of
    /// the 6 GiB memory budget`.
    pub fn windows(
        &self,
        windows: &Windows,
        config: &SegformerConfig,
        width: usize,
        say: impl FnOnce(&str),
    ) -> Result<Windows> {
        let (windows, estimate) = self.choice.windows(windows, config, width)?;
        if let (Some(e), BatchChoice::Budget(budget)) = (estimate, self.choice)
            && self.tell
            && self.said.replace(Some(e.batch)) != Some(e.batch)
        {
            say(&format!(
                "batch of {} windows: predicted peak {} of the {} memory budget",
                e.batch,
                human_bytes(e.total()),
                human_bytes(budget)
            ));
        }
        Ok(windows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(gib: u64) -> Host {
        Host {
            cores: 2,
            memory: gib << 30,
        }
    }

    #[test]
    fn the_flags_and_the_device_decide() {
        let cpu = train::Device::Cpu;
        let gpu = train::Device::Cuda(0);
        assert_eq!(
            BatchChoice::new(Some(3), None, cpu, &host(8)),
            BatchChoice::Fixed(3)
        );
        assert_eq!(
            BatchChoice::new(None, Some(5 << 20), gpu, &host(8)),
            BatchChoice::Budget(5 << 20)
        );
        assert_eq!(
            BatchChoice::new(None, None, cpu, &host(8)),
            BatchChoice::Budget(2 << 30)
        );
        assert_eq!(
            BatchChoice::new(None, None, gpu, &host(8)),
            BatchChoice::Fixed(GPU_DEFAULT)
        );
    }

    #[test]
    fn a_wider_scene_gets_a_batch_no_larger() {
        let config = SegformerConfig::mit_b0().with_num_labels(2);
        let windows = Windows::new([512, 512], None, 1).unwrap();
        let input = |batch, scene_width| InferenceInput {
            config: &config,
            tile: [512, 512],
            batch,
            overlap: 128,
            scene_width,
        };
        // A budget where 6 windows fit a 4000-wide scene: the 12000-wide blend takes room.
        let budget = InferenceEstimate::new(&input(6, 4000)).total();
        let choice = BatchChoice::Budget(budget);
        let (narrow, e) = choice.windows(&windows, &config, 4000).unwrap();
        assert_eq!((narrow.batch, e.unwrap().batch), (6, 6));
        let (wide, _) = choice.windows(&windows, &config, 12_000).unwrap();
        assert!(wide.batch < 6, "{}", wide.batch);
        assert!(InferenceEstimate::new(&input(wide.batch, 12_000)).total() <= budget);
        // Too small for one window: the flag is named.
        let e = BatchChoice::Budget(1 << 20)
            .windows(&windows, &config, 2000)
            .unwrap_err();
        assert!(e.to_string().starts_with("--memory-budget"), "{e}");
        // A fixed batch is kept.
        let (fixed, e) = BatchChoice::Fixed(3)
            .windows(&windows, &config, 30_000)
            .unwrap();
        assert_eq!((fixed.batch, e), (3, None));
    }
}
