//! The control plane's certificates and keys: a CA, kube-apiserver's serving certificate and
//! the service-account signing key, all ECDSA P-256, written as PEM files.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::error::{self, Error};

/// The first address of the service range (`--service-cluster-ip-range`), which the
/// `kubernetes` Service gets.
pub(crate) const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";
/// The service range given to kube-apiserver.
pub(crate) const SERVICE_CLUSTER_IP_RANGE: &str = "10.96.0.0/16";

/// The names kube-apiserver's serving certificate is valid for.
const SERVING_NAMES: [&str; 7] = [
    "127.0.0.1",
    KUBERNETES_SERVICE_IP,
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// Paths of the written PEM files.
#[derive(Debug, Clone)]
pub(crate) struct Pki {
    /// The CA certificate: trusted by every client, `--client-ca-file`, `--root-ca-file`.
    pub(crate) ca_cert: PathBuf,
    /// kube-apiserver's serving certificate, signed by the CA.
    pub(crate) serving_cert: PathBuf,
    /// Its private key.
    pub(crate) serving_key: PathBuf,
    /// The service-account token signing key (private, PKCS#8).
    pub(crate) service_account_key: PathBuf,
    /// Its public key, which verifies the tokens: kube-apiserver's `--service-account-key-file`
    /// does not accept a PKCS#8 private key.
    pub(crate) service_account_public_key: PathBuf,
}

fn cert_error(what: &'static str) -> impl FnOnce(rcgen::Error) -> Error {
    move |source| Error::Certificate { what, source }
}

/// Generates the certificates and keys into `dir`.
pub(crate) fn generate(dir: &Path) -> Result<Pki, Error> {
    std::fs::create_dir_all(dir).map_err(error::io(format!("create {}", dir.display())))?;

    let ca_key = KeyPair::generate().map_err(cert_error("the CA key"))?;
    let mut ca_params =
        CertificateParams::new(Vec::<String>::new()).map_err(cert_error("the CA certificate"))?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "nodewright-controlplane-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params
        .self_signed(&ca_key)
        .map_err(cert_error("the CA certificate"))?;
    let ca = Issuer::new(ca_params, ca_key);

    let serving_key = KeyPair::generate().map_err(cert_error("the kube-apiserver serving key"))?;
    let mut serving_params = CertificateParams::new(SERVING_NAMES.map(str::to_owned).to_vec())
        .map_err(cert_error("the kube-apiserver serving certificate"))?;
    serving_params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    serving_params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    serving_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_cert = serving_params
        .signed_by(&serving_key, &ca)
        .map_err(cert_error("the kube-apiserver serving certificate"))?;

    let service_account_key =
        KeyPair::generate().map_err(cert_error("the service-account signing key"))?;

    let pki = Pki {
        ca_cert: dir.join("ca.crt"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        service_account_key: dir.join("service-account.key"),
        service_account_public_key: dir.join("service-account.pub"),
    };
    write(&pki.ca_cert, &ca_cert.pem())?;
    write(&pki.serving_cert, &serving_cert.pem())?;
    write(&pki.serving_key, &serving_key.serialize_pem())?;
    write(
        &pki.service_account_key,
        &service_account_key.serialize_pem(),
    )?;
    write(
        &pki.service_account_public_key,
        &service_account_key.public_key_pem(),
    )?;
    Ok(pki)
}

pub(crate) fn write(path: &Path, contents: &str) -> Result<(), Error> {
    std::fs::write(path, contents).map_err(error::io(format!("write {}", path.display())))
}
