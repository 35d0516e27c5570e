"""gcloud's --format, --filter, --sort-by and --limit: the engine (pure) and the commands
that take them (list, jobs, quota, top)."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import one_line_error
from tpuctl.cli import projection
from tpuctl.cli.filters import parse_filter
from tpuctl.cli.yaml_out import dump_all
from tpuctl.errors import UsageError

ROWS = [
    {"name": "projects/p/locations/us-central1-a/nodes/train-1", "zone": "us-central1-a",
     "state": "READY", "chips": 4, "labels": {"env": "dev"}, "tags": ["a", "b"]},
    {"name": "projects/p/locations/us-east5-a/nodes/eval-2", "zone": "us-east5-a",
     "state": "STOPPED", "chips": 16, "labels": {"env": "prod"}, "tags": []},
    {"name": "projects/p/locations/us-central1-a/nodes/train-3", "zone": "us-central1-a",
     "state": "READY", "chips": 8, "labels": {}, "tags": ["b"]},
]  # fmt: skip


def names(expression: str) -> list[str]:
    keep = parse_filter(expression)
    return [r["name"].rsplit("/", 1)[1] for r in ROWS if keep(r)]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("state=READY", ["train-1", "train-3"]),
        ("state=ready", ["train-1", "train-3"]),  # case-insensitive for strings
        ("state!=READY", ["eval-2"]),
        ("name:train-1", ["train-1"]),  # a word of the path
        ("name:train*", ["train-1", "train-3"]),
        ("name:rain", []),  # HAS matches words, not any substring
        ("zone:us-central1", ["train-1", "train-3"]),  # words split at "-"
        ("zone:us-central1*", ["train-1", "train-3"]),
        ("chips>4", ["eval-2", "train-3"]),  # numbers compare as numbers: 16 > 4
        ("chips<=8", ["train-1", "train-3"]),
        ("labels.env=prod", ["eval-2"]),
        ("labels.env:*", ["train-1", "eval-2"]),
        ("tags:b", ["train-1", "train-3"]),
        ("state=(STOPPED READY) chips>=8", ["eval-2", "train-3"]),  # a space is AND
        ("state=READY AND chips>4", ["train-3"]),
        ("zone:us-east5* OR chips=4", ["train-1", "eval-2"]),
        ("NOT state=READY", ["eval-2"]),
        ("-state=READY", ["eval-2"]),
        ("(state=STOPPED OR chips=4) AND tags:*", ["train-1"]),
        ("name~train-[13]$", ["train-1", "train-3"]),
        ("name!~^projects/p/locations/us-central1", ["eval-2"]),
        ("nothere=1", []),
        ("nothere!=1", ["train-1", "eval-2", "train-3"]),
        ("zone='us-east5-a'", ["eval-2"]),
    ],
)
def test_filters_as_gcloud_reads_them(expression: str, expected: list[str]) -> None:
    assert names(expression) == expected


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("state=READY AND zone:x OR chips=4", "need parentheses"),
        ("state", "needs an operator"),
        ("state=", "needs a value"),
        ("(state=READY", "not closed"),
        ("state=READY)", "unexpected ')'"),
        ("name~'('", "bad regular expression"),
        ("AND state=READY", "expected a term"),
        ("1abc=2", "not a resource key"),
    ],
)
def test_a_bad_filter_is_a_usage_error_naming_it(expression: str, says: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_filter(expression)
    assert str(e.value.message).startswith(f"invalid --filter {expression!r}: ")
    assert says in e.value.message


def test_value_table_and_csv_projections() -> None:
    fmt = projection.parse_format("value(name.basename(),zone,tags)")
    assert projection.render(ROWS[:2], fmt) == "train-1\tus-central1-a\ta;b\neval-2\tus-east5-a\t\n"
    table = projection.render(ROWS[:2], projection.parse_format("table(name.basename(),state)"))
    assert table.splitlines() == ["NAME     STATE", "train-1  READY", "eval-2   STOPPED"]
    labelled = projection.parse_format("table[no-heading](labels.env:label=ENV, chips)")
    assert projection.render(ROWS[:1], labelled) == "dev  4\n"
    heading = projection.render(ROWS[:1], projection.parse_format("table(labels.env:label=ENV)"))
    assert heading.splitlines()[0] == "ENV"
    assert projection.render(ROWS[:1], projection.parse_format("csv(zone,chips)")) == (
        "zone,chips\nus-central1-a,4\n"
    )


def test_json_and_yaml() -> None:
    assert json.loads(projection.render(ROWS, projection.parse_format("json"))) == ROWS
    text = dump_all(ROWS[:2])
    assert text.startswith("---\n") is False and text.count("---\n") == 1
    assert "name: projects/p/locations/us-central1-a/nodes/train-1\n" in text
    assert "labels:\n  env: dev\n" in text and "tags:\n- a\n- b\n" in text and "tags: []\n" in text
    # strings a YAML reader would take for another type are quoted
    tricky = dump_all([{"a": "true", "b": "012", "c": "x: y", "d": None, "e": "", "f": 1.5}])
    assert tricky == 'a: "true"\nb: "012"\nc: "x: y"\nd: null\ne: ""\nf: 1.5\n'


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("xml", "unknown format 'xml'"),
        ("value", "needs the keys"),
        ("value(", "use json, yaml"),
        ("table(name.frob())", "unknown transform frob()"),
        ("json(name)", "takes no projection"),
        ("table[box](name)", "unknown attribute 'box'"),
        ("value(na me)", "not a resource key"),
    ],
)
def test_a_bad_format_is_a_usage_error_naming_it(text: str, says: str) -> None:
    with pytest.raises(UsageError) as e:
        projection.parse_format(text)
    assert e.value.message.startswith(f"invalid --format {text!r}: ") and says in e.value.message


def test_sort_filter_limit_in_gcloud_order() -> None:
    picked = projection.chosen(ROWS, "state=READY OR chips=16", "~chips", 2)
    assert picked == [1, 2]  # by chips descending (16, 8, 4), then the first two
    assert projection.chosen(ROWS, None, "zone,~chips", None) == [2, 0, 1]
    with pytest.raises(UsageError, match="invalid --limit 0"):
        projection.chosen(ROWS, None, None, 0)
    with pytest.raises(UsageError, match="invalid --sort-by 'zone,,name'"):
        projection.chosen(ROWS, None, "zone,,name", None)


def test_list_filters_sorts_limits_and_formats(cli) -> None:
    for name, accel, zone in [("a1", "v3-8", "us-central1-a"), ("b1", "v4-8", "us-central2-b"),
                              ("a2", "v3-8", "us-central1-a")]:  # fmt: skip
        assert cli("create", name, "-a", accel, "--zone", zone).code == 0
    r = cli("list", "--all-zones", "--filter", "zone:us-central1*", "--format", "value(name,zone)")
    assert r.code == 0, r.err
    assert r.out == "a1\tus-central1-a\na2\tus-central1-a\n"
    r = cli("list", "--all-zones", "--sort-by", "~name", "--limit", "2", "--format", "json")
    assert [n["name"] for n in json.loads(r.out)] == ["b1", "a2"]
    r = cli("list", "--all-zones", "--filter", "acceleratorType=v4-8", "--format", "yaml")
    assert r.out.startswith("name: b1\n") and "zone: us-central2-b\n" in r.out
    r = cli("list", "--all-zones", "--filter", "name=a1", "--format", "table(name,state)")
    assert r.out.splitlines() == ["NAME  STATE", "a1    READY"]
    r = cli("list", "--all-zones", "--filter", "name:a*", "--sort-by", "~name")
    assert [line.split()[0] for line in r.out.splitlines()[1:]] == ["a2", "a1"]  # the table
    r = cli("list", "--all-zones", "--filter", "name=zz")
    assert r.code == 0 and r.out == "" and "no TPU nodes that --filter matches" in r.err
    for name, zone in [("a1", "us-central1-a"), ("b1", "us-central2-b"), ("a2", "us-central1-a")]:
        assert cli("delete", name, "--zone", zone, "--yes").code == 0


@pytest.mark.parametrize(
    "args",
    [
        ["list", "--format", "value("],
        ["list", "--filter", "state=READY OR"],
        ["jobs", "--sort-by", "~"],
        ["quota", "--limit", "0"],
        ["top", "--format", "xml"],
    ],
)
def test_bad_expressions_exit_2_in_one_line_before_any_call(cli, args) -> None:
    r = cli(*args)
    assert r.code == 2
    assert one_line_error(r).startswith(f"error: invalid {args[1]} ")


def test_quota_and_top_take_the_flags(cli) -> None:
    r = cli("quota", "--region", "us-central1", "--filter", "family=v3", "--format",
            "value(family,limit)")  # fmt: skip
    assert r.code == 0, r.err
    assert r.out and all(line.split("\t")[0] == "v3" for line in r.out.splitlines())
    assert cli("create", "t1", "-a", "v3-8", "--zone", "us-central1-a").code == 0
    r = cli("top", "--zone", "us-central1-a", "--format", "value(name)")
    assert r.code == 0 and r.out.split() == ["t1"], (r.out, r.err)
    assert cli("delete", "t1", "--zone", "us-central1-a", "--yes").code == 0
