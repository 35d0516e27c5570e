"""The Google APIs the emulator serves, by service name, with the titles Google's own
`SERVICE_DISABLED` errors and Service Usage's `services.get` give them
(https://cloud.google.com/service-usage/docs/reference/rest/v1/services, the service
names of each API's reference: https://cloud.google.com/tpu/docs/reference/rest,
https://cloud.google.com/storage/docs/json_api, https://cloud.google.com/docs/quotas/reference/rest,
https://cloud.google.com/compute/docs/reference/rest/v1, ...).
"""

from __future__ import annotations

TPU = "tpu.googleapis.com"
STORAGE = "storage.googleapis.com"
QUOTAS = "cloudquotas.googleapis.com"
SERVICE_USAGE = "serviceusage.googleapis.com"
MONITORING = "monitoring.googleapis.com"
POLICY_TROUBLESHOOTER = "policytroubleshooter.googleapis.com"
COMPUTE = "compute.googleapis.com"
BILLING = "cloudbilling.googleapis.com"  # the Cloud Billing Catalog API
# https://cloud.google.com/artifact-registry/docs/reference/rest
ARTIFACT_REGISTRY = "artifactregistry.googleapis.com"

# service name -> title
TITLES: dict[str, str] = {
    TPU: "Cloud TPU API",
    STORAGE: "Cloud Storage API",
    QUOTAS: "Cloud Quotas API",
    "cloudresourcemanager.googleapis.com": "Cloud Resource Manager API",
    "iam.googleapis.com": "Identity and Access Management (IAM) API",
    POLICY_TROUBLESHOOTER: "Policy Troubleshooter API",
    MONITORING: "Cloud Monitoring API",
    COMPUTE: "Compute Engine API",
    "oslogin.googleapis.com": "Cloud OS Login API",
    SERVICE_USAGE: "Service Usage API",
    BILLING: "Cloud Billing API",
    ARTIFACT_REGISTRY: "Artifact Registry API",
}
