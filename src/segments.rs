//! Where `log export --segments` reads sealed segments from: a folder (a copy of the bucket),
//! or the bucket itself (`s3://…`, in the controller build, which has the AWS SDK).

use std::path::{Path, PathBuf};

use nodewright_replay::segments::{SegmentName, select};

/// Folders walked at most below the one named (`<cluster>/<store>/<segment>` and a prefix or
/// two above them).
const MAX_DEPTH: usize = 6;

/// The segments of `source` with events in `from_ms..until_ms`, in the order they are
/// assembled, with their bytes; the error says what to do.
pub fn read(
    source: &str,
    from_ms: Option<u64>,
    until_ms: Option<u64>,
) -> Result<Vec<(SegmentName, Vec<u8>)>, String> {
    if source.starts_with("s3://") {
        return from_bucket(source, from_ms, until_ms);
    }
    let root = Path::new(source);
    if !root.is_dir() {
        return Err(format!(
            "--segments {source:?} is not a folder; fix: name the folder the segments were copied to (aws s3 sync s3://<bucket>/<prefix>/<cluster> <folder>), or an s3:// location"
        ));
    }
    let mut found: Vec<(SegmentName, PathBuf)> = Vec::new();
    walk(root, root, 0, &mut found)?;
    if found.is_empty() {
        return Err(format!(
            "no segment in {source:?}: a segment is <store>/<from>-<to>-<first ms>-<last ms>.nwlog, as the controller ships them"
        ));
    }
    let chosen = select(found.iter().map(|(n, _)| n.clone()), from_ms, until_ms);
    chosen
        .into_iter()
        .map(|name| {
            let path = found
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, p)| p.clone())
                .ok_or_else(|| format!("segment {} vanished", name.path()))?;
            let bytes =
                std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
            Ok((name, bytes))
        })
        .collect()
}

/// Every file under `dir` whose path from `root` names a segment.
fn walk(
    root: &Path,
    dir: &Path,
    depth: usize,
    found: &mut Vec<(SegmentName, PathBuf)>,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let entries = std::fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry
            .map_err(|e| format!("reading {}: {e}", dir.display()))?
            .path();
        if path.is_dir() {
            walk(root, &path, depth + 1, found)?;
        } else if let Some(name) = path
            .strip_prefix(root)
            .ok()
            .and_then(Path::to_str)
            .and_then(|p| SegmentName::parse(&p.replace('\\', "/")))
        {
            found.push((name, path));
        }
    }
    Ok(())
}

#[cfg(feature = "controller")]
fn from_bucket(
    source: &str,
    from_ms: Option<u64>,
    until_ms: Option<u64>,
) -> Result<Vec<(SegmentName, Vec<u8>)>, String> {
    use nodewright_aws::log_bucket::{LogBucket, parse_s3_url};
    use nodewright_aws::{ClientSettings, Clients};

    let (bucket, prefix) = parse_s3_url(source).map_err(|e| format!("--segments {e}"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the async runtime: {e}"))?;
    runtime.block_on(async {
        let clients = Clients::connect(&ClientSettings::default())
            .await
            .map_err(|e| e.to_string())?;
        let bucket = LogBucket::new(clients.s3.clone(), &bucket, &prefix);
        let names = bucket.list("").await.map_err(|e| e.to_string())?;
        let parsed: Vec<(SegmentName, String)> = names
            .into_iter()
            .filter_map(|key| SegmentName::parse(&key).map(|n| (n, key)))
            .collect();
        if parsed.is_empty() {
            return Err(format!(
                "no segment under {}: name the cluster's folder (s3://<bucket>/<prefix>/<cluster>), as LOG_SEGMENTS_BUCKET and CLUSTER_NAME make it",
                bucket.location()
            ));
        }
        let chosen = select(parsed.iter().map(|(n, _)| n.clone()), from_ms, until_ms);
        let mut segments = Vec::with_capacity(chosen.len());
        for name in chosen {
            let key = parsed
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, k)| k.clone())
                .unwrap_or_else(|| name.path());
            let bytes = bucket.get(&key).await.map_err(|e| e.to_string())?;
            segments.push((name, bytes));
        }
        Ok(segments)
    })
}

#[cfg(not(feature = "controller"))]
fn from_bucket(
    source: &str,
    _from_ms: Option<u64>,
    _until_ms: Option<u64>,
) -> Result<Vec<(SegmentName, Vec<u8>)>, String> {
    Err(format!(
        "--segments {source}: this build reads no S3 (it has no AWS SDK); fix: copy the segments first (aws s3 sync {source} ./segments) and name the folder, or use the controller build (cargo build --features controller)"
    ))
}
