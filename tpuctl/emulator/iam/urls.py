"""The REST paths of OS Login (oslogin.googleapis.com), Compute Engine's project
metadata, Cloud Resource Manager, IAM and the Policy Troubleshooter subsets, and OAuth
2.0's token info (oauth2.googleapis.com)."""

from __future__ import annotations

from tpuctl.emulator.core.routes import OnState, Route
from tpuctl.emulator.iam import accounts as iam
from tpuctl.emulator.iam import oslogin, troubleshooter

# the OS Login API subset: a user's login profile and keys
_U = r"/v1/users/(?P<user>[^/:]+)"

ROUTES: list[Route] = [
    (
        "GET",
        _U + "/loginProfile",
        "users.getLoginProfile",
        OnState(oslogin.get_login_profile),
        ("user", "?projectId", "?systemId"),
    ),
    (
        "POST",
        _U + ":importSshPublicKey",
        "users.importSshPublicKey",
        OnState(oslogin.import_ssh_public_key),
        ("user", "?projectId", "body"),
    ),
    (
        "DELETE",
        _U + "/sshPublicKeys/(?P<fp>[^/:]+)",
        "users.sshPublicKeys.delete",
        OnState(oslogin.delete_ssh_public_key),
        ("user", "fp"),
    ),
    # Compute Engine (compute.googleapis.com): a project's metadata
    (
        "GET",
        r"/compute/(?:v1|beta|alpha)/projects/(?P<project>[^/]+)",
        "compute.projects.get",
        OnState(oslogin.get_project),
        ("project",),
    ),
    # Cloud Resource Manager: what the caller (or a VM's account) may do in a project
    (
        "POST",
        r"/v1/projects/(?P<project>[^/:]+):testIamPermissions",
        "projects.testIamPermissions",
        OnState(iam.test_iam_permissions),
        ("project", "body", "principal"),
    ),
    (
        "GET",
        r"/v1/projects/(?P<project>[^/:]+)",
        "projects.get",
        OnState(iam.get_project),
        ("project",),
    ),
    # IAM: whether a service account exists
    (
        "GET",
        r"/v1/projects/(?P<project>[^/]+)/serviceAccounts/(?P<email>[^/:]+)",
        "serviceAccounts.get",
        OnState(iam.get_service_account),
        ("project", "email"),
    ),
    # Policy Troubleshooter: what another principal holds (v2alpha1: gcloud's)
    (
        "POST",
        r"/v1/iam:troubleshoot",
        "iam.troubleshoot",
        OnState(troubleshooter.troubleshoot),
        ("body", "principal"),
    ),
    (
        "POST",
        r"/v2alpha1/iam:troubleshoot",
        "iam.troubleshoot",
        OnState(troubleshooter.troubleshoot),
        ("body", "principal"),
    ),
    # OAuth 2.0 (oauth2.googleapis.com): whom the call's token is for
    ("POST", r"/tokeninfo", "tokeninfo", OnState(iam.token_info), ("principal",)),
]
