"""Transient faults: every lifecycle command still succeeds, and no node is duplicated."""

from __future__ import annotations

import json

Z = "us-central1-a"


def test_lifecycle_survives_30_percent_faults(cli, emulator) -> None:
    # Half the faults strike after the request was carried out, so a create can succeed
    # on the server while the client sees a 5xx and retries into ALREADY_EXISTS.
    emulator.faults(rate=0.3, codes=[429, 500, 503], after_rate=0.5, seed=7)
    for name in ("f1", "f2", "f3"):
        r = cli("create", name, "-a", "v3-8", "--zone", Z)
        assert r.code == 0, r.err
    r = cli("list", "--zone", Z, "--json")
    assert r.code == 0, r.err
    assert sorted(n["name"] for n in json.loads(r.out)) == ["f1", "f2", "f3"]
    assert cli("stop", "f1", "--zone", Z).code == 0
    assert cli("start", "f1", "--zone", Z).code == 0
    r = cli("delete", "f1", "f2", "f3", "--zone", Z, "--yes")
    assert r.code == 0, r.err
    counts = emulator.requests()
    emulator.faults(rate=0)
    assert emulator.nodes() == []
    # Faults really were injected and retried: more create calls than nodes.
    assert sum(v for k, v in counts.items() if "create" in k.lower()) >= 3


def test_create_retry_adopts_the_node_its_lost_attempt_made(cli, emulator) -> None:
    # Every create is carried out, then answered 503: the retry meets ALREADY_EXISTS.
    emulator.faults(rate=1.0, codes=[503], after_rate=1.0, seed=1, paths="nodes\\?nodeId=")
    r = cli("create", "adopt", "-a", "v3-8", "--zone", Z)
    emulator.faults(rate=0)
    assert r.code == 0, r.err
    assert len(emulator.nodes()) == 1
    assert cli("delete", "adopt", "--zone", Z, "--yes").code == 0


def test_quota_like_429_is_not_retried(cli, emulator) -> None:
    emulator.faults(rate=1.0, codes=[429], after_rate=0.0, seed=1, quota=True)
    r = cli("list", "--zone", Z)
    emulator.faults(rate=0)
    assert r.code == 5
    assert "quota exceeded" in r.err
    # the metrics (and their descriptor), Compute Engine's TPU VMs and the price catalog,
    # read beside it, are other APIs; the queued requests are asked for at the same time
    # as the nodes: each call once, none retried
    tpu_calls = {
        k: v
        for k, v in emulator.requests().items()
        if "timeSeries" not in k
        and "metricDescriptors" not in k
        and not k.split()[-1].startswith(("compute.", "cloudbilling."))
    }
    assert tpu_calls == {"GET list": 1, "GET queuedResources.list": 1}
