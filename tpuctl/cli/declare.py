"""tpuctl's commands are typed functions; this module makes click commands of them.

A command's parameters are declared in its signature, as `Annotated[T, Option(...)]` or
`Annotated[T, Argument(...)]` (shared ones are aliases: options.py, node_options.py), and
a parameter annotated `Context` receives click's context. `App` collects commands and
groups; `get_command(app)` gives the `click.Group`, whose parameters are click's own
(`click.STRING`, `INT`, `FLOAT`, a flag, `click.Path`, `multiple` for `list[...]`; a
`parser=` function becomes a `click.ParamType` of its own). Only what tpuctl uses is here.
"""

from __future__ import annotations

import inspect
import pathlib
import types
import typing
from collections.abc import Callable
from typing import Any, Union

import click

Context = click.Context
Exit = click.exceptions.Exit
Abort = click.Abort
BadParameter = click.BadParameter
echo = click.echo
confirm = click.confirm
get_current_context = click.get_current_context

F = typing.TypeVar("F", bound=Callable[..., Any])


class Option:
    """An option's declaration: its flags (default: `--name`, `--name/--no-name` for a
    bool), help, metavar, a `callback(value)` or `callback(ctx, param, value)` run on the
    value, a `parser(text)` that makes the value from what was typed, `autocompletion`
    (`f(incomplete)` or `f(ctx, incomplete)`: the words a TAB offers)."""

    kind = "option"

    def __init__(
        self,
        *decls: str,
        help: str | None = None,  # noqa: A002 - click's name for it
        metavar: str | None = None,
        callback: Callable[..., Any] | None = None,
        parser: Callable[[Any], Any] | None = None,
        show_default: bool | str = True,
        autocompletion: Callable[..., list[str]] | None = None,
        is_eager: bool = False,
        hidden: bool = False,
        envvar: str | None = None,
        min: int | None = None,  # noqa: A002 - click's names (an int's bounds)
        max: int | None = None,  # noqa: A002
    ) -> None:
        self.decls = decls
        self.help = help
        self.metavar = metavar
        self.callback = callback
        self.parser = parser
        self.show_default = show_default
        self.autocompletion = autocompletion
        self.is_eager = is_eager
        self.hidden = hidden
        self.envvar = envvar
        self.bounds = (min, max)


class Argument(Option):
    """A positional argument's declaration (named after its parameter)."""

    kind = "argument"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)


class ParsedType(click.ParamType):
    """The type of a parameter declared with `parser=`: the parser makes the value (and
    refuses in its own words); `name` is the Python type's, as click names it."""

    def __init__(self, parser: Callable[[Any], Any], name: str) -> None:
        self.parser = parser
        self.name = name

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        return self.parser(value)


class HelpArgument(click.Argument):
    """An argument with help, shown in the command's Arguments section (help.py)."""

    def __init__(self, *args: Any, help: str | None = None, **kwargs: Any) -> None:  # noqa: A002
        shown = kwargs.pop("show_default", True)
        super().__init__(*args, **kwargs)
        self.help = help
        given = kwargs.get("default")
        self.shown_default = given if shown and given not in (None, (), [], "") else None

    def get_help_record(self, ctx: click.Context) -> tuple[str, str]:
        extra = []
        if self.shown_default is not None:
            extra.append(f"default: {self.shown_default}")
        if self.required:
            extra.append("required")
        text = self.help or ""
        if extra:
            text = f"{text}  [{'; '.join(extra)}]" if text else f"[{'; '.join(extra)}]"
        return str(self.metavar or self.name), text


_TYPES: dict[Any, click.ParamType] = {
    str: click.STRING,
    int: click.INT,
    float: click.FLOAT,
    pathlib.Path: click.Path(path_type=pathlib.Path),
}


def _unwrapped(hint: Any) -> tuple[Any, bool]:
    """(`T`, is_list) of `T`, `T | None`, `list[T]`, `list[T] | None`."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) is list:
        return typing.get_args(hint)[0], True
    return hint, False


def _listed(param: click.Parameter, value: Any) -> Any:
    """A repeatable option's or a variadic argument's value as a list; None when nothing
    was given and the declared default is None."""
    if value is None or not (getattr(param, "multiple", False) or param.nargs == -1):
        return value
    if param.default is None and len(value) == 0:
        return None
    return list(value)


def _callback(function: Callable[..., Any]) -> Callable[..., Any]:
    """click's `callback(ctx, param, value)` of `function(value)` or `function(ctx, param,
    value)`."""
    takes = len(inspect.signature(function).parameters)

    def called(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        value = _listed(param, value)
        return function(value) if takes == 1 else function(ctx, param, value)

    return called


def _completion(function: Callable[..., list[str]]) -> Callable[..., list[str]]:
    """click's `shell_complete(ctx, param, incomplete)` of `function(incomplete)` or
    `function(ctx, incomplete)`."""
    takes_ctx = "ctx" in inspect.signature(function).parameters

    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
        return function(ctx, incomplete) if takes_ctx else function(incomplete)

    return complete


def _param(name: str, hint: Any, declared: Option, default: Any) -> click.Parameter:
    kind, is_list = _unwrapped(hint)
    required = default is inspect.Parameter.empty
    given: dict[str, Any] = {
        "required": required,
        "metavar": declared.metavar,
        "is_eager": declared.is_eager,
        "envvar": declared.envvar,
    }
    if not required:
        given["default"] = default
    if declared.callback is not None:
        given["callback"] = _callback(declared.callback)
    if declared.autocompletion is not None:
        given["shell_complete"] = _completion(declared.autocompletion)
    if kind is not bool:
        base = _TYPES[kind]
        if declared.bounds != (None, None):
            base = click.IntRange(*declared.bounds)
        parser = declared.parser
        given["type"] = base if parser is None else ParsedType(parser, base.name)
    if isinstance(declared, Argument):
        if is_list:
            given["nargs"] = -1
        return HelpArgument([name], help=declared.help, show_default=declared.show_default, **given)
    flags = declared.decls or (f"--{name.replace('_', '-')}",)
    if kind is bool:
        given["is_flag"] = True
        if not declared.decls:
            flags = (f"{flags[0]}/--no-{flags[0][2:]}",)
    return click.Option(
        [name, *flags],
        help=declared.help,
        show_default=declared.show_default and default != "",  # not `[default: ""]`
        hidden=declared.hidden,
        multiple=is_list,
        **given,
    )


def params_of(function: Callable[..., Any]) -> tuple[list[click.Parameter], str | None]:
    """The click parameters `function`'s signature declares, and the name of its context
    parameter (None if it takes none)."""
    hints = typing.get_type_hints(function, include_extras=True)
    made: list[click.Parameter] = []
    context = None
    for name, p in inspect.signature(function).parameters.items():
        hint = hints.get(name, p.annotation)
        if hint is click.Context or (isinstance(hint, type) and issubclass(hint, click.Context)):
            context = name
            continue
        metadata = getattr(hint, "__metadata__", ())
        declared = next((m for m in metadata if isinstance(m, Option)), None)
        if declared is None:
            raise TypeError(f"{function.__name__}: {name} is declared with no Option/Argument")
        made.append(_param(name, hint.__origin__, declared, p.default))
    return made, context


def _invoker(function: Callable[..., Any], context: str | None) -> Callable[..., Any]:
    def invoke(**values: Any) -> Any:
        ctx = click.get_current_context()
        by_name = {p.name: p for p in ctx.command.params}
        called = {k: _listed(by_name[k], v) if k in by_name else v for k, v in values.items()}
        if context is not None:
            called[context] = ctx
        return function(**called)

    invoke.__name__ = function.__name__
    invoke.__doc__ = function.__doc__
    return invoke


def make_command(
    function: Callable[..., Any], name: str | None, cls: type[click.Command], **settings: Any
) -> click.Command:
    params, context = params_of(function)
    return cls(
        name=name or function.__name__.replace("_", "-"),
        params=params,
        callback=_invoker(function, context),
        help=inspect.getdoc(function),
        **settings,
    )


class App:
    """A group of commands: `@app.command()` adds a function, `app.add_group(sub, name=)`
    a group, `@app.callback()` the group's own function (its options and help)."""

    def __init__(
        self,
        name: str | None = None,
        help: str | None = None,  # noqa: A002
        no_args_is_help: bool = False,
        cls: type[click.Group] | None = None,
        command_cls: type[click.Command] | None = None,
        context_settings: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.help = help
        self.no_args_is_help = no_args_is_help
        self.cls = cls
        self.command_cls = command_cls
        self.context_settings = context_settings
        self.function: Callable[..., Any] | None = None
        self.invoke_without_command = False
        self.entries: list[tuple[str | None, Any, dict[str, Any]]] = []

    def callback(self, invoke_without_command: bool = False) -> Callable[[F], F]:
        def register(function: F) -> F:
            self.function = function
            self.invoke_without_command = invoke_without_command
            return function

        return register

    def command(self, name: str | None = None, **settings: Any) -> Callable[[F], F]:
        def register(function: F) -> F:
            self.entries.append((name, function, settings))
            return function

        return register

    def add_group(self, app: App, name: str | None = None, help: str | None = None) -> None:  # noqa: A002
        self.entries.append((name, app, {"help": help}))


def get_command(app: App, name: str | None = None, help: str | None = None) -> click.Group:  # noqa: A002
    """The click group of `app` (`name` and `help` given by the group it is added to)."""
    from tpuctl.cli import help as help_mod

    params, context = params_of(app.function) if app.function else ([], None)
    text = help or app.help or (inspect.getdoc(app.function) if app.function else None)
    group_cls = app.cls or help_mod.Group
    group = group_cls(
        name=name or app.name,
        params=params,
        callback=_invoker(app.function, context) if app.function else None,
        help=text,
        no_args_is_help=app.no_args_is_help,
        invoke_without_command=app.invoke_without_command,
        # as click 8.2 on says it, whatever the release: a command is optional there
        subcommand_metavar=f"{'[COMMAND]' if app.invoke_without_command else 'COMMAND'} [ARGS]...",
        context_settings=app.context_settings,
    )
    groups_last = sorted(app.entries, key=lambda entry: isinstance(entry[1], App))
    for entry_name, target, settings in groups_last:
        if isinstance(target, App):
            group.add_command(get_command(target, entry_name, settings.get("help")))
        else:
            given = dict(settings)
            cls = given.pop("cls", None) or app.command_cls or help_mod.Command
            group.add_command(make_command(target, entry_name, cls, **given))
    return group
