//! Choosing a burn-wgpu device: the GPUs wgpu sees through Vulkan, Metal or DX12, listed in a
//! fixed order (discrete, integrated, virtual, other, then software adapters such as Mesa's
//! lavapipe), and set up for burn's `Wgpu` backend with the graphics API they were found on.
//!
//! OpenGL adapters are left out: wgpu's GL backend lacks the compute features burn's kernels
//! need. Without any adapter (no GPU driver, no Vulkan loader) [`wgpu_adapter`] returns an
//! error listing what it found, instead of the panic a default `WgpuDevice` gives at its first
//! op.

use std::sync::Mutex;

use burn::backend::Wgpu;
use burn::backend::wgpu::graphics::{Dx12, Metal, Vulkan};
use burn::backend::wgpu::{RuntimeOptions, WgpuDevice, init_setup};
use burn::tensor::DType;
use burn::tensor::backend::Backend;

/// A wgpu adapter set up for burn's `Wgpu` backend by [`wgpu_adapter`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WgpuAdapter {
    /// The device to put tensors on (`Wgpu` / `Autodiff<Wgpu>`).
    pub device: WgpuDevice,
    /// The adapter's name as the driver reports it (e.g. `llvmpipe (LLVM 15.0.6, 256 bits)`,
    /// `NVIDIA GeForce RTX 4070`).
    pub name: String,
    /// The graphics API it runs on: `Vulkan`, `Metal` or `Dx12`.
    pub api: String,
    /// `DiscreteGpu`, `IntegratedGpu`, `VirtualGpu`, `Cpu` (a software rasteriser such as
    /// lavapipe) or `Other`.
    pub kind: String,
    /// The driver and its version, where the driver says.
    pub driver: String,
}

impl WgpuAdapter {
    /// Whether burn-wgpu computes in `dtype` on this adapter: f32 everywhere, f16 where the
    /// adapter has `shader-f16`, bf16 nowhere (WGSL has no bf16 type).
    pub fn supports(&self, dtype: DType) -> bool {
        <Wgpu as Backend>::supports_dtype(&self.device, dtype)
    }

    /// Whether this is a software adapter (lavapipe, SwiftShader, WARP): correct, but far
    /// slower than the CPU backend.
    pub fn is_software(&self) -> bool {
        self.kind == "Cpu"
    }
}

/// `name (API, kind)`, e.g. `llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan, Cpu)`.
impl std::fmt::Display for WgpuAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}, {})", self.name, self.api, self.kind)
    }
}

/// Why no wgpu device could be set up.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WgpuError {
    /// No Vulkan, Metal or DX12 adapter at all.
    #[error(
        "no GPU adapter found through Vulkan, Metal or DX12 (on Linux, install the GPU's Vulkan \
         driver and loader, e.g. `apt-get install mesa-vulkan-drivers libvulkan1`)"
    )]
    NoAdapter,
    /// Fewer adapters than the index asked for.
    #[error("no wgpu adapter {index}: found {}", .found.join("; "))]
    NoSuchAdapter {
        /// The index asked for.
        index: usize,
        /// The adapters found, in index order, as `N: name (API, kind)`.
        found: Vec<String>,
    },
    /// The adapter was found but its device could not be created.
    #[error("setting up wgpu adapter {adapter}: {reason}")]
    Setup {
        /// The adapter, as `name (API, kind)`.
        adapter: String,
        /// What wgpu or CubeCL said.
        reason: String,
    },
}

/// The adapters set up so far: CubeCL registers one server per device and refuses a second,
/// so each index is set up once per process.
static READY: Mutex<Vec<(usize, WgpuAdapter)>> = Mutex::new(Vec::new());

/// Sets up wgpu adapter `index` (`--device wgpu:N`; `wgpu` is 0) for burn's `Wgpu` backend,
/// once per process; later calls return the same adapter.
///
/// Adapters are numbered in the order discrete, integrated, virtual, other, software, each
/// group in the driver's order, over the Vulkan, Metal and DX12 adapters of this machine.
pub fn wgpu_adapter(index: usize) -> Result<WgpuAdapter, WgpuError> {
    let mut ready = READY.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, adapter)) = ready.iter().find(|(i, _)| *i == index) {
        return Ok(adapter.clone());
    }
    let adapters = list_adapters();
    if adapters.is_empty() {
        return Err(WgpuError::NoAdapter);
    }
    let Some(found) = adapters.get(index) else {
        return Err(WgpuError::NoSuchAdapter {
            index,
            found: adapters
                .iter()
                .enumerate()
                .map(|(i, a)| format!("{i}: {}", a.adapter))
                .collect(),
        });
    };
    let adapter = found.adapter.clone();
    let device = found.device.clone().ok_or_else(|| WgpuError::Setup {
        adapter: adapter.to_string(),
        reason: "CubeCL cannot select this adapter (more adapters of its type than it indexes)"
            .into(),
    })?;
    let api = found.api;
    // CubeCL panics where wgpu refuses the device: make that an error naming the adapter.
    std::panic::catch_unwind(move || match api {
        wgpu::Backend::Metal => drop(init_setup::<Metal>(&device, RuntimeOptions::default())),
        wgpu::Backend::Dx12 => drop(init_setup::<Dx12>(&device, RuntimeOptions::default())),
        _ => drop(init_setup::<Vulkan>(&device, RuntimeOptions::default())),
    })
    .map_err(|panic| WgpuError::Setup {
        adapter: adapter.to_string(),
        reason: panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "device creation failed".into()),
    })?;
    ready.push((index, adapter.clone()));
    Ok(adapter)
}

/// An adapter wgpu lists, the graphics API it was found on and the `WgpuDevice` that makes
/// CubeCL select it.
struct Listed {
    adapter: WgpuAdapter,
    api: wgpu::Backend,
    device: Option<WgpuDevice>,
}

/// The Vulkan, Metal and DX12 adapters, in [`wgpu_adapter`]'s order.
fn list_adapters() -> Vec<Listed> {
    let mut listed = Vec::new();
    for api in [
        wgpu::Backend::Vulkan,
        wgpu::Backend::Metal,
        wgpu::Backend::Dx12,
    ] {
        // Enumerated per API exactly as CubeCL does when it selects `DiscreteGpu(n)` etc., so
        // the index within a type is the one it takes.
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: api.into(),
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let mut seen: Vec<wgpu::DeviceType> = Vec::new();
        for adapter in block_on(instance.enumerate_adapters(api.into())) {
            let info = adapter.get_info();
            let nth = seen.iter().filter(|t| **t == info.device_type).count();
            seen.push(info.device_type);
            let device = match info.device_type {
                wgpu::DeviceType::DiscreteGpu => Some(WgpuDevice::DiscreteGpu(nth)),
                wgpu::DeviceType::IntegratedGpu => Some(WgpuDevice::IntegratedGpu(nth)),
                wgpu::DeviceType::VirtualGpu => Some(WgpuDevice::VirtualGpu(nth)),
                wgpu::DeviceType::Cpu => (nth == 0).then_some(WgpuDevice::Cpu),
                // CubeCL takes "other" adapters by index only when no adapter of the asked
                // type has that index; rare (unknown drivers), left unselectable.
                wgpu::DeviceType::Other => None,
            };
            let driver = [info.driver.as_str(), info.driver_info.as_str()]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            listed.push(Listed {
                adapter: WgpuAdapter {
                    device: device.clone().unwrap_or(WgpuDevice::DefaultDevice),
                    name: info.name.clone(),
                    api: format!("{api:?}"),
                    kind: format!("{:?}", info.device_type),
                    driver,
                },
                api,
                device,
            });
        }
    }
    let rank = |kind: &str| match kind {
        "DiscreteGpu" => 0,
        "IntegratedGpu" => 1,
        "VirtualGpu" => 2,
        "Other" => 3,
        _ => 4,
    };
    listed.sort_by_key(|l| rank(&l.adapter.kind));
    listed
}

/// Runs a future that native wgpu resolves without waiting (adapter enumeration).
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::yield_now();
    }
}
