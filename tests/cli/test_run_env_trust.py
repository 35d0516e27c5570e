"""The environment cache against another writer of the bucket (docs/security.md): an index
rewritten (even signed with the key of the job that built it), or planted before the
first build, gets none of its code run, the job installs the right packages; and an
`--env` index URL never reaches the bucket."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.cli.env_index import Index, write_wheel
from tests.cli.test_run import bucket_objects
from tests.cli.test_run_env import env_objects, index, project, run
from tpuctl.agent import envkeys, signing
from tpuctl.config import state_dir

__all__ = ["index", "project"]  # the fixtures, shared

BUCKET = "tpuctl-demo-tpuctl"
# The co-writer's package: run, it leaves a marker, and answers 666 instead of 42.
EVIL = "open({marker!r}, 'w').write('pwned')\nB = 333\ndef value():\n    return 666\n"
REFUSED = "is not vouched for by this client (nor built by this job): nothing of it is installed"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _indexes(emulator) -> dict[str, dict]:  # noqa: ANN001
    return {k: json.loads(v) for k, v in env_objects(emulator).items() if k.endswith("index.json")}


def _plant(emulator, key: str, wheel: Path, index_value: dict, *jobs: str) -> None:  # noqa: ANN001
    """As another job's VM may: a wheel and an index written into environment `key` (and
    as the builds of `jobs`)."""
    bucket = emulator.storage_client().bucket(BUCKET)
    bucket.blob(envkeys.wheel_path(key, _sha256(wheel), wheel.name)).upload_from_filename(wheel)
    for name in [envkeys.index_path(key)] + [envkeys.built_path(key, job) for job in jobs]:
        bucket.blob(name).upload_from_string(json.dumps(index_value))


@pytest.mark.parametrize("pinned", [False, True], ids=["ranges", "hash-pinned"])
def test_a_rewritten_index_and_wheel_are_never_installed(
    cli, emulator, project: Path, index: Index, tmp_path: Path, pinned: bool
) -> None:
    if pinned:  # a lock file with --hash: pip checks the downloads, the cache its signature
        lines = [
            f"{name}==1.0 --hash=sha256:{_sha256(index.folder / f'{name}-1.0-py3-none-any.whl')}"
            for name in ("tinya", "tinyb")
        ]
        (project / "requirements.txt").write_text("\n".join(lines) + "\n")
    assert run(cli, project, index).code == 0
    asked = index.count()
    ((name, entry),) = _indexes(emulator).items()
    marker = tmp_path / "pwned"
    evil = write_wheel(tmp_path, "tinyb", "1.0", EVIL.format(marker=str(marker)), [])
    entry["wheels"] = [
        {"file": evil.name, "sha256": _sha256(evil), "size": evil.stat().st_size}
        if w["file"].startswith("tinyb-")
        else w
        for w in entry["wheels"]
    ]
    # Signed with the key of the job that built it (its script may have read it from its
    # agent's memory), in place of the index and of the build the client vouched for.
    client_key = (state_dir() / "signing.key").read_text().strip()
    entry = signing.sign(entry, signing.job_key(client_key, entry["job"]))
    _plant(emulator, entry["key"], evil, entry, entry["job"])

    r = run(cli, project, index)
    assert r.code == 0, r.err
    assert REFUSED in r.out and "rebuilding it" in r.out
    assert "worker 0 value 42" in r.out  # the right packages, built again
    assert not marker.exists()  # nothing of the co-writer's wheel ran
    assert index.count() > asked
    assert _sha256(evil) not in json.dumps(_indexes(emulator)[name])


def test_an_environment_planted_before_the_first_build_is_never_installed(
    cli, emulator, project: Path, index: Index, tmp_path: Path
) -> None:
    # The VM facts are public (every index holds them): learnt from an entry of another set.
    (project / "requirements.txt").write_text("tinya\ntinyb\n")
    assert run(cli, project, index).code == 0
    (facts,) = [e["facts"] for e in _indexes(emulator).values()]
    # The worst case: the co-writer even knows the public name of the victim's key.
    signer = signing.signer((state_dir() / "signing.key").read_text().strip())
    key = envkeys.env_key(["tinya"], facts, signer)  # (facts: the same index settings)
    marker = tmp_path / "pwned"
    evil = write_wheel(tmp_path, "tinya", "1.0", EVIL.format(marker=str(marker)), [])
    planted = {
        "version": envkeys.INDEX_VERSION,
        "key": key,
        "job": "20250101-000000-aaaaaa",
        "wheels": [{"file": evil.name, "sha256": _sha256(evil), "size": evil.stat().st_size}],
    }
    _plant(emulator, key, evil, signing.sign(planted, "the co-writer's own key" * 2))

    (project / "requirements.txt").write_text("tinya\n")
    r = run(cli, project, index)
    assert r.code == 0, r.err
    assert f"environment {key[:12]}: the cached index {REFUSED}" in r.out
    assert "worker 0 value 42" in r.out
    assert not marker.exists()
    assert "built on 1 worker(s)" in r.err


def test_an_index_url_with_a_token_never_reaches_the_bucket(
    cli, emulator, project: Path, index: Index
) -> None:
    host = index.url.rsplit("/", 1)[0]
    url = f"{host}/SECRET-TOKEN/simple"
    job = str(project / "job.py")
    ok = cli("run", job, "--env", f"PIP_INDEX_URL={url}")
    assert ok.code == 0, ok.err
    assert "worker 0 value 42" in ok.out
    assert any(p.startswith("/SECRET-TOKEN/") for p in index.requests)  # pip used it
    assert f"resolving and building 1 requirement(s) from {host}/…" in ok.out
    (project / "requirements.txt").write_text("tinya\nnosuch==1.0\n")
    failed = cli("run", job, "--env", f"PIP_INDEX_URL={url}", "--env", "OTHER=SECRET-TOKEN")
    assert failed.code == 1
    assert f"no version of nosuch==1.0 found on {host}/…" in failed.err

    objects = bucket_objects(emulator)
    logs = b"".join(v for k, v in objects.items() if k.endswith(".log"))
    assert b"Collecting tinya" in logs  # pip's output is in the job's log...
    assert [k for k, v in objects.items() if b"SECRET-TOKEN" in v] == []  # ...not the token
    key = (state_dir() / "signing.key").read_text().strip().encode()
    assert [k for k, v in objects.items() if key in v] == []  # nor the signing key
    assert any(k.endswith("/lock.json") for k in objects)  # the failure's lock, said
    assert "SECRET-TOKEN" not in ok.out + failed.out
