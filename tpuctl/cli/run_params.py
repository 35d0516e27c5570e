"""`tpuctl run`'s parameters, made from its options' declarations
(tpuctl/services/run/options.py): declare.py reads a command's parameters from its signature,
so the command's signature is built from the declarations, each an `Annotated` parameter
as one would write by hand. An option `create` shares is the one tpuctl/cli declares for
both (node_options.py, options.py), named by the declaration's `shared`.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from tpuctl.cli import declare, node_options
from tpuctl.cli import options as cli_options
from tpuctl.services.run.options import OPTIONS, RunOption, RunOptions

F = TypeVar("F", bound=Callable[..., Any])


def shared(o: RunOption) -> Any:
    """The `Annotated` alias of a shared option (its type and its Option)."""
    alias = getattr(cli_options, o.shared or "", None) or getattr(node_options, o.shared or "")
    return alias


def _parser(o: RunOption) -> Callable[[Any], Any] | None:
    text = o.kind.text
    if text is None:
        return None
    return lambda value: text(value, o.flag) if isinstance(value, str) else value


def _annotation(o: RunOption, hint: Any) -> Any:
    if o.shared:
        return shared(o)
    if o.argument:
        return Annotated[hint, declare.Argument(help=o.help, show_default=False)]
    parser = _parser(o)
    info = declare.Option(
        *(o.flags or (o.flag,)),
        help=o.help,
        metavar=o.metavar or o.kind.metavar,
        parser=parser,
        show_default=parser is None,
    )
    return Annotated[hint, info]


def parameters() -> list[inspect.Parameter]:
    """`run`'s parameters after `ctx`, in the declarations' order."""
    hints = typing.get_type_hints(RunOptions)
    return [
        inspect.Parameter(
            o.name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=o.default,
            annotation=_annotation(o, hints[o.name]),
        )
        for o in OPTIONS
    ]


def with_run_options(command: F) -> F:
    """`command(ctx, **options)` with the signature of ctx and every declared option."""
    ctx = inspect.Parameter(
        "ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=declare.Context
    )
    params = [ctx, *parameters()]
    command.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    return command
