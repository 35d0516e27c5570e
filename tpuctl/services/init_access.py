"""`tpuctl init`, steps 3 and 4: who may do what.

3. The caller's permissions: Cloud Resource Manager's `projects.testIamPermissions` on
   the project, for every permission tpuctl's commands need (`apis.CALLER_PERMISSIONS`);
   the missing ones are named with the roles that grant them, as gcloud commands. The
   TPU API has no testIamPermissions of its own (neither google-cloud-tpu nor its v2
   discovery document has one); where Resource Manager's API is off, listing nodes
   stands in, which proves only tpu.nodes.list.
4. The nodes' service account (the project's default compute account, or the one
   named): it exists (IAM's `projects.serviceAccounts.get`), and what the agent needs of
   it (`apis.AGENT_PERMISSIONS`: the job's folder in the bucket, deleting its node) is
   said with the grant commands. Whether it holds them cannot be asked from here:
   testIamPermissions answers only for the caller, and reading every IAM policy that
   may grant them (project, bucket, folders, groups, custom roles) is not attempted.
   The agent asks for itself before each job (agent/preflight.py) and a job fails at
   once, naming what is missing. Nothing is granted here: the commands are printed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tpuctl import apis
from tpuctl.errors import PermissionDeniedError, ServiceDisabledError, TpuctlError
from tpuctl.services.init_step import Step, failed

if TYPE_CHECKING:
    from tpuctl.cloud.iam import IamApi
    from tpuctl.cloud.tpu import TpuApi
    from tpuctl.config import Target

YOU = "YOU@example.com"


def _grants(project: str, roles: list[str], account: str) -> str:
    return "; ".join(f"`{apis.grant_command(project, r, apis.member(account))}`" for r in roles)


# -- 3. the caller's permissions ----------------------------------------------------------
def check_permissions(iam: IamApi, tpu: TpuApi, target: Target, account: str | None) -> Step:
    project = target.project
    wanted = list(apis.CALLER_PERMISSIONS)
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
    roles = sorted({apis.ROLES[p] for p in missing if p in apis.ROLES})
    what = "permission" if len(missing) == 1 else "permissions"
    todo = f"{what} {', '.join(missing)} denied in project {project}; grant: " + _grants(
        project, roles, account or YOU
    )
    return Step("permissions", "todo", f"{found}: {len(missing)} missing", todo=todo)


def _by_listing(tpu: TpuApi, target: Target, account: str | None) -> Step:
    """Without Resource Manager: a harmless call, listing nodes, stands in for the rest."""
    found = (
        f"{apis.title(apis.RESOURCE_MANAGER)} is off (testIamPermissions): checked by listing nodes"
    )
    try:
        tpu.list_nodes(target.parent)
    except PermissionDeniedError as e:
        return Step("permissions", "todo", found, todo=f"{e.message}: {e.hint}")
    except TpuctlError as e:
        return failed("permissions", found, e)
    roles = sorted({apis.ROLES[p] for p in apis.CALLER_PERMISSIONS if p in apis.ROLES})
    return Step(
        "permissions",
        "ok",
        f"{found}: allowed (the rest is checked when done; the roles tpuctl needs: "
        f"{', '.join(roles)})",
    )


# -- 4. the nodes' service account -----------------------------------------------------
def check_service_account(iam: IamApi, project: str, bucket: str, email: str | None) -> Step:
    try:
        if not email:
            email = f"{iam.project_number(project)}-compute@developer.gserviceaccount.com"
        exists = iam.service_account(project, email) is not None
    except TpuctlError as e:
        return failed("service-account", "cannot look up the nodes' service account", e)
    member = apis.member(email)
    grants = (
        f"`{apis.bucket_grant_command(bucket, apis.AGENT_BUCKET_ROLE, member)}`; "
        f"`{apis.grant_command(project, apis.AGENT_PROJECT_ROLE, member)}`"
    )
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
    return Step(
        "service-account",
        "ok",
        f"the nodes' service account {email} exists; the agent needs it to write the job "
        f"bucket and delete its node ({', '.join(apis.AGENT_PERMISSIONS)}), which each job "
        f"checks before its script starts; to grant them now: {grants}",
    )
