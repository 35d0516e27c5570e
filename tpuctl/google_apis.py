"""The Google APIs tpuctl uses, the permissions its commands need, and the roles granting
them: one table for the error hints (`cloud/errors.py`) and `tpuctl init`.

Titles are the ones Google's own SERVICE_DISABLED messages use. Roles are the
predefined roles of the Cloud IAM roles reference that hold each permission (the
narrowest one tpuctl would suggest); the emulator reads the same table.
"""

from __future__ import annotations

from dataclasses import dataclass

TPU = "tpu.googleapis.com"
STORAGE = "storage.googleapis.com"
QUOTAS = "cloudquotas.googleapis.com"
SERVICE_USAGE = "serviceusage.googleapis.com"
MONITORING = "monitoring.googleapis.com"
RESOURCE_MANAGER = "cloudresourcemanager.googleapis.com"
IAM = "iam.googleapis.com"
OS_LOGIN = "oslogin.googleapis.com"
POLICY_TROUBLESHOOTER = "policytroubleshooter.googleapis.com"
COMPUTE = "compute.googleapis.com"


@dataclass(frozen=True)
class Api:
    name: str  # tpu.googleapis.com
    title: str  # Cloud TPU API
    why: str  # what tpuctl uses it for
    required: bool = True


APIS: tuple[Api, ...] = (
    Api(TPU, "Cloud TPU API", "create, list and delete TPU VMs"),
    Api(STORAGE, "Cloud Storage API", "the job bucket of `tpuctl run`"),
    Api(QUOTAS, "Cloud Quotas API", "TPU quota limits and increase requests"),
    Api(
        RESOURCE_MANAGER,
        "Cloud Resource Manager API",
        "permission checks (`tpuctl init`, and the agent's before a job)",
    ),
    Api(IAM, "Identity and Access Management (IAM) API", "the TPU VMs' service accounts"),
    Api(
        POLICY_TROUBLESHOOTER,
        "Policy Troubleshooter API",
        "`tpuctl init`'s check of what the TPU VMs' service account holds",
    ),
    Api(MONITORING, "Cloud Monitoring API", "`tpuctl top`", required=False),
    Api(
        COMPUTE,
        "Compute Engine API",
        'TPUs on Compute Engine (TPU7x; v6e and v5p with `api = "compute"`)',
        required=False,  # required where the project's TPUs are on Compute Engine (init)
    ),
    Api(OS_LOGIN, "Cloud OS Login API", "SSH with OS Login", required=False),
)
APIS_BY_NAME = {api.name: api for api in APIS}
TITLES = {
    **{api.name: api.title for api in APIS},
    SERVICE_USAGE: "Service Usage API",
}

# permission -> the predefined role tpuctl suggests for it
ROLES: dict[str, str] = {
    **{
        f"tpu.{what}": "roles/tpu.admin"
        for what in (
            "nodes.create",
            "nodes.delete",
            "nodes.update",
            "nodes.start",
            "nodes.stop",
            "queuedresources.create",
            "queuedresources.delete",
            "operations.delete",
            "operations.cancel",
        )
    },
    **{
        f"tpu.{what}": "roles/tpu.viewer"
        for what in (
            "nodes.get",
            "nodes.list",
            "queuedresources.get",
            "queuedresources.list",
            "operations.get",
            "operations.list",
            "acceleratortypes.get",
            "acceleratortypes.list",
            "runtimeversions.get",
            "runtimeversions.list",
            "locations.get",
            "locations.list",
        )
    },
    "cloudquotas.quotas.get": "roles/cloudquotas.viewer",
    "cloudquotas.quotas.update": "roles/cloudquotas.admin",
    "serviceusage.services.get": "roles/serviceusage.serviceUsageViewer",
    "serviceusage.services.list": "roles/serviceusage.serviceUsageViewer",
    "serviceusage.services.enable": "roles/serviceusage.serviceUsageAdmin",
    "serviceusage.operations.get": "roles/serviceusage.serviceUsageViewer",
    "storage.buckets.create": "roles/storage.admin",
    "storage.buckets.get": "roles/storage.admin",
    "storage.buckets.update": "roles/storage.admin",
    "storage.objects.create": "roles/storage.objectAdmin",
    "storage.objects.get": "roles/storage.objectAdmin",
    "storage.objects.list": "roles/storage.objectAdmin",
    "storage.objects.delete": "roles/storage.objectAdmin",
    # what the Policy Troubleshooter needs to read the policies it evaluates
    "resourcemanager.projects.getIamPolicy": "roles/iam.securityReviewer",
    "storage.buckets.getIamPolicy": "roles/iam.securityReviewer",
}

# What tpuctl's commands need of the caller in the project (`tpuctl init` checks them).
CALLER_PERMISSIONS: tuple[str, ...] = (
    "tpu.nodes.create",
    "tpu.nodes.delete",
    "tpu.nodes.get",
    "tpu.nodes.list",
    "tpu.queuedresources.create",
    "tpu.queuedresources.delete",
    "tpu.queuedresources.list",
    "cloudquotas.quotas.get",
    "storage.buckets.create",
    "storage.objects.create",
    "storage.objects.get",
)


# and of Compute Engine, where the project's TPUs are there: a VM, or a slice's workload
# policy, instance template and managed instance group
COMPUTE_CALLER_PERMISSIONS: tuple[str, ...] = (
    "compute.instances.create",
    "compute.instances.delete",
    "compute.instances.get",
    "compute.instances.list",
    "compute.instances.setMetadata",
    "compute.instanceTemplates.create",
    "compute.instanceTemplates.delete",
    "compute.instanceGroupManagers.create",
    "compute.instanceGroupManagers.delete",
    "compute.resourcePolicies.create",
    "compute.resourcePolicies.delete",
)


def title(service: str) -> str:
    """ "Cloud TPU API" for tpu.googleapis.com; the name itself for one tpuctl does not know."""
    return TITLES.get(service, service)


def role_for(permission: str) -> str | None:
    if permission.startswith("compute.") and permission not in ROLES:
        # Compute Engine Instance Admin (v1) holds the instances', templates' and groups'
        # permissions; Compute Admin every Compute permission (resource policies too)
        # (https://cloud.google.com/compute/docs/access/iam)
        if permission.startswith(
            ("compute.instances.", "compute.instanceTemplates.", "compute.instanceGroupManagers.")
        ):
            return "roles/compute.instanceAdmin.v1"
        return "roles/compute.admin"
    return ROLES.get(permission)


def enable_command(service: str, project: str) -> str:
    return f"gcloud services enable {service} --project {project}"


def grant_command(project: str, role: str, member: str = "user:YOU@example.com") -> str:
    return f"gcloud projects add-iam-policy-binding {project} --member={member} --role={role}"


def member(account: str) -> str:
    """The IAM member for an account: `serviceAccount:` for a service account's email."""
    kind = "serviceAccount" if account.endswith(".gserviceaccount.com") else "user"
    return f"{kind}:{account}"


def bucket_grant_command(bucket: str, role: str, member: str) -> str:
    return (
        f"gcloud storage buckets add-iam-policy-binding gs://{bucket} --member={member} "
        f"--role={role}"
    )


# What the agent on a TPU VM needs of the node's service account (docs/run.md, "The
# VM's service account"), and the roles that grant it: the job's folder in the bucket
# (read the job, write and overwrite its status, logs and outputs) and its own node
# (deleted at the end, labels patched by the idle watchdog).
AGENT_BUCKET_ROLE = "roles/storage.objectUser"
AGENT_PROJECT_ROLE = "roles/tpu.admin"
AGENT_PERMISSIONS: tuple[str, ...] = (
    "storage.objects.get",
    "storage.objects.create",
    "storage.objects.delete",
    "tpu.nodes.get",
    "tpu.nodes.update",
    "tpu.nodes.delete",
)

# What the idle watchdog on a node (agent/idle.py) reads, optionally: Cloud Monitoring's
# TensorCore idle time, which tells a TPU held but unused from a busy one (docs/gc.md).
WATCHDOG_PERMISSION = "monitoring.timeSeries.list"
WATCHDOG_ROLE = "roles/monitoring.viewer"
