//! The CRDs as the YAML files committed under `crds/`, for what must print or install them
//! without the `crd` feature (`nodewright crds`, the Helm chart). The files are generated from
//! the types; the `committed_crd_files_are_the_generated_ones` test fails when they drift and
//! rewrites them when `NODEWRIGHT_WRITE_CRDS=1` is set.

/// The names of the three CRDs, in the order of [`CRD_FILES`] (and of `crds()`).
pub const CRD_NAMES: [&str; 3] = [
    "nodepools.karpenter.sh",
    "nodeclaims.karpenter.sh",
    "ec2nodeclasses.karpenter.k8s.aws",
];

/// Each CRD's file name (Karpenter's names) and its YAML text.
pub const CRD_FILES: [(&str, &str); 3] = [
    (
        "karpenter.sh_nodepools.yaml",
        include_str!("../crds/karpenter.sh_nodepools.yaml"),
    ),
    (
        "karpenter.sh_nodeclaims.yaml",
        include_str!("../crds/karpenter.sh_nodeclaims.yaml"),
    ),
    (
        "karpenter.k8s.aws_ec2nodeclasses.yaml",
        include_str!("../crds/karpenter.k8s.aws_ec2nodeclasses.yaml"),
    ),
];

/// The three CRDs as one multi-document YAML text, as `nodewright crds` prints it.
pub fn crds_text() -> String {
    let mut out = String::new();
    for (_, yaml) in CRD_FILES {
        out.push_str("---\n");
        out.push_str(yaml);
    }
    out
}
