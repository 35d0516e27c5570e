"""Help that reads like a CLI's: `--zone ZONE`, `--ttl DURATION`, `Usage: tpuctl create
[OPTIONS] [NAME]`.

Typer 0.29 shows a Python type for every value (`--zone <str>`, `--labels <list[str]>`,
`name <str>`) and wraps required arguments in braces in the usage line (`{script}`).
`name_values` gives each parameter that has no metavar of its own the name gcloud and
click would show: the option's name in capitals, or what it takes (DURATION, KEY=VALUE).
"""

from __future__ import annotations

from typing import Any

# option dest -> what it takes, where its own name would not say it
_TAKES = {
    "ttl": "DURATION",
    "idle_timeout": "DURATION",
    "valid_until": "DURATION",
    "start_deadline": "DURATION",
    "heartbeat_deadline": "DURATION",
    "older_than": "DURATION",
    "idle": "DURATION",
    "interval": "DURATION",
    "labels": "KEY=VALUE,...",
    "metadata": "KEY=VALUE,...",
    "env_pairs": "NAME=VALUE",
    "env_file": "FILE",
    "file": "FILE",
    "workdir": "DIR",
    "outputs": "DIR",
    "output_dir": "DIR",
    "state_dir": "DIR",
    "exclude": "PATTERN",
    "accelerator": "TYPE",
    "sync_every": "DURATION",
    "hang_after": "DURATION",
    "connect_timeout": "DURATION",
    "notice": "DURATION",
    "timeout": "DURATION",
}


def name_values(command: Any) -> Any:
    """Set the metavar of every parameter of `command` (a click command, as typer makes
    it: typer 0.29 carries a click of its own, so nothing here names click's classes) and
    of its subcommands, where it has none."""
    for param in command.params:
        if param.metavar is not None:
            continue
        if param.param_type_name == "argument":
            param.metavar = (param.name or "arg").upper()
        elif param.param_type_name == "option" and not (param.is_flag or param.count):
            param.metavar = _TAKES.get(param.name or "", _number(param) or _upper(param))
    for sub in getattr(command, "commands", {}).values():
        name_values(sub)
    return command


def _number(param: Any) -> str | None:
    described = getattr(param, "type_descriptor", None)  # typer 0.29
    kind = described.annotation if described is not None else getattr(param.type, "name", "")
    return "N" if kind in (int, "integer") else None


def _upper(param: Any) -> str:
    longest = max(param.opts, key=len).lstrip("-")
    return longest.replace("-", "_").upper()


def plain_arguments(argument_class: Any) -> None:
    """Arguments shown by their names alone: bare when required in the usage line
    (`SCRIPT`, not `{SCRIPT}`), as click and man pages do, optional ones in brackets,
    and no Python type after the name in the list of arguments (`NAME`, not `NAME <str>`).
    """
    if not hasattr(argument_class, "_usage_display_name"):
        return  # an older typer, which already does so

    def usage_name(self: Any) -> str:
        name = str(self.display_name_raw)
        if self.nargs != 1:
            name += "..."
        return name if self.required else f"[{name}]"

    argument_class._usage_display_name = usage_name
    argument_class.display_type_rich = lambda self, ctx: None


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


def whole_summaries(command: Any) -> Any:
    """Each subcommand's line in its group's list is the first paragraph of its help, whole
    (click cuts a summary that does not fit with "..."; the summaries are written to fit 80
    columns, and at a narrower terminal they wrap instead)."""
    for sub in getattr(command, "commands", {}).values():
        if not sub.short_help and sub.help:
            sub.short_help = " ".join(sub.help.split("\n\n", 1)[0].split())
        whole_summaries(sub)
    return command


def unbroken_hyphens() -> None:
    """Help never wraps inside a word at its hyphens (`us-` / `west4-a`, `--keep-` /
    `request`), so what is shown can be copied: a line breaks at spaces only."""
    try:  # typer >= 0.29 vendors click; older releases depend on it
        from typer._click import _textwrap
    except ImportError:  # pragma: no cover
        from click import _textwrap  # type: ignore[no-redef]
    if getattr(_textwrap.TextWrapper, "whole_words", False):
        return

    class WholeWords(_textwrap.TextWrapper):  # type: ignore[misc, name-defined]
        whole_words = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["break_on_hyphens"] = False
            super().__init__(*args, **kwargs)

    _textwrap.TextWrapper = WholeWords  # type: ignore[misc]
