//! Who may take the log: `GET /log` is served only to callers the API server allows, as
//! kube-rbac-proxy does. The caller's bearer token is checked with a TokenReview (who is it?),
//! then its rights with SubjectAccessReviews on a virtual resource (may it read the log?):
//!
//! - `get` on `eventlogs` in API group `nodewright.dev`: the whole log;
//! - `get` on `eventlogs/redacted`: the log with names and values replaced by tokens
//!   (`redact=true`), which is what such a caller gets whatever it asks.
//!
//! The chart grants neither to anyone; it ships the ClusterRoles `<release>-log-reader` and
//! `<release>-log-reader-redacted` to bind.

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use thiserror::Error;

/// The virtual resource's API group.
pub const LOG_GROUP: &str = "nodewright.dev";
/// The virtual resource.
pub const LOG_RESOURCE: &str = "eventlogs";
/// The subresource that allows the redacted log only.
pub const REDACTED_SUBRESOURCE: &str = "redacted";

/// What a caller may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The whole log.
    Whole,
    /// The redacted log only.
    Redacted,
}

/// Why a caller is turned away.
#[derive(Debug, Error)]
pub enum Refused {
    #[error(
        "no bearer token; fix: send `Authorization: Bearer <token>` with a token the API server accepts (kubectl create token <service-account>)"
    )]
    NoToken,
    #[error("the API server does not accept this token: {0}")]
    Unauthenticated(String),
    #[error(
        "{user} may not read the log; fix: bind the ClusterRole <release>-log-reader (get eventlogs.nodewright.dev) or <release>-log-reader-redacted (get eventlogs/redacted)"
    )]
    Forbidden { user: String },
    #[error("the API server could not be asked who the caller is: {0}")]
    Unavailable(#[from] kube::Error),
}

impl Refused {
    /// The HTTP status it is answered with.
    pub fn status(&self) -> u16 {
        match self {
            Refused::NoToken | Refused::Unauthenticated(_) => 401,
            Refused::Forbidden { .. } => 403,
            Refused::Unavailable(_) => 503,
        }
    }
}

/// The bearer token of an `Authorization` header's value.
pub fn bearer(authorization: Option<&str>) -> Option<&str> {
    let value = authorization?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Asks the API server about callers.
#[derive(Clone)]
pub struct LogGate {
    client: kube::Client,
}

impl LogGate {
    pub fn new(client: kube::Client) -> Self {
        LogGate { client }
    }

    /// What the caller with this `Authorization` header may read.
    pub async fn admit(&self, authorization: Option<&str>) -> Result<Access, Refused> {
        let token = bearer(authorization).ok_or(Refused::NoToken)?;
        let review = Api::<TokenReview>::all(self.client.clone())
            .create(
                &PostParams::default(),
                &TokenReview {
                    spec: TokenReviewSpec {
                        token: Some(token.to_string()),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            )
            .await?;
        let status = review.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            return Err(Refused::Unauthenticated(
                status.error.unwrap_or_else(|| "not authenticated".into()),
            ));
        }
        let user = status.user.unwrap_or_default();
        let name = user.username.clone().unwrap_or_default();
        for (subresource, access) in [
            (None, Access::Whole),
            (Some(REDACTED_SUBRESOURCE), Access::Redacted),
        ] {
            let review = Api::<SubjectAccessReview>::all(self.client.clone())
                .create(
                    &PostParams::default(),
                    &SubjectAccessReview {
                        spec: SubjectAccessReviewSpec {
                            user: user.username.clone(),
                            groups: user.groups.clone(),
                            uid: user.uid.clone(),
                            extra: user.extra.clone(),
                            resource_attributes: Some(ResourceAttributes {
                                group: Some(LOG_GROUP.into()),
                                resource: Some(LOG_RESOURCE.into()),
                                subresource: subresource.map(str::to_string),
                                verb: Some("get".into()),
                                ..Default::default()
                            }),
                            ..Default::default()
                        },
                        ..Default::default()
                    },
                )
                .await?;
            if review.status.is_some_and(|s| s.allowed) {
                return Ok(access);
            }
        }
        Err(Refused::Forbidden { user: name })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bearer_token_is_taken() {
        assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(Some("Basic abc")), None);
        assert_eq!(bearer(Some("Bearer ")), None);
        assert_eq!(bearer(None), None);
    }
}
