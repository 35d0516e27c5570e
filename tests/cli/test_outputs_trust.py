"""Outputs come home only as the job's own agents uploaded them: a file planted in the
bucket's outputs folder by another writer, or one changed after the job uploaded it,
stays there, said in one line."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from tests.cli.test_run import project

__all__ = ["project"]  # the fixture, shared

BUCKET = "tpuctl-demo-tpuctl"


def _outputs(emulator, job: str):  # noqa: ANN001, ANN202
    return emulator.storage_client().bucket(BUCKET), f"tpuctl/jobs/{job}/outputs/"


def test_a_planted_or_changed_output_stays_in_the_bucket(cli, emulator, project) -> None:
    r = cli("run", str(project / "job.py"), "--no-outputs", "--json")
    assert r.code == 0, r.err
    job = json.loads(r.out)["job"]
    bucket, prefix = _outputs(emulator, job)
    bucket.blob(prefix + "ckpt.pkl").upload_from_string(b"cos\nsystem\n(S'touch /tmp/x'\ntR.")
    fetched = cli("outputs", job, "home")
    assert fetched.code == 0, fetched.err
    assert (Path("home") / "result-0.txt").read_text() == "done by 0"
    assert not (Path("home") / "ckpt.pkl").exists()
    assert "1 file(s) in gs://" in fetched.err
    assert "were uploaded by no agent of this job" in fetched.err
    assert "(ckpt.pkl)" in fetched.err
    assert "downloaded 1 output file(s)" in fetched.err

    bucket.blob(prefix + "result-0.txt").upload_from_string(b"not what the job wrote")
    again = cli("outputs", job, "again")
    assert again.code == 0, again.err
    assert not (Path("again") / "result-0.txt").exists()
    assert not list(Path("again").glob(".*tpuctl-part"))  # nothing half-kept either
    assert "changed since the job uploaded them: left there (result-0.txt)" in again.err

    # a replacement of another size is not even downloaded: the manifest says each size
    from tpuctl.cloud.clients import ClientFactory
    from tpuctl.services import outputs as outputs_service

    bucket.blob(prefix + "result-0.txt").upload_from_string(b"x" * (4 << 20))
    reader = ClientFactory().bucket(BUCKET, "tpuctl-demo")
    before = reader.received
    from tpuctl.services.run import signing

    brought = outputs_service.download(reader, job, Path("sized"), signing.key())
    assert brought.changed == ["result-0.txt"] and not brought.written
    assert reader.received - before < 64 << 10  # the manifests, not the 4 MiB object
    assert not Path("sized", "result-0.txt").exists()

    anyway = cli("outputs", job, "anyway", "--unverified")
    assert anyway.code == 0, anyway.err
    assert sorted(p.name for p in Path("anyway").iterdir()) == [
        ".tpuctl-outputs",
        "ckpt.pkl",
        "result-0.txt",
    ]
    assert emulator.nodes() == []


def test_without_the_jobs_key_nothing_comes_and_the_way_is_named(
    cli,
    emulator,
    project,
    monkeypatch,
) -> None:
    r = cli("run", str(project / "job.py"), "--no-outputs", "--json")
    assert r.code == 0, r.err
    job = json.loads(r.out)["job"]
    monkeypatch.setenv("TPUCTL_SIGNING_KEY", secrets.token_hex(32))  # another machine's
    fetched = cli("outputs", job, "elsewhere")
    assert fetched.code == 0, fetched.err
    assert not Path("elsewhere").exists() or not any(Path("elsewhere").iterdir())
    assert "give its signing key (signing.key in its tpuctl state dir) as TPUCTL_SIGNING_KEY" in (
        fetched.err
    )
    assert "--unverified" in fetched.err
    assert emulator.nodes() == []


def test_a_file_planted_during_the_run_does_not_come_home_with_it(cli, emulator, tmp_path) -> None:
    # the script itself plays the co-writer: it uploads into its own job's outputs folder
    # beside what its agent syncs (any job VM of the project could)
    script = tmp_path / "w" / "plant.py"
    script.parent.mkdir()
    script.write_text(PLANT)
    r = cli("run", str(script), "--json")
    assert r.code == 0, r.err
    job = json.loads(r.out)["job"]
    home = Path("outputs") / job
    assert (home / "real.txt").read_text() == "mine"
    assert not (home / "evil.py").exists()
    assert "(evil.py)" in r.err and "were uploaded by no agent of this job" in r.err
    assert emulator.nodes() == []


PLANT = """\
import json, os, urllib.parse, urllib.request
out = os.environ["TPUCTL_OUTPUT_DIR"]
open(os.path.join(out, "real.txt"), "w").write("mine")
md, gcs = os.environ["TPUCTL_METADATA_URL"], os.environ["TPUCTL_STORAGE_URL"]
def call(url, data=None, **headers):
    return urllib.request.urlopen(urllib.request.Request(url, data, headers)).read()
token = json.loads(call(md + "/instance/service-accounts/default/token",
                        **{"Metadata-Flavor": "Google"}))["access_token"]
name = urllib.parse.quote("tpuctl/jobs/%s/outputs/evil.py" % os.environ["TPUCTL_JOB_ID"], safe="")
bucket = "tpuctl-demo-tpuctl"
call(f"{gcs}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={name}", b"import os",
     Authorization="Bearer " + token)
"""
