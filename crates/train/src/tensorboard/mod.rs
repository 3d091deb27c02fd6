//! TensorBoard event files in `<run>/tb/`, beside `metrics.jsonl`: `tensorboard --logdir runs`
//! shows every run's curves and validation overlays.
//!
//! The format is written here rather than through a crate: the only Rust writers on crates.io,
//! `tensorboard-rs` and its `tensorboard-proto`, were last released in 2022, pull in `protobuf`
//! 2 with ~30k lines of generated code and an old `image`, for what is a ~150-line format:
//! TFRecord framing (length, masked CRC-32C, data, masked CRC-32C) around three small
//! protobuf messages ([`record`]). No CRC-32C crate is in the workspace's lock file either.
//!
//! Files are append-only logs written through a buffer, flushed at every checkpoint and
//! evaluation and when the run ends: a crash loses at most what was logged since the last
//! checkpoint, which a resume writes again. They are not written atomically (a reader would
//! see nothing until the run ends); a record cut short by a kill fails its CRC, and readers,
//! TensorBoard and [`EventWriter::open`] alike, stop at it.
//!
//! A resume at step `s` keeps the earlier files' events up to `s` (rewriting them atomically
//! when a killed run logged past it, as `metrics.jsonl` is cut) and writes a new file, named
//! to sort after them, that opens with `SessionLog.START` at `s + 1`: a TensorBoard already
//! showing the killed run's later steps drops them on reading it, so each step appears once.

mod record;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::TrainError;
use crate::io::write_atomic;
use record::{Body, event, event_step, frame, records};

const PREFIX: &str = "events.out.tfevents.";

/// An open event file.
pub(crate) struct EventWriter {
    path: PathBuf,
    out: BufWriter<File>,
}

impl EventWriter {
    /// Opens a new event file in `dir` (created). A fresh run (`resume_step` `None`) first
    /// removes the event files already there; a run resumed at step `s` drops their events
    /// past `s` and starts the new file at `s + 1`.
    pub(crate) fn open(dir: &Path, resume_step: Option<u64>) -> Result<Self, TrainError> {
        std::fs::create_dir_all(dir).map_err(|e| TrainError::io(dir, e))?;
        let existing = event_files(dir)?;
        for path in &existing {
            match resume_step {
                None => std::fs::remove_file(path).map_err(|e| TrainError::io(path, e))?,
                Some(s) => keep_until(path, s)?,
            }
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        // The seconds in the name order the files as TensorBoard reads them: this one after
        // every earlier one, even within the same second or after a clock change.
        let after = existing.iter().filter_map(|p| name_seconds(p)).max();
        let secs = after.map_or(now.as_secs(), |a| now.as_secs().max(a + 1));
        let path = dir.join(format!("{PREFIX}{secs}.{}", hostname()));
        let file = File::create(&path).map_err(|e| TrainError::io(&path, e))?;
        let mut w = Self {
            path,
            out: BufWriter::new(file),
        };
        // The version at step 0, as TensorFlow writes it, so that a later resume keeps it.
        w.write(0, Body::FileVersion)
            .and_then(|()| match resume_step {
                Some(s) => w.write(s + 1, Body::Start),
                None => Ok(()),
            })
            .and_then(|()| w.flush())
            .map_err(|e| TrainError::io(&w.path, e))?;
        Ok(w)
    }

    /// The file written.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn write(&mut self, step: u64, body: Body<'_>) -> std::io::Result<()> {
        let wall_time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        self.out.write_all(&frame(&event(wall_time, step, body)))
    }

    /// Scalars `(tag, value)` at `step`, as one event (TensorBoard stores f32).
    pub(crate) fn scalars(&mut self, step: u64, values: &[(String, f64)]) -> std::io::Result<()> {
        let values: Vec<(String, f32)> =
            values.iter().map(|(t, v)| (t.clone(), *v as f32)).collect();
        self.write(step, Body::Scalars(&values))
    }

    /// A PNG image of `size` (width, height) pixels at `step`.
    pub(crate) fn image(
        &mut self,
        step: u64,
        tag: &str,
        png: &[u8],
        size: (usize, usize),
    ) -> std::io::Result<()> {
        self.write(step, Body::Image { tag, png, size })
    }

    /// Writes the buffered events to the file.
    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// The event files of `dir`, sorted by name as TensorBoard reads them.
fn event_files(dir: &Path) -> Result<Vec<PathBuf>, TrainError> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| TrainError::io(dir, e))? {
        let path = entry.map_err(|e| TrainError::io(dir, e))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with(PREFIX) && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// The Unix seconds in an event file's name.
fn name_seconds(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?.strip_prefix(PREFIX)?;
    name.split('.').next()?.parse().ok()
}

/// Rewrites event file `path` without its events past `step` and without a torn tail; leaves
/// it untouched when there is nothing to drop.
fn keep_until(path: &Path, step: u64) -> Result<(), TrainError> {
    let bytes = std::fs::read(path).map_err(|e| TrainError::io(path, e))?;
    let all = records(&bytes);
    let kept: Vec<u8> = all
        .iter()
        .filter(|(_, data)| event_step(data).is_some_and(|s| s <= step))
        .flat_map(|(framed, _)| framed.iter().copied())
        .collect();
    if kept.len() == bytes.len() {
        return Ok(());
    }
    write_atomic(path, &kept).map_err(|e| TrainError::io(path, e))
}

/// This machine's name for the file name, as TensorFlow's writers add it (so that runs
/// written to one shared directory from several machines do not collide); `localhost` when
/// unknown.
fn hostname() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| {
            s.trim()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                .collect::<String>()
        })
        .find(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::tfevents::{self, event_files as files_of, read_file};

    fn losses(w: &mut EventWriter, steps: std::ops::RangeInclusive<u64>) {
        for s in steps {
            w.scalars(s, &[("train/loss".to_string(), s as f64 / 8.0)])
                .unwrap();
        }
    }

    #[test]
    fn fresh_run_writes_one_file_of_scalars_and_images() {
        let dir = tempfile::tempdir().unwrap();
        let tb = dir.path().join("tb");
        std::fs::create_dir_all(&tb).unwrap();
        std::fs::write(tb.join(format!("{PREFIX}1.old")), b"a previous run").unwrap();
        let mut w = EventWriter::open(&tb, None).unwrap();
        losses(&mut w, 1..=3);
        w.scalars(
            3,
            &[
                ("val/miou".to_string(), 0.625),
                ("val/iou/rice_paddy".to_string(), f64::NAN),
            ],
        )
        .unwrap();
        w.image(3, "val/overlays", b"\x89PNG-bytes", (488, 168))
            .unwrap();
        w.flush().unwrap();
        let files = files_of(&tb);
        assert_eq!(files, vec![w.path().to_path_buf()], "the old file is gone");
        let name = files[0].file_name().unwrap().to_str().unwrap().to_string();
        let secs: u64 = name[PREFIX.len()..]
            .split('.')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(secs > 1_600_000_000, "{name}");
        let e = read_file(&files[0]);
        assert_eq!(e[0].file_version.as_deref(), Some("brain.Event:2"));
        assert!((e[0].wall_time - secs as f64).abs() < 5.0);
        assert_eq!(e[0].session_status, None, "a fresh run has no restart");
        let steps: Vec<i64> = e.iter().map(|e| e.step).collect();
        assert_eq!(steps, [0, 1, 2, 3, 3, 3]);
        assert_eq!(e[2].values[0].tag, "train/loss");
        assert_eq!(e[2].values[0].scalar, Some(0.25));
        assert_eq!(e[4].values[0].scalar, Some(0.625));
        assert!(e[4].values[1].scalar.unwrap().is_nan());
        let img = e[5].values[0].image.as_ref().unwrap();
        assert_eq!((img.width, img.height), (488, 168));
        assert_eq!(img.encoded, b"\x89PNG-bytes");
    }

    #[test]
    fn resume_drops_orphaned_steps_and_restarts_in_a_later_file() {
        let dir = tempfile::tempdir().unwrap();
        let tb = dir.path().join("tb");
        let mut w = EventWriter::open(&tb, None).unwrap();
        losses(&mut w, 1..=10);
        w.flush().unwrap();
        let first = w.path().to_path_buf();
        drop(w);
        // A kill mid-write leaves a torn record at the end.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&first)
            .unwrap();
        f.write_all(&frame(&event(0.0, 11, Body::FileVersion))[..9])
            .unwrap();
        drop(f);

        // The checkpoint the resume starts from is at step 6.
        let mut w = EventWriter::open(&tb, Some(6)).unwrap();
        losses(&mut w, 7..=8);
        w.flush().unwrap();
        let files = files_of(&tb);
        assert_eq!(
            files,
            vec![first.clone(), w.path().to_path_buf()],
            "sorted, new last"
        );
        let old: Vec<i64> = read_file(&first).iter().map(|e| e.step).collect();
        assert_eq!(old, [0, 1, 2, 3, 4, 5, 6]);
        let new = read_file(&files[1]);
        assert_eq!(new[0].file_version.as_deref(), Some("brain.Event:2"));
        assert_eq!((new[1].step, new[1].session_status), (7, Some(1)));
        let losses: Vec<(i64, f32)> = tfevents::scalars(&tb)
            .into_iter()
            .map(|(tag, s, v)| {
                assert_eq!(tag, "train/loss");
                (s, v)
            })
            .collect();
        let want: Vec<(i64, f32)> = (1..=8).map(|s| (s, s as f32 / 8.0)).collect();
        assert_eq!(losses, want, "each step once, in order");
    }
}
