"""Options shared by commands, and the per-invocation environment they work in.

The environment (`AppEnv`) travels in the click context (`ctx.obj`), set by the root
callback: a command reads it with `app_of(ctx)`, and a test hands `main()` its own.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from tpuctl.catalog import canonical_accelerator
from tpuctl.cli import complete, declare
from tpuctl.cloud import registry
from tpuctl.errors import UsageError

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.cloud.clients import ClientFactory
    from tpuctl.config import Target

Project = Annotated[
    str | None,
    declare.Option(
        "--project", "-p", help="Google Cloud project (default: see docs/configuration.md)."
    ),
]
Zone = Annotated[
    str | None,
    declare.Option("--zone", "-z", help="Zone, e.g. us-central1-a.", autocompletion=complete.zones),
]
Zones = Annotated[
    str | None,
    declare.Option(
        "--zone",
        "-z",
        help="Zone, or zones to try in order when one has no capacity or quota left: "
        "us-central2-b,us-east5-a.",
        autocompletion=complete.zones,
    ),
]
Json = Annotated[bool, declare.Option("--json", help="Print machine-readable JSON on stdout.")]
Accelerator = Annotated[
    str,
    declare.Option(
        "--accelerator",
        "-a",
        "--accelerator-type",
        callback=canonical_accelerator,  # v5e-8 -> v5litepod-8, as the API names it
        autocompletion=complete.accelerators,
        help="TPU type, e.g. v3-8, v4-32, v5litepod-8 (v5e-8 works too).",
    ),
]
NodeName = Annotated[
    str, declare.Argument(help="Node name.", autocompletion=complete.node_names, show_default=False)
]
JobRef = Annotated[
    str,
    declare.Argument(help="Job id or --name (see `tpuctl jobs`).", autocompletion=complete.job_ids),
]
NoWait = Annotated[
    bool, declare.Option("--no-wait", help="Return once the cloud accepted the request.")
]


@dataclass
class AppEnv:
    """What one invocation works with; tests build their own instead of patching."""

    debug: bool = False
    stdin_isatty: bool = field(default_factory=lambda: sys.stdin.isatty())
    _factory: ClientFactory | None = None

    @property
    def factory(self) -> ClientFactory:
        if self._factory is None:
            from tpuctl.cloud.clients import ClientFactory

            self._factory = ClientFactory()
        return self._factory

    def target(
        self,
        project: str | None,
        zone: str | None,
        need_zone: bool = True,
        many_zones: bool = False,
    ) -> Target:
        from tpuctl.cli.first_run import not_set_up
        from tpuctl.config import NotSetUp
        from tpuctl.services.zones import check_known
        from tpuctl.target_resolution import resolve_target

        try:
            target = resolve_target(
                project,
                zone,
                endpoint_defaults=self.factory.defaults,
                need_zone=need_zone,
                many_zones=many_zones,
            )
        except NotSetUp as e:  # a first run: everything missing in one message
            missing = [*e.missing] + ([] if self.factory.has_credentials() else ["credentials"])
            if len(missing) > 1:
                raise not_set_up(missing) from None
            raise

        def served() -> list[str]:  # us-central1-z: a zone no API serves
            return [z for b in self.backends() for z in b.locations(target.project)]

        check_known(target, served)
        return target

    def tpu(self) -> TpuBackend:
        """The adapter of the API whose quota `tpuctl quota` reports row by row
        (`BackendKind.reports_quota`: the Cloud TPU API's)."""
        return registry.quota_api(self.backends())

    def backends(self) -> list[TpuBackend]:
        """The APIs a node may be on (the registry's entries, whose order means nothing)."""
        return self.factory.backends()


def app_of(ctx: declare.Context) -> AppEnv:
    """The invocation's AppEnv, which the root callback put in the click context."""
    return ctx.ensure_object(AppEnv)


# A list's table without dropping columns to fit the terminal (identifiers are never cut)
Wide = Annotated[
    bool,
    declare.Option("--wide", help="Every column, even where the terminal is narrow."),
]


def _api_names(auto: bool = False) -> str:
    """`tpu (the Cloud TPU API) or compute (Compute Engine)`, from the registry."""
    named = [f"{k.key} ({k.called})" for k in registry.KINDS]
    named += [f"{registry.AUTO} (any, in order)"] if auto else []
    return ", ".join(named[:-1]) + " or " + named[-1] if len(named) > 1 else named[0]


def _api(value: str | None) -> str | None:
    if value is not None and value not in registry.known():
        raise UsageError(f"invalid --api {value!r}: {_api_names()}")
    return value


def _run_api(value: str | None) -> str | None:
    if value is not None and value not in (*registry.known(), registry.AUTO):
        raise UsageError(f"invalid --api {value!r}: {_api_names(auto=True)}")
    return value


# `run`'s: also auto, either API, zone by zone (docs/compute-engine.md, "Capacity hunting")
RunApi = Annotated[
    str | None,
    declare.Option(
        "--api",
        metavar="|".join((*registry.known(), registry.AUTO)),
        help=f"The API: {registry.choices(auto=True)} (in each zone the default API, then "
        "the others, on no capacity or quota).",
        callback=_run_api,
        show_default=False,
    ),
]

# Which TPU API: the Cloud TPU API or Compute Engine (docs/compute-engine.md)
Api = Annotated[
    str | None,
    declare.Option(
        "--api",
        metavar="|".join(registry.known()),
        help=f"The API: {registry.choices()} (default: the one that offers the type; v6e and "
        f"v5p: the config file's `api`, else {registry.preferred().key}).",
        callback=_api,
        show_default=False,
    ),
]


def seconds(flag: str, minimum: float = 0.0, maximum: float | None = None) -> Any:
    """A callback for an option that takes a duration (`30s`, `5m`; a bare number is
    seconds) and hands the command its seconds as a float (None stays None)."""
    from tpuctl.durations import MAX_SECONDS, parse_seconds

    def convert(value: str | float | None) -> float | None:
        if value is None or isinstance(value, float):
            return value
        return parse_seconds(str(value), flag, minimum, MAX_SECONDS if maximum is None else maximum)

    return convert


MAX_COUNT = 10**9  # a bound for counts typed on the command line (--limit, --value)


def whole_number(flag: str, minimum: int, maximum: int) -> Any:
    """A callback for an option that takes a whole number from `minimum` to `maximum`,
    refused in those words (not click's) otherwise."""

    def convert(value: str | int | None) -> int | None:
        if value is None or isinstance(value, int):
            return value
        text = str(value).strip()
        if not (text.isascii() and text.isdigit() and minimum <= int(text) <= maximum):
            raise UsageError(f"invalid {flag} {value!r}: a whole number {minimum} to {maximum}")
        return int(text)

    return convert


def _checked(module: str, parser: str) -> Any:
    """A callback that parses an expression at once (a usage error before any call) and
    hands the command its text; the parser is imported only when the flag is given."""

    def check(value: str | None) -> str | None:
        if value is not None:
            import importlib

            getattr(importlib.import_module(module), parser)(value)
        return value

    return check


# gcloud's list flags (docs/commands.md, "Output, filters and sorting")
Format = Annotated[
    str | None,
    declare.Option(
        "--format",
        metavar="FORMAT",
        callback=_checked("tpuctl.cli.projection", "parse_format"),
        help="As gcloud's: json, yaml, value(KEY,...), table(KEY,...), csv(KEY,...).",
    ),
]
Filter = Annotated[
    str | None,
    declare.Option(
        "--filter",
        metavar="EXPRESSION",
        callback=_checked("tpuctl.cli.filters", "parse_filter"),
        help="Only the rows it matches, as gcloud's: 'state=READY AND name:train*'.",
    ),
]
SortBy = Annotated[
    str | None,
    declare.Option(
        "--sort-by",
        metavar="KEY,~KEY",
        callback=_checked("tpuctl.cli.projection", "parse_sort_by"),
        help="Sort by these keys of the --json rows; ~ sorts a key descending.",
    ),
]
Limit = Annotated[
    int | None,
    declare.Option(
        "--limit", metavar="N", parser=whole_number("--limit", 1, MAX_COUNT), help="At most N rows."
    ),
]
