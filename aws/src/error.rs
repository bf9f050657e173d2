//! What went wrong talking to AWS, sorted by what the caller does about it.

use std::fmt;

use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use thiserror::Error;

/// What kind of failure an AWS error is: the caller's next step depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// No capacity for what was asked (`InsufficientInstanceCapacity`, ...): the offerings are
    /// marked unavailable and others are tried.
    Capacity,
    /// Throttled or a server error that outlived the SDK's own retries (jittered exponential
    /// backoff): try again later.
    Transient,
    /// Credentials missing, expired or without permission: a person must act.
    Auth,
    /// The request names something that is wrong or missing (a subnet, an AMI, a queue).
    Config,
    /// The endpoint could not be reached at all.
    Unreachable,
}

/// EC2's codes for "no capacity for that offering now": Karpenter marks the offering
/// unavailable for a while and launches elsewhere.
pub const CAPACITY_CODES: &[&str] = &[
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "UnfulfillableCapacity",
    "Unsupported",
    "InsufficientFreeAddressesInSubnet",
    "InsufficientCapacityOnHost",
    "ReservationCapacityExceeded",
    "SpotMaxPriceTooLow",
    "VcpuLimitExceeded",
];

const AUTH_CODES: &[&str] = &[
    "AuthFailure",
    "UnauthorizedOperation",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "RequestExpired",
    "AccessDenied",
    "AccessDeniedException",
    "UnrecognizedClientException",
    "OptInRequired",
];

const TRANSIENT_CODES: &[&str] = &[
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "InternalError",
    "InternalFailure",
    "ServiceUnavailable",
    "Unavailable",
    "RequestTimeout",
];

/// Sorts an AWS error code.
pub fn classify_code(code: &str) -> ErrorClass {
    if CAPACITY_CODES.contains(&code) {
        ErrorClass::Capacity
    } else if AUTH_CODES.contains(&code) {
        ErrorClass::Auth
    } else if TRANSIENT_CODES.contains(&code) || code.ends_with("Throttled") {
        ErrorClass::Transient
    } else {
        ErrorClass::Config
    }
}

/// One failed AWS call: which one, its code and message, and its class.
#[derive(Debug, Clone, Error)]
pub struct AwsError {
    /// The operation, e.g. `ec2:CreateFleet`.
    pub operation: &'static str,
    pub class: ErrorClass,
    /// AWS's error code, when the service answered.
    pub code: Option<String>,
    pub message: String,
}

impl fmt::Display for AwsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.code {
            Some(code) => write!(f, "{} failed with {code}: {}", self.operation, self.message)?,
            None => write!(f, "{} failed: {}", self.operation, self.message)?,
        }
        match self.class {
            ErrorClass::Auth => write!(
                f,
                "; fix: give nodewright credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or a pod identity / IRSA role) with the permissions in docs/aws.md"
            ),
            ErrorClass::Unreachable => write!(
                f,
                "; fix: check the network path to the endpoint (AWS_ENDPOINT_URL, if set, names it) and AWS_REGION"
            ),
            _ => Ok(()),
        }
    }
}

impl AwsError {
    /// From any SDK error: the service's code when it answered, else a transport failure.
    pub fn from_sdk<E, R>(operation: &'static str, err: SdkError<E, R>) -> AwsError
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
        R: fmt::Debug,
    {
        match &err {
            SdkError::ServiceError(service) => {
                let inner = service.err();
                let code = inner.code().map(str::to_string);
                let message = inner
                    .message()
                    .map(str::to_string)
                    .unwrap_or_else(|| inner.to_string());
                AwsError {
                    operation,
                    class: code.as_deref().map_or(ErrorClass::Config, classify_code),
                    code,
                    message,
                }
            }
            SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) => AwsError {
                operation,
                class: ErrorClass::Unreachable,
                code: None,
                message: error_chain(&err),
            },
            SdkError::ConstructionFailure(_) => {
                let message = error_chain(&err);
                // Missing credentials fail while the request is signed.
                let class = if message.contains("credentials") {
                    ErrorClass::Auth
                } else {
                    ErrorClass::Config
                };
                AwsError {
                    operation,
                    class,
                    code: None,
                    message,
                }
            }
            _ => AwsError {
                operation,
                class: ErrorClass::Transient,
                code: err.code().map(str::to_string),
                message: error_chain(&err),
            },
        }
    }

    /// Whether the service said the thing named does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code.as_deref().is_some_and(|c| {
            c.ends_with("NotFound")
                || c == "AWS.SimpleQueueService.NonExistentQueue"
                || c == "QueueDoesNotExist"
                || c == "ParameterNotFound"
        })
    }
}

/// An error with its sources, on one line.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_sort_into_what_the_caller_does() {
        assert_eq!(
            classify_code("InsufficientInstanceCapacity"),
            ErrorClass::Capacity
        );
        assert_eq!(
            classify_code("InsufficientFreeAddressesInSubnet"),
            ErrorClass::Capacity
        );
        assert_eq!(classify_code("RequestLimitExceeded"), ErrorClass::Transient);
        assert_eq!(classify_code("UnauthorizedOperation"), ErrorClass::Auth);
        assert_eq!(
            classify_code("InvalidSubnetID.NotFound"),
            ErrorClass::Config
        );
    }
}
