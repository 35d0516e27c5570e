"""The Cloud Billing Catalog API (billing/): Google's own client (google-cloud-billing,
REST) pages through the SKUs with their USD prices; the control plane changes the
table, which outlives a restart; the front end's refusals come in Google's shapes."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from google.api_core import exceptions
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import billing_v1
from google.oauth2.credentials import Credentials

from tpuctl.emulator.control.client import CONTROL_PREFIX

TPU, GCE = "E000-3F24-B8AA", "6F81-5844-456A"
NEW_SKU = "ABCD-0123-4567"


def _client(address: str, **options: Any) -> billing_v1.CloudCatalogClient:
    return billing_v1.CloudCatalogClient(
        transport="rest",
        # an API key is the credentials when there is one
        credentials=None if "api_key" in options else AnonymousCredentials(),
        client_options=ClientOptions(api_endpoint=f"http://{address}", **options),
    )


def _skus(client: billing_v1.CloudCatalogClient, service: str, size: int = 0) -> list[Any]:
    request = billing_v1.ListSkusRequest(parent=f"services/{service}", page_size=size)
    return list(client.list_skus(request=request))


def _call(url: str, method: str = "GET", body: Any = None, headers: dict[str, str] | None = None):
    data = json.dumps(body).encode() if body is not None else None
    sent = {"Content-Type": "application/json", **(headers or {})}
    request = urllib.request.Request(url, data=data, method=method, headers=sent)
    try:
        with urllib.request.urlopen(request) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _price(sku: Any) -> float:
    money = sku.pricing_info[0].pricing_expression.tiered_rates[0].unit_price
    assert money.currency_code == "USD"
    return money.units + money.nanos / 1e9


def _sku(description: str, units: str, nanos: int) -> dict[str, Any]:
    rate = {
        "startUsageAmount": 0,
        "unitPrice": {"currencyCode": "USD", "units": units, "nanos": nanos},
    }
    return {
        "name": f"services/{GCE}/skus/{NEW_SKU}",
        "skuId": NEW_SKU,
        "description": description,
        "category": {"resourceFamily": "Compute", "resourceGroup": "TPU", "usageType": "OnDemand"},
        "serviceRegions": ["us-west4"],
        "pricingInfo": [{"pricingExpression": {"usageUnit": "h", "tieredRates": [rate]}}],
    }


def test_list_skus_pages_through_every_sku_with_usd_prices(emulator) -> None:
    client = _client(emulator.address)
    whole = _skus(client, TPU)
    paged = _skus(client, TPU, size=4)
    assert [s.sku_id for s in paged] == [s.sku_id for s in whole] and len(whole) > 4
    counts = emulator.requests()
    assert counts["GET cloudbilling.services.skus.list"] == 1 + -(-len(whole) // 4)
    v2 = [s for s in whole if s.description == "Tpu-v2 Device running in Iowa"]
    assert len(v2) == 1 and v2[0].service_regions == ["us-central1"]
    money = v2[0].pricing_info[0].pricing_expression.tiered_rates[0].unit_price
    assert (money.units, money.nanos) == (4, 500_000_000)  # a v2-8 device: 4 chips at 1.125
    assert v2[0].category.resource_group == "TPU" and v2[0].name.startswith(f"services/{TPU}/skus/")
    gce = _skus(client, GCE)
    groups = {s.category.resource_group for s in gce}
    assert {"TPU", "CPU", "RAM", "GPU"} <= groups  # a reader must filter
    usage = {s.category.usage_type for s in gce if "TpuV6e" in s.description}
    assert usage == {"OnDemand", "Preemptible", "Commit1Yr", "Commit3Yr"}
    spot = [s for s in gce if s.description == "Preemptible TpuV6e running in Americas"]
    assert _price(spot[0]) == pytest.approx(0.6483) and "us-east1" in spot[0].service_regions
    assert not [s for s in whole + gce if "7x" in s.description.lower()]


def test_list_services_names_cloud_tpu_and_compute_engine(emulator) -> None:
    client = _client(emulator.address)
    services = {s.service_id: s for s in client.list_services()}
    assert services[TPU].display_name == "Cloud TPU"
    assert services[GCE].display_name == "Compute Engine"
    assert services[GCE].business_entity_name == "businessEntities/GCP"
    assert services[TPU].name == f"services/{TPU}"


def test_the_control_plane_adds_changes_and_removes_a_sku(emulator) -> None:
    client = _client(emulator.address)
    control = f"http://{emulator.address}{CONTROL_PREFIX}billing/skus"
    status, added = _call(control, "POST", {"sku": _sku("TpuV6e running in Las Vegas", "3", 10)})
    assert status == 200 and added["pricingInfo"][0]["effectiveTime"] != "2026-11-01T08:00:00Z"
    found = [s for s in _skus(client, GCE) if s.sku_id == NEW_SKU]
    assert found and _price(found[0]) == pytest.approx(3.00000001)
    status, _ = _call(control, "POST", {"sku": _sku("TpuV6e running in Las Vegas", "2", 5 * 10**8)})
    assert status == 200
    assert [_price(s) for s in _skus(client, GCE) if s.sku_id == NEW_SKU] == [2.5]
    assert NEW_SKU in {s["skuId"] for s in _call(control)[1]["skus"]}
    assert _call(f"{control}/{NEW_SKU}", "DELETE")[0] == 200
    assert NEW_SKU not in {s.sku_id for s in _skus(client, GCE)}
    status, body = _call(f"{control}/{NEW_SKU}", "DELETE")
    assert status == 404 and body["error"]["status"] == "NOT_FOUND"
    bad = _sku("x", "1", 0) | {"skuId": "ABCD-0123-0000"}
    status, body = _call(control, "POST", {"sku": bad})
    assert status == 400 and "skuId" in body["error"]["message"]


def test_an_api_key_is_refused_as_invalid(emulator) -> None:
    status, body = _call(f"http://{emulator.address}/v1/services/{TPU}/skus?key=AIzaSyFake")
    assert status == 400
    error = body["error"]
    assert error["message"] == "API key not valid. Please pass a valid API key."
    assert error["status"] == "INVALID_ARGUMENT"
    info = error["details"][0]
    assert (info["reason"], info["domain"]) == ("API_KEY_INVALID", "googleapis.com")
    assert info["metadata"] == {"service": "cloudbilling.googleapis.com"}
    with pytest.raises(exceptions.BadRequest):  # the client sends its key as a header
        _skus(_client(emulator.address, api_key="AIzaSyFake"), TPU)


def test_a_vm_token_without_a_billing_scope_is_refused(emulator, emulator_server) -> None:
    backend = emulator_server.backend
    narrow = backend.mint_token(
        "sa@p.iam.gserviceaccount.com",
        ["https://www.googleapis.com/auth/devstorage.read_only"],
        "p",
    )
    wide = backend.mint_token(
        "sa@p.iam.gserviceaccount.com",
        ["https://www.googleapis.com/auth/cloud-billing.readonly"],
        "p",
    )
    url = f"http://{emulator.address}/v1/services/{TPU}/skus"
    status, body = _call(url, headers={"Authorization": f"Bearer {narrow}"})
    assert status == 403
    assert body["error"]["details"][0]["reason"] == "ACCESS_TOKEN_SCOPE_INSUFFICIENT"
    assert body["error"]["details"][0]["metadata"]["service"] == "cloudbilling.googleapis.com"
    assert _call(url, headers={"Authorization": f"Bearer {wide}"})[0] == 200


def test_a_quota_project_without_the_api_gets_service_disabled(emulator) -> None:
    emulator.config(services="new-project")  # the Cloud Billing API is off in a new project
    # google-auth's user credentials with a quota project send x-goog-user-project
    credentials = Credentials(token="a-user-token", quota_project_id="fresh-proj")
    client = billing_v1.CloudCatalogClient(
        transport="rest",
        credentials=credentials,
        client_options=ClientOptions(api_endpoint=f"http://{emulator.address}"),
    )
    with pytest.raises(exceptions.Forbidden) as refused:
        _skus(client, TPU)
    assert refused.value.reason == "SERVICE_DISABLED"
    assert "Cloud Billing API has not been used in project" in refused.value.message
    assert _skus(_client(emulator.address), TPU)  # no quota project: nothing to check
    emulator.config(project_services={"fresh-proj": {"cloudbilling.googleapis.com": True}})
    assert _skus(client, TPU)


@pytest.mark.parametrize(
    ("mode", "error", "message"),
    [
        ("unavailable", exceptions.ServiceUnavailable, "The service is currently unavailable."),
        ("forbidden", exceptions.Forbidden, "The caller does not have permission"),
    ],
)
def test_the_catalog_can_be_made_to_fail(emulator, mode, error, message) -> None:
    emulator.config(billing_catalog=mode)
    with pytest.raises(error) as failed:
        _skus(_client(emulator.address), TPU)
    assert failed.value.message.endswith(f": {message}")  # after the method and URL
    emulator.config(billing_catalog="ok")
    assert _skus(_client(emulator.address), TPU)


def test_an_unknown_service_is_not_found(emulator) -> None:
    with pytest.raises(exceptions.NotFound):
        _skus(_client(emulator.address), "0000-0000-0000")


def test_a_changed_sku_outlives_a_restart(tmp_path) -> None:
    from tpuctl.emulator.core.server import EmulatorServer

    def started() -> EmulatorServer:
        return EmulatorServer(port=0, state_dir=tmp_path / "emu", storage=False, ssh=False).start()

    server = started()
    try:
        control = f"http://{server.address}{CONTROL_PREFIX}billing/skus"
        assert (
            _call(control, "POST", {"sku": _sku("TpuV6e running in Las Vegas", "9", 0)})[0] == 200
        )
        gone = next(s.sku_id for s in _skus(_client(server.address), TPU))
        assert _call(f"{control}/{gone}", "DELETE")[0] == 200
    finally:
        server.stop()
    server = started()
    try:
        client = _client(server.address)
        assert [_price(s) for s in _skus(client, GCE) if s.sku_id == NEW_SKU] == [9.0]
        assert gone not in {s.sku_id for s in _skus(client, TPU)}
    finally:
        server.stop()
