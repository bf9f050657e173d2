//! # nodewright-aws
//!
//! nodewright's hands on AWS, built only with the root package's `controller` feature:
//! - [`clients`]: the EC2, SQS and SSM clients from the environment (endpoints included);
//! - [`catalog`]: instance types, offerings and spot prices → the core's catalog;
//!   [`refresh`]: kept fresh on Karpenter's periods, each change an event;
//! - [`resolve`]: an EC2NodeClass's selector terms → subnets, security groups, AMIs;
//! - [`launch`]: a NodeClaim → launch template + `CreateFleet`, the outcome as an event;
//! - [`instances`]: terminate, find and list this cluster's instances;
//! - [`tags`]: the tags that mark them;
//! - [`queue`]: the interruption queue's long poll, deleting only what is durable;
//! - [`preflight`]: `nodewright aws check`;
//! - [`log_bucket`]: the bucket the store's sealed segments are shipped to.
//!
//! Nothing here decides: every result becomes an event for the core, through the driver.

pub mod catalog;
pub mod clients;
pub mod error;
pub mod instance_types;
pub mod instances;
pub mod launch;
pub mod log_bucket;
pub mod preflight;
pub mod queue;
pub mod refresh;
pub mod resolve;
pub mod tags;
#[cfg(feature = "testing")]
pub mod testing;
pub mod user_data;

pub use clients::{ClientSettings, Clients};
pub use error::{AwsError, ErrorClass};

/// The SDKs this crate speaks, for callers that set up what it reads (tests against a local
/// server).
pub use {aws_sdk_ec2, aws_sdk_s3, aws_sdk_sqs};
