"""Typer's coercion of a command's parameters, without pydantic where it would change nothing.

Typer 0.29 builds a pydantic `TypeAdapter` for every parameter of the command being run,
given or not, to turn what click parsed into the annotated type; importing pydantic for it
costs about 90 ms on every command (and on every TAB completion). For most values that
conversion is the identity: a `str` option given a string, an `int` one left at its int
default (or given digits), an option left at None, a `list[str]` given strings (made a
list). `install()`
has typer answer those at once, and hands any other value (a path, a duration's parser, a
bound, a choice, a string for an `int`) to typer's own coercion, built on first use, so
what a command receives and every error message stay typer's.
"""

from __future__ import annotations

from typing import Any

_DONE = "_tpuctl_light"


class _Light:
    """A parameter's coercion: the identity cases here, the rest typer's own."""

    def __init__(self, descriptor: Any, build: Any) -> None:
        self._descriptor = descriptor
        self._build = build
        self._real: Any = None
        info = descriptor.parameter_info
        plain = info.parser is None and info.min is None and info.max is None
        self._kind = descriptor.annotation if plain and descriptor.file_annotation is None else None
        # an option with a parser of ours (`whole_number`, `seconds`): its result, when it
        # is a plain value, is what typer would make of it too
        bare = info.min is None and info.max is None and descriptor.file_annotation is None
        self._parser = info.parser if bare else None

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        single = not (param.multiple or param.nargs == -1)
        if self._parser is not None and single:
            if value is None:
                return None
            parsed = self._parser(value)
            if type(parsed) in (str, int, float, bool):
                return parsed
        if self._kind is not None:
            multi = param.multiple or param.nargs == -1
            done, coerced = _identity(self._kind, value, multi)
            if done:
                return coerced
        if self._real is None:
            self._real = self._build(self._descriptor)
        return self._real.coerce(value, param=param, ctx=ctx)


def _identity(kind: Any, value: Any, multi: bool) -> tuple[bool, Any]:
    """(True, what typer would make of `value` for a `kind` parameter) where that needs no
    pydantic; (False, None) otherwise."""
    if multi:
        if value is None:
            return True, ()
        strings = isinstance(value, tuple | list) and all(type(v) is str for v in value)
        return (True, list(value)) if kind == list[str] and strings else (False, None)
    if value is None:
        return True, None
    if kind in (str, int, float, bool) and type(value) is kind:
        return True, value
    digits = type(value) is str and value.isascii() and value.isdigit() and len(value) <= 18
    if kind is int and digits:  # `--limit 3`: what pydantic makes of it, int("3")
        return True, int(value)
    return False, None


def install() -> None:
    """Have typer's parameters take the identity cases without pydantic (once; nothing is
    changed on a typer whose internals are not the ones this was written for)."""
    try:
        from typer import core
    except ImportError:  # pragma: no cover
        return
    build = getattr(core, "build_runtime_param", None)
    if build is None or getattr(build, _DONE, False):
        return

    def light(descriptor: Any) -> Any:
        return _Light(descriptor, build)

    setattr(light, _DONE, True)
    core.build_runtime_param = light
