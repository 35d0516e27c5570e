"""Which account the client factory asks OS Login about, in the cloud (no call made)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpuctl.cloud.clients import ClientFactory
from tpuctl.errors import ConfigError


class UserCredentials:
    """Like google.oauth2.credentials.Credentials: no email in them."""


class ServiceAccountCredentials:
    service_account_email = "trainer@p.iam.gserviceaccount.com"


def factory(tmp_path: Path, creds: object, account: str | None) -> ClientFactory:
    gcloud = tmp_path / "gcloud"
    (gcloud / "configurations").mkdir(parents=True)
    if account:
        (gcloud / "configurations" / "config_default").write_text(f"[core]\naccount = {account}\n")
    made = ClientFactory({"CLOUDSDK_CONFIG": str(gcloud)})
    made.__dict__["credentials"] = creds  # what google.auth.default() would have found
    return made


def test_a_service_accounts_credentials_name_it(tmp_path: Path) -> None:
    made = factory(tmp_path, ServiceAccountCredentials(), "alice@example.com")
    assert made.login_account() == "trainer@p.iam.gserviceaccount.com"


def test_user_credentials_go_by_gclouds_account(tmp_path: Path) -> None:
    assert factory(tmp_path, UserCredentials(), "alice@example.com").login_account() == (
        "alice@example.com"
    )


def test_no_account_anywhere_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="OS Login needs your account's email") as e:
        factory(tmp_path, UserCredentials(), None).login_account()
    assert "gcloud config set account" in str(e.value.hint)
