"""`tpuctl run`'s options are declared once (tpuctl/services/run/options.py): the command's
parameters, the request's fields, the job file's keys and the help's value names are made
from the declarations, and nothing else in tpuctl lists them."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import typing
from pathlib import Path

import pytest

from tpuctl.cli import run as run_cmd
from tpuctl.services.run import jobfile, options
from tpuctl.services.run.options import OPTIONS, RunOptions
from tpuctl.services.run.request import RunRequest

TPUCTL = Path(options.__file__).parents[2]


def test_each_option_is_one_declaration() -> None:
    tree = ast.parse(Path(options.__file__).read_text())
    (body,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RunOptions"]
    fields = [n for n in body.body if isinstance(n, ast.AnnAssign)]
    declared = [
        f.target.id  # type: ignore[attr-defined]
        for f in fields
        if isinstance(f.value, ast.Call) and getattr(f.value.func, "id", "") == "option"
    ]
    assert declared == [f.target.id for f in fields]  # type: ignore[attr-defined]
    assert declared == [o.name for o in OPTIONS]
    assert len(set(declared)) == len(declared)


def test_the_request_is_the_declarations() -> None:
    # RunRequest adds rules, no field: its fields are the declared options, typed so
    assert RunRequest.__dict__.get("__annotations__", {}) == {}
    assert [f.name for f in dataclasses.fields(RunRequest)] == [o.name for o in OPTIONS]
    request = RunRequest.of({})
    assert {o.name: getattr(request, o.name) for o in OPTIONS} == {
        o.name: o.default for o in OPTIONS
    }


def test_the_command_takes_every_declared_option_and_nothing_else() -> None:
    params = list(inspect.signature(run_cmd.run).parameters)
    assert params == ["ctx", *(o.name for o in OPTIONS)]
    hints = typing.get_type_hints(RunOptions)
    for o in OPTIONS:
        annotation = inspect.signature(run_cmd.run).parameters[o.name].annotation
        if not o.shared:  # a shared option's type is the other command's (read at the edge)
            assert typing.get_args(annotation)[0] == hints[o.name], o.name


def test_a_shared_option_is_named_as_the_other_command_declares_it() -> None:
    from tpuctl.cli.declare import Option
    from tpuctl.cli.run_params import shared

    for o in OPTIONS:
        if o.shared:
            (info,) = [m for m in typing.get_args(shared(o))[1:] if isinstance(m, Option)]
            assert o.flag in info.decls, o.name


def test_no_other_module_declares_a_run_option() -> None:
    """Outside options.py no module of run's names a flag to declare.Option/Argument (the
    one that makes them, run_params.py, takes each from its declaration) or keeps a
    table of job-file keys."""
    for path in [*TPUCTL.glob("cli/run*.py"), *TPUCTL.glob("services/run/*.py")]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                written = [a for a in node.args if isinstance(a, ast.Constant)]
                assert not (name in ("Option", "Argument") and written), (path.name, node.lineno)
            if isinstance(node, ast.Dict) and path.name == "jobfile.py":
                assert len(node.keys) < 5, (path.name, node.lineno)  # no list of keys


def test_the_job_file_keys_are_the_declared_ones() -> None:
    keyed = [o.key for o in OPTIONS if o.key]
    assert [k for k in jobfile.KEYS if k != "zones"] == keyed
    assert {k: jobfile.KEYS[k] for k in keyed} == {o.key: o.kind for o in OPTIONS if o.key}
    assert {
        **{o.key: o.name for o in OPTIONS if o.key and o.key != o.name},
        "zones": "zone",
    } == jobfile.PARAM_OF


@pytest.mark.parametrize(
    ("given", "name", "value"),
    [
        ({"ttl": "2h"}, "ttl", 7200),
        ({"start_lease": "30s"}, "start_lease", 30),
        ({"max_cost": "$12.50"}, "max_cost", 12.5),
        ({"restarts": "4"}, "restarts", 4),
        ({"ttl": 60}, "ttl", 60),  # a job file's, read already
    ],
)
def test_values_are_read_into_their_types_at_the_edge(given, name, value) -> None:  # noqa: ANN001
    assert getattr(RunRequest.of(given), name) == value


def test_a_job_file_writes_durations_and_dollars_back_as_text() -> None:
    text = jobfile.dump({"ttl": 86400, "start_lease": 90, "valid_until": 7200, "max_cost": 25.0})
    assert 'ttl = "1d"' in text and 'start_lease = "90s"' in text
    assert 'valid_until = "2h"' in text and 'max_cost = "25"' in text
