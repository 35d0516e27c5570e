"""The Policy Troubleshooter API's one method, `iam.troubleshoot` (v1, and v2alpha1,
which `gcloud policy-troubleshoot iam` calls): does a principal hold a permission on a
resource? `tpuctl init` asks it of the nodes' service account, for what the agent needs
on the project and on the job bucket: the only way to ask what *another* principal
holds (`testIamPermissions` answers for the caller alone).

The shapes are those of the API's reference
(https://cloud.google.com/policy-intelligence/docs/reference/policytroubleshooter/rest/v1/iam/troubleshoot):
the request's `accessTuple` names `principal` (an email), `fullResourceName`
(`//cloudresourcemanager.googleapis.com/projects/P`,
`//storage.googleapis.com/projects/_/buckets/B`,
`//artifactregistry.googleapis.com/projects/P/locations/L/repositories/R`) and
`permission`; the answer's `access` is GRANTED, NOT_GRANTED, UNKNOWN_CONDITIONAL or
UNKNOWN_INFO_DENIED, the last when the caller may not read a policy that counts
(`resourcemanager.projects.getIamPolicy` on a project, `storage.buckets.getIamPolicy` on a bucket,
`artifactregistry.repositories.getIamPolicy` on a repository; the API's guide
https://cloud.google.com/policy-intelligence/docs/troubleshoot-access).

The emulator has no policies of its own: a principal holds what its config does not
deny (`denied_permissions` of the caller, `service_accounts` for the VMs' accounts, see
accounts.py), and an account that does not exist holds nothing. The API must be enabled in
the project of the resource (a bucket's is not known here, so a bucket is not checked
for it).
"""

from __future__ import annotations

import re
from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.iam.accounts import Principal

# the service of a full resource name -> the permission that reads its policy
_VIEW = {
    "cloudresourcemanager.googleapis.com": "resourcemanager.projects.getIamPolicy",
    "storage.googleapis.com": "storage.buckets.getIamPolicy",
    "artifactregistry.googleapis.com": "artifactregistry.repositories.getIamPolicy",
}
_RESOURCE = re.compile(
    r"^//(?P<service>[a-z0-9.-]+\.googleapis\.com)/projects/(?P<project>[^/]+)"
    r"(?:/buckets/(?P<bucket>[^/]+)"
    r"|/locations/(?P<location>[^/]+)/repositories/(?P<repo>[^/]+))?$"
)
_DEFAULT_ACCOUNT = re.compile(r"^\d+-compute@developer\.gserviceaccount\.com$")


def _fields(body: dict[str, Any]) -> tuple[str, str, str]:
    found = body.get("accessTuple")
    found = found if isinstance(found, dict) else {}
    names = ("principal", "fullResourceName", "permission")
    for name in names:
        if not isinstance(found.get(name), str) or not found[name]:
            raise errors.invalid_argument(
                f"Request contains an invalid argument: access_tuple.{name} is required."
            )
    return found["principal"], found["fullResourceName"], found["permission"]


def troubleshoot(state: Any, body: dict[str, Any], principal: Principal | None) -> dict[str, Any]:
    who, resource, permission = _fields(body)
    parts = _RESOURCE.match(resource)
    if (
        parts is None
        or (parts["service"] == "storage.googleapis.com") != bool(parts["bucket"])
        or (parts["service"] == "artifactregistry.googleapis.com") != bool(parts["repo"])
    ):
        raise errors.invalid_argument(f"Invalid full resource name: {resource}")
    access = state.access
    if parts["project"] != "_":
        access.check("iam.troubleshoot", parts["project"], "", principal=principal, write=False)
    view = _VIEW.get(parts["service"])
    if view is None or view in access.denied_to(principal):
        verdict = "UNKNOWN_INFO_DENIED"
    else:
        held = _holds(access, who, parts["project"], permission)
        verdict = "GRANTED" if held else "NOT_GRANTED"
    explained = {"access": verdict, "fullResourceName": resource, "relevance": "HIGH"}
    return {"access": verdict, "explainedPolicies": [explained]}


def _holds(access: Any, email: str, project: str, permission: str) -> bool:
    """Does `email` hold `permission`? Nothing is held by a principal that does not
    exist here (a bucket's project is not known: any account configured, or any
    project's default compute account, exists for it)."""
    if email == access.caller:
        return permission not in access.denied
    if project != "_":
        exists = access.accounts.exists(project, email)
    else:
        exists = email in access.accounts.accounts or bool(_DEFAULT_ACCOUNT.match(email))
    return exists and permission not in access.accounts.denied(email)
