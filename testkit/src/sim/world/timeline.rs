//! The scenario's timeline: what a user does to the cluster at a moment (scale, delete, apply,
//! interrupt).

use super::*;

impl World {
    /// Carries out one action of the timeline.
    pub(super) fn run_action(&mut self, action: &Action) {
        let now = self.now_ms;
        match action {
            Action::Scale {
                namespace,
                deployment,
                replicas,
            } => {
                let key = (namespace.clone(), deployment.clone());
                self.cluster.scale_deployment(
                    &key,
                    *replicas,
                    now,
                    &mut self.rng,
                    &mut self.outbox,
                    &mut self.changes,
                );
            }
            Action::Delete {
                kind,
                namespace,
                name,
            } => match kind {
                DeleteKind::Deployment | DeleteKind::ReplicaSet | DeleteKind::StatefulSet => {
                    let key = (namespace.clone(), name.clone());
                    self.cluster
                        .delete_deployment(&key, now, &mut self.outbox, &mut self.changes);
                }
                DeleteKind::Pod => self.cluster.delete_pod(
                    &PodKey::new(namespace, name),
                    false,
                    now,
                    &mut self.outbox,
                    &mut self.changes,
                ),
                DeleteKind::NodePool => {
                    self.nodepools.remove(name);
                    self.emit(EventKind::NodePoolDeleted { name: name.clone() })
                }
                DeleteKind::EC2NodeClass => {
                    self.nodeclasses.remove(name);
                    self.emit(EventKind::NodeClassDeleted { name: name.clone() });
                }
                DeleteKind::Job => {
                    let key = (namespace.clone(), name.clone());
                    self.cluster
                        .delete_job(&key, now, &mut self.outbox, &mut self.changes);
                }
                DeleteKind::CronJob => {
                    let key = (namespace.clone(), name.clone());
                    self.cluster
                        .delete_cronjob(&key, now, &mut self.outbox, &mut self.changes);
                }
                DeleteKind::DaemonSet => {
                    self.cluster
                        .daemonsets
                        .remove(&(namespace.clone(), name.clone()));
                    self.emit(EventKind::DaemonSetDeleted {
                        namespace: namespace.clone(),
                        name: name.clone(),
                    });
                }
                DeleteKind::PodDisruptionBudget => {
                    self.cluster.pdbs.remove(&(namespace.clone(), name.clone()));
                    self.emit(EventKind::PodDisruptionBudgetDeleted {
                        namespace: namespace.clone(),
                        name: name.clone(),
                    });
                }
            },
            Action::Apply(manifests) => {
                let manifests = manifests.clone();
                self.apply(&manifests);
            }
            Action::Interrupt {
                kind,
                target,
                storm: None,
            } => self.interrupt(kind, target),
            Action::Interrupt {
                kind,
                target,
                storm: Some(storm),
            } => self.storm(kind, target, storm),
        }
    }
}
