"""What a project has switched on, and what the caller may do: the gate every API call
passes before its method runs, as Google's front end checks a call before the service.

Config (control plane, `POST /_emulator/v1/config`):
- `services`: which APIs are enabled, in every project: a preset, "all" (the default,
  so demos and tests are not limited), "new-project" (what a new Google Cloud project
  starts with: Service Usage, Cloud Storage and Cloud Monitoring on, the rest off) or
  "none" (every API off but Service Usage), or a map `{service: true|false}` (partial).
  Enabling an API through the Service Usage API enables it in that project only
  (`project_services` shows those changes).
- `billing`: `true`/`false` for every project, or `{"*": true, "<project>": false}`.
- `denied_permissions`: IAM permissions the caller lacks, e.g. `["tpu.nodes.create"]`.
- `caller`: the account the caller is (`GET status` shows it, as `gcloud auth list` would);
  "" for credentials that do not say whose they are (a user's token without the email
  scope: the token info, accounts.token_info, then names no email).
- `service_accounts`: the VMs' service accounts and the permissions each lacks (accounts.py);
  a call with a token a worker's metadata server minted is its node's account's, and
  its scopes are checked first.

The answers, in the order the cloud checks: an API not enabled in the project is 403
SERVICE_DISABLED; a paid API in a project without billing 403 BILLING_DISABLED; a
missing permission 403 IAM_PERMISSION_DENIED. The Cloud Quotas switch of `quotas/limits.py`
(`quotas_api`) is the same fact seen from there: "disabled" there is disabled here.
"""

from __future__ import annotations

import copy
from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.iam.accounts import (
    Principal,
    ServiceAccounts,
    scope_allows,
    scope_insufficient,
)
from tpuctl.emulator.offerings import apis
from tpuctl.emulator.tpu.models import project_number

SERVICES: dict[str, str] = dict(apis.TITLES)  # every API the emulator knows: name -> title
PAID = {apis.TPU, apis.COMPUTE}  # calls and enabling need billing
# what a new project has on, of the APIs here (the list of services enabled by default:
# https://cloud.google.com/service-usage/docs/enabled-service#default); the Cloud
# Billing API is not among them
_NEW_PROJECT_ON = {apis.SERVICE_USAGE, apis.STORAGE, apis.MONITORING}
PRESETS = ("all", "new-project", "none")
CONFIG_KEYS = {
    "services",
    "billing",
    "denied_permissions",
    "project_services",
    "caller",
    "service_accounts",
}
CALLER = "you@example.com"

# verb (as counted in /requests) -> (service, permission)
_TPU_VERBS = {
    "locations.list": "tpu.locations.list",
    "locations.get": "tpu.locations.get",
    "list": "tpu.nodes.list",
    "create": "tpu.nodes.create",
    "get": "tpu.nodes.get",
    "delete": "tpu.nodes.delete",
    "patch": "tpu.nodes.update",
    "stop": "tpu.nodes.stop",
    "start": "tpu.nodes.start",
    "getGuestAttributes": "tpu.nodes.get",
    # v2alpha1 only; the permission is not documented: the emulator's choice
    "performMaintenance": "tpu.nodes.update",
    "simulateMaintenanceEvent": "tpu.nodes.update",
    "queuedResources.list": "tpu.queuedresources.list",
    "queuedResources.create": "tpu.queuedresources.create",
    "queuedResources.get": "tpu.queuedresources.get",
    "queuedResources.delete": "tpu.queuedresources.delete",
    "operations.list": "tpu.operations.list",
    "operations.get": "tpu.operations.get",
    "operations.delete": "tpu.operations.delete",
    "operations.cancel": "tpu.operations.cancel",
    "acceleratorTypes.list": "tpu.acceleratortypes.list",
    "acceleratorTypes.get": "tpu.acceleratortypes.get",
    "runtimeVersions.list": "tpu.runtimeversions.list",
    "runtimeVersions.get": "tpu.runtimeversions.get",
}
VERBS: dict[str, tuple[str, str]] = {
    **{verb: (apis.TPU, permission) for verb, permission in _TPU_VERBS.items()},
    "quotaInfos.list": (apis.QUOTAS, "cloudquotas.quotas.get"),
    "quotaInfos.get": (apis.QUOTAS, "cloudquotas.quotas.get"),
    "quotaPreferences.create": (apis.QUOTAS, "cloudquotas.quotas.update"),
    "quotaPreferences.get": (apis.QUOTAS, "cloudquotas.quotas.get"),
    "quotaPreferences.list": (apis.QUOTAS, "cloudquotas.quotas.get"),
    "services.get": (apis.SERVICE_USAGE, "serviceusage.services.get"),
    "compute.projects.get": ("compute.googleapis.com", "compute.projects.get"),
    "services.batchGet": (apis.SERVICE_USAGE, "serviceusage.services.get"),
    "services.list": (apis.SERVICE_USAGE, "serviceusage.services.list"),
    "services.enable": (apis.SERVICE_USAGE, "serviceusage.services.enable"),
    "services.batchEnable": (apis.SERVICE_USAGE, "serviceusage.services.enable"),
    # testing one's own permissions needs none (Resource Manager's reference)
    "projects.testIamPermissions": ("cloudresourcemanager.googleapis.com", ""),
    "projects.get": ("cloudresourcemanager.googleapis.com", "resourcemanager.projects.get"),
    "serviceAccounts.get": ("iam.googleapis.com", "iam.serviceAccounts.get"),
    "timeSeries.list": (apis.MONITORING, "monitoring.timeSeries.list"),
    # asking needs no permission; reading the policies does (troubleshooter.py)
    "iam.troubleshoot": (apis.POLICY_TROUBLESHOOTER, ""),
    # Artifact Registry (registry/urls.py; each method's permission as its REST reference says)
    "repositories.create": (apis.ARTIFACT_REGISTRY, "artifactregistry.repositories.create"),
    "repositories.get": (apis.ARTIFACT_REGISTRY, "artifactregistry.repositories.get"),
    "repositories.list": (apis.ARTIFACT_REGISTRY, "artifactregistry.repositories.list"),
    # the operations' permission is not documented: the emulator's choice
    "artifactregistry.operations.get": (
        apis.ARTIFACT_REGISTRY,
        "artifactregistry.repositories.get",
    ),
}


COMPUTE = "compute.googleapis.com"
# Compute Engine's permission for a method, where it is not `compute.<resource>.<method>`
# (https://cloud.google.com/compute/docs/reference/rest/v1 names each method's permission)
_COMPUTE_METHODS = {
    "insert": "create",
    "aggregatedList": "list",
    "wait": "get",
    "listManagedInstances": "get",
}


def compute_permission(verb: str) -> str | None:
    """The permission a Compute Engine call needs (`compute.instances.insert` ->
    `compute.instances.create`); None for what the gate leaves alone (public images)."""
    parts = verb.split(".")
    if len(parts) != 3 or parts[0] != "compute" or parts[1] == "images":
        return None
    resource = {"regionInstanceTemplates": "instanceTemplates"}.get(parts[1], parts[1])
    return f"compute.{resource}.{_COMPUTE_METHODS.get(parts[2], parts[2])}"


def _preset(name: str) -> dict[str, bool]:
    on = {
        "all": set(SERVICES),
        "new-project": _NEW_PROJECT_ON,
        "none": {apis.SERVICE_USAGE},
    }[name]
    return {service: service in on for service in SERVICES}


def _switches(value: Any) -> bool:
    """Whether `value` is a map of known API names to booleans."""
    return isinstance(value, dict) and all(
        s in SERVICES and isinstance(on, bool) for s, on in value.items()
    )


def _resource(path: str) -> str:
    """`projects/P/locations/Z/nodes/N` from `/v2/projects/...`: what a denial names."""
    path = path.removeprefix("/compute")  # Compute's paths: /compute/v1/projects/P
    return path.split("/", 2)[-1] if path.startswith("/v") else path.lstrip("/")


class Access:
    """Enabled APIs per project, billing per project, and the caller's permissions."""

    def __init__(self) -> None:
        self.services = _preset("all")
        self.project_services: dict[str, dict[str, bool]] = {}
        self.billing: dict[str, bool] = {"*": True}
        self.denied: list[str] = []
        self.caller = CALLER
        self.accounts = ServiceAccounts()  # the VMs' service accounts and their tokens
        # Service Usage operations by name: {"project", "service", "done_at"}; not kept
        # over a restart (what they enable is applied when due, `service_usage.tick`)
        self.operations: dict[str, dict[str, Any]] = {}

    # -- config ----------------------------------------------------------------------
    def to_config(self) -> dict[str, Any]:
        return {
            "services": dict(self.services),
            "project_services": copy.deepcopy(self.project_services),
            "billing": dict(self.billing),
            "denied_permissions": list(self.denied),
            "caller": self.caller,
            **self.accounts.to_config(),
        }

    def load(self, config: dict[str, Any]) -> None:
        self.services.update(config.get("services") or {})
        self.project_services.update(config.get("project_services") or {})
        self.billing.update(config.get("billing") or {})
        self.denied = list(config.get("denied_permissions") or self.denied)
        self.caller = str(config.get("caller", self.caller))
        self.accounts.load(config)

    def update(self, body: dict[str, Any]) -> None:
        """Apply the keys of a config update, all checked before any is applied."""
        services, project_services = dict(self.services), copy.deepcopy(self.project_services)
        value = body.get("services")
        if isinstance(value, str):
            if value not in PRESETS:
                raise errors.invalid_argument(f"services preset must be one of {list(PRESETS)}")
            services, project_services = _preset(value), {}
        elif value is not None:
            if not _switches(value):
                raise errors.invalid_argument(
                    f"services maps API names {sorted(SERVICES)} to true or false"
                )
            services.update(value)
            for per_project in project_services.values():
                for service in value:
                    per_project.pop(service, None)
        if "project_services" in body:
            given = body["project_services"] or {}
            if not isinstance(given, dict) or not all(map(_switches, given.values())):
                raise errors.invalid_argument("project_services maps projects to {service: bool}")
            project_services = copy.deepcopy(given)
        billing = dict(self.billing)
        value = body.get("billing")
        if isinstance(value, bool):
            billing = {"*": value}
        elif value is not None:
            if not isinstance(value, dict) or not all(isinstance(v, bool) for v in value.values()):
                raise errors.invalid_argument('billing is true, false or {"*"|project: bool}')
            billing.update(value)
        denied = body.get("denied_permissions", self.denied)
        if not isinstance(denied, list) or not all(isinstance(p, str) and p for p in denied):
            raise errors.invalid_argument("denied_permissions is a list of permission names")
        caller = body.get("caller", self.caller)
        if not isinstance(caller, str) or (caller and "@" not in caller):
            raise errors.invalid_argument('caller is an account\'s email address (or "": unknown)')
        ServiceAccounts.validate(body)
        self.accounts.update(body)
        self.services, self.project_services = services, project_services
        self.caller = caller
        self.billing, self.denied = billing, list(denied)

    # -- facts -------------------------------------------------------------------------
    def enabled(self, project: str, service: str) -> bool:
        per_project = self.project_services.get(project, {})
        return per_project.get(service, self.services.get(service, False))

    def set_enabled(self, project: str, service: str, on: bool = True) -> None:
        self.project_services.setdefault(project, {})[service] = on

    def billed(self, project: str) -> bool:
        return self.billing.get(project, self.billing.get("*", True))

    def denied_to(self, principal: Principal | None) -> set[str]:
        """What a call's principal lacks: a VM's account's, or the caller's (None)."""
        if principal is None:
            return set(self.denied)
        return self.accounts.denied(principal.account)

    # -- the gate ----------------------------------------------------------------------
    def check(
        self,
        verb: str,
        project: str,
        path: str,
        quotas_api: str = "enabled",
        principal: Principal | None = None,
        write: bool = True,
    ) -> None:
        """Refuse a call as Google's front end would; verbs it does not know pass. A
        call with a VM's token (`principal`) is checked for its scopes first, then for
        its account's permissions instead of the caller's."""
        if not project:
            return
        if verb in VERBS:
            service, permission = VERBS[verb]
        elif compute_permission(verb) is not None:
            service, permission = COMPUTE, str(compute_permission(verb))
        else:
            return
        if principal is not None and not scope_allows(principal.scopes, service, write):
            raise scope_insufficient(service, verb)
        on = self.enabled(project, service) and not (
            service == apis.QUOTAS and quotas_api == "disabled"
        )
        if not on:
            raise errors.service_disabled(project, service, SERVICES[service])
        if service in PAID and not self.billed(project):
            raise billing_disabled(project, service)
        if permission and permission in self.denied_to(principal):
            if service == COMPUTE:
                raise compute_permission_denied(permission, _resource(path))
            raise permission_denied(service, permission, _resource(path))


def billing_disabled(project: str, service: str) -> errors.ApiError:
    """403 for a paid API in a project without billing, as Google's front end words it."""
    number = project_number(project)
    url = f"https://console.developers.google.com/billing/enable?project={number}"
    message = (
        f"This API method requires billing to be enabled. Please enable billing on project "
        f"#{number} by visiting {url} then retry. If you enabled billing for this project "
        "recently, wait a few minutes for the action to propagate to our systems and retry."
    )
    info = {
        "@type": errors.ERROR_INFO_TYPE,
        "reason": "BILLING_DISABLED",
        "domain": "googleapis.com",
        "metadata": {"consumer": f"projects/{number}", "service": service},
    }
    return errors.ApiError(403, "PERMISSION_DENIED", message, [info])


def permission_denied(service: str, permission: str, resource: str) -> errors.ApiError:
    """403 for a caller without `permission`: "Permission 'tpu.nodes.create' denied on
    'projects/P/locations/Z/nodes'", with the ErrorInfo Google's services add."""
    info = {
        "@type": errors.ERROR_INFO_TYPE,
        "reason": "IAM_PERMISSION_DENIED",
        "domain": service,
        "metadata": {"permission": permission, "resource": resource},
    }
    message = f"Permission '{permission}' denied on '{resource}'"
    return errors.ApiError(403, "PERMISSION_DENIED", message, [info])


def compute_permission_denied(permission: str, resource: str) -> errors.ApiError:
    """403 as Compute Engine words it: `Required 'compute.instances.create' permission for
    'projects/P/zones/Z/instances/N'` (reason `forbidden`; the wording as gcloud prints
    Compute's refusals, from memory of public output: contributing/emulator-fidelity.md)."""
    from tpuctl.emulator.compute.errors import ComputeError

    return ComputeError(403, "forbidden", f"Required '{permission}' permission for '{resource}'")
