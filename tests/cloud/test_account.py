"""Who the client factory says the calls are made as: told by the credentials themselves
(google-auth's own classes), against the emulator's metadata and token-info endpoints;
never `default`, never the login name; gcloud's account only when they do not tell."""

from __future__ import annotations

import base64
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.auth import compute_engine, impersonated_credentials
from google.auth.compute_engine import _metadata
from google.oauth2 import credentials as user_credentials
from google.oauth2 import service_account

from tpuctl.cloud.clients import ClientFactory
from tpuctl.emulator.tpu.models import project_number
from tpuctl.errors import ConfigError

Z = "us-central1-a"
SA = "trainer@p.iam.gserviceaccount.com"


def factory(emulator, tmp_path: Path, creds: object, account: str | None = None) -> ClientFactory:  # noqa: ANN001
    """A factory whose endpoints are the emulator's, with `creds` as google.auth.default()
    would have found them, and gcloud's `core/account` set to `account`."""
    gcloud = tmp_path / "gcloud"
    (gcloud / "configurations").mkdir(parents=True, exist_ok=True)
    if account:
        (gcloud / "configurations" / "config_default").write_text(f"[core]\naccount = {account}\n")
    made = ClientFactory({"CLOUDSDK_CONFIG": str(gcloud), "TPUCTL_EMULATOR_HOST": emulator.address})
    made.__dict__["credentials"] = creds
    return made


def id_token(claims: dict[str, str]) -> str:
    part = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"e30.{part}.c2ln"  # header {}, the claims, a signature not checked


@pytest.fixture
def vm(emulator) -> Iterator[str]:  # noqa: ANN001
    """A TPU VM made with no service account named: the project's default compute account
    is its own. Yields the root of its worker 0's metadata server (no scheme)."""
    from google.cloud import tpu_v2

    parent = f"projects/tpuctl-demo/locations/{Z}"
    node = tpu_v2.Node(accelerator_type="v3-8", runtime_version="tpu-ubuntu2204-base")
    emulator.tpu_client().create_node(parent=parent, node_id="vm", node=node).result(10)
    yield f"{emulator.address}/_emulator/v1/metadata/tpuctl-demo/{Z}/vm/0"
    emulator.tpu_client().delete_node(name=f"{parent}/nodes/vm").result(10)


DEFAULT_SA = f"{project_number('tpuctl-demo')}-compute@developer.gserviceaccount.com"


def test_a_service_accounts_key_and_an_impersonated_account_name_it(emulator, tmp_path) -> None:  # noqa: ANN001
    key = service_account.Credentials(None, SA, "http://127.0.0.1:9/token")
    assert factory(emulator, tmp_path, key, "alice@example.com").account() == SA
    source = user_credentials.Credentials(token="ya29.source")
    runner = impersonated_credentials.Credentials(source, "runner@p.iam.gserviceaccount.com", [])
    assert factory(emulator, tmp_path, runner).account() == "runner@p.iam.gserviceaccount.com"


def test_a_vms_credentials_name_its_service_account_not_default(
    emulator, tmp_path, vm: str, monkeypatch: pytest.MonkeyPatch
) -> None:  # noqa: ANN001
    # google-auth reads GCE_METADATA_HOST once, on import: this is that variable's value
    monkeypatch.setattr(_metadata, "_GCE_METADATA_HOST", vm)
    credentials = compute_engine.Credentials()
    assert credentials.service_account_email == "default"  # what every VM said before
    made = factory(emulator, tmp_path, credentials, "alice@example.com")
    assert made.account() == DEFAULT_SA
    assert made.login_account() == DEFAULT_SA


def test_a_users_credentials_name_the_account_of_their_id_token(emulator, tmp_path) -> None:  # noqa: ANN001
    token = id_token({"email": "ada.b@example.com", "email_verified": "true"})
    user = user_credentials.Credentials(token="ya29.user", id_token=token)
    assert factory(emulator, tmp_path, user, "alice@example.com").account() == "ada.b@example.com"


def test_a_token_alone_is_asked_of_the_token_info_endpoint(emulator, tmp_path, vm: str) -> None:  # noqa: ANN001
    """A VM's token names the VM's account there; one the endpoint never issued is, in
    the emulator, its caller's (the laptop's anonymous clients are asked the same way)."""
    url = f"http://{vm}/computeMetadata/v1/instance/service-accounts/default/token"
    request = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
    with urllib.request.urlopen(request) as answer:
        token = user_credentials.Credentials(token=json.load(answer)["access_token"])
    assert factory(emulator, tmp_path, token).account() == DEFAULT_SA
    emulator.config(caller="ada@example.com")
    stranger = user_credentials.Credentials(token="ya29.never-issued-here")
    assert factory(emulator, tmp_path, stranger).account() == "ada@example.com"
    assert emulator.requests()["POST tokeninfo"] == 2


def test_credentials_that_do_not_tell_go_by_gclouds_account(emulator, tmp_path) -> None:  # noqa: ANN001
    emulator.config(caller="")  # a token without the email scope: no email in its info
    user = user_credentials.Credentials(token="ya29.no-email-scope")
    assert factory(emulator, tmp_path, user, "alice@example.com").account() == "alice@example.com"


def test_no_account_anywhere_is_one_clear_error(emulator, tmp_path) -> None:  # noqa: ANN001
    emulator.config(caller="")
    made = factory(emulator, tmp_path, user_credentials.Credentials(token="ya29.x"))
    assert made.account() is None
    with pytest.raises(ConfigError, match="OS Login needs your account's email") as e:
        made.login_account()
    assert "gcloud config set account" in str(e.value.hint)
