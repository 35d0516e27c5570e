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


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    # a `|` inside a cell, even in code, ends the cell unless escaped (GitHub's tables)
    return lines + [
        "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows
    ]


def _code(value: object) -> str:
    return f"`{value}`"


def _json(value: object) -> str:
    return _code(json.dumps(value))


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


def routes_section() -> list[str]:
    lines = [
        "## REST routes",
        "",
        "Each service's routes, matched in this order; the verb is what `/requests` counts.",
    ]
    for service in SERVICES:
        rows = [
            (method, _code(template(path)), _code(verb), _code(permission(verb)))
            for method, path, verb, _, _ in service.routes
        ]
        lines += ["", f"### {service.name}", ""]
        if not rows:
            lines.append("No REST route on the emulator's port: it is served on its own.")
            continue
        lines += _table(("method", "path", "verb", "permission checked"), rows)
    return lines


def control_section() -> list[str]:
    rows = [
        (method, _code(CONTROL_PREFIX + path), _code(target), _keys(spec))
        for (method, path), (target, spec, _) in CONTROL_ROUTES.items()
    ]
    rows += [
        (method, _code(CONTROL_PREFIX + prefix + "{id}"), _code(target), "-")
        for (method, prefix), (target, _) in CONTROL_PREFIXES.items()
    ]
    lines = ["## Control-plane routes", "", "JSON in and out; never faulted, never counted."]
    return lines + [""] + _table(("method", "path", "backend method", "body keys"), rows)


def config_section() -> list[str]:
    owners = [("the emulator", "", OWN_CONFIG_KEYS)] + [
        (service.name, slot.name, slot.config_keys)
        for service in SERVICES
        for slot in service.slots
    ]
    rows = [
        (_code(key), service, _code(f"state.{slot}" if slot else "state"))
        for service, slot, keys in owners
        for key in sorted(keys)
    ]
    lines = [
        "## Config keys",
        "",
        f"What `POST {CONTROL_PREFIX}config` accepts, by the service that owns it and",
        "where the emulator's state holds it.",
    ]
    lines += [""] + _table(("key", "service", "held in"), rows)
    presets = [
        ("quotas", limits.PRESETS),
        ("compute_quotas", compute_quotas.PRESETS),
        ("quotas_api", limits.API_MODES),
        ("services", access.PRESETS),
        ("billing_catalog", billing.MODES),
    ]
    lines += ["", "### Presets", "", "The string values a key takes besides a map."]
    lines += [""] + _table(
        ("key", "values"), [(_code(k), ", ".join(map(_code, v))) for k, v in presets]
    )
    durations = [(_code(k), _json(v)) for k, v in DEFAULT_DURATIONS.items()]
    lines += [
        "",
        "### Durations",
        "",
        "`durations` keys and their defaults in seconds (null: held until `advance`).",
    ]
    lines += [""] + _table(("duration", "default"), durations)
    sampler = [(_code(k), _json(v)) for k, v in monitoring.DEFAULTS.items()]
    lines += [
        "",
        "### Monitoring settings",
        "",
        f"What `POST {CONTROL_PREFIX}monitoring` accepts, in seconds.",
    ]
    return lines + [""] + _table(("setting", "default"), sampler)


def rules_section() -> list[str]:
    fields = [
        (_code(f.name), _json(f.default_factory() if callable(f.default_factory) else f.default))
        for f in dataclasses.fields(errors.Faults)
    ]
    lines = [
        "## Rule tables",
        "",
        "### Faults",
        "",
        f"`POST {CONTROL_PREFIX}faults` keys and defaults.",
    ]
    lines += [""] + _table(("key", "default"), fields)
    lines += [
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
