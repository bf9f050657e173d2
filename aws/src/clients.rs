//! The EC2, SQS, SSM and S3 clients, from the environment as every AWS tool reads it: the
//! region (`AWS_REGION`), credentials (the default chain: environment, profile, web identity /
//! IRSA, EKS pod identity, instance metadata) and endpoints (`AWS_ENDPOINT_URL`, or one
//! service's `AWS_ENDPOINT_URL_EC2`, `AWS_ENDPOINT_URL_SQS`, `AWS_ENDPOINT_URL_SSM`,
//! `AWS_ENDPOINT_URL_S3`), so that one code path talks to AWS or to a local server.

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::config::Credentials;
use aws_sdk_ec2::config::ProvideCredentials;

use crate::error::{AwsError, ErrorClass};

/// The SDK's own retries: throttling and 5xx answers are retried with jittered exponential
/// backoff this many times in all before the error reaches nodewright.
pub const MAX_ATTEMPTS: u32 = 5;

/// How long connecting to an AWS endpoint may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long one attempt of an EC2 or SSM call may take, and the whole call with the SDK's
/// retries: a call into an endpoint that stopped answering fails within this, as
/// `ErrorClass::Unreachable`, instead of hanging its caller.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(30);
/// SQS's: a receive waits up to `queue::WAIT_SECONDS` (20 s) for messages by design.
pub const QUEUE_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
pub const QUEUE_OPERATION_TIMEOUT: Duration = Duration::from_secs(90);
/// S3's: a sealed segment may be large.
pub const BUCKET_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(60);
pub const BUCKET_OPERATION_TIMEOUT: Duration = Duration::from_secs(180);

fn timeouts(attempt: Duration, operation: Duration) -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .operation_attempt_timeout(attempt)
        .operation_timeout(operation)
        .build()
}

/// What to connect with; every field left out comes from the environment.
#[derive(Debug, Clone, Default)]
pub struct ClientSettings {
    pub region: Option<String>,
    /// One endpoint for every service (a local server in tests).
    pub endpoint_url: Option<String>,
    /// Fixed credentials `(access key id, secret)`, for tests against a local server.
    pub static_credentials: Option<(String, String)>,
}

/// The clients, sharing one configuration.
#[derive(Debug, Clone)]
pub struct Clients {
    pub ec2: aws_sdk_ec2::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub ssm: aws_sdk_ssm::Client,
    pub s3: aws_sdk_s3::Client,
    pub region: String,
}

impl Clients {
    /// Loads the configuration and checks that credentials can be had (without calling AWS):
    /// a missing region or missing credentials is an error that says how to fix it.
    pub async fn connect(settings: &ClientSettings) -> Result<Clients, AwsError> {
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .retry_config(RetryConfig::standard().with_max_attempts(MAX_ATTEMPTS))
            .timeout_config(timeouts(ATTEMPT_TIMEOUT, OPERATION_TIMEOUT));
        if let Some(region) = &settings.region {
            loader = loader.region(Region::new(region.clone()));
        }
        if let Some(url) = &settings.endpoint_url {
            loader = loader.endpoint_url(url);
        }
        if let Some((id, secret)) = &settings.static_credentials {
            loader =
                loader.credentials_provider(Credentials::new(id, secret, None, None, "static"));
        }
        let config = loader.load().await;
        let Some(region) = config.region().map(|r| r.to_string()) else {
            return Err(AwsError {
                operation: "configuration",
                class: ErrorClass::Config,
                code: None,
                message: "no AWS region is set; fix: set AWS_REGION (e.g. us-east-1)".into(),
            });
        };
        let credentials_missing = |detail: String| AwsError {
            operation: "credentials",
            class: ErrorClass::Auth,
            code: None,
            message: format!("no AWS credentials could be loaded ({detail})"),
        };
        match config.credentials_provider() {
            None => return Err(credentials_missing("no provider".into())),
            Some(provider) => {
                if let Err(e) = provider.provide_credentials().await {
                    return Err(credentials_missing(e.to_string()));
                }
            }
        }
        // A local S3 (an endpoint given) is addressed by path, `endpoint/bucket/key`: it has
        // no DNS name for each bucket.
        let s3 = aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(config.endpoint_url().is_some())
            .timeout_config(timeouts(BUCKET_ATTEMPT_TIMEOUT, BUCKET_OPERATION_TIMEOUT))
            .build();
        let sqs = aws_sdk_sqs::config::Builder::from(&config)
            .timeout_config(timeouts(QUEUE_ATTEMPT_TIMEOUT, QUEUE_OPERATION_TIMEOUT))
            .build();
        Ok(Clients {
            ec2: aws_sdk_ec2::Client::new(&config),
            sqs: aws_sdk_sqs::Client::from_conf(sqs),
            ssm: aws_sdk_ssm::Client::new(&config),
            s3: aws_sdk_s3::Client::from_conf(s3),
            region,
        })
    }
}
