"""Write docs/emulator-reference.md from the emulator's own tables: each service's REST
routes (`tpuctl/emulator/services.py`), the control plane's routes
(`control/urls.py`), the config keys the control plane accepts and the rule tables
(durations, presets, fault codes, worker-fault kinds).

    python scripts/emulator_reference.py           # write the page
    python scripts/emulator_reference.py --check   # exit 1 when the page differs

A dev script: it imports the emulator, which tpuctl's client code never does.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tpuctl.emulator.billing import catalog as billing  # noqa: E402
from tpuctl.emulator.control.client import CONTROL_PREFIX  # noqa: E402
from tpuctl.emulator.control.urls import CONTROL_PREFIXES, CONTROL_ROUTES  # noqa: E402
from tpuctl.emulator.core import errors  # noqa: E402
from tpuctl.emulator.core.state import DEFAULT_DURATIONS, OWN_CONFIG_KEYS  # noqa: E402
from tpuctl.emulator.iam import access  # noqa: E402
from tpuctl.emulator.monitoring import models as monitoring  # noqa: E402
from tpuctl.emulator.quotas import compute as compute_quotas  # noqa: E402
from tpuctl.emulator.quotas import limits  # noqa: E402
from tpuctl.emulator.services import SERVICES  # noqa: E402
from tpuctl.emulator.workers import faults as worker_faults  # noqa: E402

PAGE = ROOT / "docs" / "emulator-reference.md"
COMMAND = "python scripts/emulator_reference.py"


def template(regex: str) -> str:
    """A route's path regex as a readable template: named groups become `{name}`,
    alternatives `{a|b}`, escapes their character."""
    out: list[str] = []
    i = 0
    while i < len(regex):
        c = regex[i]
        if regex.startswith("(?P<", i):
            name = regex[i + 4 : regex.index(">", i)]
            i = _close(regex, i)
            out.append("{" + name + "}")
        elif regex.startswith("(?:", i):
            end = _close(regex, i)
            out.append("{" + regex[i + 3 : end - 1] + "}")
            i = end
        elif c == "[":
            end = regex.index("]", i)
            out.append("{" + "|".join(regex[i + 1 : end]) + "}")
            i = end + 1
        elif c == "\\":
            out.append(regex[i + 1])
            i += 2
        elif c in "^$":
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _close(regex: str, start: int) -> int:
    """The index just past the group that opens at `start`."""
    depth = 0
    i = start
    while i < len(regex):
        if regex[i] == "\\":
            i += 2
            continue
        if regex[i] == "[":
            i = regex.index("]", i) + 1
            continue
        depth += {"(": 1, ")": -1}.get(regex[i], 0)
        i += 1
        if depth == 0:
            return i
    raise ValueError(f"unbalanced group in {regex!r}")


def permission(verb: str) -> str:
    if verb in access.VERBS:
        return access.VERBS[verb][1] or "none"
    return access.compute_permission(verb) or "none"


def _code(value: object) -> str:
    return f"`{value}`"


def _json(value: object) -> str:
    return _code(json.dumps(value))


def _pairs(values: Mapping[str, object]) -> str:
    """`key` default, ... on one line."""
    return ", ".join(f"`{key}` {_json(value)}" for key, value in values.items()) + "."


def _keys(spec: tuple[str, ...]) -> str:
    shown = []
    for item in spec:
        if item.startswith("="):
            continue
        if item == "body":
            shown.append("a JSON object")
        elif item.endswith("?"):
            shown.append(f"`{item[:-1]}` (optional)")
        else:
            shown.append(f"`{item}`")
    return ", ".join(shown) or "-"


def prefix_of(path: str) -> str:
    """The part of a path its group shares: up to its second placeholder segment (`{x}`)
    when a segment follows, else up to its first, else its first segment."""
    parts = path.split("/")
    marks = [i for i, part in enumerate(parts[:-1]) if part.startswith("{")]
    end = marks[1] if len(marks) > 1 else marks[0] if marks else 1
    return "/".join(parts[: end + 1]) if end < len(parts) - 1 else ""


def groups(paths: list[str]) -> list[tuple[str, list[int]]]:
    """Consecutive paths of one prefix: (prefix, their indexes)."""
    out: list[tuple[str, list[int]]] = []
    for i, path in enumerate(paths):
        prefix = prefix_of(path)
        if out and out[-1][0] == prefix:
            out[-1][1].append(i)
        else:
            out.append((prefix, [i]))
    return out


def _first(path: str) -> tuple[str, str]:
    """`/v2/projects/x` -> (`v2`, `projects/x`)."""
    _, first, rest = (path + "/").split("/", 2)
    return first, rest


def repeats(routes: list[tuple[str, str, str]]) -> dict[str, list[str]]:
    """First segments (`v2alpha1`) that serve again, with the same verb, every route of
    the first segments before them that they repeat any of (`v2`, `v{1|2}`): each maps
    to those it repeats. Their repeated routes are said in one line, not listed."""
    seen: dict[tuple[str, str, str], str] = {}
    sources: dict[str, set[str]] = {}
    for method, path, verb in routes:
        first, rest = _first(path)
        earlier = seen.setdefault((method, rest, verb), first)
        if earlier != first:
            sources.setdefault(first, set()).add(earlier)
    out = {}
    for alias, froms in sources.items():
        mine = {(m, _first(p)[1], v) for m, p, v in routes if _first(p)[0] == alias}
        theirs = {(m, _first(p)[1], v) for m, p, v in routes if _first(p)[0] in froms}
        if theirs <= mine:
            out[alias] = sorted(froms)
    return out


def route_lines(routes: list[tuple[str, str, str]]) -> list[str]:
    """(method, path template, verb) as one line each, grouped under their prefixes; a
    first segment that serves again the routes of others says so in one line."""
    aliases = repeats(routes)
    known = {(m, _first(p)[1], v) for m, p, v in routes if _first(p)[0] not in aliases}
    lines: list[str] = []
    shown = [
        (method, path, verb)
        for method, path, verb in routes
        if _first(path)[0] not in aliases or (method, _first(path)[1], verb) not in known
    ]
    for alias, froms in aliases.items():
        where = " and ".join(f"`/{first}`" for first in froms)
        lines += ["", f"`/{alias}` serves each route below under {where} too, as they do."]
    for prefix, members in groups([path for _, path, _ in shown]):
        lines += ["", f"`{prefix}`"] if prefix else [""]
        for i in members:
            method, path, verb = shown[i]
            lines.append(f"- {method} `{path[len(prefix) :]}` {verb}")
    return lines


def _verb(service: str, verb: str) -> str:
    """The verb, and the permission checked unless it is the verb's own name."""
    checked = permission(verb)
    own = {verb.lower(), f"{service.split('.')[0]}.{verb}".lower()}
    return f"`{verb}`" if checked.lower() in own else f"`{verb}` ({checked})"


def routes_section() -> list[str]:
    lines = [
        "## REST routes",
        "",
        "Each service's routes in the order they are matched, under the prefix they share:",
        "method, path, the verb `/requests` counts, and the permission checked unless it is",
        "the verb, alone or after the API's name, case aside: `none` when none is.",
    ]
    for service in SERVICES:
        routes = [
            (method, template(path), _verb(service.name, verb))
            for method, path, verb, _, _ in service.routes
        ]
        lines += ["", f"### {service.name}"]
        if not routes:
            lines += ["", "No REST route on the emulator's port: it is served on its own."]
            continue
        lines += route_lines(routes)
    return lines


def control_section() -> list[str]:
    rows = [
        (method, path, f"`{target}`" + ("" if spec_keys == "-" else f", body: {spec_keys}"))
        for (method, path), (target, spec, _) in CONTROL_ROUTES.items()
        for spec_keys in [_keys(spec)]
    ]
    rows += [
        (method, prefix + "{id}", f"`{target}`")
        for (method, prefix), (target, _) in CONTROL_PREFIXES.items()
    ]
    lines = [
        "## Control-plane routes",
        "",
        f"JSON in and out; never faulted, never counted. Under `{CONTROL_PREFIX}`: method,",
        "path, the backend's method and the body's keys.",
        "",
    ]
    return lines + [f"- {method} `{path}` {rest}" for method, path, rest in rows]


def config_section() -> list[str]:
    owners = [("the emulator", "", OWN_CONFIG_KEYS)] + [
        (service.name, slot.name, slot.config_keys)
        for service in SERVICES
        for slot in service.slots
    ]
    rows = [
        f"- {service} (`{f'state.{slot}' if slot else 'state'}`): "
        + ", ".join(map(_code, sorted(keys)))
        for service, slot, keys in owners
        if keys
    ]
    lines = [
        "## Config keys",
        "",
        f"What `POST {CONTROL_PREFIX}config` accepts, by the service that owns it and",
        "where the emulator's state holds it.",
    ]
    lines += ["", *rows]
    presets = [
        ("quotas", limits.PRESETS),
        ("compute_quotas", compute_quotas.PRESETS),
        ("quotas_api", limits.API_MODES),
        ("services", access.PRESETS),
        ("billing_catalog", billing.MODES),
    ]
    lines += ["", "### Presets", "", "The string values a key takes besides a map:", ""]
    lines += [f"- `{k}`: " + ", ".join(map(_code, v)) for k, v in presets]
    lines += [
        "",
        "### Durations",
        "",
        "`durations` keys and their defaults in seconds (null: held until `advance`):",
        _pairs(DEFAULT_DURATIONS),
        "",
        "### Monitoring settings",
        "",
        f"What `POST {CONTROL_PREFIX}monitoring` accepts, in seconds:",
        _pairs(monitoring.DEFAULTS),
    ]
    return lines


def rules_section() -> list[str]:
    fields: dict[str, object] = {
        f.name: f.default_factory() if callable(f.default_factory) else f.default
        for f in dataclasses.fields(errors.Faults)
    }
    lines = [
        "## Rule tables",
        "",
        "### Faults",
        "",
        f"`POST {CONTROL_PREFIX}faults` keys and defaults:",
        _pairs(fields),
        "",
        "HTTP codes a fault may answer: " + ", ".join(map(_code, errors.FAULT_CODES)) + ".",
    ]
    lines += ["", "### Worker faults", "", f"`kind` of `POST {CONTROL_PREFIX}worker-fault`."]
    return lines + [""] + [f"- `{kind}`" for kind in worker_faults.KINDS]


def render() -> str:
    lines = [
        "# Emulator reference",
        "",
        f"Generated by `{COMMAND}` (`make docs-reference`) from the emulator's own tables: "
        "do not edit by hand.",
        "",
        "Every route, control call, config key and rule table the emulator has, as its code "
        "declares them; the guide is [emulator.md](emulator.md).",
        "",
        *routes_section(),
        "",
        *control_section(),
        "",
        *config_section(),
        "",
        *rules_section(),
    ]
    text = "\n".join(lines) + "\n"
    return re.sub(r"\n{3,}", "\n\n", text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the page differs")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"{PAGE} is out of date: run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
