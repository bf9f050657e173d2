//! Expiration: a NodeClaim older than its `expireAfter` is replaced, forced and outside budgets.

use crate::model::duration::format_duration_ms;
use crate::state::ClusterState;
use crate::wake::Wake;

/// NodeClaims past their `expireAfter`, with the explanation; and the next expiry to come.
pub fn expired(state: &ClusterState, now_ms: u64) -> (Vec<(String, String)>, Option<u64>) {
    let mut out = Vec::new();
    let mut next = Wake::default();
    for (name, claim) in &state.nodeclaims {
        if claim.terminating.is_some() {
            continue;
        }
        let Some(expire_after) = claim.spec.expire_after_ms else {
            continue;
        };
        let at = claim.created_at_ms + expire_after;
        if at <= now_ms {
            out.push((
                name.clone(),
                format!(
                    "NodeClaim is {} old, past expireAfter {} (forced; budgets do not apply)",
                    format_duration_ms(now_ms - claim.created_at_ms),
                    format_duration_ms(expire_after)
                ),
            ));
        } else {
            next.offer(at);
        }
    }
    (out, next.ms())
}
