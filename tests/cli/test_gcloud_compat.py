"""The same intent sent by gcloud and by tpuctl: the bodies the emulator received agree
on every field that matters (docs/compatibility.md records each comparison).

gcloud spells proto3 defaults out (`preemptible: false`, `metadata: {}`) and sends the
network `default` the API would pick anyway; tpuctl adds its own labels. Both are taken
out before comparing; ids and timestamps are not compared.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from tests.cli.conftest import one_line_error
from tests.emulator.test_gcloud import gcloud, gcloud_config, point_at

Z = "us-central1-a"
PROJECT = "tpuctl-demo"
NODE_FIELDS = (
    "acceleratorType",
    "runtimeVersion",
    "description",
    "labels",
    "metadata",
    "networkConfig",
    "schedulingConfig",
    "serviceAccount",
    "tags",
)


@pytest.fixture
def gcloud_on_emulator(emulator):
    """gcloud's scratch configuration pointed at the emulator, without credentials."""
    point_at(emulator, PROJECT)
    yield
    client = emulator.tpu_client()
    emulator.durations(delete=0)
    for qr in emulator.queued():
        client.delete_queued_resource(request={"name": qr["name"], "force": True}).result()
    for node in emulator.nodes():
        client.delete_node(name=node["name"]).result()


def _plain(value: Any) -> Any:
    """Without proto3 defaults (false, 0, "", {}, []) and the default network."""
    if isinstance(value, dict):
        out = {k: _plain(v) for k, v in value.items()}
        if out.get("network") == "default":
            del out["network"]
        return {k: v for k, v in out.items() if v not in (False, 0, "", {}, [], None)}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _node(body: dict[str, Any]) -> dict[str, Any]:
    """The fields of a Node body that matter, tpuctl's own labels left out."""
    node = {k: body[k] for k in NODE_FIELDS if k in body}
    labels = {
        k: v
        for k, v in (node.get("labels") or {}).items()
        if k != "managed-by" and not k.startswith("tpuctl-")
    }
    return _plain({**node, "labels": labels})


def _last(emulator, method: str, name: str) -> dict[str, Any]:
    """The last body of `method` whose path or nodeId / queuedResourceId names `name`."""
    for entry in reversed(emulator.bodies(method)):
        ids = (entry["query"].get("nodeId"), entry["query"].get("queuedResourceId"))
        if name in ids or entry["path"].endswith(f"/{name}"):
            return entry
    raise AssertionError(f"no {method} body for {name}: {emulator.bodies()}")


def _ok(result) -> None:
    code = getattr(result, "returncode", getattr(result, "code", None))
    assert code == 0, result.stderr if hasattr(result, "stderr") else result.err


NETWORK = ["--network", "default", "--subnetwork", "default"]
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
READ_WRITE = "https://www.googleapis.com/auth/devstorage.read_write"
SA = f"trainer@{PROJECT}.iam.gserviceaccount.com"


@pytest.mark.parametrize(
    ("gcloud_flags", "tpuctl_flags"),
    [
        # tpuctl always states the scope gcloud sends only when asked (--scopes)
        (["--spot", "--internal-ips", "--tags", "ssh,web", "--scopes", CLOUD_PLATFORM],
         ["--spot", "--internal-ip-only", "--tags", "ssh,web"]),
        (["--preemptible", "--scopes", CLOUD_PLATFORM], ["--preemptible"]),
        (["--service-account", SA, "--scopes", f"{CLOUD_PLATFORM},{READ_WRITE}"],
         ["--service-account", SA, "--scopes", f"cloud-platform,{READ_WRITE}"]),
    ],
    ids=["spot-internal-ips-tags", "preemptible-external-ips", "service-account-scopes"],
)  # fmt: skip
def test_create_node(cli, emulator, gcloud_on_emulator, gcloud_flags, tpuctl_flags) -> None:
    common = ["--labels", "team=ml,run=a1", "--metadata", "k=v", *NETWORK]
    _ok(gcloud(
        "compute", "tpus", "tpu-vm", "create", "g1", "--zone", Z, "--accelerator-type", "v3-8",
        "--version", "tpu-vm-base", *common, *gcloud_flags,
    ))  # fmt: skip
    _ok(cli("create", "t1", "-a", "v3-8", "--zone", Z, "--version", "tpu-vm-base",
            *common, *tpuctl_flags))  # fmt: skip
    theirs = _node(_last(emulator, "create", "g1")["body"])
    ours = _node(_last(emulator, "create", "t1")["body"])
    assert ours == theirs
    assert theirs["labels"] == {"team": "ml", "run": "a1"}
    assert theirs["networkConfig"]["subnetwork"] == "default"
    assert CLOUD_PLATFORM in ours["serviceAccount"]["scope"]
    gcloud_nodes = {n["name"].rsplit("/", 1)[1]: n for n in emulator.nodes()}
    keys = ("networkConfig", "schedulingConfig", "tags", "serviceAccount")
    assert {k: gcloud_nodes["g1"].get(k) for k in keys} == {
        k: gcloud_nodes["t1"].get(k) for k in keys
    }


def test_update_labels(cli, emulator, gcloud_on_emulator) -> None:
    for name in ("g1", "t1"):
        _ok(cli("create", name, "-a", "v3-8", "--zone", Z, "--version", "tpu-vm-base"))
    _ok(gcloud("compute", "tpus", "tpu-vm", "update", "g1", "--zone", Z,
               "--update-labels", "tpuctl-keep=true"))  # fmt: skip
    _ok(cli("keep", "t1", "--zone", Z))
    theirs, ours = _last(emulator, "patch", "g1"), _last(emulator, "patch", "t1")
    assert theirs["query"]["updateMask"] == ours["query"]["updateMask"] == "labels"
    assert theirs["body"]["labels"]["tpuctl-keep"] == ours["body"]["labels"]["tpuctl-keep"]
    # gcloud sends the node it read back (only the masked field counts), tpuctl the labels
    assert set(ours["body"]) == {"labels"} and {"labels", "name"} <= set(theirs["body"])
    labels = {n["name"].rsplit("/", 1)[1]: dict(n["labels"]) for n in emulator.nodes()}
    # the two creates may straddle a second: the creation stamps differ, nothing else may
    created = {name: int(labels[name].pop("tpuctl-created")) for name in ("g1", "t1")}
    assert abs(created["g1"] - created["t1"]) <= 60
    assert labels["g1"] == labels["t1"]  # the labels tpuctl set on both at create, plus keep


def _queued(body: dict[str, Any]) -> dict[str, Any]:
    out = {k: body[k] for k in ("spot", "guaranteed", "reservationName") if k in body}
    policy = dict(body.get("queueingPolicy") or {})
    if "validUntilTime" in policy:  # RFC 3339, with or without fractions
        stamp = policy["validUntilTime"].replace("Z", "+00:00")
        policy["validUntilTime"] = datetime.fromisoformat(stamp).timestamp()
    out["queueingPolicy"] = policy
    (spec,) = body["tpu"]["nodeSpec"]
    out["parent"] = spec["parent"]
    out["node"] = _node(spec["node"])
    return out


@pytest.mark.parametrize(
    ("gcloud_flags", "tpuctl_flags"),
    [
        (["--spot", "--valid-until-duration", "6h"], ["--spot", "--valid-until", "6h"]),
        (["--reserved", "--valid-until-time", "2030-01-01T00:00:00Z"],
         ["--reserved", "--valid-until-time", "2030-01-01T00:00:00Z"]),
    ],
    ids=["spot-valid-until-duration", "reserved-valid-until-time"],
)  # fmt: skip
def test_queued_create(cli, emulator, gcloud_on_emulator, gcloud_flags, tpuctl_flags) -> None:
    _ok(gcloud(
        "compute", "tpus", "queued-resources", "create", "gq", "--node-id", "gq", "--zone", Z,
        "--accelerator-type", "v3-8", "--runtime-version", "tpu-vm-base", *gcloud_flags,
        "--scopes", CLOUD_PLATFORM,  # what tpuctl states unasked
    ))  # fmt: skip
    _ok(cli("create", "tq", "-a", "v3-8", "--zone", Z, "--version", "tpu-vm-base", "--queued",
            *tpuctl_flags))  # fmt: skip
    theirs = _queued(_last(emulator, "queuedResources.create", "gq")["body"])
    ours = _queued(_last(emulator, "queuedResources.create", "tq")["body"])
    assert ours == theirs
    if "--reserved" in gcloud_flags:
        assert ours["reservationName"] == f"projects/{PROJECT}/locations/{Z}/reservations/-"
        assert "schedulingConfig" not in ours["node"]  # not the node's reserved flag
    else:
        assert ours["spot"] == {} and ours["queueingPolicy"] == {"validUntilDuration": "21600s"}


def test_flex_start_queued_create_is_gcloud_alphas(cli, emulator, gcloud_on_emulator) -> None:
    """gcloud alpha's flex-start request (v2alpha1 over REST) and tpuctl's are one body."""
    _ok(gcloud(
        "alpha", "compute", "tpus", "queued-resources", "create", "gq", "--node-id", "gq",
        "--zone", Z, "--accelerator-type", "v3-8", "--runtime-version", "tpu-vm-base",
        "--provisioning-model=flex-start", "--max-run-duration=4h", "--scopes", CLOUD_PLATFORM,
    ))  # fmt: skip
    _ok(cli("create", "tq", "-a", "v3-8", "--zone", Z, "--version", "tpu-vm-base",
            "--flex-start", "--max-run-duration", "4h"))  # fmt: skip
    theirs = _last(emulator, "queuedResources.create", "gq")
    ours = _last(emulator, "queuedResources.create", "tq")
    alpha_path = f"/v2alpha1/projects/{PROJECT}/locations/{Z}/queuedResources"
    assert ours["path"] == theirs["path"] == alpha_path
    flex = ("provisioningModel", "runDuration")
    assert {k: ours["body"].get(k) for k in flex} == {k: theirs["body"].get(k) for k in flex}
    assert ours["body"]["runDuration"] == {"maxRunDuration": "14400s"}
    assert _queued(ours["body"]) == _queued(theirs["body"])


def test_guaranteed_is_gclouds_alone(emulator, gcloud_on_emulator) -> None:
    """gcloud GA offers --guaranteed (an empty `guaranteed` message); tpuctl does not: the
    emulator takes gcloud's request as the API does."""
    _ok(gcloud(
        "compute", "tpus", "queued-resources", "create", "gq", "--node-id", "gq", "--zone", Z,
        "--accelerator-type", "v3-8", "--runtime-version", "tpu-vm-base", "--guaranteed",
    ))  # fmt: skip
    assert _last(emulator, "queuedResources.create", "gq")["body"]["guaranteed"] == {}
    assert [q["name"].rsplit("/", 1)[1] for q in emulator.queued()] == ["gq"]


def test_a_bad_tag_is_a_usage_error(cli, emulator) -> None:
    r = cli("create", "t1", "-a", "v3-8", "--zone", Z, "--tags", "ssh,Web_1")
    assert r.code == 2
    assert one_line_error(r) == (
        "error: invalid tag 'Web_1': a lowercase letter, then lowercase letters, digits or '-' "
        "(not last), at most 63 characters"
    )
    assert "POST create" not in emulator.requests()


def test_lifecycle_rule(cli, emulator, gcloud_on_emulator, tmp_path) -> None:
    """The bucket's rule for old job folders: gcloud reads the one tpuctl adds, and tpuctl
    takes one gcloud set as the rule it would have offered."""
    storage = emulator.status()["storage_endpoint"]
    gcloud_config({"api_endpoint_overrides/storage": f"{storage}/storage/v1/"})
    _ok(cli("init", "--zone", Z, "--yes"))
    url = f"gs://{PROJECT}-tpuctl"
    described = gcloud("storage", "buckets", "describe", url, "--format=json")
    _ok(described)
    described = json.loads(described.stdout)
    ours = {
        "action": {"type": "Delete"},
        "condition": {"age": 30, "matchesPrefix": ["tpuctl/jobs/"]},
    }
    assert described["lifecycle_config"] == {"rule": [ours]}

    theirs = {"rule": [{**ours, "condition": {"age": 14, "matchesPrefix": ["tpuctl/jobs/"]}}]}
    path = tmp_path / "lifecycle.json"
    path.write_text(json.dumps(theirs))
    _ok(gcloud("storage", "buckets", "update", url, f"--lifecycle-file={path}"))
    r = cli("init", "--zone", Z, "--yes", "--json")
    step = {s["step"]: s for s in json.loads(r.out)["steps"]}["retention"]
    assert (step["status"], step["found"]) == (
        "ok",
        f"{url} deletes job folders (tpuctl/jobs/) after 14 days",
    )


def test_enabling_apis_is_one_batch_as_gcloud_sends_it(cli, emulator, gcloud_on_emulator) -> None:
    """`tpuctl init --yes` on a project with the APIs off, and `gcloud services enable`
    of the same APIs: the same `services.batchEnable` body."""
    emulator.config(services="none")
    r = cli("init", "--zone", Z, "--yes", "--json")
    apis_step = {s["step"]: s for s in json.loads(r.out)["steps"]}["apis"]
    assert apis_step["status"] == "done"
    (ours,) = emulator.bodies("services.batchEnable")
    ids = ours["body"]["serviceIds"]
    emulator.reset()
    emulator.config(services="none")
    endpoint = f"http://{emulator.address}/"
    gcloud_config({"api_endpoint_overrides/serviceusage": endpoint})
    _ok(gcloud("services", "enable", *ids))
    (theirs,) = emulator.bodies("services.batchEnable")
    assert (theirs["path"], theirs["body"]) == (ours["path"], ours["body"])
    assert emulator.config()["project_services"] == {PROJECT: dict.fromkeys(ids, True)}
