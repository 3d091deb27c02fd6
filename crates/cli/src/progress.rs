//! The progress bar of a long command (`predict`): on stderr with an ETA when stderr is a
//! terminal, nothing at all when it is piped or redirected (indicatif draws only on a terminal).
//! The command's own lines go through [`Progress::line`] so the bar never splits them.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// One bar, reused task after task: [`Progress::start`] a task (a scene), give it its length
/// once known, advance it, and print the task's result line in its place.
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar counting `unit`s: `[1/3] s1.tif [=====>    ] 1200/8000 rows ETA 42s`.
    pub fn new(unit: &str) -> Self {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(&format!(
                "{{prefix}} [{{bar:30}}] {{pos}}/{{len}} {unit} ETA {{eta}}"
            ))
            .expect("a valid template")
            .progress_chars("=> "),
        );
        Self { bar }
    }

    /// Starts a task named `name`, of unknown length until [`Progress::set_length`].
    pub fn start(&self, name: String) {
        self.bar.reset();
        self.bar.set_length(0);
        self.bar.set_prefix(name);
    }

    /// The current task's length.
    pub fn set_length(&self, len: u64) {
        self.bar.set_length(len);
    }

    /// `n` more units of the current task done.
    pub fn advance(&self, n: u64) {
        self.bar.inc(n);
    }

    /// Clears the bar and prints `line` to stderr in its place.
    pub fn line(&self, line: &str) {
        self.bar.suspend(|| eprintln!("{line}"));
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Progress {
    /// A command that fails mid-task leaves no half bar above its error line.
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
