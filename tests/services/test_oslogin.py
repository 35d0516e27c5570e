"""How tpuctl reads the OS Login switches and a login profile (no cloud needed)."""

from __future__ import annotations

import pytest

from tpuctl.cloud.oslogin import LoginProfile, member
from tpuctl.models import Node
from tpuctl.services import oslogin


@pytest.mark.parametrize(
    ("value", "on"),
    [
        ("TRUE", True), ("true", True), ("True", True), ("tRuE", True), ("1", True), ("t", True),
        ("FALSE", False), ("false", False), ("0", False), ("f", False),
        ("", None), ("yes", None), (None, None),
    ],
)  # fmt: skip
def test_switch_values_read_as_gcloud_or_the_guest_agent_reads_them(
    value: str | None, on: bool | None
) -> None:
    assert oslogin.flag(value) is on


def node(**metadata: str) -> Node:
    return Node(name="n", project="p", zone="us-central1-a", accelerator_type="v3-8",
                state="READY", metadata=metadata)  # fmt: skip


def test_the_node_decides_before_the_project_which_is_read_once_and_only_if_needed() -> None:
    reads: list[str] = []

    def project(name: str) -> dict[str, str]:
        reads.append(name)
        return {oslogin.ENABLE: "TRUE"}

    assert not oslogin.Settings(node(**{oslogin.ENABLE: "false"}), project).on(oslogin.ENABLE)
    assert reads == []
    settings = oslogin.Settings(node(), project)
    assert settings.on(oslogin.ENABLE) and not settings.on(oslogin.TWO_FACTOR)
    assert reads == ["p"]


def test_the_login_name_is_the_primary_accounts_else_the_first() -> None:
    assert LoginProfile("a@x", [("one", False), ("two", True)]).username == "two"
    assert LoginProfile("a@x", [("one", False), ("two", False)]).username == "one"
    assert LoginProfile("a@x").username is None


def test_iam_members_name_service_accounts_as_such() -> None:
    assert member("a@example.com") == "user:a@example.com"
    assert member("sa@p.iam.gserviceaccount.com") == "serviceAccount:sa@p.iam.gserviceaccount.com"
