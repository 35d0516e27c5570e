"""The root of tpuctl's command line; `main()` is the one error boundary."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

from click import exceptions as click_exc

from tpuctl import __version__, interrupts
from tpuctl.cli import argcheck, complete, declare
from tpuctl.cli import help as help_mod
from tpuctl.cli.options import AppEnv
from tpuctl.errors import ExitCode, TpuctlError

# Every command, in the order the help lists them: (module in tpuctl.cli, function), or
# (module, its declare.App, the group's help). A command's module is imported only when that
# command runs, or when the whole tree is needed (the help, a name that is no command).
COMMANDS: dict[str, tuple[str, str] | tuple[str, str, str | None]] = {
    "init": ("init", "init"),
    "create": ("create", "create"),
    "list": ("list_cmd", "list_nodes"),
    "top": ("top", "top"),
    "describe": ("describe", "describe"),
    "stop": ("power", "stop"),
    "start": ("power", "start"),
    "delete": ("delete", "delete"),
    "maintain": ("maintain", "maintain"),
    "keep": ("keep", "keep"),
    "gc": ("gc", "gc"),
    "quota": ("quota", "app", None),
    "run": ("run", "run"),
    "doctor": ("doctor", "doctor"),
    "jobs": ("jobs", "jobs"),
    "logs": ("jobs", "logs"),
    "cancel": ("jobs", "cancel"),
    "outputs": ("jobs", "outputs"),
    "stacks": ("jobs", "stacks"),
    "cost": ("cost_cmd", "cost"),
    "prices": ("prices_cmd", "prices"),
    "profile": ("profile_cmd", "profile"),
    "ssh": ("ssh", "ssh"),
    "exec": ("exec_cmd", "exec_command"),
    "scp": ("scp", "scp"),
    "emulator": ("emulator_cmd", "app", "Run a local emulator of the cloud side."),
}


def _version(value: bool) -> None:
    if value:
        print(f"tpuctl {__version__}")
        raise declare.Exit(0)


def root(
    ctx: declare.Context,
    version: Annotated[
        bool,
        declare.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
    debug: Annotated[
        bool, declare.Option("--debug", help="Tracebacks and an HTTP trace on stderr.")
    ] = False,
    install_completion: Annotated[
        bool,
        declare.Option(
            "--install-completion",
            callback=complete.install,
            is_eager=True,
            help="Install completion for the current shell.",
        ),
    ] = False,
    show_completion: Annotated[
        bool,
        declare.Option(
            "--show-completion",
            callback=complete.show,
            is_eager=True,
            help="Show completion for the current shell, to copy it or customize the installation.",
        ),
    ] = False,
) -> None:
    """tpuctl: create, run on, watch and tear down Cloud TPU VMs.

    Try it with no Google account: `tpuctl emulator start --detach`, then paste the line it prints.
    """
    # main() hands in its AppEnv; anything else invoking the app (a test's click.Command.main) gets
    # a fresh one. `--debug` itself is taken out of the arguments by main().
    app_env = ctx.ensure_object(AppEnv)
    app_env.debug = app_env.debug or debug


def make_app(only: str | None = None) -> declare.App:
    """tpuctl's app: every command, or the command `only` alone (a name of COMMANDS)."""
    import importlib

    made = declare.App(
        name="tpuctl",
        help="Manage the whole life of Google Cloud TPU VMs.",
        no_args_is_help=True,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    made.callback()(root)
    for name, (module, attribute, *group) in COMMANDS.items():
        if only is not None and name != only:
            continue
        target = getattr(importlib.import_module(f"tpuctl.cli.{module}"), attribute)
        if group and group[0]:
            made.add_group(target, name=name, help=group[0])
        elif group:  # the group's own callback says what it is
            made.add_group(target, name=name)
        else:
            made.command(name)(target)
    return made


_whole: list[declare.App] = []


def __getattr__(name: str) -> declare.App:
    """`tpuctl.cli.app`: the whole app, made on first use."""
    if name != "app":
        raise AttributeError(name)
    if not _whole:
        _whole.append(make_app())
    return _whole[0]


def _named(args: list[str]) -> str | None:
    """The command these arguments run, when its name is whole and the tree needs no other
    (a shell completion's words are read from its variables); None for the whole tree."""
    words = args
    if any(k.startswith("_TPUCTL_COMPLETE") for k in os.environ):
        line = os.environ.get("COMP_WORDS") or ""
        words = line.split()[1:]
        if len(words) < 2 and not line.endswith(" "):
            return None  # the command's name itself is being completed
    if not words or words[0] not in COMMANDS:
        return None  # `--version`, `--help`, a misspelt name: the whole tree
    return words[0]


def _set_debug(debug: bool) -> None:
    """Logging and an HTTP trace on stderr, every credential scrubbed (tpuctl/redact.py);
    stdout stays clean."""
    if not debug and "logging" not in sys.modules:
        return  # nothing to switch off, and no import to pay for
    from tpuctl import redact

    redact.install(debug)


def _split_debug(argv: list[str]) -> tuple[list[str], bool]:
    """`--debug` is accepted anywhere before `--`, so it can be added to any command line."""
    if "--" in argv:
        cut = argv.index("--")
        head, tail = argv[:cut], argv[cut:]
    else:
        head, tail = argv, []
    debug = "--debug" in head or os.environ.get("TPUCTL_DEBUG", "") not in ("", "0")
    return [a for a in head if a != "--debug"] + tail, debug


def _fail(message: str, hint: str | None = None) -> None:
    from tpuctl.wording import printable  # a message may name what the bucket holds

    sys.stderr.write(f"error: {printable(message)}\n")
    if hint:
        sys.stderr.write(f"hint: {printable(hint)}\n")


def main(argv: list[str] | None = None, app_env: AppEnv | None = None) -> int:
    """Run tpuctl; return the exit code. Errors become one line, tracebacks only with --debug.
    What the command skipped of the bucket (services/records.py) is said last, a line each."""
    try:
        return _main(argv, app_env)
    finally:
        from tpuctl.services import records

        for line in records.take():
            sys.stderr.write(f"tpuctl: {line}\n")
        if "tpuctl.services.prices" in sys.modules:  # the next command reads its own
            sys.modules["tpuctl.services.prices"].forget()


def _run(command: Any, args: list[str], app_env: AppEnv) -> Any:
    """The command line run as click's `Command.main` runs it, leaving every error to
    `_main` (click's main writes a blank line on stderr for a Ctrl-C); a shell completion
    goes through click's main, which answers it and exits."""
    if "_TPUCTL_COMPLETE" in os.environ:
        return command.main(args=args, prog_name="tpuctl", standalone_mode=False, obj=app_env)
    with command.make_context("tpuctl", args, obj=app_env) as ctx:
        return command.invoke(ctx)


def _main(argv: list[str] | None, app_env: AppEnv | None) -> int:
    args, debug = _split_debug(list(sys.argv[1:] if argv is None else argv))
    app_env = app_env or AppEnv()
    app_env.debug = debug
    _set_debug(debug)
    try:
        with interrupts.noting():
            made = make_app(_named(args))
            command = declare.get_command(made)
            argcheck.check(command, args)  # `-abc`, `-accelerator`: refused, not misread
            result = _run(command, args, app_env)
        if result == ExitCode.INTERRUPTED and interrupts.received:
            _fail("interrupted")  # a Ctrl-C that escaped the command: nothing said yet
        return int(result) if isinstance(result, int) else 0
    except TpuctlError as e:
        if debug:
            import traceback

            traceback.print_exc()
        _fail(e.message, e.hint)
        return int(e.exit_code)
    except click_exc.UsageError as e:
        if type(e).__name__ == "NoArgsIsHelpError":
            # `tpuctl` or `tpuctl emulator` alone: the help, and nothing wrong
            sys.stdout.write(e.ctx.get_help() + "\n" if e.ctx else e.format_message())
            return 0
        where = (
            f"tpuctl {e.ctx.command_path.split(' ', 1)[1]}"
            if e.ctx and " " in e.ctx.command_path
            else "tpuctl"
        )
        hint = f"see `{where} --help`"
        like = help_mod.misspelt(e, strict=where == "tpuctl run")  # run: or a script's flag
        if like:
            hint = f"did you mean {like}? see `{where} --help`"
        elif where == "tpuctl run" and type(e).__name__ == "NoSuchOption":
            option = getattr(e, "option_name", "") or "--flag"
            hint = f"arguments for your script go after `--`: `tpuctl run SCRIPT -- {option} ...`"
        message = e.format_message()
        if type(e).__name__ == "NoSuchOption":  # in the same words whatever click's release
            message = f"No such option: {getattr(e, 'option_name', '')}"
        _fail(message, hint)
        return int(ExitCode.USAGE)
    except declare.Exit as e:
        return int(e.exit_code)
    except (declare.Abort, KeyboardInterrupt, EOFError):
        _fail("interrupted")
        return int(ExitCode.INTERRUPTED)
    except click_exc.ClickException as e:
        _fail(e.format_message())
        return int(e.exit_code)
    except Exception as e:  # noqa: BLE001 - the one boundary that catches everything
        if debug:
            raise
        _fail(f"unexpected {type(e).__name__}: {e}", "run again with --debug for the traceback")
        return int(ExitCode.FAILED)
