"""Help that reads like a CLI's: `--zone ZONE`, `--ttl DURATION`, `Usage: tpuctl create
[OPTIONS] [NAME]`, through click's public extension points.

tpuctl's commands are made of the classes below (tpuctl/cli/declare.py): each parameter
that has no metavar of its own gets the name gcloud would show (the option's name in
capitals, or what it takes: DURATION, KEY=VALUE, N), arguments are shown by their names
alone and listed with their help, the commands of a group in the order they were added, a
command's summary in its group's list is whole, and help never breaks a word at its
hyphens.
"""

from __future__ import annotations

from typing import Any

import click

# option dest -> what it takes, where its own name would not say it (run's options say
# it in their declarations: tpuctl/services/run/options.py)
_TAKES = {
    "ttl": "DURATION",
    "idle_timeout": "DURATION",
    "valid_until": "DURATION",
    "older_than": "DURATION",
    "idle": "DURATION",
    "interval": "DURATION",
    "labels": "KEY=VALUE,...",
    "metadata": "KEY=VALUE,...",
    "workdir": "DIR",
    "output_dir": "DIR",
    "state_dir": "DIR",
    "accelerator": "TYPE",
    "connect_timeout": "DURATION",
    "notice": "DURATION",
    "timeout": "DURATION",
}
_HYPHEN = "\ue000"  # stands for "-" while a text is wrapped: a letter to the wrapper


class WholeWordsFormatter(click.HelpFormatter):
    """Help never wraps inside a word at its hyphens (`us-` / `west4-a`, `--keep-` /
    `request`), so what is shown can be copied: a line breaks at spaces only. The wrapper
    sees each hyphen as a letter; `getvalue` gives them back."""

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        super().write_usage(_held(prog), _held(args), prefix)

    def write_text(self, text: str) -> None:
        super().write_text(_held(text))

    def write_dl(self, rows: Any, *args: Any, **kwargs: Any) -> None:
        super().write_dl([(_held(a), _held(b)) for a, b in rows], *args, **kwargs)

    def getvalue(self) -> str:
        return str(super().getvalue()).replace(_HYPHEN, "-")


def _held(text: str) -> str:
    return text.replace("-", _HYPHEN)


class HelpContext(click.Context):
    formatter_class = WholeWordsFormatter


def name_values(command: Any) -> Any:
    """Set the metavar of every parameter of `command` that has none."""
    for param in command.params:
        if param.metavar is not None:
            continue
        if param.param_type_name == "argument":
            param.metavar = (param.name or "arg").upper()
        elif param.param_type_name == "option" and not (param.is_flag or param.count):
            param.metavar = _TAKES.get(param.name or "", _number(param) or _upper(param))
    return command


def _number(param: Any) -> str | None:
    return "N" if getattr(param.type, "name", "").startswith("integer") else None


def _upper(param: Any) -> str:
    longest = max(param.opts, key=len).lstrip("-")
    return longest.replace("-", "_").upper()


def _summary(command: Any, limit: int) -> str:
    """A command's line in its group's list: the first paragraph of its help, whole (click
    cuts a summary that does not fit with "..."; the summaries are written to fit 80
    columns, and at a narrower terminal they wrap instead)."""
    if command.short_help or not command.help:
        return str(click.Command.get_short_help_str(command, limit))
    return " ".join(command.help.split("\n\n", 1)[0].split())


class Command(click.Command):
    """A tpuctl command: values named, arguments plain (bare when required in the usage
    line, `SCRIPT` not `{SCRIPT}`, in brackets when optional, no Python type after the
    name in the list of arguments), hyphens whole."""

    context_class = HelpContext

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        name_values(self)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name != "argument":
                pieces.extend(param.get_usage_pieces(ctx))
                continue
            name = str(param.metavar) + ("..." if param.nargs != 1 else "")
            pieces.append(name if param.required else f"[{name}]")
        return pieces

    def format_arguments(self, ctx: Any, formatter: Any) -> None:
        """Nothing: the arguments are listed with the options (click 8.5's own section
        would say them twice)."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append((str(param.metavar), record[1]))
            elif param.param_type_name == "option":
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)

    def get_short_help_str(self, limit: int = 45) -> str:
        return _summary(self, limit)


class Group(click.Group):
    """A group of tpuctl's commands: its options named as a command's, its commands in
    the order they were added, each command's summary whole."""

    context_class = HelpContext

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        name_values(self)

    def get_short_help_str(self, limit: int = 45) -> str:
        return _summary(self, limit)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """A misspelt command's name is refused with the likeliest one, as click 8.2 on
        says it, whatever the release (8.1 names none)."""
        import difflib

        name = args[0] if args else ""
        if name not in self.commands and not name.startswith("-") and not ctx.resilient_parsing:
            like = difflib.get_close_matches(name, self.list_commands(ctx), n=1)
            if like:
                ctx.fail(f"No such command {name!r}. Did you mean {like[0]!r}?")
        return super().resolve_command(ctx, args)


def misspelt(error: Any, strict: bool = False) -> str | None:
    """The option a click NoSuchOption `error` most likely meant (`--accelerater`:
    `--accelerator`), None when it offers none; `strict`: only a near-exact one, where the
    word may as well be meant for someone else (a script's flag before `--`)."""
    import difflib

    if type(error).__name__ != "NoSuchOption" or not getattr(error, "possibilities", None):
        return None
    typed = str(getattr(error, "option_name", "") or "")
    cutoff = 0.8 if strict else 0.75
    like = difflib.get_close_matches(typed, sorted(error.possibilities), n=1, cutoff=cutoff)
    return like[0] if like else None
