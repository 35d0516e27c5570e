"""What an organisation imposes on a project, and the TPU service agent: two more refusals
a new project meets on its first create.

Config (control plane, `POST /_emulator/v1/config`):
- `org_policy`: `{"resource_locations": ["us-central1", "europe-west4-a", ...]}`, the
  locations `constraints/gcp.resourceLocations` allows (a region allows its zones; null
  or absent: anywhere), and `"vm_external_ip_access": false` for
  `constraints/compute.vmExternalIpAccess` denying every VM an external IP.
- `tpu_service_agent`: false when the project's TPU service agent
  (`service-N@cloud-tpu.iam.gserviceaccount.com`, role `roles/tpu.serviceAgent`, listed
  in Google's service agents reference) is missing or has lost its role.

The answers, checked on node and queued-resource creates, after the front end's checks
(access.py) and before the request's own validation:
- an org-policy violation is 400 FAILED_PRECONDITION with a `google.rpc.PreconditionFailure`
  whose violation `type` is the constraint. The wording follows public outputs of other
  Google APIs refusing `gcp.resourceLocations` (firebase-tools issues #1978 and #6454:
  "Constraint constraints/gcp.resourceLocations violated for [orgpolicy:projects/N]
  attempting to ..."); the TPU API's own text was not found in a public source.
- a missing service agent is 403 PERMISSION_DENIED naming the agent and its role. This
  is modelled, not seen: no public output of the TPU API for it was found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.offerings.zones import region_of
from tpuctl.emulator.tpu.models import project_number

CONFIG_KEYS = frozenset({"org_policy", "tpu_service_agent"})
PRECONDITION_FAILURE_TYPE = "type.googleapis.com/google.rpc.PreconditionFailure"
LOCATIONS = "constraints/gcp.resourceLocations"
EXTERNAL_IPS = "constraints/compute.vmExternalIpAccess"
_POLICY_KEYS = {"resource_locations", "vm_external_ip_access"}


@dataclass
class Policies:
    resource_locations: list[str] | None = None  # None: every location
    vm_external_ip_access: bool = True
    tpu_service_agent: bool = True

    def to_config(self) -> dict[str, Any]:
        return {
            "org_policy": {
                "resource_locations": self.resource_locations,
                "vm_external_ip_access": self.vm_external_ip_access,
            },
            "tpu_service_agent": self.tpu_service_agent,
        }

    @staticmethod
    def validate(body: dict[str, Any]) -> None:
        policy = body.get("org_policy", {})
        if not isinstance(policy, dict) or set(policy) - _POLICY_KEYS:
            raise errors.invalid_argument(f"org_policy takes {sorted(_POLICY_KEYS)}")
        places = policy.get("resource_locations")
        if places is not None and not (
            isinstance(places, list) and all(isinstance(p, str) and p for p in places)
        ):
            raise errors.invalid_argument("org_policy.resource_locations: a list of locations")
        for key, value in (
            ("org_policy.vm_external_ip_access", policy.get("vm_external_ip_access", True)),
            ("tpu_service_agent", body.get("tpu_service_agent", True)),
        ):
            if not isinstance(value, bool):
                raise errors.invalid_argument(f"{key} must be true or false")

    def update(self, body: dict[str, Any]) -> None:
        policy = body.get("org_policy", {})
        if "resource_locations" in policy:
            self.resource_locations = policy["resource_locations"]
        if "vm_external_ip_access" in policy:
            self.vm_external_ip_access = policy["vm_external_ip_access"]
        if "tpu_service_agent" in body:
            self.tpu_service_agent = body["tpu_service_agent"]

    def check_create(self, project: str, zone: str, nodes: list[dict[str, Any]], what: str) -> None:
        """Refuse creating `nodes` (Node bodies) in `zone` as the policies would."""
        number = project_number(project)
        if self.resource_locations is not None:
            allowed = set(self.resource_locations)
            if zone not in allowed and region_of(zone) not in allowed:
                raise _violation(
                    LOCATIONS,
                    number,
                    f"Constraint {LOCATIONS} violated for [orgpolicy:projects/{number}] "
                    f"attempting to create {what} in [{zone}]. For more information, see "
                    "https://cloud.google.com/resource-manager/docs/organization-policy/"
                    "defining-locations.",
                )
        external = any((body.get("networkConfig") or {}).get("enableExternalIps") for body in nodes)
        if external and not self.vm_external_ip_access:
            raise _violation(
                EXTERNAL_IPS,
                number,
                f"Constraint {EXTERNAL_IPS} violated for project {number}: {what} in "
                f"[{zone}] asks for external IP addresses, which the organization policy "
                "denies.",
            )
        if not self.tpu_service_agent:
            agent = f"service-{number}@cloud-tpu.iam.gserviceaccount.com"
            raise errors.ApiError(
                403,
                "PERMISSION_DENIED",
                f"The Cloud TPU service agent {agent} is missing or does not have the role "
                f"roles/tpu.serviceAgent on project {project}.",
                [
                    {
                        "@type": errors.ERROR_INFO_TYPE,
                        "reason": "SERVICE_AGENT_MISSING_PERMISSIONS",
                        "domain": "tpu.googleapis.com",
                        "metadata": {"serviceAgent": agent, "role": "roles/tpu.serviceAgent"},
                    }
                ],
            )


def _violation(constraint: str, number: str, message: str) -> errors.ApiError:
    violation = {
        "type": constraint,
        "subject": f"orgpolicy:projects/{number}",
        "description": message,
    }
    return errors.ApiError(
        400,
        "FAILED_PRECONDITION",
        message,
        [{"@type": PRECONDITION_FAILURE_TYPE, "violations": [violation]}],
    )
