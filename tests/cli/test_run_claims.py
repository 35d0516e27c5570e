"""One job a node: `run --node` claims the node; a node another job holds is refused
naming that job; the claim goes at the end on every path; a stale claim is taken over;
no teardown deletes a node another job holds."""

from __future__ import annotations

import json
import signal

from tests.cli.conftest import one_line_error
from tests.cli.test_run import _running, _wait_running, bucket_objects, project, wait_for
from tpuctl.agent import claims

__all__ = ["project"]  # the fixture, shared

CLAIM = claims.claim_path("tpuctl-demo", "us-central1-a", "shared")


def _claim(emulator) -> dict | None:  # noqa: ANN001
    raw = bucket_objects(emulator).get(CLAIM)
    return json.loads(raw) if raw else None


def _claim_as_a_client(emulator, claim: str, value: dict) -> None:  # type: ignore[type-arg]  # noqa: ANN001
    """Take a claim as `run` does: its job's lease written first (lease.held), then the
    claim."""
    bucket = emulator.storage_client().bucket("tpuctl-demo-tpuctl")
    lease = claims.lease(str(value["job"]), 90.0, 0)
    bucket.blob(claims.lease_path(str(value["job"]))).upload_from_string(json.dumps(lease))
    bucket.blob(claim).upload_from_string(json.dumps(value))


def _names(emulator) -> list[str]:  # noqa: ANN001
    return [n["name"].rsplit("/", 1)[1] for n in emulator.nodes()]


def test_a_busy_node_is_refused_naming_its_job(cli, emulator, project) -> None:
    assert cli("create", "shared", "-a", "v3-8").code == 0
    r = cli("run", str(project / "job.py"), "--node", "shared", "--detach", "--json",
            "--env", "NAP=60")  # fmt: skip
    assert r.code == 0, r.err
    first = json.loads(r.out)["job"]
    assert (_claim(emulator) or {}).get("job") == first

    r = cli("run", str(project / "job.py"), "--node", "shared")
    assert r.code == 5, r.err
    said = one_line_error(r)
    assert f"node shared is busy: job {first} of " in said
    assert "its agents are running" in said or "its client is running" in said
    assert f"tpuctl cancel {first}" in r.err  # the way out
    assert (_claim(emulator) or {}).get("job") == first  # the refusal took nothing

    assert cli("cancel", first).code == 0
    wait_for(lambda: _claim(emulator) is None)  # the agent freed it at the end
    assert _names(emulator) == ["shared"]
    r = cli("run", str(project / "job.py"), "--node", "shared", "--json")
    assert r.code == 0, r.err
    assert _claim(emulator) is None  # released by the client at the end
    assert cli("delete", "shared", "--yes").code == 0


def test_a_stale_claim_is_taken_over_and_its_teardown_spares_the_new_job(
    cli, emulator, project
) -> None:
    """A claim whose job has ended is taken over, and a claim of an earlier node of the
    same name is not the current node's."""
    assert cli("create", "shared", "-a", "v3-8").code == 0
    client = emulator.storage_client().bucket("tpuctl-demo-tpuctl")
    r = cli("run", str(project / "job.py"), "--node", "shared", "--keep")
    assert r.code == 0, r.err
    # A claim left behind by a job that ended (its client died after the job's end).
    ended = json.loads(cli("jobs", "--json").out)[0]["id"]
    stale = claims.claim(ended, "", "someone", "elsewhere")
    client.blob(CLAIM).upload_from_string(json.dumps(stale))
    r = cli("run", str(project / "job.py"), "--node", "shared", "--keep")
    assert r.code == 0, r.err
    assert f"the claim of job {ended} is stale" in r.err
    assert _claim(emulator) is None
    # An earlier node's claim (another create time), whatever its job does.
    other = claims.claim("20200101-000000-abcdef", "12345", "someone", "elsewhere")
    client.blob(CLAIM).upload_from_string(json.dumps(other))
    r = cli("run", str(project / "job.py"), "--node", "shared", "--keep")
    assert r.code == 0, r.err
    assert _names(emulator) == ["shared"]
    assert cli("delete", "shared", "--yes").code == 0


def test_the_agents_teardown_leaves_a_node_another_job_holds(cli, emulator, project) -> None:
    """Job A owns the node and tears down at its end; job B took A's claim over (as it
    would a stale one) meanwhile: A's agent does not delete the node under B."""
    assert cli("create", "shared", "-a", "v3-8").code == 0
    with _running(project / "job.py", "--node", "shared", "--teardown", "--env", "NAP=4") as a:
        wait_for(lambda: (_claim(emulator) or {}).get("job") not in (None, ""))
        holder = (_claim(emulator) or {})["job"]
        # B's claim, as `take` writes it over a stale one.
        theirs = claims.claim("20200101-000000-abcdef", "", "b", "elsewhere")
        _claim_as_a_client(emulator, CLAIM, theirs)
        out, err = a.communicate(timeout=120)
    assert a.returncode == 0, err
    assert "is claimed by job 20200101-000000-abcdef now: not deleting it" in err
    logs = [v for k, v in bucket_objects(emulator).items() if f"{holder}/logs/" in k]
    assert any(b"claimed by job 20200101-000000-abcdef now: not deleting it" in v for v in logs)
    assert _names(emulator) == ["shared"]
    assert (_claim(emulator) or {}).get("job") == "20200101-000000-abcdef"  # theirs stays
    assert cli("delete", "shared", "--yes").code == 0


def test_a_forged_claim_leaves_no_node_billing(cli, emulator, project) -> None:
    """A claim written into the bucket by someone else than a client (no lease, no agent
    of its job) holds nothing: the job's teardown deletes its node all the same."""
    assert cli("create", "shared", "-a", "v3-8").code == 0
    with _running(project / "job.py", "--node", "shared", "--teardown", "--env", "NAP=4") as a:
        wait_for(lambda: (_claim(emulator) or {}).get("job") not in (None, ""))
        forged = claims.claim("20200101-000000-f0f0f0", "", "mallory", "elsewhere")
        blob = emulator.storage_client().bucket("tpuctl-demo-tpuctl").blob(CLAIM)
        blob.upload_from_string(json.dumps(forged))
        _, err = a.communicate(timeout=120)
    assert a.returncode == 0, err
    assert "claimed by job 20200101-000000-f0f0f0 now: not deleting it" not in err
    assert _names(emulator) == []
    blob.delete()


def test_a_detached_agent_deletes_its_node_under_a_forged_claim(cli, emulator, project) -> None:
    """With no client to look (--detach), worker 0's agent tells the claim of a job that
    shows no life (no lease, no heartbeat: written by someone else) from a holder's."""
    assert cli("create", "shared", "-a", "v3-8").code == 0
    r = cli("run", str(project / "job.py"), "--node", "shared", "--teardown", "--detach",
            "--json", "--env", "NAP=3")  # fmt: skip
    assert r.code == 0, r.err
    job = json.loads(r.out)["job"]
    wait_for(lambda: (_claim(emulator) or {}).get("job") == job)
    forged = claims.claim("20200101-000000-f0f0f0", "", "mallory", "elsewhere")
    blob = emulator.storage_client().bucket("tpuctl-demo-tpuctl").blob(CLAIM)
    blob.upload_from_string(json.dumps(forged))
    wait_for(lambda: _names(emulator) == [], timeout=120)  # the node went: nothing bills
    logs = cli("logs", job)
    assert "which shows no life (no client's lease, no agent's heartbeat): deleting it" in (
        logs.out + logs.err
    )
    blob.delete()


def test_ctrl_c_releases_the_claim(cli, emulator, project) -> None:
    assert cli("create", "shared", "-a", "v3-8").code == 0
    with _running(project / "job.py", "--node", "shared", "--env", "NAP=60") as proc:
        _wait_running(emulator)
        assert (_claim(emulator) or {}).get("job")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err
    assert _claim(emulator) is None
    assert _names(emulator) == ["shared"]  # --node kept: the node stays, free
    assert cli("delete", "shared", "--yes").code == 0


def test_on_compute_engine_the_teardown_reads_the_vms_create_time_not_the_tpu_apis(
    cli, emulator, project
) -> None:
    """The agent's claim check asks Compute Engine (the VM's own API) when its node was
    made: a claim of this VM (its create time, with Compute Engine's UTC offset) is
    left to its job, a claim of an earlier VM of that name is not; the TPU API, which
    holds no such node, is never asked."""
    zone = "us-central1-c"  # where the emulated Compute Engine offers TPU7x
    claim = claims.claim_path("tpuctl-demo", zone, "shared")
    blob = emulator.storage_client().bucket("tpuctl-demo-tpuctl").blob(claim)

    def claimed() -> dict:  # type: ignore[type-arg]
        raw = bucket_objects(emulator).get(claim)
        return json.loads(raw) if raw else {}

    assert cli("create", "shared", "-a", "tpu7x-8", "--zone", zone).code == 0
    before = emulator.requests().get("GET get", 0)  # the TPU API's nodes.get (none asked)
    for created, spared in ((None, True), ("12345", False)):
        where = ("--node", "shared", "--api", "compute", "--zone", zone)
        with _running(project / "job.py", *where, "--teardown", "--env", "NAP=4") as a:
            wait_for(lambda: claimed().get("job") not in (None, ""))
            holder = claimed()["job"]
            # B's claim, as `take` writes it: of this VM (A's create time), or of an
            # earlier VM of the same name
            ours = claimed()["node_created"]
            assert ours  # the client's create time of the VM, in seconds
            theirs = claims.claim("20200101-000000-abcdef", created or ours, "b", "elsewhere")
            _claim_as_a_client(emulator, claim, theirs)
            _, err = a.communicate(timeout=120)
        assert a.returncode == 0, err
        (log,) = [v for k, v in bucket_objects(emulator).items() if f"{holder}/logs/" in k]
        said = b"teardown: VM shared is claimed by job 20200101-000000-abcdef now: not deleting"
        assert (said in log) is spared, log
        assert (b"teardown: deleting VM shared" in log) is not spared, log
        assert [i["name"].rsplit("/", 1)[1] for i in emulator.instances()] == (
            ["shared"] if spared else []
        )
        assert emulator.requests().get("GET get", 0) == before  # no TPU API read of a node
        if spared:
            blob.delete()  # theirs stayed; free the VM for the next job
