"""Names and labels as the TPU API takes them: node names, label keys and values, the
owner label, and the name tpuctl makes for a create that gave none."""

from __future__ import annotations

import re
from collections.abc import Iterable

from tpuctl.config import login_name
from tpuctl.errors import UsageError

NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
LABEL_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE_RE = re.compile(r"^[a-z0-9_-]{0,63}$")


def validate_name(name: str) -> None:
    if not NAME_RE.match(name):
        raise UsageError(
            f"invalid node name {name!r}: use 1-63 lowercase letters, digits and hyphens, "
            "starting with a letter and not ending with a hyphen",
            hint="e.g. my-tpu-1",
        )


def label_safe(value: str) -> str:
    """Make any string a valid label value (lowercase, [a-z0-9_-], at most 63)."""
    return re.sub(r"[^a-z0-9_-]", "-", value.lower())[:63]


def local_user() -> str:
    """The local user as a label value (`tpuctl-owner`)."""
    return label_safe(login_name()) or "unknown"


def owner_label(account: str | None) -> str:
    """The `tpuctl-owner` label of what tpuctl makes as `account` (the credentials' email:
    `ada@example.com` -> `ada-example-com`), so gc tells your nodes from those of another
    account whose login name is the same (every notebook VM's user is `jupyter`). Where the
    account cannot be told, the local login name, as a last resort."""
    return label_safe(account) if account else local_user()


def generated_name(accelerator: str, user: str | None = None) -> str:
    """A unique, readable node name for a create that gave none: `ada-v3-8-4f1c`
    (lowercase letters, digits and hyphens, a letter first, at most 63)."""
    import secrets

    owner = re.sub(r"[^a-z0-9]+", "-", (user if user is not None else local_user()).lower())
    kind = re.sub(r"[^a-z0-9]+", "-", accelerator.lower())
    stem = "-".join(p for p in (owner.strip("-")[:20], kind.strip("-")[:20]) if p)
    if not stem or not stem[0].isalpha():
        stem = f"tpu-{stem}".rstrip("-")
    return f"{stem}-{secrets.token_hex(2)}"


def parse_pairs(items: Iterable[str], what: str) -> dict[str, str]:
    """`["a=1,b=2", "c=3"]` -> {"a": "1", "b": "2", "c": "3"}."""
    out: dict[str, str] = {}
    for item in items:
        for pair in filter(None, item.split(",")):
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise UsageError(f"invalid {what} {pair!r}: expected KEY=VALUE")
            out[key.strip()] = value.strip()
    return out


_TAG_RE = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")


def parse_tags(items: Iterable[str]) -> list[str]:
    """`["a,b", "c"]` -> ["a", "b", "c"]: network tags, as gcloud's --tags takes them
    (RFC 1035: a lowercase letter, then lowercase letters, digits or '-', at most 63)."""
    tags = [t.strip() for item in items for t in item.split(",") if t.strip()]
    for tag in tags:
        if not _TAG_RE.fullmatch(tag):
            raise UsageError(
                f"invalid tag {tag!r}: a lowercase letter, then lowercase letters, digits or "
                "'-' (not last), at most 63 characters"
            )
    return list(dict.fromkeys(tags))


def validate_labels(labels: dict[str, str]) -> None:
    if len(labels) > 64:
        raise UsageError(f"too many labels ({len(labels)}): the TPU API allows 64")
    for key, value in labels.items():
        if not LABEL_KEY_RE.match(key) or not LABEL_VALUE_RE.match(value):
            raise UsageError(
                f"invalid label {key}={value}: keys start with a lowercase letter; keys and "
                "values use lowercase letters, digits, '_' and '-', at most 63 characters"
            )
