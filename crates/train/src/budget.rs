//! A run against its memory before it starts: `[memory] budget` applied through the planner,
//! then the machine's cores and RAM checked ([`crate::host`]), with nothing allocated yet.

use segformer::Kernels;

use crate::config::TrainConfig;
use crate::device::{Device, Devices};
use crate::error::TrainError;
use crate::model::model_config;
use crate::plan::{LoaderInput, PlanInputTemplate, fit_whole_process, parse_bytes};

/// Applies `[memory] budget` (each device's): picks micro-batch, accumulation, precision and
/// checkpointing so the predicted peak of the whole process (the step, the process baseline
/// and the loader's samples: [`fit_whole_process`]) fits and the effective batch
/// (`memory.effective_batch`, else `batch_size × devices × accumulation_steps`) is kept, for a
/// model whose layers run `kernels`. Returns why, or `None` without a budget.
///
/// With `memory.host` (the machine, which the binary passes in), it then checks the run
/// against the machine before anything is allocated: `train.workers` against its cores, and
/// the predicted memory against its RAM, naming the value that does not fit
/// (`data.size`, `train.batch_size` or `train.prefetch`) with the largest that does.
pub fn fit_memory(
    cfg: &mut TrainConfig,
    devices: &Devices,
    kernels: Kernels,
) -> Result<Option<String>, TrainError> {
    if let Some(host) = cfg.memory.host {
        crate::host::check_workers(cfg, &host)?;
    }
    let device = devices.primary();
    let reason = fit_budget_of(cfg, devices, kernels)?;
    if let Some(host) = cfg.memory.host {
        let model = planned_model(cfg)?;
        let loss = cfg.loss.for_planning(model.num_labels());
        let t = template(cfg, &model, &loss, device, kernels);
        crate::host::check_memory(cfg, &t, &host)?;
    }
    Ok(reason)
}

fn fit_budget_of(
    cfg: &mut TrainConfig,
    devices: &Devices,
    kernels: Kernels,
) -> Result<Option<String>, TrainError> {
    let (device, n) = (devices.primary(), devices.len());
    let Some(budget) = cfg.memory.budget.clone() else {
        return Ok(None);
    };
    let bytes =
        parse_bytes(&budget).map_err(|e| TrainError::Config(format!("`memory.budget`: {e}")))?;
    let model = planned_model(cfg)?;
    let effective = cfg
        .memory
        .effective_batch
        .unwrap_or(cfg.train.batch_size * cfg.train.accumulation_steps * n);
    if !effective.is_multiple_of(n) {
        return Err(TrainError::Config(format!(
            "`memory.effective_batch` = {effective} is not a multiple of the {n} devices \
             ({devices}); use a multiple of {n}"
        )));
    }
    let loss = cfg.loss.for_planning(model.num_labels());
    let choice = fit_whole_process(
        bytes,
        effective / n,
        &template(cfg, &model, &loss, device, kernels),
        &loader_input(cfg),
    )
    .map_err(|e| TrainError::Config(format!("`memory.budget`: {e}")))?;
    cfg.train.batch_size = choice.micro_batch;
    cfg.train.accumulation_steps = choice.accumulation_steps;
    cfg.train.precision = choice.precision;
    cfg.train.checkpointing = choice.checkpointing;
    Ok(Some(match n {
        1 => choice.reason(),
        _ => format!("{} on each of {n} devices", choice.reason()),
    }))
}

/// The loader a run feeds its steps with.
pub(crate) fn loader_input(cfg: &TrainConfig) -> LoaderInput {
    LoaderInput {
        workers: cfg.train.workers,
        prefetch: cfg.train.prefetch,
    }
}

/// The model a run trains, as the planner needs it: the architecture, the dataset's classes
/// and bands.
pub(crate) fn planned_model(cfg: &TrainConfig) -> Result<segformer::SegformerConfig, TrainError> {
    let meta = tiles::DatasetMeta::load(&cfg.data.root)?;
    let class_names = match (&cfg.data.classes, &meta) {
        (Some(l), _) => l.class_names(),
        (None, Some(m)) => m.classes.clone(),
        (None, None) => vec!["class_0".into(), "class_1".into()],
    };
    let bands = meta.as_ref().map(|m| m.bands).unwrap_or(3);
    model_config(&cfg.model, &class_names, bands)
}

pub(crate) fn template<'a>(
    cfg: &TrainConfig,
    model: &'a segformer::SegformerConfig,
    loss: &'a segformer::SegLoss,
    device: Device,
    kernels: Kernels,
) -> PlanInputTemplate<'a> {
    PlanInputTemplate {
        config: model,
        height: cfg.data.size[0],
        width: cfg.data.size[1],
        precision: cfg.train.precision,
        reduced: device.reduced_precision(),
        checkpointing: cfg.train.checkpointing,
        kernels: device.kernel_path(kernels),
        allocator: device.allocator(),
        loss: Some(loss),
    }
}

/// A synthetic dataset on disk and a config training MiT-B0 on it, with `data` and `train`
/// lines added; the directory lives as long as the returned guard.
#[cfg(test)]
pub(crate) fn synthetic_config(data: &str, train: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let opts = tiles::SyntheticOptions {
        count: 4,
        size: 32,
        out: dir.path().to_path_buf(),
        ..Default::default()
    };
    tiles::prepare_synthetic(&opts).unwrap();
    let text = format!(
        "[model]\npreset = \"mit-b0\"\n[data]\nroot = {:?}\n{data}\n[train]\n{train}\n",
        dir.path().to_str().unwrap()
    );
    (dir, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_budget_rewrites_batch_and_accumulation() {
        let (_dir, text) = synthetic_config(
            "size = [512, 512]",
            "batch_size = 8\n[memory]\nbudget = \"1GiB\"",
        );
        let mut cfg = TrainConfig::from_toml_str(&text, &[]).unwrap();
        let reason = fit_memory(&mut cfg, &Device::Cpu.into(), Kernels::Auto)
            .unwrap()
            .expect("a budget was given");
        assert_eq!(
            cfg.train.batch_size * cfg.train.accumulation_steps,
            8,
            "{reason}"
        );
        assert!(cfg.train.batch_size < 8, "{reason}");
        assert!(reason.contains("1 GiB"), "{reason}");
        // burn-cuda runs burn's composed ops (with the recomputing attention and loss), which
        // keep more than the fused CPU kernels: the same budget holds fewer images there.
        let mut on_gpu = TrainConfig::from_toml_str(&text, &[]).unwrap();
        let gpu_reason = fit_memory(&mut on_gpu, &Device::Cuda(0).into(), Kernels::Auto)
            .unwrap()
            .unwrap();
        assert_eq!(on_gpu.train.batch_size * on_gpu.train.accumulation_steps, 8);
        assert!(
            on_gpu.train.batch_size < cfg.train.batch_size,
            "cpu: {reason}; cuda: {gpu_reason}"
        );
        cfg.memory.budget = Some("a lot".into());
        let e = fit_memory(&mut cfg, &Device::Cpu.into(), Kernels::Auto)
            .unwrap_err()
            .to_string();
        assert!(e.contains("memory.budget") && e.contains("a lot"), "{e}");
    }
}
