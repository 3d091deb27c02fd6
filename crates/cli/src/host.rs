//! The machine segfit runs on, measured here (the libraries read no system state) and passed
//! down: its cores bound the loader's threads, its memory every size a user gives, so that an
//! oversized setting is one clear error instead of an aborted allocation.

use anyhow::{Result, bail};
use train::{Host, MAX_BATCH, MAX_SIDE, human_bytes};

/// The cores available to this process and the machine's physical memory (`MemTotal` of
/// `/proc/meminfo`). Where it cannot be read (not Linux), memory counts as unbounded and only
/// the static limits apply.
pub fn host() -> Host {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_total(&text))
        .unwrap_or(u64::MAX);
    Host { cores, memory }
}

/// Makes glibc keep the memory a process frees for its next allocations, instead of handing
/// large blocks back to the kernel on every free (`mmap`/`munmap` above the mmap threshold,
/// trimming the heap's top). A sliding-window prediction allocates and frees the same large
/// activations for every batch; returned each time, every page is faulted in and zeroed again
/// by the kernel. Measured on `segfit predict` (1947×1933, 512² windows, batch 4, this 2-core
/// machine): 8.8 s → 7.0 s, peak RSS 385 → 445 MiB (`crates/cli/BENCH-predict.md`).
///
/// One arena for every thread: the model runs on a thread of rayon's pool
/// (`segformer::on_cpu_pool`), and a thread's own arena grows in heaps of at most 64 MiB, so a
/// larger activation would be mapped and unmapped on every batch whatever the thresholds say
/// (the same 512² run spent 5 % of its time in page faults and was 15 % slower). A no-op
/// elsewhere than glibc.
pub fn reuse_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets two of glibc's allocator thresholds; it is called before the
    // command allocates anything large, and its failure (an unsupported value) changes nothing.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, i32::MAX);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// `MemTotal:  24576000 kB` in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// `flag` = `value` lies in `[min, max]`, or one error naming the flag.
pub fn check_flag(flag: &str, value: usize, min: usize, max: usize) -> Result<()> {
    if value < min {
        bail!("{flag} {value} is too small; expected at least {min}");
    }
    if value > max {
        bail!("{flag} {value} is too large; expected at most {max}");
    }
    Ok(())
}

/// A side in pixels given by `flag`: between 1 and [`MAX_SIDE`].
pub fn check_side(flag: &str, value: usize) -> Result<()> {
    check_flag(flag, value, 1, MAX_SIDE)
}

/// A batch given by `flag`: between 1 and [`MAX_BATCH`].
pub fn check_batch(flag: &str, value: usize) -> Result<()> {
    check_flag(flag, value, 1, MAX_BATCH)
}

/// What a batch of `batch` windows of `side`² pixels holds at the least while the model runs on
/// them: the f32 input bands, and f32 logits for every class (upsampled to the window and
/// blended). A floor, not a prediction: the layers' activations come on top.
fn inference_floor(batch: usize, tile: [usize; 2], bands: usize, labels: usize) -> u64 {
    let pixels = tile[0] as f64 * tile[1] as f64;
    (batch as f64 * pixels * 4.0 * (bands + 2 * labels) as f64) as u64
}

/// Inference on `batch` windows of `tile` pixels fits this machine's memory (see
/// [`inference_floor`]); otherwise an error naming `--tile` or `--batch-size` with the largest
/// that fits.
pub fn check_inference(
    host: &Host,
    batch: usize,
    tile: [usize; 2],
    bands: usize,
    labels: usize,
) -> Result<()> {
    let need = inference_floor(batch, tile, bands, labels);
    if need <= host.memory {
        return Ok(());
    }
    let has = human_bytes(host.memory);
    let one = inference_floor(1, tile, bands, labels);
    if one > host.memory {
        let per_pixel = inference_floor(1, [1, 1], bands, labels).max(1);
        let side = ((host.memory / per_pixel) as f64).sqrt() as usize;
        bail!(
            "--tile {}x{} needs at least {} for one window ({bands} bands, {labels} classes), and \
             this machine has {has}; the largest window that fits is about {side}",
            tile[0],
            tile[1],
            human_bytes(one)
        );
    }
    let most = (host.memory / one.max(1)).max(1);
    bail!(
        "--batch-size {batch} needs at least {} for {batch} windows of {}x{}, and this machine \
         has {has}; the largest batch that fits is about {most}",
        human_bytes(need),
        tile[0],
        tile[1]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_mem_total() {
        let text = "MemTotal:       24576000 kB\nMemFree:        1000 kB\n";
        assert_eq!(mem_total(text), Some(24576000 * 1024));
        assert_eq!(mem_total("MemFree: 3 kB\n"), None);
    }

    #[test]
    fn inference_beyond_memory_names_the_flag() {
        let host = Host {
            cores: 2,
            memory: 1 << 30,
        };
        assert!(check_inference(&host, 4, [512, 512], 3, 2).is_ok());
        let e = check_inference(&host, 1, [100_000, 100_000], 3, 2).unwrap_err();
        assert!(e.to_string().contains("--tile 100000x100000"), "{e}");
        let e = check_inference(&host, 10_000, [512, 512], 3, 2).unwrap_err();
        assert!(e.to_string().contains("--batch-size 10000"), "{e}");
    }
}
