//! Data-parallel training: one replica of the model and its optimizer per device, the
//! micro-batches of a round one per device, each on its own thread (their forward passes take
//! turns, their backward passes overlap: see [`Replica::micro_batch`]), and the group's
//! gradients summed across the devices by burn-collective's all-reduce before every replica
//! applies the same AdamW step, as PyTorch's DistributedDataParallel does.
//!
//! Every replica starts from the same weights and applies the same all-reduced gradients with
//! the same element-wise AdamW, so the replicas stay identical and the primary's (the first
//! device's) is the one evaluated and checkpointed. BatchNorm's batch statistics are per
//! device (as in DDP without SyncBatchNorm): each replica normalises its own micro-batch, and
//! the running statistics kept are the primary's, updated by its own micro-batches (as DDP's
//! `broadcast_buffers` keeps rank 0's).

use std::marker::PhantomData;
use std::sync::{Mutex, MutexGuard};

use augment::Batch;
use burn::collective::{CollectiveConfig, PeerId, ReduceOperation};
use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::prelude::ToElement;
use burn::tensor::Tensor;
use burn::tensor::backend::AutodiffBackend;
use infer::batch_tensors;
use segformer::{SegLoss, Segformer};

use crate::error::TrainError;
use crate::optim::AdamW;

/// One device's copy of the model, its optimizer and the gradients of the group so far.
pub(crate) struct Replica<B: AutodiffBackend> {
    pub(crate) device: B::Device,
    /// Always `Some` between calls: AdamW takes the model by value for its step.
    pub(crate) model: Option<Segformer<B>>,
    pub(crate) optim: AdamW<B>,
    grads: GradientsAccumulator<Segformer<B>>,
    /// Micro-batches whose gradients `grads` holds.
    micro_batches: usize,
}

impl<B: AutodiffBackend> Replica<B> {
    pub(crate) fn new(device: B::Device, model: Segformer<B>, optim: AdamW<B>) -> Self {
        Self {
            device,
            model: Some(model),
            optim,
            grads: GradientsAccumulator::new(),
            micro_batches: 0,
        }
    }

    pub(crate) fn model(&self) -> &Segformer<B> {
        self.model
            .as_ref()
            .expect("the model is back after every step")
    }

    /// Forward, loss and backward of one micro-batch; its gradients (the loss multiplied by
    /// `factor`) join the group's. Returns the loss; a non-finite one is not backpropagated.
    /// The backend's RNG (dropout, stochastic depth) is seeded with `seed` first.
    ///
    /// `turn`, when several devices run, is held from the seeding until the loss is read
    /// back: burn's RNG is one per process, so the forward passes that draw from it take
    /// turns, and reading the loss makes a lazy backend (burn-fusion) draw before the turn
    /// passes on. The backward passes, the all-reduce and the AdamW steps run side by side.
    pub(crate) fn micro_batch(
        &mut self,
        batch: &Batch,
        seed: u64,
        factor: f64,
        loss_fn: &SegLoss,
        turn: Option<&Mutex<()>>,
    ) -> f64 {
        let (x, y) = batch_tensors::<B>(batch, &self.device);
        let model = self
            .model
            .as_ref()
            .expect("the model is back after every step");
        let (loss, value) = {
            let _turn = turn.map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
            B::seed(&self.device, seed);
            let loss = model.loss_with(model.forward(x), y, loss_fn);
            let value = loss.clone().into_scalar().to_f64();
            (loss, value)
        };
        if !value.is_finite() {
            return value;
        }
        let grads = GradientsParams::from_grads(loss.mul_scalar(factor).backward(), model);
        self.grads.accumulate(model, grads);
        self.micro_batches += 1;
        value
    }

    /// Forgets the group's gradients (a skipped step).
    pub(crate) fn discard(&mut self) {
        self.grads = GradientsAccumulator::new();
        self.micro_batches = 0;
    }

    /// One AdamW step at `lr` on the group's gradients, summed first across the devices when
    /// `peer` is this replica's place in a [`Collective`] (a replica that had no micro-batch in
    /// a short last group adds zeros). Returns whether AdamW applied it.
    pub(crate) fn step(
        &mut self,
        lr: f64,
        grad_scale: f64,
        peer: Option<PeerId>,
    ) -> Result<bool, TrainError> {
        let model = self
            .model
            .take()
            .expect("the model is back after every step");
        let mut grads = match self.micro_batches {
            0 => zero_grads(&model),
            _ => self.grads.grads(),
        };
        self.discard();
        if let Some(peer) = peer {
            grads = match grads.all_reduce::<B::InnerBackend>(peer, ReduceOperation::Sum) {
                Ok(g) => g,
                Err(e) => {
                    self.model = Some(model);
                    return Err(collective_error(&format!("{e:?}")));
                }
            };
        }
        let (model, stats) = self.optim.step(lr, model, grads, grad_scale);
        self.model = Some(model);
        Ok(stats.applied)
    }
}

/// Runs `f(i, replica)` for every replica, each on a thread of its own when there are several
/// (a single replica runs on the caller's thread), and returns the results in order. A panic
/// on one (an out-of-memory, say) is resumed on the caller once every thread has ended.
pub(crate) fn on_each<B, T, F>(replicas: &mut [Replica<B>], f: F) -> Vec<T>
where
    B: AutodiffBackend,
    T: Send,
    F: Fn(usize, &mut Replica<B>) -> T + Sync,
{
    if let [one] = replicas {
        return vec![f(0, one)];
    }
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = replicas
            .iter_mut()
            .enumerate()
            .map(|(i, r)| {
                std::thread::Builder::new()
                    .name(format!("replica-{i}"))
                    .spawn_scoped(s, move || f(i, r))
                    .expect("the OS starts a thread per device")
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    })
}

/// Zero gradients for every float parameter of `model`: what a replica without a micro-batch
/// contributes to the all-reduce, which needs the same parameters from every peer.
fn zero_grads<B: AutodiffBackend>(model: &Segformer<B>) -> GradientsParams {
    struct Zeros<'a>(&'a mut GradientsParams);
    impl<B: AutodiffBackend> ModuleVisitor<B> for Zeros<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let value = param.val();
            // Only what backward gives a gradient: BatchNorm's running statistics are
            // parameters too, without one.
            if !value.is_require_grad() {
                return;
            }
            let zeros = Tensor::<B::InnerBackend, D>::zeros(value.shape(), &value.device());
            self.0.register::<B::InnerBackend, D>(param.id, zeros);
        }
    }
    let mut grads = GradientsParams::new();
    model.visit(&mut Zeros(&mut grads));
    grads
}

fn collective_error(reason: &str) -> TrainError {
    TrainError::Device {
        device: "data-parallel".into(),
        reason: format!("burn-collective's all-reduce failed: {reason}"),
    }
}

/// One data-parallel session of burn-collective's local server: a peer registered per device
/// (the inner backend's, as burn-collective asks of autodiff backends), unregistered when this
/// is dropped. The server is one per backend type and process, so sessions take a process-wide
/// lock: two data-parallel runs in one process (tests) run one after the other.
pub(crate) struct Collective<B: AutodiffBackend> {
    peers: u32,
    _session: MutexGuard<'static, ()>,
    _backend: PhantomData<B>,
}

static SESSION: Mutex<()> = Mutex::new(());

impl<B: AutodiffBackend> Collective<B> {
    /// Registers one peer per device (`None` for a single device: nothing to reduce).
    pub(crate) fn start(devices: &[B::Device]) -> Result<Option<Self>, TrainError> {
        if devices.len() < 2 {
            return Ok(None);
        }
        let session = SESSION.lock().unwrap_or_else(|p| p.into_inner());
        // A previous session that failed half-way may have left peers or operations behind.
        burn::collective::reset_collective::<B::InnerBackend>();
        let config = CollectiveConfig::default().with_num_devices(devices.len());
        // Registration returns once every peer has registered: one thread per peer.
        let registered: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = devices
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    let (device, config) = (d.clone(), config.clone());
                    s.spawn(move || {
                        burn::collective::register::<B::InnerBackend>(
                            PeerId::from(i as u32),
                            device,
                            config,
                        )
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join()).collect()
        });
        for r in registered {
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(collective_error(&format!("registering: {e:?}"))),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        Ok(Some(Self {
            peers: devices.len() as u32,
            _session: session,
            _backend: PhantomData,
        }))
    }

    /// The peer of replica `i`.
    pub(crate) fn peer(&self, i: usize) -> PeerId {
        PeerId::from(i as u32)
    }
}

impl<B: AutodiffBackend> Drop for Collective<B> {
    fn drop(&mut self) {
        for i in 0..self.peers {
            let _ = burn::collective::finish_collective::<B::InnerBackend>(PeerId::from(i));
        }
    }
}
