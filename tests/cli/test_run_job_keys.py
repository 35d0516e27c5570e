"""The client's key never leaves the laptop: a job's VM holds a key of that job alone
(tpuctl/agent/signing.py), so what a job's script learns on its node (the agent's
memory included) vouches for nothing beyond that job; another job installs an
environment a job built only once the client vouched for it (services/run/vouching.py),
and a job's edits of its node's venv never reach the next job there."""

from __future__ import annotations

import base64
import json
import threading
import time
from pathlib import Path

from tests.cli.env_index import Index, write_wheel
from tests.cli.test_run import _running
from tests.cli.test_run_env import env_objects, index, project, run
from tests.emulator.ssh_helpers import worker_processes
from tpuctl.agent import envkeys, protocol, signing
from tpuctl.cloud import ssh
from tpuctl.services.run import signing as client_signing
from tpuctl.services.run import vouching

__all__ = ["index", "project"]  # the fixtures, shared

BUCKET = "tpuctl-demo-tpuctl"
# A co-writer's module: said in the job's log when it runs (a file it wrote would be in the
# emulated worker's own root, and go with its node).
EVIL = "print('pwned by the co-writer', flush=True)\nB = 333\n"
# The script waits for the test (it looks at the node meanwhile), then says its value.
WAITING = """\
import os, pathlib, time, tinya
home = pathlib.Path.home()
(home / "running").write_text(str(os.getpid()))
while not (home / "go").exists():
    time.sleep(0.05)
print("worker", os.environ["TPUCTL_WORKER_ID"], "value", tinya.value(), flush=True)
"""


def _memory(pid: int) -> bytes:
    """What a process holds in its writable memory (as root on the VM may read it)."""
    held = bytearray()
    try:
        maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
        with open(f"/proc/{pid}/mem", "rb", 0) as mem:
            for line in maps:
                span, perms = line.split()[:2]
                if not perms.startswith("rw"):
                    continue
                start, end = (int(x, 16) for x in span.split("-"))
                try:
                    mem.seek(start)
                    held += mem.read(end - start)
                except (OSError, OverflowError, ValueError):
                    continue
    except OSError:
        pass
    return bytes(held)


def test_the_client_key_never_reaches_the_vm(
    cli, emulator, emulator_server, project: Path, index: Index, monkeypatch
) -> None:
    sent: list[tuple[str, bytes]] = []  # every SSH command and the stdin it was given
    original = ssh.Session.run

    async def spied(self, command, output, stdin=None):  # noqa: ANN001, ANN202
        sent.append((command, stdin or b""))
        return await original(self, command, output, stdin)

    monkeypatch.setattr(ssh.Session, "run", spied)
    (project / "job.py").write_text(WAITING)
    root = Path(emulator_server.backend.workers.root)
    seen: dict[str, bytes] = {}

    def look_while_it_runs() -> None:  # the node's processes, as the script could see them
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(root.glob("*/w0/home/running")):
            time.sleep(0.05)
        for pid in worker_processes():
            for part in ("environ", "cmdline"):
                try:
                    seen[f"{pid}/{part}"] = Path(f"/proc/{pid}/{part}").read_bytes()
                except OSError:
                    continue
            seen[f"{pid}/memory"] = _memory(pid)
        for home in root.glob("*/w0/home"):
            (home / "go").write_text("")

    assert cli("create", "kept", "-a", "v3-8").code == 0
    try:
        looker = threading.Thread(target=look_while_it_runs)
        looker.start()
        r = run(cli, project, index, "--node", "kept", "--json")
        looker.join()
        assert r.code == 0, r.err
        assert "worker 0 value 42" in r.err  # (--json: the log on stderr)
        job = json.loads(r.out)["job"]
        files = {str(p): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    finally:
        assert cli("delete", "kept", "--yes").code == 0

    key = client_signing.key().encode()
    job_key = signing.job_key(key.decode(), job).encode()
    starts = [stdin for command, stdin in sent if " agent start " in f" {command} "]
    assert starts and all(job_key in stdin for stdin in starts)  # what the agents got...
    trust = json.loads(json.loads(starts[0])[protocol.TRUST])
    assert trust["job_key"] == job_key.decode() != key.decode()
    assert [c for c, stdin in sent if key in stdin or key in c.encode()] == []  # ...not the key
    assert any(b"/memory" in k.encode() and job_key in v for k, v in seen.items())  # looked
    assert [k for k, v in seen.items() if key in v] == []  # no process of the node has it
    assert len(files) > 10 and [f for f, v in files.items() if key in v] == []  # nor a file
    objects = env_objects(emulator)
    assert [k for k, v in objects.items() if key in v] == []


def _client_key() -> str:
    return client_signing.key()


def test_an_index_forged_by_a_job_for_another_requirement_set_is_never_vouched_for(
    emulator, emulator_server, project: Path, index: Index, tmp_path: Path
) -> None:
    # Job A (requirement set: tinya) builds its environment; while it runs, its script
    # (which holds A's key) signs an index for another set (tinyb), puts it where A's
    # build is and under the key of that set, with a wheel of its own.
    (project / "job.py").write_text(WAITING)
    root = Path(emulator_server.backend.workers.root)
    bucket = emulator.storage_client().bucket(BUCKET)
    evil = write_wheel(tmp_path, "tinyb", "1.0", EVIL, [])
    with _running(project / "job.py", "--env", f"PIP_INDEX_URL={index.url}", "--json") as a:
        built = _wait_for(lambda: [k for k in env_objects(emulator) if "/built/" in k])
        _wait_for(lambda: list(root.glob("*/w0/home/running")))
        key_a, job = built[0].split("/")[2], built[0].rsplit("/", 1)[1][: -len(".json")]
        mine = json.loads(env_objects(emulator)[built[0]])
        key_b = envkeys.env_key(["tinyb"], mine["facts"], signing.signer(_client_key()))
        forged = dict(
            mine,
            key=key_b,
            requirements=["tinyb"],
            wheels=[{"file": evil.name, "sha256": _sha(evil), "size": evil.stat().st_size}],
        )
        forged = signing.sign(forged, signing.job_key(_client_key(), job))
        bucket.blob(envkeys.wheel_path(key_b, _sha(evil), evil.name)).upload_from_filename(evil)
        for name in (envkeys.index_path(key_b), envkeys.built_path(key_b, job)):
            bucket.blob(name).upload_from_string(json.dumps(forged))
        # where the client looks for A's build (the key A's status names): the forgery
        under_a = signing.sign(dict(forged, key=key_a), signing.job_key(_client_key(), job))
        bucket.blob(envkeys.built_path(key_a, job)).upload_from_string(json.dumps(under_a))
        for home in root.glob("*/w0/home"):
            (home / "go").write_text("")
        out, err = a.communicate(timeout=120)
    assert a.returncode == 0, err
    assert (
        f"environment {key_a[:12]}: the index job {job} built is not signed with its key, "
        "or not of its own requirements: not vouched for" in err
    )
    assert not [k for k in bucket_names(emulator) if k.startswith(vouching.RECORDS)]

    # Job B (tinyb) finds A's forgery under its key: not vouched for, built again.
    (project / "job.py").write_text("import tinyb\nprint('value', tinyb.B, flush=True)\n")
    (project / "requirements.txt").write_text("tinyb\n")
    r = _run_attached(project, index)
    assert "value 21" in r and "pwned" not in r, r
    assert f"environment {key_b[:12]}: the cached index is not vouched for by this client" in r


def test_a_job_that_edits_its_nodes_venv_changes_nothing_in_the_next_job_there(
    cli, emulator, project: Path, index: Index, tmp_path: Path
) -> None:
    evil = write_wheel(tmp_path, "tinyb", "1.0", EVIL, [])
    poison = f"""\
import base64, pathlib, sys, tinyb
site = pathlib.Path(tinyb.__file__).parent.parent
(site / "evil.pth").write_text("import sys; print('pwned by a .pth', flush=True)\\n")
(site / "sitecustomize.py").write_text("print('pwned by sitecustomize', flush=True)\\n")
pathlib.Path(tinyb.__file__).write_text("B = 333\\n")
(pathlib.Path(tinyb.__file__).parent / "__pycache__").mkdir(exist_ok=True)
wheels = pathlib.Path(sys.prefix).parent / "wheels"
wheels.mkdir(exist_ok=True)
(wheels / {evil.name!r}).write_bytes(base64.b64decode({base64.b64encode(evil.read_bytes())!r}))
(wheels / "extra-1.0-py3-none-any.whl").write_bytes(b"left by the job")
print("poisoned", flush=True)
"""
    assert cli("create", "kept", "-a", "v3-8").code == 0
    try:
        (project / "job.py").write_text(poison)
        first = run(cli, project, index, "--node", "kept")
        assert first.code == 0, first.err
        assert "poisoned" in first.out
        (project / "job.py").write_text(
            "import tinya\nprint('worker 0 value', tinya.value(), flush=True)\n"
        )
        second = run(cli, project, index, "--node", "kept")
        assert second.code == 0, second.err
        assert "worker 0 value 42" in second.out
        assert "pwned" not in second.out  # no .pth, no sitecustomize, no module of the first
        assert "from the bucket on 1 worker(s)" in second.err  # the changed wheel, again
    finally:
        assert cli("delete", "kept", "--yes").code == 0


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _wait_for(condition):  # noqa: ANN001, ANN202
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out")


def bucket_names(emulator) -> list[str]:  # noqa: ANN001
    return [b.name for b in emulator.storage_client().list_blobs(BUCKET, prefix="tpuctl/")]


def _run_attached(project: Path, index: Index) -> str:
    with _running(project / "job.py", "--env", f"PIP_INDEX_URL={index.url}") as proc:
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return out + err


def test_the_client_vouches_only_for_a_jobs_own_build_of_its_own_requirements() -> None:
    key, job, lines = "c" * 64, "20261201-101500-ab12cd", ["tinya"]
    env = {"PIP_INDEX_URL": "https://me:token@pkgs.example.com/simple"}
    facts = dict(envkeys.vm_facts("rt", False), indexes=vouching.indexes_digest(key, env))
    env_key = envkeys.env_key(lines, facts, signing.signer(key))
    index = {
        "version": envkeys.INDEX_VERSION,
        "key": env_key,
        "requirements": lines,
        "facts": facts,
        "job": job,
        "wheels": [{"file": "tinya-1.0-py3-none-any.whl", "sha256": "0" * 64}],
    }

    def vouched(value: dict, signed_by: str = job, settings: dict = env) -> bool:
        signed = signing.sign(value, signing.job_key(key, signed_by))
        return vouching.checks_out(signed, key, job, lines, settings, env_key)

    assert vouched(index)
    assert not vouched(index, signed_by="20261201-101501-ffffff")  # another job's key
    assert not vouched(dict(index, job="20261201-101501-ffffff"))  # naming another job
    assert not vouched(dict(index, requirements=["tinyb"]))  # another requirement set
    other = dict(facts, runtime="another")  # under a key its facts do not make
    assert not vouched(dict(index, facts=other))
    assert not vouched(index, settings={"PIP_INDEX_URL": "https://elsewhere/simple"})
    assert not vouching.checks_out(index, key, job, lines, env, env_key)  # unsigned
    # the digest of the index settings names no URL, and differs by client key
    assert "pkgs.example.com" not in json.dumps(facts) and "token" not in json.dumps(facts)
    assert vouching.indexes_digest("d" * 64, env) != facts["indexes"]


def test_an_environment_built_from_another_index_is_not_reused(
    cli, emulator, project: Path, index: Index
) -> None:
    assert run(cli, project, index).code == 0
    elsewhere = index.url.replace("/simple", "/private-token/simple")  # the same wheels
    r = cli("run", str(project / "job.py"), "--env", f"PIP_INDEX_URL={elsewhere}")
    assert r.code == 0, r.err
    assert "built on 1 worker(s)" in r.err  # a key of its own: built from that index
    keys = {k.split("/")[2] for k in env_objects(emulator)}
    assert len(keys) == 2 and not any(b"private-token" in v for v in env_objects(emulator).values())
