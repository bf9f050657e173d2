//! What the decider does with pod events: a pod seen, bound or gone, and its place on its
//! node's list.

use super::*;

impl Core {
    /// A pod bound to a node: listed on it (and off the node it was on), no longer pending.
    pub(super) fn pod_bound(&mut self, pod: &PodKey, node: &str) {
        if let Some(was_pending) = self.state.pods.get(pod).map(counts_as_pending) {
            if was_pending {
                self.provisioner.pending_pods -= 1;
            }
            let old = self.state.pods.bind(pod, node).flatten();
            if let Some(old) = &old {
                self.touch_node(old);
                // A pod bound again elsewhere leaves its first node's list (no node
                // keeps the id of a pod that is not on it).
                if old != node {
                    self.detach_pod(pod, old);
                }
            }
            self.touch_node(node);
            self.attach_pod(pod, node);
        }
        self.provisioner.nominations.remove(pod);
        self.provisioner.unschedulable.remove(pod);
        // The scheduler may have used capacity meant for pods still pending: look again.
        self.trigger_if_pending();
    }

    /// A pod gone: off its node, and forgotten by every room.
    pub(super) fn pod_deleted(&mut self, pod: &PodKey) {
        let removed = self.state.pods.remove(pod);
        if removed.as_ref().is_some_and(counts_as_pending) {
            self.provisioner.pending_pods -= 1;
        }
        if let Some(node) = removed.and_then(|p| p.node_name) {
            self.touch_node(&node);
            self.detach_pod(pod, &node);
        }
        self.provisioner.nominations.remove(pod);
        self.provisioner.unschedulable.remove(pod);
        self.warnings.missing_requests.remove(pod);
        if !self.warnings.annotations.is_empty() {
            self.warnings.annotations.remove(&format!("pod {pod}"));
        }
    }

    pub(super) fn apply_pod(&mut self, pod: &Pod, commands: &mut Vec<Command>) {
        let now = self.now_ms;
        let previous_node = self
            .state
            .pods
            .get(&pod.key)
            .and_then(|p| p.node_name.clone());
        if let Some(old) = &previous_node {
            self.touch_node(old);
        }
        if let Some(new) = &pod.node_name {
            self.touch_node(new);
        }
        if let Some(old) = &previous_node
            && pod.node_name.as_ref() != Some(old)
        {
            self.detach_pod(&pod.key, old);
        }
        if let (_, Some(old)) = self.state.pods.insert(pod.clone())
            && counts_as_pending(&old)
        {
            self.provisioner.pending_pods -= 1;
        }
        // The pod in the table is another now: the node that lists it sums it again.
        if let Some(listed) = pod
            .node_name
            .as_ref()
            .and_then(|n| self.state.nodes.get_mut(n))
        {
            listed.pods_changed();
        }
        if counts_as_pending(pod) {
            self.provisioner.pending_pods += 1;
        }
        if pod.missing_requests && self.warnings.missing_requests.insert(pod.key.clone()) {
            commands.push(Command::WarnMissingRequests {
                pod: pod.key.clone(),
            });
        }
        self.warn_invalid_annotation(|| format!("pod {}", pod.key), &pod.annotations, commands);
        match &pod.node_name {
            Some(node) => {
                self.attach_pod(&pod.key, node);
                self.provisioner.nominations.remove(&pod.key);
                self.provisioner.unschedulable.remove(&pod.key);
            }
            None if !pod.is_daemonset_pod() => self.provisioner.batcher.trigger(now),
            None => {}
        }
    }

    /// Reports a `karpenter.sh/do-not-disrupt` value that protects nothing, once per value.
    pub(super) fn warn_invalid_annotation(
        &mut self,
        object: impl FnOnce() -> String,
        annotations: &BTreeMap<String, String>,
        commands: &mut Vec<Command>,
    ) {
        let Some(reason) = crate::model::do_not_disrupt::invalid_value(annotations) else {
            if !self.warnings.annotations.is_empty() {
                self.warnings.annotations.remove(&object());
            }
            return;
        };
        let object = object();
        let value = annotations
            .get(crate::model::labels::DO_NOT_DISRUPT)
            .cloned()
            .unwrap_or_default();
        if self.warnings.annotations.get(&object) != Some(&value) {
            self.warnings.annotations.insert(object.clone(), value);
            commands.push(Command::WarnInvalidAnnotation { object, reason });
        }
    }

    /// Lists a pod of the table on its node (if the node is known yet).
    pub(super) fn attach_pod(&mut self, pod: &PodKey, node: &str) {
        let Some(id) = self.state.pods.id(pod) else {
            debug_assert!(false, "only a pod of the table is attached to a node");
            return;
        };
        if let Some(state) = self.state.nodes.get_mut(node)
            && state.pods.insert(pod.clone(), id).is_none()
        {
            state.pods_changed();
            state.last_pod_event_ms = self.now_ms;
        }
    }

    /// Takes a pod off a node's list: a pod that left the node, or left the table (so that
    /// no node keeps the id of a pod gone).
    fn detach_pod(&mut self, pod: &PodKey, node: &str) {
        if let Some(state) = self.state.nodes.get_mut(node) {
            if state.pods.remove(pod).is_some() {
                state.pods_changed();
            }
            state.last_pod_event_ms = self.now_ms;
        }
    }
}
