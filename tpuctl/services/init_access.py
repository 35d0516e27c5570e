"""`tpuctl init`, steps 3 and 6: who may do what.

3. The caller's permissions: Cloud Resource Manager's `projects.testIamPermissions` on
   the project, for every permission tpuctl's commands need (`google_apis.CALLER_PERMISSIONS`);
   the missing ones are named with the roles that grant them, as gcloud commands. The
   TPU API has no testIamPermissions of its own (neither google-cloud-tpu nor its v2
   discovery document has one); where Resource Manager's API is off, listing nodes
   stands in, which proves only tpu.nodes.list.
6. The nodes' service account (the project's default compute account, or the one
   named), checked after the bucket is made: it exists (IAM's
   `projects.serviceAccounts.get`), and it holds what the agent needs
   (`google_apis.AGENT_PERMISSIONS`: the job's folder in the bucket, deleting its node), asked
   of the Policy Troubleshooter (`iam.troubleshoot`, one permission a call: the storage
   ones on the bucket, the TPU ones on the project). testIamPermissions answers only for
   the caller; the Troubleshooter evaluates every allow policy that counts (the
   resource's, its project's, folders' and organisation's, groups, custom roles; not deny
   policies, which its REST API does not weigh:
   https://cloud.google.com/policy-intelligence/docs/troubleshoot-access), as far as the
   caller may read them (roles/iam.securityReviewer reads them all). Where it cannot
   tell (UNKNOWN_INFO_DENIED), or its API is off, the step says so and stays ready: the
   agent asks for itself before each job (agent/preflight.py), and a job then fails at
   once, naming what is missing. Nothing is granted here: the commands are printed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tpuctl import google_apis
from tpuctl.errors import ConfigError, PermissionDeniedError, ServiceDisabledError, TpuctlError
from tpuctl.services.init_step import Step, failed

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.cloud.iam import IamApi
    from tpuctl.config import Target

YOU = "YOU@example.com"


def _grants(project: str, roles: list[str], account: str) -> str:
    return "; ".join(
        f"`{google_apis.grant_command(project, r, google_apis.member(account))}`" for r in roles
    )


# -- 3. the caller's permissions ----------------------------------------------------------
def check_permissions(
    iam: IamApi,
    tpu: TpuBackend,
    target: Target,
    account: str | None,
    extra: tuple[str, ...] = (),
) -> Step:
    """Test what tpuctl needs of the caller (and `extra`: Compute Engine's, where the
    project's TPUs are there)."""
    project = target.project
    wanted = [*google_apis.CALLER_PERMISSIONS, *extra]
    try:
        held = iam.test_permissions(project, wanted)
    except ServiceDisabledError:
        return _by_listing(tpu, target, account)
    except TpuctlError as e:
        return failed("permissions", "cannot test your permissions", e)
    found = f"tested {len(wanted)} permissions tpuctl needs with testIamPermissions"
    missing = [p for p in wanted if p not in held]
    if not missing:
        return Step("permissions", "ok", f"{found}: you hold them all")
    roles = sorted({role for p in missing if (role := google_apis.role_for(p))})
    what = "permission" if len(missing) == 1 else "permissions"
    todo = f"{what} {', '.join(missing)} denied in project {project}; grant: " + _grants(
        project, roles, account or YOU
    )
    return Step("permissions", "todo", f"{found}: {len(missing)} missing", todo=todo)


def _by_listing(tpu: TpuBackend, target: Target, account: str | None) -> Step:
    """Without Resource Manager: a harmless call, listing nodes, stands in for the rest."""
    manager = google_apis.title(google_apis.RESOURCE_MANAGER)
    found = f"{manager} is off (testIamPermissions): checked by listing nodes"
    try:
        tpu.list_nodes(target.parent)
    except PermissionDeniedError as e:
        return Step("permissions", "todo", found, todo=f"{e.message}: {e.hint}")
    except TpuctlError as e:
        return failed("permissions", found, e)
    roles = sorted(
        {google_apis.ROLES[p] for p in google_apis.CALLER_PERMISSIONS if p in google_apis.ROLES}
    )
    return Step(
        "permissions",
        "ok",
        f"{found}: allowed (the rest is checked when done; the roles tpuctl needs: "
        f"{', '.join(roles)})",
    )


# -- 6. the nodes' service account --------------------------------------------------------
def check_service_account(
    iam: IamApi, project: str, bucket: str, email: str | None, bucket_made: bool
) -> Step:
    try:
        if not email:
            email = f"{iam.project_number(project)}-compute@developer.gserviceaccount.com"
        exists = iam.service_account(project, email) is not None
    except TpuctlError as e:
        return failed("service-account", "cannot look up the nodes' service account", e)
    member = google_apis.member(email)
    bucket_grant = (
        f"`{google_apis.bucket_grant_command(bucket, google_apis.AGENT_BUCKET_ROLE, member)}`"
    )
    project_grant = (
        f"`{google_apis.grant_command(project, google_apis.AGENT_PROJECT_ROLE, member)}`"
    )
    grants = f"{bucket_grant}; {project_grant}"
    if not exists:
        if email.endswith("-compute@developer.gserviceaccount.com"):
            make = f"`gcloud services enable compute.googleapis.com --project {project}` (it "
            make += "makes the default compute account), or name one with --service-account"
        else:
            name = email.split("@")[0]
            make = f"`gcloud iam service-accounts create {name} --project {project}`"
        return Step(
            "service-account",
            "todo",
            f"the nodes' service account {email} does not exist",
            todo=f"create it: {make}; then grant it: {grants}",
        )
    needs = (
        f"to write the job bucket and delete its node: {', '.join(google_apis.AGENT_PERMISSIONS)}"
    )
    try:
        verdicts = _troubleshoot(iam, project, bucket if bucket_made else None, email)
    except ConfigError as e:  # the API off, or user credentials without a quota project
        why = e.message + (
            f"; {e.hint}" if e.hint and not isinstance(e, ServiceDisabledError) else ""
        )
        return Step(
            "service-account",
            "ok",
            f"the nodes' service account {email} exists; what it holds was not checked "
            f"({why}); the agent needs it {needs}; each job checks them before its "
            f"script starts; to grant them now: {grants}",
        )
    except TpuctlError as e:
        return failed("service-account", f"cannot check what {email} holds", e)
    watchdog = verdicts.pop(google_apis.WATCHDOG_PERMISSION)
    lacking = [p for p, v in verdicts.items() if v == "NOT_GRANTED"]
    unknown = [p for p, v in verdicts.items() if v not in ("GRANTED", "NOT_GRANTED")]
    where = f"project {project}" + (f" and bucket gs://{bucket}" if bucket_made else "")
    if lacking:
        todo = [bucket_grant] if any(p.startswith("storage.") for p in lacking) else []
        todo += [project_grant] if any(p.startswith("tpu.") for p in lacking) else []
        return Step(
            "service-account",
            "todo",
            f"the nodes' service account {email} lacks {', '.join(lacking)} on {where}: "
            "a job's agent could not run or end its node",
            todo="grant: " + "; ".join(todo),
        )
    found = f"the nodes' service account {email} holds what the agent needs {needs}"
    if unknown:
        found = (
            f"the nodes' service account {email} exists; for {', '.join(unknown)} the Policy "
            f"Troubleshooter could not tell ({verdicts[unknown[0]]}: you may not read every "
            f"IAM policy that counts, e.g. without {_VIEW_ROLE}); each job checks before its "
            f"script starts; to grant them now: {grants}"
        )
    else:
        found += f" (asked the Policy Troubleshooter, on {where})"
    if watchdog == "NOT_GRANTED":
        role = google_apis.grant_command(project, google_apis.WATCHDOG_ROLE, member)
        found += (
            f"; optional: it lacks {google_apis.WATCHDOG_PERMISSION}, without which the idle "
            "watchdog cannot tell a TPU held but unused from a busy one, and keeps such a "
            f"node (`{role}`)"
        )
    return Step("service-account", "ok", found)


_VIEW_ROLE = google_apis.ROLES["resourcemanager.projects.getIamPolicy"]  # reads every policy


def _troubleshoot(iam: IamApi, project: str, bucket: str | None, email: str) -> dict[str, str]:
    """The Policy Troubleshooter's verdict on each permission the agent needs, and the
    idle watchdog's: the storage ones on the bucket (on the project while there is no
    bucket, as no bucket grant can exist yet), the others on the project."""
    on_project = f"//cloudresourcemanager.googleapis.com/projects/{project}"
    on_bucket = f"//storage.googleapis.com/projects/_/buckets/{bucket}" if bucket else on_project
    return {
        p: iam.troubleshoot(
            email, on_bucket if p.startswith("storage.") else on_project, p, project
        )
        for p in (*google_apis.AGENT_PERMISSIONS, google_apis.WATCHDOG_PERMISSION)
    }
