"""gcloud itself, with a scratch configuration, against the emulator.

gcloud needs the override to end with a slash and no version (`http://HOST:PORT/`);
it appends `v2/projects/...` itself (an override ending in `/v2/` gives `/v2/v2/...`).
"""

from __future__ import annotations

import configparser
import json
import os
import shutil
import subprocess
from pathlib import Path

GCLOUD = shutil.which("gcloud") or "/usr/bin/gcloud"


def gcloud(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.update(
        CLOUDSDK_CORE_DISABLE_PROMPTS="1",
        CLOUDSDK_CORE_DISABLE_USAGE_REPORTING="true",
        CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK="true",
    )
    return subprocess.run(
        [GCLOUD, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def gcloud_config(properties: dict[str, str]) -> None:
    """Set gcloud properties (`section/name=value`, e.g. `project`, `auth/disable_credentials`)
    in the scratch configuration that CLOUDSDK_CONFIG names (see the isolated_env fixture),
    as `gcloud config set` stores them: a property without a section is `core`'s. Written
    directly: each `config set` starts gcloud, about 0.8 s of CPU. The `gce` file is what
    gcloud itself writes once it knows it is not on a Compute Engine VM, so no gcloud call
    asks a metadata server (tests talk only to 127.0.0.0/8)."""
    root = Path(os.environ["CLOUDSDK_CONFIG"])
    path = root / "configurations" / "config_default"
    path.parent.mkdir(parents=True, exist_ok=True)
    config = configparser.ConfigParser(interpolation=None)
    config.read(path)
    for key, value in properties.items():
        section, _, name = key.rpartition("/")
        if not config.has_section(section or "core"):
            config.add_section(section or "core")
        config.set(section or "core", name, value)
    with path.open("w") as f:
        config.write(f)
    (root / "active_config").write_text("default")
    (root / "gce").write_text("False")


def point_at(emulator, project: str = "p") -> None:
    """gcloud's TPU API at the emulator, without credentials, in `project`."""
    gcloud_config(
        {
            "api_endpoint_overrides/tpu": f"http://{emulator.address}/",
            "auth/disable_credentials": "true",
            "project": project,
        }
    )


def test_gcloud_create_list_describe_delete(emulator) -> None:
    point_at(emulator)

    made = gcloud(
        "compute", "tpus", "tpu-vm", "create", "g1", "--zone", "us-central1-a",
        "--accelerator-type", "v3-8", "--version", "tpu-vm-base", "--labels", "team=ml",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    (node,) = emulator.nodes()
    assert node["labels"] == {"team": "ml"}
    assert node["networkConfig"]["enableExternalIps"] is True  # gcloud's default

    listed = gcloud("compute", "tpus", "tpu-vm", "list", "--zone", "us-central1-a")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split()[:3] == ["NAME", "ZONE", "ACCELERATOR_TYPE"]
    assert row.split()[:3] == ["g1", "us-central1-a", "v3-8"]
    assert row.split()[-1] == "READY"

    described = gcloud(
        "compute", "tpus", "tpu-vm", "describe", "g1", "--zone", "us-central1-a",
        "--format", "json",
    )  # fmt: skip
    assert described.returncode == 0, described.stderr
    data = json.loads(described.stdout)
    assert data["name"] == "projects/p/locations/us-central1-a/nodes/g1"
    assert data["networkEndpoints"][0]["ipAddress"].startswith("127.")

    missing = gcloud("compute", "tpus", "tpu-vm", "describe", "nope", "--zone", "us-central1-a")
    assert missing.returncode != 0
    assert "NOT_FOUND: Resource 'projects/p/locations/us-central1-a/nodes/nope' was not found" in (
        missing.stderr
    )

    gone = gcloud("compute", "tpus", "tpu-vm", "delete", "g1", "--zone", "us-central1-a", "--quiet")
    assert gone.returncode == 0, gone.stderr
    assert emulator.nodes() == []
    counts = emulator.requests()
    assert counts["POST create"] == 1 and counts["DELETE delete"] == 1
