"""Project and zone resolution: the documented order, and one-line errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tpuctl.config import gcloud_properties
from tpuctl.errors import ConfigError, UsageError
from tpuctl.target_resolution import resolve_target


def write_gcloud(root: Path, name: str, project: str | None, zone: str | None) -> None:
    (root / "configurations").mkdir(parents=True, exist_ok=True)
    (root / "active_config").write_text(name)
    lines = []
    if project:
        lines += ["[core]", f"project = {project}"]
    if zone:
        lines += ["[compute]", f"zone = {zone}"]
    (root / "configurations" / f"config_{name}").write_text("\n".join(lines) + "\n")


@pytest.fixture
def base_env(tmp_path: Path) -> dict[str, str]:
    return {
        "HOME": str(tmp_path / "home"),
        "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"),
        "TPUCTL_CONFIG": str(tmp_path / "tpuctl.toml"),
    }


def test_order_flags_env_cloudsdk_file_gcloud(tmp_path: Path, base_env: dict[str, str]) -> None:
    write_gcloud(tmp_path / "gcloud", "work", "from-gcloud", "us-central1-c")
    env = dict(base_env)
    t = resolve_target(env=env)
    assert (t.project, t.zone) == ("from-gcloud", "us-central1-c")
    assert t.project_source == "gcloud config core/project"

    Path(env["TPUCTL_CONFIG"]).write_text('project = "from-file"\nzone = "europe-west4-a"\n')
    t = resolve_target(env=env)
    assert (t.project, t.zone) == ("from-file", "europe-west4-a")

    env["CLOUDSDK_CORE_PROJECT"] = "from-cloudsdk"
    env["CLOUDSDK_COMPUTE_ZONE"] = "us-east1-d"
    assert resolve_target(env=env).project == "from-cloudsdk"
    assert resolve_target(env=env).zone == "us-east1-d"

    env["TPUCTL_PROJECT"] = "from-tpuctl-env"
    assert resolve_target(env=env).project == "from-tpuctl-env"

    t = resolve_target("from-flag", "us-central2-b", env=env)
    assert (t.project, t.zone, t.region) == ("from-flag", "us-central2-b", "us-central2")


def test_endpoint_defaults_come_last(base_env: dict[str, str]) -> None:
    t = resolve_target(
        env=base_env, endpoint_defaults=lambda: {"project": "a-demo", "zone": "us-central1-a"}
    )
    assert (t.project, t.zone) == ("a-demo", "us-central1-a")
    assert t.project_source == "the endpoint's defaults"
    t = resolve_target(
        "mine-1", env=base_env, endpoint_defaults=lambda: {"project": "a-demo"}, need_zone=False
    )
    assert (t.project, t.zone) == ("mine-1", "-")


def test_missing_project_names_every_place(base_env: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as e:
        resolve_target(env=base_env)
    msg = str(e.value)
    assert "\n" not in msg
    for place in (
        "--project",
        "$TPUCTL_PROJECT",
        "$CLOUDSDK_CORE_PROJECT",
        "tpuctl.toml",
        "gcloud config core/project",
    ):
        assert place in msg
    assert "gcloud config set project" in (e.value.hint or "")


def test_missing_zone(base_env: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match=r"no zone set; looked at --zone, \$TPUCTL_ZONE"):
        resolve_target("my-project", env=base_env)


def test_gcloud_active_config_and_override(tmp_path: Path, base_env: dict[str, str]) -> None:
    root = tmp_path / "gcloud"
    write_gcloud(root, "other", "p-other", None)
    write_gcloud(root, "main", "p-main", "z-main")
    assert gcloud_properties(base_env) == {"core/project": "p-main", "compute/zone": "z-main"}
    env = {**base_env, "CLOUDSDK_ACTIVE_CONFIG_NAME": "other"}
    assert gcloud_properties(env) == {"core/project": "p-other"}


def test_malformed_config_file_is_a_config_error(base_env: dict[str, str]) -> None:
    Path(base_env["TPUCTL_CONFIG"]).write_text("project = \n")
    with pytest.raises(ConfigError, match="cannot read tpuctl's config file"):
        resolve_target(env=base_env)


@pytest.mark.parametrize(
    "project", ["my-project", "abcdef", "a" * 30, "google.com:my-project", "p-1-2-3"]
)
def test_project_ids_of_the_documented_shape_pass(base_env: dict[str, str], project: str) -> None:
    assert resolve_target(project, "us-central1-a", env=base_env).project == project


@pytest.mark.parametrize(
    "project",
    ["abcde", "a" * 31, "1project", "my-project-", "My-Project", "my_project", "a b c d e f",
     "google.com:", ":my-project", "my-project\n", "domain:x"],
)  # fmt: skip
def test_other_project_ids_are_refused(base_env: dict[str, str], project: str) -> None:
    with pytest.raises(UsageError, match=r"invalid --project .*: a project id is 6 to 30"):
        resolve_target(project, "us-central1-a", env=base_env)
    with pytest.raises(ConfigError, match=r"\(from \$TPUCTL_PROJECT\): a project id is"):
        resolve_target(env={**base_env, "TPUCTL_PROJECT": project, "TPUCTL_ZONE": "us-east5-a"})


@pytest.mark.parametrize("zone", ["us-central1", "a", "us-central1-", "US-CENTRAL1-A", "x-1-a-b"])
def test_zones_of_another_shape_are_refused(base_env: dict[str, str], zone: str) -> None:
    with pytest.raises(UsageError, match=r"invalid --zone .*: a zone looks like us-central1-a"):
        resolve_target("my-project", zone, env=base_env)


def test_config_file_values_must_be_strings(base_env: dict[str, str]) -> None:
    path = Path(base_env["TPUCTL_CONFIG"])
    cases = (
        ('zone = ["a"]\n', {"TPUCTL_PROJECT": "my-project"}, "zone = ['a'] in {}: expected a "
         "string, a zone like us-central1-a"),
        ("project = 5\n", {}, "project = 5 in {}: expected a string, a project id like"),
    )  # fmt: skip
    for text, env, says in cases:
        path.write_text(text)
        with pytest.raises(ConfigError) as e:
            resolve_target(env={**base_env, **env})
        assert str(e.value).startswith(says.format(path))


def test_zone_lists_for_commands_that_fail_over(base_env: dict[str, str]) -> None:
    t = resolve_target("my-project", "us-central2-b, us-east5-a,us-central2-b", env=base_env,
                       many_zones=True)  # fmt: skip
    assert (t.zone, t.zones, t.candidates) == (
        "us-central2-b",
        ("us-central2-b", "us-east5-a"),
        ("us-central2-b", "us-east5-a"),
    )
    assert t.in_zone("us-east5-a").zone == "us-east5-a"
    one = resolve_target("my-project", "us-east5-a", env=base_env, many_zones=True)
    assert (one.zones, one.candidates) == ((), ("us-east5-a",))
    with pytest.raises(UsageError, match=r"invalid --zone 'us-east5-a,': an empty zone"):
        resolve_target("my-project", "us-east5-a,", env=base_env, many_zones=True)
    with pytest.raises(UsageError, match=r"invalid --zone 'nope': a zone looks like"):
        resolve_target("my-project", "us-east5-a,nope", env=base_env, many_zones=True)
    with pytest.raises(UsageError, match=r"this command works in one zone"):
        resolve_target("my-project", "us-central2-b,us-east5-a", env=base_env)


def test_zones_in_the_config_file(base_env: dict[str, str]) -> None:
    path = Path(base_env["TPUCTL_CONFIG"])
    path.write_text('project = "my-project"\nzones = ["us-east5-a", "us-central2-b"]\n')
    t = resolve_target(env=base_env, many_zones=True)
    assert (t.zone, t.zones) == ("us-east5-a", ("us-east5-a", "us-central2-b"))
    assert "zones = [...]" in t.zone_source
    single = resolve_target(env=base_env)  # a command that works in one zone: the first
    assert (single.zone, single.candidates) == ("us-east5-a", ("us-east5-a",))
    # the flag wins over the file
    assert resolve_target(zone="us-east1-d", env=base_env, many_zones=True).candidates == (
        "us-east1-d",
    )
    for text, says in (
        ('zones = ["us-east5-a"]\nzone = "us-east5-a"\n', "both zone and zones are set in"),
        ("zones = []\n", "zones = [] in"),
        ('zones = "us-east5-a"\n', "zones = 'us-east5-a' in"),
        ('zones = ["Nope"]\n', "invalid zone 'Nope' (from"),
    ):
        path.write_text('project = "my-project"\n' + text)
        with pytest.raises(ConfigError, match=re.escape(says)):
            resolve_target(env=base_env, many_zones=True)
