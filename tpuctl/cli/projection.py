"""gcloud's list flags over the rows a command prints with --json: `--format`, `--sort-by`
and `--limit` (the `--filter` expressions are in tpuctl/cli/filters.py).

The subset follows `gcloud topic formats` and `gcloud topic projections`
(https://cloud.google.com/sdk/gcloud/reference/topic/formats,
https://cloud.google.com/sdk/gcloud/reference/topic/projections):
- `json`, `yaml` (one document per resource, `---` between them), and
  `value(KEY,...)`, `table(KEY,...)`, `csv(KEY,...)` with a projection of resource keys;
- a key is a dotted path into a row (`labels.env`, `acceleratorType`), optionally with
  a transform (`name.basename()`, `.lower()`, `.upper()`) and `:label=HEADING`;
- `value`: tab-separated, no heading, list items joined by `;`; `table`: headings are the
  last part of each key in capitals; `csv`: a heading row of the keys;
  `[no-heading]` drops the heading of `table` and `csv`;
- `--sort-by=KEY,~KEY`: `~` sorts that key descending; rows missing a key come first.
Everything here is pure: rows in, rows or text out. A bad expression raises UsageError
naming it.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from typing import Any

from tpuctl.cli.keys import KEY, lookup, missing
from tpuctl.errors import UsageError

_TRANSFORMS = {
    "basename": lambda v: str(v).rstrip("/").rsplit("/", 1)[-1],
    "lower": lambda v: str(v).lower(),
    "upper": lambda v: str(v).upper(),
}
FORMATS = ("json", "yaml", "value", "table", "csv")


@dataclass(frozen=True)
class Column:
    key: str
    transforms: tuple[str, ...] = ()
    label: str = ""

    def heading(self) -> str:
        return self.label or self.key.split(".")[-1].upper()

    def value(self, row: Any) -> Any:
        v = lookup(row, self.key)
        for t in self.transforms:
            if not missing(v):
                v = _TRANSFORMS[t](v)
        return v


@dataclass(frozen=True)
class Format:
    name: str
    columns: tuple[Column, ...] = field(default_factory=tuple)
    heading: bool = True


def parse_format(text: str) -> Format:
    """`json`, `yaml`, `value(name,zone)`, `table[no-heading](name.basename():label=N)`."""
    m = re.fullmatch(r"\s*([a-z]+)\s*(?:\[([^\]]*)\])?\s*(?:\((.*)\))?\s*", text, re.S)

    def bad(why: str) -> UsageError:
        return UsageError(f"invalid --format {text!r}: {why}")

    if not m:
        raise bad("use json, yaml, value(KEY,...), table(KEY,...) or csv(KEY,...)")
    name, attributes, projection = m.group(1), m.group(2), m.group(3)
    if name not in FORMATS:
        raise bad(f"unknown format {name!r}; one of {', '.join(FORMATS)}")
    heading = True
    for attribute in filter(None, (a.strip() for a in (attributes or "").split(","))):
        if attribute != "no-heading":
            raise bad(f"unknown attribute {attribute!r} (no-heading is known)")
        heading = False
    if name in ("json", "yaml"):
        if projection is not None:
            raise bad(f"{name} takes no projection here")
        return Format(name)
    if not projection or not projection.strip():
        raise bad(f"{name} needs the keys to show, e.g. {name}(name,zone)")
    return Format(name, tuple(_column(p, bad) for p in projection.split(",")), heading)


def _column(text: str, bad: Any) -> Column:
    key_part, _, label_part = text.strip().partition(":")
    label = ""
    if label_part:
        lm = re.fullmatch(r"\s*label=(.*)", label_part)
        if not lm:
            raise bad(f"unknown key attribute {label_part!r} (label=HEADING is known)")
        label = lm.group(1).strip().strip("'\"")
    transforms = re.findall(r"\.([a-z]+)\(\)", key_part)
    key = re.sub(r"\.[a-z]+\(\)", "", key_part).strip()
    if not KEY.fullmatch(key):
        raise bad(f"{key_part.strip() or 'an empty key'!r} is not a resource key")
    for t in transforms:
        if t not in _TRANSFORMS:
            raise bad(f"unknown transform {t}() ({', '.join(f'{n}()' for n in _TRANSFORMS)})")
    return Column(key, tuple(transforms), label)


def parse_sort_by(text: str) -> list[tuple[str, bool]]:
    """`zone,~name` -> [(key, descending)]."""
    keys = []
    for part in text.split(","):
        p = part.strip()
        descending = p.startswith("~")
        key = p[1:].strip() if descending else p
        if not KEY.fullmatch(key):
            raise UsageError(f"invalid --sort-by {text!r}: {p!r} is not a resource key")
        keys.append((key, descending))
    return keys


def _order(value: Any) -> tuple[int, Any]:
    if missing(value):
        return (0, "")
    if isinstance(value, bool):
        return (1, int(value))
    if isinstance(value, int | float):
        return (1, value)
    return (2, json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else str(value))


def sort_rows(
    rows: list[Any], keys: list[tuple[str, bool]], row_of: Any = lambda r: r
) -> list[Any]:
    """Sorted by the first key, then the next for ties, and so on (a stable sort per key,
    the last key first); `row_of` gives the row an item stands for."""
    out = list(rows)
    for key, descending in reversed(keys):

        def by(item: Any, k: str = key) -> tuple[int, Any]:
            return _order(lookup(row_of(item), k))

        out.sort(key=by, reverse=descending)
    return out


def parse_limit(value: int | None) -> int | None:
    if value is not None and value < 1:
        raise UsageError(f"invalid --limit {value}: at least 1")
    return value


def _cell(value: Any, joiner: str) -> str:
    if missing(value):
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, list):
        return joiner.join(_cell(v, joiner) for v in value)
    if isinstance(value, dict):
        return joiner.join(f"{k}={_cell(v, joiner)}" for k, v in value.items())
    return str(value)


def render(rows: list[Any], fmt: Format) -> str:
    """The text for `rows` in `fmt`, ending in a newline unless it is empty."""
    if fmt.name == "json":
        return json.dumps(rows, indent=2, default=str) + "\n"
    if fmt.name == "yaml":
        from tpuctl.cli.yaml_out import dump_all

        return dump_all(rows)
    cells = [[_cell(c.value(r), ";") for c in fmt.columns] for r in rows]
    if fmt.name == "value":
        return "".join("\t".join(line) + "\n" for line in cells)
    if fmt.name == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        if fmt.heading:
            writer.writerow([c.label or c.key for c in fmt.columns])
        writer.writerows(cells)
        return buffer.getvalue()
    headings = [c.heading() for c in fmt.columns]
    table = ([headings] if fmt.heading else []) + cells
    if not table:
        return ""
    widths = [max(len(line[i]) for line in table) for i in range(len(headings))]
    return "".join(
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() + "\n"
        for line in table
    )


def chosen(
    rows: list[Any], filter_text: str | None, sort_text: str | None, limit: int | None
) -> list[int]:
    """Indexes of the rows to show, in order: sorted, filtered, cut to the limit (the
    order gcloud applies --sort-by, --filter and --limit in)."""
    from tpuctl.cli.filters import parse_filter

    keep = parse_filter(filter_text) if filter_text else None
    order = list(range(len(rows)))
    if sort_text:
        keys = parse_sort_by(sort_text)
        order = sort_rows(order, keys, lambda i: rows[i])
    picked = [i for i in order if keep is None or keep(rows[i])]
    return picked[: parse_limit(limit)] if limit is not None else picked
