"""The Policy Troubleshooter's `iam.troubleshoot` (iam/troubleshooter.py): what a principal
holds, from the emulator's permission config, in the API's shapes; gcloud's
`policy-troubleshoot iam` (v2alpha1) reads the same answer."""

from __future__ import annotations

import json

import pytest

from tests.emulator.test_gcloud import gcloud, gcloud_config
from tests.emulator.test_vm_tokens import _call
from tpuctl.emulator.tpu.models import project_number

P = "proj-t"
ON_PROJECT = f"//cloudresourcemanager.googleapis.com/projects/{P}"
ON_BUCKET = "//storage.googleapis.com/projects/_/buckets/b1"
DEFAULT = f"{project_number(P)}-compute@developer.gserviceaccount.com"
TRAINER = f"trainer@{P}.iam.gserviceaccount.com"


def ask(emulator, principal: str, permission: str, resource: str = ON_PROJECT):  # noqa: ANN001, ANN201
    body = {"accessTuple": {"principal": principal, "fullResourceName": resource,
                            "permission": permission}}  # fmt: skip
    return _call(f"http://{emulator.address}/v1/iam:troubleshoot", "POST", body)


@pytest.mark.parametrize(
    ("principal", "permission", "resource", "access"),
    [
        (DEFAULT, "tpu.nodes.delete", ON_PROJECT, "GRANTED"),
        (DEFAULT, "storage.objects.create", ON_BUCKET, "GRANTED"),
        (TRAINER, "tpu.nodes.delete", ON_PROJECT, "NOT_GRANTED"),  # denied in its config
        (TRAINER, "tpu.nodes.get", ON_PROJECT, "GRANTED"),
        (f"ghost@{P}.iam.gserviceaccount.com", "tpu.nodes.get", ON_PROJECT, "NOT_GRANTED"),
        ("you@example.com", "tpu.nodes.create", ON_PROJECT, "NOT_GRANTED"),  # the caller
        ("you@example.com", "tpu.nodes.list", ON_PROJECT, "GRANTED"),
    ],
)
def test_what_a_principal_holds(emulator, principal, permission, resource, access) -> None:  # noqa: ANN001
    emulator.config(
        service_accounts={TRAINER: {"denied_permissions": ["tpu.nodes.delete"]}},
        denied_permissions=["tpu.nodes.create"],
    )
    status, body = ask(emulator, principal, permission, resource)
    assert status == 200, body
    assert body["access"] == access
    assert body["explainedPolicies"][0]["fullResourceName"] == resource


def test_policies_the_caller_cannot_read(emulator) -> None:
    emulator.config(denied_permissions=["storage.buckets.getIamPolicy"])
    assert ask(emulator, DEFAULT, "storage.objects.get", ON_BUCKET)[1]["access"] == (
        "UNKNOWN_INFO_DENIED"
    )
    assert ask(emulator, DEFAULT, "tpu.nodes.get")[1]["access"] == "GRANTED"


def test_refusals(emulator) -> None:
    status, body = _call(f"http://{emulator.address}/v1/iam:troubleshoot", "POST", {})
    assert (status, body["error"]["status"]) == (400, "INVALID_ARGUMENT")
    assert "access_tuple.principal is required" in body["error"]["message"]
    status, body = ask(emulator, DEFAULT, "tpu.nodes.get", "//storage.googleapis.com/projects/p")
    assert (status, body["error"]["message"]) == (
        400,
        "Invalid full resource name: //storage.googleapis.com/projects/p",
    )
    emulator.config(services={"policytroubleshooter.googleapis.com": False})
    status, body = ask(emulator, DEFAULT, "tpu.nodes.get")
    assert status == 403
    assert body["error"]["details"][0]["reason"] == "SERVICE_DISABLED"
    assert "Policy Troubleshooter API has not been used in project" in body["error"]["message"]


def test_gcloud_reads_the_answer(emulator) -> None:
    emulator.config(service_accounts={TRAINER: {"denied_permissions": ["tpu.nodes.delete"]}})
    endpoint = f"http://{emulator.address}/"
    gcloud_config(
        {
            "api_endpoint_overrides/policytroubleshooter": endpoint,
            "auth/disable_credentials": "true",
        }
    )
    for permission, access in (("tpu.nodes.delete", "NOT_GRANTED"), ("tpu.nodes.get", "GRANTED")):
        r = gcloud("policy-troubleshoot", "iam", ON_PROJECT, f"--principal-email={TRAINER}",
                   f"--permission={permission}", "--format=json")  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["access"] == access
    assert emulator.requests()["POST iam.troubleshoot"] == 2
