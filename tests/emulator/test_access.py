"""The emulator's control of APIs, billing and permissions, and the Service Usage and
quota-preference subsets, through Google's own clients."""

from __future__ import annotations

from typing import Any

import pytest
from google.api_core import exceptions as gx

from tpuctl.emulator.control.client import ControlError

P = "projects/new-proj"


def service_usage(emulator) -> Any:  # noqa: ANN001
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import service_usage_v1

    return service_usage_v1.ServiceUsageClient(
        transport="rest",
        client_options={"api_endpoint": f"http://{emulator.address}"},
        credentials=AnonymousCredentials(),
    )


def test_a_disabled_api_answers_service_disabled_as_google_does(emulator) -> None:
    emulator.config(services="none")
    with pytest.raises(gx.Forbidden) as err:
        list(emulator.tpu_client().list_nodes(parent=f"{P}/locations/us-central1-a"))
    assert err.value.reason == "SERVICE_DISABLED"
    assert err.value.metadata["service"] == "tpu.googleapis.com"
    assert err.value.metadata["consumer"].startswith("projects/")
    assert "Cloud TPU API has not been used in project" in str(err.value)
    with pytest.raises(gx.Forbidden) as err:
        list(emulator.quotas_client().list_quota_infos(parent=f"{P}/locations/global/services/x"))
    assert err.value.reason == "SERVICE_DISABLED"


def test_enable_is_an_operation_and_switches_one_project(emulator) -> None:
    emulator.config(services="none", durations={"enable_service": 0.2})
    su = service_usage(emulator)
    name = f"{P}/services/tpu.googleapis.com"
    assert su.get_service(request={"name": name}).state.name == "DISABLED"
    op = su.enable_service(request={"name": name})
    assert not op.done()
    assert op.result(timeout=10).service.state.name == "ENABLED"
    assert su.get_service(request={"name": name}).state.name == "ENABLED"
    list(emulator.tpu_client().list_nodes(parent=f"{P}/locations/us-central1-a"))
    # another project is untouched; enabling again is the done no-op operation
    other = su.get_service(request={"name": "projects/other-proj/services/tpu.googleapis.com"})
    assert other.state.name == "DISABLED"
    again = su.enable_service(request={"name": name})
    assert again.done() and again.operation.name == "operations/noop.DONE_OPERATION"
    enabled = su.list_services(request={"parent": P, "filter": "state:ENABLED"})
    assert sorted(s.config.name for s in enabled) == [
        "serviceusage.googleapis.com",
        "tpu.googleapis.com",
    ]
    assert emulator.config()["project_services"] == {"new-proj": {"tpu.googleapis.com": True}}


def test_batch_enable_switches_several_in_one_operation(emulator) -> None:
    """`services.batchEnable`, what `gcloud services enable A B` sends: one operation,
    all or none, at most 20 services."""
    emulator.config(services="none", durations={"enable_service": 0.2})
    su = service_usage(emulator)
    ids = ["tpu.googleapis.com", "storage.googleapis.com", "iam.googleapis.com"]
    op = su.batch_enable_services(request={"parent": P, "service_ids": ids})
    assert not op.done()
    done = op.result(timeout=10)
    assert sorted(s.config.name for s in done.services) == sorted(ids)
    assert all(s.state.name == "ENABLED" for s in done.services)
    assert emulator.config()["project_services"] == {"new-proj": dict.fromkeys(ids, True)}
    again = su.batch_enable_services(request={"parent": P, "service_ids": ids})
    assert again.done() and again.operation.name == "operations/noop.DONE_OPERATION"
    assert emulator.requests()["POST services.batchEnable"] == 2

    emulator.config(billing={"new-proj": False})
    with pytest.raises(gx.BadRequest) as err:  # a paid API refuses the whole batch
        su.batch_enable_services(
            request={
                "parent": P,
                "service_ids": ["cloudquotas.googleapis.com", "compute.googleapis.com"],
            }
        )
    assert err.value.reason == "UREQ_PROJECT_BILLING_NOT_FOUND"
    quotas = su.get_service(request={"name": f"{P}/services/cloudquotas.googleapis.com"})
    assert quotas.state.name == "DISABLED"
    with pytest.raises(gx.Forbidden, match="nope.googleapis.com"):
        su.batch_enable_services(request={"parent": P, "service_ids": ["nope.googleapis.com"]})
    with pytest.raises(gx.BadRequest, match="at most 20"):
        su.batch_enable_services(request={"parent": P, "service_ids": ids * 7})


def test_enabling_a_paid_api_needs_billing_and_unknown_apis_are_refused(emulator) -> None:
    emulator.config(services="none", billing={"new-proj": False})
    su = service_usage(emulator)
    with pytest.raises(gx.BadRequest) as err:
        su.enable_service(request={"name": f"{P}/services/tpu.googleapis.com"})
    assert err.value.reason == "UREQ_PROJECT_BILLING_NOT_FOUND"
    with pytest.raises(gx.Forbidden) as err:
        su.get_service(request={"name": f"{P}/services/nope.googleapis.com"})
    assert "Not found or permission denied for service(s): nope.googleapis.com" in str(err.value)


def test_billing_and_permissions(emulator) -> None:
    emulator.config(billing={"new-proj": False})
    with pytest.raises(gx.Forbidden) as err:
        list(emulator.tpu_client().list_nodes(parent=f"{P}/locations/us-central1-a"))
    assert err.value.reason == "BILLING_DISABLED"
    assert "requires billing to be enabled" in str(err.value)
    emulator.config(billing=True, denied_permissions=["tpu.nodes.list"])
    with pytest.raises(gx.Forbidden) as err:
        list(emulator.tpu_client().list_nodes(parent=f"{P}/locations/us-central1-a"))
    assert err.value.reason == "IAM_PERMISSION_DENIED"
    assert "Permission 'tpu.nodes.list' denied on 'projects/new-proj/locations/us-central1-a" in (
        str(err.value)
    )


@pytest.mark.parametrize(
    "bad",
    [
        {"services": "some"},
        {"services": {"tpu.googleapis.com": "yes"}},
        {"services": {"x.googleapis.com": True}},
        {"billing": "off"},
        {"denied_permissions": "tpu.nodes.create"},
    ],
)
def test_bad_access_config_is_refused(emulator, bad) -> None:
    with pytest.raises(ControlError):
        emulator.config(**bad)


def test_quota_preferences_are_filed_reviewed_and_granted(emulator) -> None:
    quota_id = "TPUV6EPerProjectPerRegionForTPUAPI"
    emulator.quotas("new-project")
    client = emulator.quotas_client()
    parent = f"{P}/locations/global"
    body = {
        "service": "tpu.googleapis.com",
        "quota_id": quota_id,
        "quota_config": {"preferred_value": 8},
        "dimensions": {"region": "us-east5"},
    }
    with pytest.raises(gx.BadRequest, match="Contact email is required"):
        client.create_quota_preference(parent=parent, quota_preference=body)
    body["contact_email"] = "me@example.com"
    pref = client.create_quota_preference(
        parent=parent, quota_preference=body, quota_preference_id="v6e-east5"
    )
    assert pref.reconciling and pref.quota_config.granted_value == 0
    with pytest.raises(gx.Conflict):
        client.create_quota_preference(
            parent=parent, quota_preference=body, quota_preference_id="v6e-east5"
        )
    assert [p.name for p in client.list_quota_preferences(parent=parent)] == [pref.name]
    emulator.call("POST", "quota-preferences/decide", {"name": pref.name, "granted": 8})
    got = client.get_quota_preference(name=pref.name)
    assert not got.reconciling and got.quota_config.granted_value == 8
    assert emulator.config()["quotas"][quota_id]["us-east5"] == 8
