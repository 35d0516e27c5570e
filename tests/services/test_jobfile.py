"""Job files: what `load` accepts and refuses (file, line, key), and what `dump` writes
reads back the same with tomllib."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tpuctl.errors import UsageError
from tpuctl.services.run import jobfile

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def write(tmp_path: Path, text: str | bytes, name: str = "job.toml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_every_kind_of_value_read_into_its_type(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
# a comment
script = "src/train.py"
args = ["--steps", "10"]
accelerator = "V5E-8"          # the flag's alias, lowercased
zones = ["us-east5-a", "us-east5-b"]
spot = true
restarts = 2
sync_every = 5
ttl = "2h"
start_deadline = 600
workdir = "src"
outputs = "/abs/out"
env_file = "secrets.env"
exclude = ["*.ckpt", "data/"]

[env]
STEPS = 100
NAME = "ünï"
""",
    )
    job = jobfile.load(path)
    v = job.values
    assert v["script"] == str(tmp_path / "src/train.py")  # as named, as the argument gives it
    assert v["workdir"] == tmp_path / "src"
    assert v["outputs"] == Path("/abs/out")
    assert v["env_file"] == [tmp_path / "secrets.env"]
    assert v["accelerator"] == "v5litepod-8"
    assert v["zones"] == "us-east5-a,us-east5-b"
    assert (v["spot"], v["restarts"], v["sync_every"]) == (True, 2, 5.0)
    assert (v["ttl"], v["start_deadline"]) == (7200, 600)  # in seconds, as the request holds them
    assert v["env"] == ["STEPS=100", "NAME=ünï"]
    assert job.lines["script"] == 3 and job.lines["env"] == 17
    assert job.where("ttl") == f"{path}:10"


@pytest.mark.parametrize(("text", "seconds"), [('"10m"', 600.0), ("90", 90.0), ("0", 0.0)])
def test_hang_after_is_a_duration_or_seconds_and_0_turns_it_off(
    tmp_path: Path, text: str, seconds: float
) -> None:
    assert jobfile.load(write(tmp_path, f"hang_after = {text}\n")).values["hang_after"] == seconds


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('script = "a.py"\naccelerator = 5\n',
         ':2: accelerator: expected a string, an accelerator type like "v3-8", not 5'),
        ('script = "a.py"\n\nttl = "5x"\n', ":3: ttl: invalid duration '5x': use e.g. 90s"),
        ('ttl = "400d"\n', ":1: ttl: invalid duration '400d': at most"),
        ('zones = ["us-east5-a", "Nope"]\n', ":1: zones: 'Nope' is not a zone: a zone looks like"),
        ("zones = []\n", ":1: zones: expected a list of zones"),
        ('zone = "us-east5-a"\nzones = ["us-east5-a"]\n', ":2: zones: give zone or zones"),
        ('project = "X"\n', ":1: project: 'X' is not a project id: a project id is"),
        ("restarts = -1\n", ":1: restarts: expected a whole number, 0 or more, not -1"),
        ("restarts = 1.5\n", ":1: restarts: expected a whole number"),
        ("sync_every = 0.5\n", ":1: sync_every: expected a number of seconds, at least 1"),
        ('spot = "yes"\n', ":1: spot: expected true or false, not 'yes'"),
        ('hang_after = "soon"\n', ":1: hang_after: invalid hang_after 'soon': use e.g. 30s"),
        ("hang_after = true\n", ':1: hang_after: expected a duration: a string like "10m"'),
        ('exclude = "*.ckpt"\n', ":1: exclude: expected a list of strings, not '*.ckpt'"),
        ("args = [1, 2]\n", ":1: args: expected a list of strings"),
        ("env_file = 3\n", ":1: env_file: expected a string or a list of strings"),
        ("[env]\nA = true\n", ":2: env: A: expected a string, not True"),  # the key's line
        ('[env]\n"1X" = "a"\n', ":2: env: '1X' is not a variable name"),
        ('env = "A=1"\n', ":1: env: expected a table of names to strings"),
        ("[workdir]\nx = 1\n", ":1: workdir: expected a string (a path"),
        ('\n\nacclerator = "v3-8"\n', ":3: unknown key 'acclerator' (did you mean 'accelerator'?); "
         "allowed: accelerator, api, args, bucket,"),
        ("spot = true\nspot = false\n", ":2: not valid TOML: Cannot overwrite a value (column 13)"),
        ('setup = """\nx = 1\n', ": not valid TOML: Unterminated string (at end of document)"),
    ],
)  # fmt: skip
def test_errors_name_file_line_and_key(tmp_path: Path, text: str, says: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(UsageError) as e:
        jobfile.load(path)
    assert str(e.value).startswith(f"{path}{says}"), str(e.value)
    assert "\n" not in str(e.value)


def test_binary_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"bin.toml: not a job file: not UTF-8 text"):
        jobfile.load(write(tmp_path, b"\xff\xfe\x00x", "bin.toml"))
    with pytest.raises(UsageError, match=r"cannot read job file .*none.toml: No such file"):
        jobfile.load(tmp_path / "none.toml")


def test_lines_inside_multiline_strings_are_not_keys(tmp_path: Path) -> None:
    path = write(tmp_path, 'setup = """\nttl = 1\n"""\nttl = "5x"\n')
    with pytest.raises(UsageError, match=r"job.toml:4: ttl:"):
        jobfile.load(path)


TRICKY = [
    "plain",
    'quote " and backslash \\ and \\n literally',
    "tab\tnewline\ncr\rbell\x07del\x7fesc\x1b",
    "ünïcødé ✓ 日本語 🚀",
    "",
    "'single' and '''triple'''",
    '"""',
]


def test_dump_reads_back_the_same(tmp_path: Path) -> None:
    values = {
        "script": tmp_path / "train.py",
        "args": TRICKY,
        "accelerator": "v3-8",
        "zones": ["us-east5-a", "us-east5-b"],
        "spot": True,
        "restarts": 3,
        "sync_every": 30.0,
        "setup": TRICKY[2],
        "name": TRICKY[3],
        "env": {"A": TRICKY[1], "B": TRICKY[3]},
    }
    text = jobfile.dump(values, "first line\nsecond line")
    assert text.startswith("# first line\n# second line\n")
    data = tomllib.loads(text)
    assert data["args"] == TRICKY
    assert data["setup"] == TRICKY[2] and data["name"] == TRICKY[3]
    assert data["env"] == {"A": TRICKY[1], "B": TRICKY[3]}
    assert (data["spot"], data["restarts"], data["sync_every"]) == (True, 3, 30.0)
    assert data["zones"] == ["us-east5-a", "us-east5-b"]
    assert list(data)[:3] == ["script", "args", "accelerator"]
    # and `load` takes it back
    path = write(tmp_path, text)
    assert jobfile.load(path).values["args"] == TRICKY


def test_paths_are_written_from_the_current_folder(tmp_path: Path) -> None:
    assert jobfile.shown_path(tmp_path / "a" / "b.py", tmp_path) == "a/b.py"
    assert jobfile.shown_path(tmp_path, tmp_path) == "."
    assert jobfile.shown_path(Path("/elsewhere/x"), tmp_path) == "/elsewhere/x"


def test_text_toml_cannot_hold_is_refused() -> None:
    undecodable = b"caf\xe9".decode("utf-8", "surrogateescape")  # an argv of Latin-1 bytes
    with pytest.raises(UsageError, match=r"--print-spec: args: .* TOML cannot hold it"):
        jobfile.dump({"args": [undecodable]})
