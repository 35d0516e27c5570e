"""tpuctl run --slices N on Compute Engine: every worker of every slice runs the job, with
the MEGASCALE variables and the per-slice TPU_WORKER_ID / TPU_WORKER_HOSTNAMES; JAX's own
cluster detection, as the script below replays it, finds every process, the process count
and one coordinator; nothing is left after, also when a slice cannot be had."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import spawned
from tests.cli.test_run import bucket_objects, wait_for
from tests.cli.test_run_compute import READ_METADATA, _views, script_in

V6E = ("-a", "v6e-16", "--api", "compute", "--zone", "us-east1-d", "--slices", "2")
TPU7X = ("-a", "tpu7x-8", "--zone", "us-central1-c", "--slices", "2")

# What jax.distributed.initialize() concludes on a TPU VM, as jax/_src/clusters/
# cloud_tpu_cluster.py (BaseTpuCluster, GceTpuCluster, GkeTpuCluster) reads it: the
# MEGASCALE_* values from the environment first, then the `tpu-env` metadata; within the
# slice `agent-worker-number` and `worker-network-endpoints` (GceTpuCluster) or else
# TPU_WORKER_ID and TPU_WORKER_HOSTNAMES (GkeTpuCluster); process id = id in the slice +
# slice id x processes per slice; count = processes per slice x slices; coordinator = the
# MEGASCALE address's host on JAX's port 8476.
JAX_VIEW = (
    READ_METADATA
    + """\
def tpu_env(key):
    if key in os.environ:
        return os.environ[key]
    for line in (attr("tpu-env") or "").split("\\n"):
        k, _, v = line.partition(":")
        if k.strip() == key:
            return v.strip().strip("'")
    return None
if attr("agent-worker-number") is not None:
    cluster, in_slice = "gcetpu", int(attr("agent-worker-number"))
    hosts = [w.split(":")[2] for w in attr("worker-network-endpoints").split(",")]
elif os.environ.get("TPU_WORKER_HOSTNAMES") is not None:
    cluster, in_slice = "gketpu", int(os.environ["TPU_WORKER_ID"])
    hosts = os.environ["TPU_WORKER_HOSTNAMES"].split(",")
else:
    raise SystemExit("no TPU cluster found")
megascale = tpu_env("MEGASCALE_COORDINATOR_ADDRESS")
slices = int(tpu_env("MEGASCALE_NUM_SLICES")) if megascale else 1
slice_id = int(tpu_env("MEGASCALE_SLICE_ID")) if megascale else 0
coordinator = (megascale or hosts[0]).split(":")[0] + ":8476"
print("jax " + json.dumps({
    "cluster": cluster, "process_id": in_slice + slice_id * len(hosts),
    "num_processes": len(hosts) * slices, "coordinator": coordinator,
    "slice": slice_id, "in_slice": in_slice, "hosts": hosts,
    "env": {k: v for k, v in os.environ.items() if k.startswith(("MEGASCALE_", "TPU_WORKER_"))},
    "tpuctl": [os.environ["TPUCTL_SLICE_ID"], os.environ["TPUCTL_WORKER_ID"]]}))
"""
)


@pytest.fixture
def jax_view(tmp_path: Path) -> Path:
    return script_in(tmp_path, JAX_VIEW)


@pytest.mark.parametrize(("shape", "per_slice"), [(V6E, 4), (TPU7X, 1)])
def test_every_worker_of_two_slices_finds_the_others_and_nothing_is_left(
    cli, emulator, jax_view, shape, per_slice
) -> None:
    r = cli("run", str(jax_view), *shape, "--no-outputs", "--json")
    assert r.code == 0, r.err
    result = json.loads(r.out)
    name = result["node"]
    assert result["slices"] == [f"{name}-0", f"{name}-1"]
    views = _views(r.err)  # with --json the logs go to stderr
    assert f"[s1/w{per_slice - 1}] jax " in r.err  # each line marked with slice and worker
    total = 2 * per_slice
    assert sorted(views) == list(range(total))  # every process, each its own id
    assert {v["num_processes"] for v in views.values()} == {total}
    assert {v["cluster"] for v in views.values()} == {"gketpu"}  # no agent-worker-number
    (coordinator,) = {v["coordinator"] for v in views.values()}  # one, agreed by all
    (address,) = {v["env"]["MEGASCALE_COORDINATOR_ADDRESS"] for v in views.values()}
    assert address == views[0]["hosts"][0] + ":8080"  # slice 0's worker 0, tpuctl's port
    assert coordinator == views[0]["hosts"][0] + ":8476"
    for pid, v in views.items():
        s, k = divmod(pid, per_slice)
        assert (v["slice"], v["in_slice"]) == (s, k)
        assert v["tpuctl"] == [str(s), str(k)]
        env = v["env"]
        assert env["MEGASCALE_NUM_SLICES"] == "2" and env["MEGASCALE_SLICE_ID"] == str(s)
        assert env["MEGASCALE_PORT"] == "8080"
        assert env["TPU_WORKER_ID"] == str(k)  # the worker's number in its own slice
        assert len(env["TPU_WORKER_HOSTNAMES"].split(",")) == per_slice  # its slice's hosts
    hosts = {v["slice"]: tuple(v["hosts"]) for v in views.values()}
    assert hosts[0] != hosts[1]  # each slice lists its own hosts
    assert emulator.instances() == []  # every slice's VMs, groups, templates, policies


def test_room_for_one_slice_only_runs_nothing_leaves_nothing_and_says_why(
    cli, emulator, jax_view
) -> None:
    emulator.capacity({"us-east1-d": {"v6e": 16}})  # one v6e-16, not two
    r = cli("run", str(jax_view), *V6E, "--no-outputs")
    assert r.code == 5, r.err
    assert "no capacity for slice 1 of 2" in r.err and "does not have enough resources" in r.err
    assert "] jax " not in r.out
    assert emulator.instances() == []


def test_worker_0_of_slice_0_deletes_every_slice_when_the_job_ends(cli, emulator, jax_view) -> None:
    r = cli("run", str(jax_view), *V6E, "--no-outputs")
    assert r.code == 0, r.err
    logs = b"".join(v for k, v in bucket_objects(emulator).items() if k.endswith("worker-0.log"))
    assert b"teardown: deleting multislice tpuctl-" in logs and b"(every slice)" in logs
    assert b"teardown failed" not in logs
    assert emulator.instances() == []


def test_with_the_client_killed_the_agent_of_slice_0_deletes_every_slices_vms(
    cli, emulator, jax_view
) -> None:
    """SIGKILL of the client while the job runs: worker 0 of slice 0 deletes both slices'
    groups (their VMs: what bills). Their templates and policies, which bill nothing and
    cannot go while their group is there, are left for `tpuctl gc` or `delete`."""
    (jax_view.parent / "nap.py").write_text("import time\ntime.sleep(5)\n")
    with spawned("run", str(jax_view.parent / "nap.py"), *V6E, "--no-outputs",
                 timeout=150) as p:  # fmt: skip
        # eight VMs start slowly on a loaded machine: a hang guard, not a measure. Every
        # agent has started (the client starts them at once, in no order) and the last
        # one runs: else slice 0's agent may never start, and the boot guard, not it,
        # deletes the VMs once the dead client's lease runs out
        def started() -> bool:
            st = bucket_objects(emulator, lambda k: "/status/worker-" in k)
            last = next((v for k, v in st.items() if k.endswith("/worker-7.json")), b"")
            return len(st) == 8 and b'"RUNNING"' in last

        wait_for(started, timeout=120)
        p.proc.kill()  # no cleanup of any kind on this side
    kinds = lambda: sorted(r["status"] for r in emulator.instances())  # noqa: E731
    # within what the product promises (no VM billing 150 s after the job's end): an agent
    # the client had not started yet when it died is waited for --heartbeat-deadline
    wait_for(lambda: kinds() == ["INSTANCE_TEMPLATE"] * 2 + ["WORKLOAD_POLICY"] * 2, timeout=150)
    logs = b"".join(v for k, v in bucket_objects(emulator).items() if k.endswith("worker-0.log"))
    assert b"(every slice)" in logs and b"teardown failed" not in logs
    left = {r["name"].rsplit("/", 1)[-1][: -len("-d-it")] for r in emulator.instances()}
    assert sorted(name[-2:] for name in left) == ["-0", "-1"]  # each slice's two free parts
    r = cli("delete", *sorted(left), "--zone", "us-east1-d", "--yes")
    assert r.code == 0, r.err
    assert emulator.instances() == []


def test_with_room_for_both_slices_in_the_second_zone_only_the_job_runs_there(
    cli, emulator, jax_view
) -> None:
    emulator.capacity({"us-east5-a": {"v6e": 16}})  # one v6e-16 there, not two
    r = cli("run", str(jax_view), "-a", "v6e-16", "--api", "compute", "--slices", "2",
            "--zone", "us-east5-a,us-east5-b", "--no-outputs")  # fmt: skip
    assert r.code == 0, r.err
    assert "zone us-east5-a skipped: tpuctl-" in r.err, r.err
    assert "ended FAILED: no capacity for slice 1 of 2" in r.err
    assert "multislice tpuctl-" in r.err and "(2 slices) is in us-east5-b" in r.err
    assert sorted(_views(r.out)) == list(range(8))
    assert emulator.instances() == []


def test_api_auto_takes_the_whole_multislice_to_compute_engine_when_the_tpu_api_has_no_quota(
    cli, emulator, jax_view
) -> None:
    """--api auto for N slices: the Cloud TPU API's queued multislice cannot be had (no v6e
    quota there), so the same N slices are made on Compute Engine in the same zone."""
    emulator.quotas({"TPUV6EPerProjectPerRegionForTPUAPI": {"us-east5": 0}})
    r = cli("run", str(jax_view), "-a", "v6e-16", "--api", "auto", "--slices", "2",
            "--zone", "us-east5-a", "--no-outputs")  # fmt: skip
    assert r.code == 0, r.err
    assert "zone us-east5-a (Cloud TPU API) skipped: quota exceeded" in r.err, r.err
    assert "(2 slices) is in us-east5-a on Compute Engine" in r.err, r.err
    assert sorted(_views(r.out)) == list(range(8))
    assert emulator.instances() == [] and emulator.nodes() == []
