"""IamApi: what the caller may do in a project, the project's number, whether a service
account exists and what it holds: Cloud Resource Manager's `projects.testIamPermissions`
and `projects.get` (v1), IAM's `projects.serviceAccounts.get`, and the Policy
Troubleshooter's `iam.troubleshoot` (v1; gcloud's `policy-troubleshoot iam` sends the
same body to v2alpha1).

Plain REST calls through the credentials' session (cloud/session.py), as compute.py
makes its one call: no Resource Manager or IAM client library is installed, and three
small calls do not justify one. Errors go through the shared translation (`cloud/errors.py`), as
google-api-core builds them from the HTTP answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote


class IamApi:
    """The caller's permissions and the project's service accounts."""

    def __init__(
        self,
        session: Callable[[], Any],
        resource_manager: str,
        iam: str,
        troubleshooter: str = "https://policytroubleshooter.googleapis.com",
        where: str = "the Cloud Resource Manager API",
        unreachable_hint: str = "",
    ) -> None:
        self._session = session  # made on first use (cloud/session.py)
        self._crm = resource_manager.rstrip("/")  # https://cloudresourcemanager.googleapis.com
        self._iam = iam.rstrip("/")  # https://iam.googleapis.com
        self._troubleshooter = troubleshooter.rstrip("/")
        self._where = where
        self._hint = unreachable_hint

    def _call(self, method: str, url: str, subject: str, project: str, **kw: Any) -> Any:
        from tpuctl.cloud import rest

        return rest.call(
            self._session,
            method,
            url,
            subject=subject,
            where=self._where,
            hint=self._hint,
            project=project,
            **kw,
        )

    def test_permissions(self, project: str, permissions: list[str]) -> set[str]:
        """Those of `permissions` the caller holds in `project` (the method itself needs
        no permission; at most 100 a call)."""
        held: set[str] = set()
        url = f"{self._crm}/v1/projects/{project}:testIamPermissions"
        for i in range(0, len(permissions), 100):
            body = {"permissions": permissions[i : i + 100]}
            answer = self._call("POST", url, f"project {project}", project, json=body)
            held.update(answer.get("permissions") or [])
        return held

    def project_number(self, project: str) -> str:
        """The project's number (Resource Manager's `projects.get`)."""
        url = f"{self._crm}/v1/projects/{project}"
        answer = self._call("GET", url, f"project {project}", project)
        return str(answer["projectNumber"])

    def service_account(self, project: str, email: str) -> dict[str, Any] | None:
        """The service account, or None when it does not exist."""
        from tpuctl.errors import NotFoundError

        url = f"{self._iam}/v1/projects/{project}/serviceAccounts/{quote(email, safe='@')}"
        try:
            return dict(self._call("GET", url, f"service account {email}", project))
        except NotFoundError:
            return None

    def troubleshoot(self, principal: str, resource: str, permission: str, project: str) -> str:
        """Does `principal` (an email) hold `permission` on `resource` (a full resource
        name, e.g. //cloudresourcemanager.googleapis.com/projects/P)? The Policy
        Troubleshooter's verdict: GRANTED, NOT_GRANTED, UNKNOWN_CONDITIONAL or
        UNKNOWN_INFO_DENIED (the caller may not read a policy that counts)."""
        url = f"{self._troubleshooter}/v1/iam:troubleshoot"
        body = {
            "accessTuple": {
                "principal": principal,
                "fullResourceName": resource,
                "permission": permission,
            }
        }
        answer = self._call("POST", url, f"{permission} of {principal}", project, json=body)
        return str(answer.get("access") or "ACCESS_STATE_UNSPECIFIED")
