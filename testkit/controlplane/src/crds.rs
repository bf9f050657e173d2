//! nodewright's CRDs (NodePool, NodeClaim, EC2NodeClass), installed the way users install
//! them: server-side apply of what `nodewright crds` prints.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::Resource;
use nodewright_api::{EC2NodeClass, NodeClaim, NodePool};

use crate::{ControlPlane, Error};

/// How long the API server may take to serve new CRDs.
const CRDS_TIMEOUT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);

impl ControlPlane {
    /// [`ControlPlane::start`], then [`ControlPlane::install_crds`].
    pub async fn start_with_crds() -> Result<ControlPlane, Error> {
        let control_plane = ControlPlane::start().await?;
        control_plane.install_crds().await?;
        Ok(control_plane)
    }

    /// Applies nodewright's CRDs and returns once the API server serves all three kinds
    /// (each CRD Established and its list endpoint answering).
    pub async fn install_crds(&self) -> Result<(), Error> {
        let client = self.client();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in nodewright_api::crds() {
            let name = crd.meta().name.clone().unwrap_or_default();
            crds.patch(
                &name,
                &PatchParams::apply("nodewright-tests").force(),
                &Patch::Apply(&crd),
            )
            .await
            .map_err(|source| Error::Api {
                action: format!("apply the CRD {name}"),
                source,
            })?;
        }
        let resources = [
            ApiResource::erase::<NodePool>(&()),
            ApiResource::erase::<NodeClaim>(&()),
            ApiResource::erase::<EC2NodeClass>(&()),
        ];
        let deadline = Instant::now() + CRDS_TIMEOUT;
        loop {
            let problem = match served(&crds, &client, &resources).await {
                Ok(()) => return Ok(()),
                Err(problem) => problem,
            };
            if Instant::now() >= deadline {
                return Err(Error::CrdsNotServed {
                    timeout: CRDS_TIMEOUT,
                    problem,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Whether every CRD is Established and every kind can be listed.
async fn served(
    crds: &Api<CustomResourceDefinition>,
    client: &kube::Client,
    resources: &[ApiResource],
) -> Result<(), String> {
    for name in nodewright_api::CRD_NAMES {
        let crd = crds.get(name).await.map_err(|e| format!("{name}: {e}"))?;
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if !established {
            return Err(format!("{name} is not Established yet"));
        }
    }
    // Established comes a moment before the new endpoints answer.
    for resource in resources {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
        api.list(&ListParams::default().limit(1))
            .await
            .map_err(|e| format!("listing {}: {e}", resource.plural))?;
    }
    Ok(())
}
