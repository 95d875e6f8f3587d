//! Plan files and stored plans: a `[[step]]` table per step, the action's name beside every
//! field any action takes ([`RawStep`], the shape the files have always had), typed into
//! [`Step`]s by one conversion that refuses a field the action does not take. Plans are
//! written back through the same shape, so a stored plan reads as it was written.

use super::step::{check_times, Action, Partition, PartitionKind, Step, Wait, When};
use super::{check_steps_max, FaultPlan, PlanError};
use crate::nemesis::target::Target;
use crate::net::Grudge;
use serde::{Deserialize, Serialize};
use tidewater_workloads::nemesis::WaitFor;

/// The action names of plan files, the tag of a [`RawStep`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum ActionName {
    Isolate,
    Partition,
    Cut,
    CutClients,
    Heal,
    Kill,
    PowerLoss,
    Stop,
    Start,
    Restart,
    Pause,
    Resume,
    WaitForIsrShrink,
    WaitForIsrExpand,
    WaitForLeader,
    WaitForIsrFull,
}

/// A step as plan files write it: the action's name beside every field any action takes.
/// Loading turns it into a [`Step`], refusing fields the action does not take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    at_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    after_s: Option<f64>,
    action: ActionName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    target: Option<Target>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from: Option<Target>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kind: Option<PartitionKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    grudge: Option<Grudge>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout_s: Option<f64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    torn: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// A plan as files write it (`[[step]]` tables).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPlan {
    #[serde(default)]
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    step: Vec<RawStep>,
}

impl ActionName {
    fn is_wait(self) -> bool {
        matches!(
            self,
            ActionName::WaitForIsrShrink
                | ActionName::WaitForIsrExpand
                | ActionName::WaitForLeader
                | ActionName::WaitForIsrFull
        )
    }
}

impl RawStep {
    /// The typed step, or what is wrong with this one (without the step's number).
    fn into_step(self) -> Result<Step, String> {
        use ActionName as A;
        let name = self.action;
        check_times(self.at_s, self.after_s, self.timeout_s)?;
        if self.timeout_s.is_some() && !name.is_wait() {
            return Err("timeout_s is for wait-for-* steps".into());
        }
        let when = match (self.at_s, self.after_s) {
            (Some(_), Some(_)) => return Err("give at_s or after_s, not both".into()),
            (Some(at_s), None) => When::At { at_s },
            (None, Some(after_s)) => When::After { after_s },
            (None, None) => When::Now,
        };
        let takes_target = !matches!(name, A::Heal | A::Partition | A::WaitForIsrFull);
        let needs_target = takes_target && name != A::WaitForLeader;
        if needs_target && self.target.is_none() {
            return Err("needs a target".into());
        }
        if (name == A::Cut) != self.from.is_some() {
            return Err("from is for cut, and cut needs it".into());
        }
        if self.torn && name != A::PowerLoss {
            return Err("torn is for power-loss".into());
        }
        if name == A::Partition && self.kind.is_some() == self.grudge.is_some() {
            return Err("partition needs exactly one of kind or grudge".into());
        }
        if name != A::Partition && (self.kind.is_some() || self.grudge.is_some()) {
            return Err("kind and grudge are for partition".into());
        }
        if !takes_target && self.target.is_some() {
            return Err("takes no target".into());
        }
        if self.key.is_some() && !name.is_wait() {
            return Err("key is for wait-for-* steps".into());
        }
        if name.is_wait() && self.key.is_none() {
            return Err("needs a key such as \"t0/0\"".into());
        }
        let target = self.target;
        let given = || target.clone().expect("checked above");
        let key = || self.key.clone().expect("checked above");
        let timeout_s = self.timeout_s;
        let action = match name {
            A::Isolate => Action::Isolate { target: given() },
            A::Partition => Action::Partition(match (self.kind, self.grudge) {
                (Some(kind), _) => Partition::Random(kind),
                (None, grudge) => Partition::Grudge(grudge.expect("checked above")),
            }),
            A::Cut => Action::Cut {
                target: given(),
                from: self.from.expect("checked above"),
            },
            A::CutClients => Action::CutClients { target: given() },
            A::Heal => Action::Heal,
            A::Kill => Action::Kill { target: given() },
            A::PowerLoss => Action::PowerLoss {
                target: given(),
                torn: self.torn,
            },
            A::Stop => Action::Stop { target: given() },
            A::Start => Action::Start { target: given() },
            A::Restart => Action::Restart { target: given() },
            A::Pause => Action::Pause { target: given() },
            A::Resume => Action::Resume { target: given() },
            A::WaitForIsrShrink => Action::Wait(Wait::IsrShrink {
                key: key(),
                target: given(),
                timeout_s,
            }),
            A::WaitForIsrExpand => Action::Wait(Wait::IsrExpand {
                key: key(),
                target: given(),
                timeout_s,
            }),
            A::WaitForLeader => Action::Wait(Wait::Leader {
                key: key(),
                target: target.clone(),
                timeout_s,
            }),
            A::WaitForIsrFull => Action::Wait(Wait::IsrFull {
                key: key(),
                timeout_s,
            }),
        };
        let step = Step {
            when,
            action,
            bind: self.bind,
            note: self.note,
        };
        step.check()?;
        Ok(step)
    }

    /// The name of the action, for messages, as the file wrote it.
    fn action_name(&self) -> String {
        serde_json::to_value(self.action)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default()
    }
}

impl From<Step> for RawStep {
    fn from(step: Step) -> RawStep {
        let mut raw = RawStep {
            at_s: None,
            after_s: None,
            action: ActionName::Heal,
            target: step.action.target().cloned(),
            from: None,
            kind: None,
            grudge: None,
            key: None,
            timeout_s: None,
            torn: false,
            bind: step.bind,
            note: step.note,
        };
        match step.when {
            When::Now => {}
            When::At { at_s } => raw.at_s = Some(at_s),
            When::After { after_s } => raw.after_s = Some(after_s),
        }
        raw.action = match step.action {
            Action::Isolate { .. } => ActionName::Isolate,
            Action::Partition(Partition::Random(kind)) => {
                raw.kind = Some(kind);
                ActionName::Partition
            }
            Action::Partition(Partition::Grudge(grudge)) => {
                raw.grudge = Some(grudge);
                ActionName::Partition
            }
            Action::Cut { from, .. } => {
                raw.from = Some(from);
                ActionName::Cut
            }
            Action::CutClients { .. } => ActionName::CutClients,
            Action::Heal => ActionName::Heal,
            Action::Kill { .. } => ActionName::Kill,
            Action::PowerLoss { torn, .. } => {
                raw.torn = torn;
                ActionName::PowerLoss
            }
            Action::Stop { .. } => ActionName::Stop,
            Action::Start { .. } => ActionName::Start,
            Action::Restart { .. } => ActionName::Restart,
            Action::Pause { .. } => ActionName::Pause,
            Action::Resume { .. } => ActionName::Resume,
            Action::Wait(wait) => {
                raw.key = Some(wait.key().to_string());
                raw.timeout_s = wait.timeout_s();
                match wait.until() {
                    WaitFor::IsrShrink => ActionName::WaitForIsrShrink,
                    WaitFor::IsrExpand => ActionName::WaitForIsrExpand,
                    WaitFor::Leader => ActionName::WaitForLeader,
                    WaitFor::IsrFull => ActionName::WaitForIsrFull,
                }
            }
        };
        raw
    }
}

impl TryFrom<RawPlan> for FaultPlan {
    type Error = PlanError;

    /// Types every step (numbering the one that is wrong) and validates the whole.
    fn try_from(raw: RawPlan) -> Result<FaultPlan, PlanError> {
        check_steps_max(raw.step.len())?;
        let step = raw
            .step
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let name = s.action_name();
                s.into_step()
                    .map_err(|m| PlanError(format!("step {} ({name}): {m}", i + 1)))
            })
            .collect::<Result<Vec<Step>, PlanError>>()?;
        let plan = FaultPlan {
            name: raw.name,
            description: raw.description,
            step,
        };
        plan.validate()?;
        Ok(plan)
    }
}

impl From<FaultPlan> for RawPlan {
    fn from(plan: FaultPlan) -> RawPlan {
        RawPlan {
            name: plan.name,
            description: plan.description,
            step: plan.step.into_iter().map(RawStep::from).collect(),
        }
    }
}
