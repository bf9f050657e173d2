//! Identities and their files: the static token file kube-apiserver authenticates with, one
//! kubeconfig per identity, and the admin client built from its kubeconfig.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::error::Error;
use crate::pki::write;

/// A user of the control plane, authenticated by a bearer token.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    /// The user name kube-apiserver sees.
    pub(crate) user: String,
    /// Its bearer token.
    pub(crate) token: String,
}

impl Identity {
    /// A new identity with a fresh random token.
    pub(crate) fn new(user: &str) -> Identity {
        Identity {
            user: user.to_owned(),
            token: random_token(),
        }
    }
}

/// 128 random bits as hex, from the standard library's randomly keyed hasher (the tokens
/// guard a loopback-only, throw-away cluster).
fn random_token() -> String {
    let half = || {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u8(0);
        hasher.finish()
    };
    format!("{:016x}{:016x}", half(), half())
}

/// The group every identity is in: the control plane is a test fixture, so all components
/// act as cluster admins and RBAC never gets in their way.
const GROUP: &str = "system:masters";

/// Writes kube-apiserver's `--token-auth-file`: `token,user,uid,"groups"` per line.
pub(crate) fn write_token_file(path: &Path, identities: &[&Identity]) -> Result<(), Error> {
    let lines: String = identities
        .iter()
        .map(|id| format!("{},{},{},\"{GROUP}\"\n", id.token, id.user, id.user))
        .collect();
    write(path, &lines)
}

/// A YAML scalar: JSON string syntax is valid YAML.
fn quote(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// Writes a kubeconfig for `identity` against `server`, trusting `ca_cert`.
pub(crate) fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca_cert: &Path,
    identity: &Identity,
) -> Result<(), Error> {
    let contents = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: nodewright
  cluster:
    server: {server}
    certificate-authority: {ca}
users:
- name: {user}
  user:
    token: {token}
contexts:
- name: nodewright
  context:
    cluster: nodewright
    user: {user}
current-context: nodewright
",
        server = quote(server),
        ca = quote(&ca_cert.to_string_lossy()),
        user = quote(&identity.user),
        token = quote(&identity.token),
    );
    write(path, &contents)
}

/// kube-scheduler's configuration file: its kubeconfig, no leader election.
pub(crate) fn write_scheduler_config(path: &Path, kubeconfig: &Path) -> Result<(), Error> {
    let contents = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {kubeconfig}
leaderElection:
  leaderElect: false
",
        kubeconfig = quote(&kubeconfig.to_string_lossy()),
    );
    write(path, &contents)
}

/// The client configuration a kubeconfig file gives.
pub(crate) async fn config(path: &PathBuf) -> Result<kube::Config, Error> {
    let kubeconfig_error = |source| Error::Kubeconfig {
        path: path.clone(),
        source,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(kubeconfig_error)
}

/// A client configured from a kubeconfig file.
pub(crate) async fn client(path: &PathBuf) -> Result<kube::Client, Error> {
    let config = config(path).await?;
    kube::Client::try_from(config).map_err(|source| Error::Api {
        action: format!("build a client from {}", path.display()),
        source,
    })
}
