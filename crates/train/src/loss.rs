//! The `[loss]` table: which loss trains the model (cross-entropy, Dice, focal, Lovász or a
//! weighted sum) and its class weights, resolved to a [`segformer::SegLoss`].

use segformer::{LossKind, LossTerm, SegLoss};
use serde::{Deserialize, Serialize};

use crate::error::TrainError;

/// A loss as `[loss]` names it: `ce`, `dice`, `focal` or `lovasz` (its parameters, `gamma` and
/// `smooth`, are the table's). Adding one is a variant here and its arm in [`LossName::kind`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LossName {
    /// HF's cross-entropy (class-weighted with `class_weights`).
    #[default]
    Ce,
    /// smp's multiclass Dice loss from logits.
    Dice,
    /// Focal loss, softmax form.
    Focal,
    /// Lovász-softmax.
    Lovasz,
}

impl LossName {
    /// The loss with the parameters of `cfg`.
    fn kind(self, cfg: &LossConfig) -> LossKind {
        match self {
            LossName::Ce => LossKind::CrossEntropy,
            LossName::Dice => LossKind::Dice { smooth: cfg.smooth },
            LossName::Focal => LossKind::Focal { gamma: cfg.gamma },
            LossName::Lovasz => LossKind::Lovasz,
        }
    }
}

/// `ce`, `dice`, `focal` or `lovasz` (any case), the words `loss.kind` takes.
impl std::str::FromStr for LossName {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        crate::config::from_name(s)
    }
}

/// `[loss]`: `kind = "ce" | "dice" | "focal" | "lovasz"`, or `terms = [{ kind, weight }, …]`
/// for a weighted sum; `class_weights = "auto" | [w, …]`; `gamma` (focal), `smooth` (Dice).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LossConfig {
    /// One loss (ignored when `terms` is given).
    pub kind: LossName,
    /// A weighted sum of losses; overrides `kind`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terms: Option<Vec<LossTermConfig>>,
    /// `"auto"` (median frequency balancing over the train split's class pixel counts:
    /// `w_c = median_k f_k / f_c`) or one weight per class; applied by `ce` and `focal`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class_weights: Option<ClassWeights>,
    /// Focal loss exponent γ.
    pub gamma: f64,
    /// Dice smoothing constant.
    pub smooth: f64,
}

impl Default for LossConfig {
    fn default() -> Self {
        Self {
            kind: LossName::Ce,
            terms: None,
            class_weights: None,
            gamma: 2.0,
            smooth: 0.0,
        }
    }
}

/// One term of `loss.terms`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LossTermConfig {
    /// `ce`, `dice`, `focal` or `lovasz`.
    pub kind: LossName,
    /// Its factor in the sum.
    #[serde(default = "one")]
    pub weight: f64,
}

fn one() -> f64 {
    1.0
}

/// `loss.class_weights`: `"auto"` or a list.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ClassWeights {
    /// `"auto"`: median frequency balancing from the train split's pixel counts.
    Auto(String),
    /// One weight per class, in class order.
    List(Vec<f64>),
}

impl LossConfig {
    /// The `(kind, weight)` pairs the config sums.
    fn term_list(&self) -> Vec<(LossName, f64)> {
        match &self.terms {
            Some(t) => t.iter().map(|t| (t.kind, t.weight)).collect(),
            None => vec![(self.kind, 1.0)],
        }
    }

    /// Checks values the types cannot (the class count is checked by [`LossConfig::resolve`]).
    pub fn validate(&self) -> Result<(), TrainError> {
        let bad =
            |k: &str, v: String, fix: &str| Err(TrainError::Config(format!("`{k}` = {v} {fix}")));
        if matches!(&self.terms, Some(t) if t.is_empty()) {
            return bad(
                "loss.terms",
                "[]".into(),
                "is empty; give at least one { kind, weight } or drop it for `loss.kind`",
            );
        }
        for (_, weight) in self.term_list() {
            if !(weight.is_finite() && weight >= 0.0) {
                return bad(
                    "loss.terms.weight",
                    weight.to_string(),
                    "must be a finite number >= 0",
                );
            }
        }
        if !(self.gamma.is_finite() && self.gamma >= 0.0) {
            return bad(
                "loss.gamma",
                self.gamma.to_string(),
                "must be a finite number >= 0 (2 is the paper's)",
            );
        }
        if !(self.smooth.is_finite() && self.smooth >= 0.0) {
            return bad(
                "loss.smooth",
                self.smooth.to_string(),
                "must be a finite number >= 0 (0 or 1 are usual)",
            );
        }
        match &self.class_weights {
            Some(ClassWeights::Auto(s)) if s != "auto" => bad(
                "loss.class_weights",
                format!("\"{s}\""),
                "is not understood; use \"auto\" or a list with one weight per class",
            ),
            Some(ClassWeights::List(w)) if w.iter().any(|v| !(v.is_finite() && *v >= 0.0)) => bad(
                "loss.class_weights",
                format!("{w:?}"),
                "must hold finite weights >= 0",
            ),
            _ => Ok(()),
        }
    }

    /// The loss as the memory planner sees it: the terms, and class weights where there are
    /// any (`"auto"` ones as all 1: their values change no tensor's size). Invalid settings
    /// give HF's cross-entropy here; the run's own check reports them.
    pub fn for_planning(&self, classes: usize) -> SegLoss {
        let weights = match &self.class_weights {
            Some(ClassWeights::Auto(_)) => Some(vec![1; classes.max(1)]),
            _ => None,
        };
        self.resolve(classes, weights.as_deref())
            .unwrap_or_default()
    }

    /// Whether `"auto"` class weights need the train split's class pixel counts.
    pub fn needs_class_counts(&self) -> bool {
        matches!(self.class_weights, Some(ClassWeights::Auto(_)))
    }

    /// The loss for `classes` classes; `class_pixels` (the train split's pixel count per
    /// class) is needed for `"auto"` weights.
    pub fn resolve(
        &self,
        classes: usize,
        class_pixels: Option<&[u64]>,
    ) -> Result<SegLoss, TrainError> {
        self.validate()?;
        let terms: Vec<LossTerm> = self
            .term_list()
            .into_iter()
            .map(|(name, weight)| LossTerm {
                kind: name.kind(self),
                weight,
            })
            .collect();
        let class_weights = match &self.class_weights {
            None => None,
            Some(ClassWeights::List(w)) if w.len() != classes => {
                return Err(TrainError::Config(format!(
                    "`loss.class_weights` has {} weights but the dataset has {classes} classes; give one per class, in class order, or \"auto\"",
                    w.len()
                )));
            }
            Some(ClassWeights::List(w)) => Some(w.iter().map(|&v| v as f32).collect()),
            Some(ClassWeights::Auto(_)) => {
                let counts = class_pixels.filter(|c| c.len() == classes).ok_or_else(|| {
                    TrainError::Config(
                        "`loss.class_weights = \"auto\"` needs the train split's class pixel counts, which were not found; give the weights as a list".into(),
                    )
                })?;
                Some(segformer::median_frequency_weights(counts))
            }
        };
        if classes == 1 && (terms_differ_from_ce(&terms) || class_weights.is_some()) {
            return Err(TrainError::Config(
                "`[loss]`: a single-class (sigmoid) model trains with HF's BCE only; drop the [loss] table or use two classes".into(),
            ));
        }
        Ok(SegLoss {
            terms,
            class_weights,
        })
    }
}

/// One log line: the sum and the class weights.
pub(crate) fn describe(loss: &SegLoss, class_names: &[String]) -> String {
    let terms: Vec<String> = loss
        .terms
        .iter()
        .map(|t| match &t.kind {
            LossKind::Dice { smooth } => format!("{}·dice(smooth {smooth})", t.weight),
            LossKind::Focal { gamma } => format!("{}·focal(gamma {gamma})", t.weight),
            k => format!("{}·{}", t.weight, k.name()),
        })
        .collect();
    let mut line = format!("loss: {}", terms.join(" + "));
    if let Some(w) = &loss.class_weights {
        let pairs: Vec<String> = class_names
            .iter()
            .zip(w)
            .map(|(n, w)| format!("{n} {w:.3}"))
            .collect();
        line += &format!("; class weights (ce, focal): {}", pairs.join(", "));
    }
    line
}

fn terms_differ_from_ce(terms: &[LossTerm]) -> bool {
    terms
        .iter()
        .any(|t| t.kind != LossKind::CrossEntropy || t.weight != 1.0)
        || terms.len() != 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TrainConfig;

    const MINIMAL: &str = "[model]\npreset = \"mit-b0\"\n[data]\nroot = \"data/x\"\n";

    fn parse(extra: &str) -> Result<TrainConfig, TrainError> {
        TrainConfig::from_toml_str(&format!("{MINIMAL}{extra}"), &[])
    }

    #[test]
    fn loss_tables_parse_to_the_sum_they_describe() {
        let c = parse("[loss]\nterms = [{ kind = \"ce\", weight = 1.0 }, { kind = \"dice\", weight = 0.5 }]\nsmooth = 1.0\n").unwrap();
        let l = c.loss.resolve(3, None).unwrap();
        assert_eq!(
            l.terms,
            vec![
                LossTerm {
                    kind: LossKind::CrossEntropy,
                    weight: 1.0
                },
                LossTerm {
                    kind: LossKind::Dice { smooth: 1.0 },
                    weight: 0.5
                },
            ]
        );
        assert_eq!(l.class_weights, None);
        // The default is HF's cross-entropy, the fused path.
        assert_eq!(
            parse("").unwrap().loss.resolve(2, None).unwrap(),
            SegLoss::default()
        );
        let c = parse("[loss]\nkind = \"focal\"\ngamma = 1.0\nclass_weights = \"auto\"\n").unwrap();
        let l = c.loss.resolve(3, Some(&[700, 200, 100])).unwrap();
        assert_eq!(l.terms[0].kind, LossKind::Focal { gamma: 1.0 });
        let w = l.class_weights.unwrap();
        assert!(
            (w[0] - 2.0 / 7.0).abs() < 1e-6 && w[1] == 1.0 && w[2] == 2.0,
            "{w:?}"
        );
        let c = parse("[loss]\nclass_weights = [1.0, 4.0]\n").unwrap();
        assert_eq!(
            c.loss.resolve(2, None).unwrap().class_weights,
            Some(vec![1.0, 4.0])
        );
    }

    #[test]
    fn planner_counts_the_composed_terms() {
        let config = segformer::SegformerConfig::mit_b0().with_num_labels(5);
        let input = crate::plan::PlanInput {
            config: &config,
            height: 64,
            width: 32,
            batch: 2,
            precision: crate::config::Precision::F32,
            checkpointing: false,
            kernels: segformer::KernelPath::Fused,
            allocator: crate::plan::Allocator::Heap,
            loss: None,
        };
        let full = 2 * 5 * 64 * 32 * 4;
        assert_eq!(
            crate::plan::loss_terms_bytes(&input, &SegLoss::default()),
            0
        );
        let c = parse("[loss]\nterms = [{ kind = \"ce\" }, { kind = \"dice\", weight = 0.5 }]\n")
            .unwrap();
        let l = c.loss.resolve(5, None).unwrap();
        assert_eq!(crate::plan::loss_terms_bytes(&input, &l), full * (1 + 4));
        let weighted = SegLoss {
            class_weights: Some(vec![1.0; 5]),
            ..SegLoss::default()
        };
        assert_eq!(crate::plan::loss_terms_bytes(&input, &weighted), full * 3);
    }

    #[test]
    fn bad_loss_values_name_key_value_and_fix() {
        for (extra, want) in [
            ("[loss]\nkind = \"dyce\"\n", ["loss.kind", "dyce", "lovasz"]),
            (
                "[loss]\nterms = [{ kind = \"iou\" }]\n",
                ["loss.terms.kind", "iou", "dice"],
            ),
            ("[loss]\ngamma = -1.0\n", ["loss.gamma", "-1", ">= 0"]),
            (
                "[loss]\nclass_weights = \"median\"\n",
                ["loss.class_weights", "median", "auto"],
            ),
        ] {
            let e = parse(extra).unwrap_err().to_string();
            assert!(want.iter().all(|w| e.contains(w)), "{e}");
        }
        let c = parse("[loss]\nclass_weights = [1.0, 2.0, 3.0]\n").unwrap();
        let e = c.loss.resolve(2, None).unwrap_err().to_string();
        assert!(
            e.contains("loss.class_weights") && e.contains("3 weights"),
            "{e}"
        );
        let c = parse("[loss]\nkind = \"dice\"\n").unwrap();
        assert!(
            c.loss
                .resolve(1, None)
                .unwrap_err()
                .to_string()
                .contains("BCE")
        );
    }
}
