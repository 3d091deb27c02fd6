//! From `--device` (a [`train::Device`], the one parser and availability check) to the
//! inference backend type: the only place the binary's own `cuda`/`wgpu` features decide what
//! runs.

/// Calls `f::<B>(args…, &device)` with the inference backend `B` that `--device` names, after
/// `train` has checked that this build and this machine can use it.
macro_rules! on_device {
    ($device:expr, $f:ident ( $($arg:expr),* )) => {
        match $device {
            train::Device::Cpu => $f::<burn::backend::Flex>($($arg,)* &Default::default()),
            train::Device::Cuda(index) => {
                #[cfg(feature = "cuda")]
                {
                    let backend_device = train::cuda_device(index)?;
                    $f::<burn::backend::Cuda>($($arg,)* &backend_device)
                }
                #[cfg(not(feature = "cuda"))]
                {
                    Err(train::Device::Cuda(index).not_built().into())
                }
            }
            train::Device::Wgpu(index) => {
                #[cfg(feature = "wgpu")]
                {
                    let adapter = train::wgpu_adapter(index)?;
                    $f::<burn::backend::Wgpu>($($arg,)* &adapter.device)
                }
                #[cfg(not(feature = "wgpu"))]
                {
                    Err(train::Device::Wgpu(index).not_built().into())
                }
            }
        }
    };
}
pub(crate) use on_device;
