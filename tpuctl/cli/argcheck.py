"""Command lines click would read in a way nobody meant, refused before they run.

click reads `-abc` as `-a bc` (a short option with its value stuck on), so
`tpuctl create -abc -a v3-8` made a node named from the type, the `bc` silently
overridden; and `-accelerator v3-8` became `-a ccelerator`. tpuctl never needs a
value stuck to a short option, nor short options clustered, so one dash and several
letters is refused: as the long option it resembles (`--accelerator`), else as what
it is. Words after `--`, and the value of an option that takes one, are left alone.
"""

from __future__ import annotations

from typing import Any

from tpuctl.errors import UsageError


def _leaf(command: Any, args: list[str]) -> tuple[Any, list[str], str]:
    """The (sub)command `args` run, the words after its name, and its path."""
    path = "tpuctl"
    rest = list(args)
    while True:
        subs = getattr(command, "commands", None)
        if not subs:
            return command, rest, path
        at = next((i for i, a in enumerate(rest) if not a.startswith("-")), None)
        if at is None or rest[at] not in subs:
            return command, rest, path
        command, path = subs[rest[at]], f"{path} {rest[at]}"
        rest = rest[at + 1 :]


def check(command: Any, args: list[str]) -> None:
    """Refuse a single-dash word of several letters among the options of `args`, and both
    sides of one on/off flag (`--teardown --keep`: click would let the last one win)."""
    leaf, rest, path = _leaf(command, args)
    takes_value: set[str] = set()
    longs: list[str] = []
    pairs: list[tuple[list[str], list[str]]] = []
    for param in getattr(leaf, "params", []):
        if getattr(param, "param_type_name", "") != "option":
            continue
        names = [*param.opts, *getattr(param, "secondary_opts", [])]
        longs += [n for n in names if n.startswith("--")]
        if not (param.is_flag or param.count):
            takes_value.update(param.opts)
        if getattr(param, "secondary_opts", None):
            pairs.append((list(param.opts), list(param.secondary_opts)))
    skip = False
    seen: list[str] = []
    for word in rest:
        if skip:
            skip = False
            continue
        if word == "--":
            break
        if word in takes_value:
            skip = True
            continue
        stuck = len(word) > 2 and word[0] == "-" and word[1].isalpha()  # -abc, not --abc
        if stuck:
            raise _refusal(word, longs, path)
        seen.append(word)
    for on, off in pairs:
        given = [next(w for w in seen if w in side) for side in (on, off) if set(side) & set(seen)]
        if len(given) == 2:
            raise UsageError(f"{given[0]} and {given[1]} are exclusive: choose one")


def _refusal(word: str, longs: list[str], path: str) -> UsageError:
    import difflib

    body = "--" + word[1:].split("=", 1)[0]
    like = [body] if body in longs else difflib.get_close_matches(body, longs, cutoff=0.75)
    if like:
        return UsageError(
            f"no such option {word!r}: a long option takes two dashes: did you mean {like[0]}?",
            hint=f"see `{path} --help`",
        )
    return UsageError(
        f"no such option {word!r}: a short option is one dash and one letter, its value "
        "apart (-z ZONE); a long one takes two dashes (--zone)",
        hint=f"see `{path} --help`",
    )
