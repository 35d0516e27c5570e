"""`tpuctl-owner`: one account, one label. Accounts whose addresses differ only in what a
label cannot hold get distinct labels; gc and keep tell their nodes apart; a node an
older tpuctl labelled stays its account's; with no account told, nothing is created."""

from __future__ import annotations

import json

from tests.cli.conftest import one_line_error
from tests.cli.test_gc import PARENT, Z, expire, foreign_node, names
from tpuctl.services.names import legacy_owner_label, owner_label

LOOK_ALIKES = ("ada.b@example.com", "ada-b@example.com", "ada+b@example.com")


def owner_of(emulator, node: str) -> str:  # noqa: ANN001
    return emulator.tpu_client().get_node(name=f"{PARENT}/nodes/{node}").labels["tpuctl-owner"]


def test_look_alike_accounts_get_distinct_labels_and_only_their_own_nodes(cli, emulator) -> None:  # noqa: ANN001
    for i, account in enumerate(LOOK_ALIKES):
        emulator.config(caller=account)
        assert cli("create", f"n{i}", "-a", "v3-8", "--zone", Z, "--ttl", "1h").code == 0
        expire(emulator, f"n{i}")
    labels = [owner_of(emulator, f"n{i}") for i in range(3)]
    assert labels == [owner_label(a) for a in LOOK_ALIKES]
    assert len(set(labels)) == 3 and all(len(v) <= 63 for v in labels)
    assert all(v.startswith("ada-b-example-com-") and "default" not in v for v in labels)

    emulator.config(caller="ada-b@example.com")
    r = cli("keep", "n2", "--zone", Z)
    assert r.code == 2 and "node n2 is another account's" in one_line_error(r)
    r = cli("gc", "--dry-run", "--json")
    assert [row["name"] for row in json.loads(r.out)] == ["n1"]
    assert cli("gc", "--yes").code == 0
    assert names(emulator) == ["n0", "n2"]
    r = cli("gc", "--yes", "--owner", "ada+b@example.com")  # an email: that account's
    assert r.code == 0 and names(emulator) == ["n0"]
    assert cli("gc", "--yes", "--owner", labels[0]).code == 0  # a label: as it is
    assert names(emulator) == []


def test_an_older_tpuctls_label_is_still_its_accounts(cli, emulator) -> None:  # noqa: ANN001
    old = {"managed-by": "tpuctl", "tpuctl-owner": legacy_owner_label("ada@example.com")}
    foreign_node(emulator, "older", {**old, "tpuctl-expires": "1"})
    emulator.config(caller="bob@example.com")
    assert json.loads(cli("gc", "--dry-run", "--json").out) == []
    emulator.config(caller="ada@example.com")
    assert cli("keep", "older", "--zone", Z).code == 0  # hers, so she may keep it
    assert cli("keep", "older", "--zone", Z, "--off").code == 0
    r = cli("gc", "--dry-run", "--owner", owner_label("ada@example.com"), "--json")
    assert json.loads(r.out) == []  # the new label alone is not the old one
    assert cli("gc", "--yes").code == 0
    assert names(emulator) == []


def test_the_old_label_is_ambiguous_between_look_alikes_as_documented(cli, emulator) -> None:  # noqa: ANN001
    """docs/gc.md: an old label matches every account whose address gives it."""
    old = {"managed-by": "tpuctl", "tpuctl-owner": "ada-b-example-com"}
    foreign_node(emulator, "older", {**old, "tpuctl-expires": "1"})
    for account in LOOK_ALIKES:
        emulator.config(caller=account)
        r = cli("gc", "--dry-run", "--json")
        assert [row["name"] for row in json.loads(r.out)] == ["older"]
    emulator.tpu_client().delete_node(name=f"{PARENT}/nodes/older").result()


def test_no_account_told_creates_nothing_and_says_how_to_name_it(cli, emulator) -> None:  # noqa: ANN001
    import os
    from pathlib import Path

    emulator.config(caller="")  # credentials whose token info names no email
    r = cli("create", "nobody", "-a", "v3-8", "--zone", Z)
    assert r.code != 0 and "needs your account's email" in one_line_error(r)
    assert "gcloud config set account" in r.err
    r = cli("gc", "--dry-run")
    assert r.code != 0 and "needs your account's email" in one_line_error(r)
    assert cli("gc", "--dry-run", "--all-owners").code == 0  # nobody's to tell apart
    assert names(emulator) == []

    config = Path(os.environ["CLOUDSDK_CONFIG"]) / "configurations"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config_default").write_text("[core]\naccount = cy@example.com\n")
    assert cli("create", "cys", "-a", "v3-8", "--zone", Z).code == 0
    assert owner_of(emulator, "cys") == owner_label("cy@example.com")
    assert cli("delete", "cys", "--zone", Z, "--yes").code == 0


def test_an_owner_that_is_neither_an_email_nor_a_label_is_refused(cli, emulator) -> None:  # noqa: ANN001
    r = cli("gc", "--dry-run", "--owner", "Ada Lovelace")
    assert r.code == 2
    assert one_line_error(r).startswith("error: invalid owner 'Ada Lovelace': ")
    assert emulator.requests() == {}  # refused before any call
