"""Malformed input through the real CLI: one line naming the input and what is allowed,
exit 2 (usage) or 3 (configuration), never a traceback or an `unexpected ...`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.conftest import one_line_error

BINARY = bytes(range(256)) * 4  # not UTF-8
NINES = "9" * 400


@pytest.mark.parametrize(
    ("args", "env", "config", "code", "says"),
    [
        (["create", "x", "-a", "v3-8", "--ttl", NINES], {}, None, 2,
         f"invalid --ttl '{NINES[:37]}...': at most 365d (one year)"),
        (["create", "x", "-a", "v3-8", "--ttl", NINES + "h"], {}, None, 2,
         "invalid --ttl '999"),
        (["create", "x", "-a", "v3-8", "--ttl", "999999999h"], {}, None, 2,
         "invalid --ttl '999999999h': at most 365d (one year)"),
        (["create", "x", "-a", "v3-8", "--idle-timeout", "366d"], {}, None, 2,
         "invalid --idle-timeout '366d': at most 365d"),
        (["create", "x", "-a", "v3-8", "--queued", "--timeout", "1.5e9s"], {}, None, 2,
         "invalid --timeout '1.5e9s'"),
        (["run", "--env-file", "{bin}", "{script}"], {}, None, 2,
         "cannot read --env-file {bin}: not UTF-8 text"),
        (["list"], {}, BINARY, 3, "cannot read tpuctl's config file {config}: not UTF-8 text"),
        (["emulator", "start", "--port", "99999"], {}, None, 2,
         "Invalid value for '--port': 99999 is not a TCP port: use 1 to 65535"),
        (["emulator", "start", "--ssh-port", "-1"], {}, None, 2,
         "Invalid value for '--ssh-port': -1 is not a TCP port: use 1 to 65535"),
        (["list"], {"TPUCTL_EMULATOR_HOST": "not a host:xx"}, None, 3,
         "invalid TPUCTL_EMULATOR_HOST 'not a host:xx': expected HOST:PORT"),
        (["list"], {"TPUCTL_EMULATOR_HOST": "127.0.0.1:99999"}, None, 3,
         "invalid TPUCTL_EMULATOR_HOST '127.0.0.1:99999': expected HOST:PORT"),
        (["list"], {"TPUCTL_EMULATOR_HOST": "http://127.0.0.1:8470"}, None, 3,
         "invalid TPUCTL_EMULATOR_HOST 'http://127.0.0.1:8470'"),
        (["quota", "--zone", "nowhere"], {}, None, 2,
         "invalid --zone 'nowhere': a zone looks like us-central1-a"),
        (["quota", "--region", "nowhere"], {}, None, 2,
         "invalid --region 'nowhere': a region looks like us-central1"),
        (["list"], {}, b'zone = ["a"]\n', 3,
         "zone = ['a'] in {config}: expected a string, a zone like us-central1-a"),
        (["list"], {}, b"project = 5\n", 3,
         "project = 5 in {config}: expected a string, a project id like my-project"),
        (["list"], {}, b'project = "BAD"\n', 3, "invalid project 'BAD' (from {config}"),
        (["list", "--project", "BAD PROJECT!"], {}, None, 2,
         "invalid --project 'BAD PROJECT!': a project id is 6 to 30 lowercase"),
        (["list"], {"TPUCTL_PROJECT": "-leading"}, None, 3,
         "invalid project '-leading' (from $TPUCTL_PROJECT)"),
        (["list", "--zone", "us central1-a"], {}, None, 2,
         "invalid --zone 'us central1-a': a zone looks like us-central1-a"),
        (["list"], {"CLOUDSDK_COMPUTE_ZONE": "a"}, None, 3,
         "invalid zone 'a' (from $CLOUDSDK_COMPUTE_ZONE): a zone looks like us-central1-a"),
        (["create", "-abc", "-a", "v3-8"], {}, None, 2,
         "no such option '-abc': a short option is one dash and one letter, its value apart"),
        (["create", "-accelerator", "v3-8"], {}, None, 2,
         "no such option '-accelerator': a long option takes two dashes: did you mean "
         "--accelerator?"),
        (["quota", "request", "-value", "8"], {}, None, 2,
         "no such option '-value': a long option takes two dashes: did you mean --value?"),
        (["create", "x", "-a", "v3-8", "--zone", ""], {}, None, 2,
         "invalid --zone '': empty; give a zone like us-central1-a, or leave --zone out"),
        (["list", "--project", ""], {}, None, 2,
         "invalid --project '': empty; give a project id like my-project"),
        (["gc", "--zone", ""], {}, None, 2, "invalid --zone '': empty"),
        (["run", "{script}", "--bucket", "gs://UPPER_bucket"], {}, None, 2,
         "invalid bucket name gs://UPPER_bucket (--bucket): only lowercase letters"),
        (["run", "{script}", "--hang-after", "soon"], {}, None, 2,
         "invalid --hang-after 'soon': use e.g. 30s, 5m or 1h30m"),
        (["run", "{script}", "--outputs", "{bin}/sub"], {}, None, 2,
         "invalid --outputs {bin}/sub: {bin} is not a folder"),
    ],
)  # fmt: skip
def test_bad_input_gets_one_line_naming_it(
    cli, emulator, monkeypatch, tmp_path: Path, args: list[str], env: dict, config: bytes | None,
    code: int, says: str,
) -> None:  # fmt: skip
    names = {"bin": str(tmp_path / "bin.env"), "script": str(tmp_path / "job.sh"),
             "config": os.environ["TPUCTL_CONFIG"]}  # fmt: skip
    Path(names["bin"]).write_bytes(BINARY)
    Path(names["script"]).write_text("#!/bin/sh\ntrue\n")
    Path(names["script"]).chmod(0o755)
    if config is not None:
        Path(names["config"]).parent.mkdir(parents=True, exist_ok=True)
        Path(names["config"]).write_bytes(config)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    r = cli(*(a.format(**names) for a in args))
    assert r.code == code, r.err
    assert "unexpected" not in r.err
    assert says.format(**names) in one_line_error(r)
    assert emulator.nodes() == []  # refused before anything was created


@pytest.mark.parametrize(
    ("zone", "nearest", "hint"),
    [
        ("us-central1-z", "us-central1-a",
         "the zones of us-central1: us-central1-a, us-central1-b, us-central1-c, us-central1-f"),
        ("mars-north1-a", "us-south1-a", "`gcloud compute tpus locations list` lists the zones"),
    ],
)  # fmt: skip
def test_an_unknown_zone_of_the_right_shape_is_named_with_the_nearest(
    cli, emulator, zone: str, nearest: str, hint: str
) -> None:
    for args in (["list"], ["quota"], ["describe", "n1"], ["create", "n1", "-a", "v3-8"]):
        r = cli(*args, "--zone", zone)
        assert r.code == 2, r.err
        assert one_line_error(r) == (
            f"error: unknown zone {zone!r}: no Cloud TPU zone has that name; "
            f"did you mean {nearest}?"
        )
        assert f"hint: {hint}" in r.err
    assert emulator.requests() == {"GET locations.list": 4}  # once a command, nothing else


def test_a_zone_from_the_environment_is_checked_too(cli, monkeypatch) -> None:
    monkeypatch.setenv("TPUCTL_ZONE", "us-central1-z")
    r = cli("list")
    assert r.code == 3, r.err
    assert one_line_error(r).startswith(
        "error: unknown zone 'us-central1-z' (from $TPUCTL_ZONE): no Cloud TPU zone has that name"
    )


def test_a_catalogue_zone_costs_no_locations_call(cli, emulator) -> None:
    assert cli("list", "--zone", "us-east5-a").code == 0
    assert "GET locations.list" not in emulator.requests()


def test_emulator_addresses_of_every_form_are_taken() -> None:
    from tpuctl.cloud.clients import ClientFactory

    for address in ("127.0.0.1:8470", "localhost:1", "[::1]:65535", "emu.example.com:8470"):
        factory = ClientFactory({"TPUCTL_EMULATOR_HOST": f" {address} "})
        assert factory.tpu_endpoint == f"http://{address}"


@pytest.mark.parametrize(
    ("typed", "hint"),
    [
        ("--accelerater", "hint: did you mean --accelerator? see `tpuctl run --help`"),
        ("--epochs", "hint: arguments for your script go after `--`: "
                     "`tpuctl run SCRIPT -- --epochs ...`"),
    ],
)  # fmt: skip
def test_a_misspelt_run_flag_is_told_apart_from_a_scripts(cli, tmp_path: Path, typed, hint):
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    r = cli("run", str(script), typed, "v3-8")
    assert r.code == 2
    assert f"No such option: {typed}" in one_line_error(r)
    assert hint in r.err


def test_a_closed_local_emulator_port_fails_at_once_saying_so(cli, monkeypatch) -> None:
    from tpuctl.emulator.core.ports import free_port

    port = free_port()  # nothing listens there
    monkeypatch.setenv("TPUCTL_EMULATOR_HOST", f"127.0.0.1:{port}")
    r = cli("create", "n1", "-a", "v3-8", "--project", "my-project", "--zone", "us-central1-a")
    assert r.code == 6, r.err
    assert one_line_error(r) == (
        f"error: cannot reach the local emulator at 127.0.0.1:{port}: nothing listens on "
        f"port {port}"
    )
    assert "hint: start it with `tpuctl emulator start --detach`" in r.err
