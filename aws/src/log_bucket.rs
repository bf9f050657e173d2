//! The bucket the controller ships its store's sealed segments to, and `log export --segments
//! s3://…` reads them back from: objects under one prefix, put whole, listed and fetched. What
//! a segment holds and how its key is made is the replay crate's (`segments`); this is only
//! the bucket.

use aws_sdk_s3::primitives::ByteStream;

use crate::error::{AwsError, ErrorClass};

/// Keys asked for in one listing page (S3's own limit).
const PAGE: i32 = 1000;

/// Pages read at most by one listing: a million keys, far more than years of segments. The
/// bound stops a listing that never ends (a server that always says there is more).
const MAX_PAGES: usize = 1000;

/// A bucket and a prefix in it: `s3://<bucket>/<prefix>`.
#[derive(Debug, Clone)]
pub struct LogBucket {
    client: aws_sdk_s3::Client,
    bucket: String,
    /// Empty, or ending with `/`.
    prefix: String,
    /// Keys asked for in one listing page.
    page: i32,
}

/// `s3://bucket/prefix` read into its bucket and prefix (the prefix may be empty); the error
/// says what a good one looks like.
pub fn parse_s3_url(url: &str) -> Result<(String, String), String> {
    let rest = url
        .strip_prefix("s3://")
        .ok_or_else(|| format!("{url:?} is not an S3 location; fix: s3://<bucket>/<prefix>"))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let valid = (3..=63).contains(&bucket.len())
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    if !valid {
        return Err(format!(
            "{bucket:?} in {url:?} is not a bucket name (3 to 63 lowercase letters, digits, '-' and '.'); fix: s3://<bucket>/<prefix>"
        ));
    }
    Ok((bucket.to_string(), prefix.to_string()))
}

impl LogBucket {
    /// Objects of `bucket` under `prefix` (a `/` is added when it does not end with one).
    pub fn new(client: aws_sdk_s3::Client, bucket: &str, prefix: &str) -> LogBucket {
        let mut prefix = prefix.trim_start_matches('/').to_string();
        if !prefix.is_empty() && !prefix.ends_with('/') {
            prefix.push('/');
        }
        LogBucket {
            client,
            bucket: bucket.to_string(),
            prefix,
            page: PAGE,
        }
    }

    /// Listings of `page` keys a page (S3's limit is 1000): tests go through several pages
    /// with a few keys.
    pub fn with_page(mut self, page: i32) -> LogBucket {
        self.page = page.clamp(1, PAGE);
        self
    }

    /// `s3://bucket/prefix/`, for messages.
    pub fn location(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.prefix)
    }

    /// Stores `bytes` at `name` (under the prefix), whole: an object is never seen half
    /// written.
    pub async fn put(&self, name: &str, bytes: Vec<u8>) -> Result<(), AwsError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(format!("{}{name}", self.prefix))
            .content_type("application/octet-stream")
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("s3:PutObject", e))?;
        Ok(())
    }

    /// The names (under the prefix) of every object whose name starts with `under`, in S3's
    /// order (by name).
    pub async fn list(&self, under: &str) -> Result<Vec<String>, AwsError> {
        let mut names = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let page = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(format!("{}{under}", self.prefix))
                .max_keys(self.page)
                .set_continuation_token(token.take())
                .send()
                .await
                .map_err(|e| AwsError::from_sdk("s3:ListObjectsV2", e))?;
            names.extend(
                page.contents()
                    .iter()
                    .filter_map(|o| o.key()?.strip_prefix(&self.prefix).map(str::to_string)),
            );
            match page.next_continuation_token() {
                Some(next) if page.is_truncated() == Some(true) => token = Some(next.to_string()),
                _ => return Ok(names),
            }
        }
        Err(AwsError {
            operation: "s3:ListObjectsV2",
            class: ErrorClass::Transient,
            code: None,
            message: format!(
                "{} lists more than {} pages of objects; fix: name a narrower prefix",
                self.location(),
                MAX_PAGES
            ),
        })
    }

    /// The bytes of the object at `name` (under the prefix).
    pub async fn get(&self, name: &str) -> Result<Vec<u8>, AwsError> {
        let object = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(format!("{}{name}", self.prefix))
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("s3:GetObject", e))?;
        let bytes = object.body.collect().await.map_err(|e| AwsError {
            operation: "s3:GetObject",
            class: ErrorClass::Unreachable,
            code: None,
            message: format!("reading {}{name}: {e}", self.location()),
        })?;
        Ok(bytes.into_bytes().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_s3_url_reads_into_bucket_and_prefix() {
        assert_eq!(
            parse_s3_url("s3://incident-logs/clusters/demo"),
            Ok(("incident-logs".to_string(), "clusters/demo".to_string()))
        );
        assert_eq!(
            parse_s3_url("s3://incident-logs"),
            Ok(("incident-logs".to_string(), String::new()))
        );
        for bad in ["incident-logs/x", "s3://", "s3://Logs/x", "s3://ab/x"] {
            let error = parse_s3_url(bad).expect_err(bad);
            assert!(error.contains("fix: s3://<bucket>/<prefix>"), "{error}");
        }
    }
}
