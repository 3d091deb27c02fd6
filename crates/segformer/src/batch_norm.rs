//! `nn.BatchNorm2d` with PyTorch's exact semantics.

use burn::module::{Module, Param, RunningState};
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;

/// `nn.BatchNorm2d(channels)` with PyTorch's exact semantics (eps 1e-5, momentum 0.1).
///
/// NOTE: burn's own `BatchNorm` updates `running_var` with the biased batch variance;
/// PyTorch uses the unbiased one (`n / (n - 1)`), so we keep our own module to match the
/// running statistics of HF checkpoints after a training step. Both use the same momentum
/// convention, `running = (1 - momentum) * running + momentum * batch`.
#[derive(Module, Debug)]
pub(crate) struct BatchNorm2d<B: Backend> {
    /// Scale (`weight` in PyTorch).
    pub gamma: Param<Tensor<B, 1>>,
    /// Shift (`bias` in PyTorch).
    pub beta: Param<Tensor<B, 1>>,
    /// `running_mean`.
    pub running_mean: RunningState<Tensor<B, 1>>,
    /// `running_var` (unbiased).
    pub running_var: RunningState<Tensor<B, 1>>,
    momentum: f64,
    pub(crate) epsilon: f64,
}

impl<B: Backend> BatchNorm2d<B> {
    pub(crate) fn new(channels: usize, device: &B::Device) -> Self {
        Self {
            gamma: Param::from_tensor(Tensor::ones([channels], device)),
            beta: Param::from_tensor(Tensor::zeros([channels], device)),
            running_mean: RunningState::new(Tensor::zeros([channels], device)),
            running_var: RunningState::new(Tensor::ones([channels], device)),
            momentum: 0.1,
            epsilon: 1e-5,
        }
    }

    /// `running = (1 - momentum) · running + momentum · batch` for the mean and the unbiased
    /// variance of a batch.
    ///
    /// # Shapes
    /// - mean, unbiased_var: `[channels]`
    pub(crate) fn update_running(&self, mean: Tensor<B, 1>, unbiased_var: Tensor<B, 1>) {
        let m = self.momentum;
        let running_mean = self.running_mean.value_sync() * (1.0 - m) + mean * m;
        let running_var = self.running_var.value_sync() * (1.0 - m) + unbiased_var * m;
        self.running_mean.update(running_mean.detach());
        self.running_var.update(running_var.detach());
        // burn's `RunningState` keeps an update per thread until that thread updates again (or
        // the module is recorded), then averages what it holds: a model whose forward runs on
        // a new thread each time (a data-parallel replica) would average successive updates
        // instead of chaining them. Folding each update in at once keeps the chain whatever
        // the thread (on one thread it is what the next update would have done first).
        fold(&self.running_mean);
        fold(&self.running_var);
    }

    /// This module with running statistics of its own, equal to these: burn's `RunningState`
    /// is shared between clones, so replicas of a model cloned from one another would update
    /// one running estimate from all their threads.
    pub(crate) fn with_own_running_stats(mut self) -> Self {
        self.running_mean = own(&self.running_mean);
        self.running_var = own(&self.running_var);
        self
    }

    /// Batch statistics (and a running-stats update) under autodiff, running stats otherwise.
    ///
    /// # Shapes
    /// - input: `[batch, channels, height, width]`
    /// - output: `[batch, channels, height, width]`
    pub(crate) fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let [batch, channels, height, width] = x.dims();
        let (mean, var) = if B::ad_enabled(&x.device()) {
            let n = batch * height * width;
            // Mean over batch and pixels without a transpose: [B, C, H*W] -> [B, C, 1] -> [1, C, 1]
            // (equal counts per image, so the mean of the means is the mean).
            let flat = x.clone().reshape([batch, channels, height * width]);
            let mean = flat.clone().mean_dim(2).mean_dim(0); // [1, C, 1]
            let var = (flat - mean.clone()).square().mean_dim(2).mean_dim(0); // biased, [1, C, 1]
            let mean = mean.reshape([channels]);
            let var = var.reshape([channels]);
            let unbiased = if n > 1 {
                var.clone().detach() * (n as f64 / (n - 1) as f64)
            } else {
                var.clone().detach()
            };
            self.update_running(mean.clone().detach(), unbiased);
            (mean, var)
        } else {
            (self.running_mean.value(), self.running_var.value())
        };
        let shape = [1, channels, 1, 1];
        let std = var.add_scalar(self.epsilon).sqrt().reshape(shape);
        let x = (x - mean.reshape(shape)) / std;
        x * self.gamma.val().reshape(shape) + self.beta.val().reshape(shape)
    }
}

/// Folds the pending per-thread updates of `state` into its value (recording a running state
/// does that; the record is dropped).
fn fold<B: Backend>(state: &RunningState<Tensor<B, 1>>) {
    let _ = state.clone().into_record();
}

/// A running state of its own with `state`'s id and value.
fn own<B: Backend>(state: &RunningState<Tensor<B, 1>>) -> RunningState<Tensor<B, 1>> {
    let record = state.clone().into_record();
    RunningState::with_id(record.id, record.val())
}
