"""Names and labels as the TPU API takes them: node names, label keys and values, the
owner label, and the name tpuctl makes for a create that gave none."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from tpuctl.config import login_name
from tpuctl.errors import UsageError

NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
# Google's label requirements (cloud.google.com/compute/docs/labeling-resources#requirements)
# also allow lowercase international characters; the TPU API's reference states no rule
# of its own, so tpuctl keeps to the ASCII subset, which both APIs take.
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
    """The local login name as a label value: a readable part of generated names, never
    an owner (every notebook VM's user is `jupyter`)."""
    return label_safe(login_name()) or "unknown"


# The owner label's digest: 12 hex digits (48 bits) of SHA-256 of the lowercased address.
# Two accounts' labels can only meet when their readable parts already do (`ada.b@x.com`,
# `ada-b@x.com`): for a digest to then agree by chance among even 10^5 accounts of one
# project is a chance of about (10^5)^2 / 2 / 2^48, 2 in 10^5, and far less among the
# few look-alike addresses that share a readable part. (A label proves nothing against
# someone who writes it on purpose: anyone who may create nodes may copy any label.)
OWNER_DIGEST = 12


def owner_label(account: str) -> str:
    """The `tpuctl-owner` label of what tpuctl makes as `account` (an email): a readable
    part and a digest of the whole lowercased address, so that distinct accounts never
    share one (`ada.b@example.com` -> `ada-b-example-com-` and 12 hex digits, where
    `ada-b@example.com` and `ada+b@example.com` get other digits). At most 63."""
    address = account.strip().lower()
    digest = hashlib.sha256(address.encode()).hexdigest()[:OWNER_DIGEST]
    readable = label_safe(address)[: 62 - OWNER_DIGEST].rstrip("-_")
    return f"{readable}-{digest}"


def legacy_owner_label(account: str) -> str:
    """The label older tpuctl gave `account`'s nodes (`label_safe` alone): read, never
    written. Not injective: `ada.b@`, `ada-b@` and `ada+b@example.com` all give it."""
    return label_safe(account.strip())


@dataclass(frozen=True)
class Owner:
    """Whose nodes gc and keep act on: the `tpuctl-owner` values that are this owner's.
    An account owns its label and, for nodes an older tpuctl made, its legacy label (which
    an account whose address differs only in characters a label cannot hold shares:
    docs/gc.md); a label given as such owns that label only."""

    label: str  # the one tpuctl writes (shown in messages)
    legacy: str = ""

    @classmethod
    def of(cls, given: str) -> Owner:
        """An account's email, or a `tpuctl-owner` label as it is on the nodes."""
        if "@" in given:
            return cls(owner_label(given), legacy_owner_label(given))
        if not given or not LABEL_VALUE_RE.match(given):
            raise UsageError(
                f"invalid owner {given!r}: an account's email, or a tpuctl-owner label "
                "(lowercase letters, digits, '_' and '-', at most 63)"
            )
        return cls(given)

    def owns(self, value: str | None) -> bool:
        """Whether a `tpuctl-owner` value (None: absent) is this owner's."""
        return bool(value) and value in (self.label, self.legacy)


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


def parse_labels(items: Iterable[str]) -> dict[str, str]:
    """`--labels k=v[,k=v...]`, each checked against the API's rules before any call."""
    labels = parse_pairs(items, "label")
    validate_labels(labels)
    return labels


def validate_labels(labels: dict[str, str]) -> None:
    """The rules both APIs apply to labels (ASCII only: see LABEL_KEY_RE)."""
    if len(labels) > 64:
        raise UsageError(f"too many labels ({len(labels)}): the TPU API allows 64")
    for key, value in labels.items():
        if not LABEL_KEY_RE.match(key):
            raise UsageError(
                f"invalid label key {key!r} (in {key}={value}): a lowercase letter a-z, then "
                "lowercase letters, digits, '_' or '-', at most 63 characters"
            )
        if not LABEL_VALUE_RE.match(value):
            raise UsageError(
                f"invalid label value {value!r} (in {key}={value}): empty, or lowercase "
                "letters a-z, digits, '_' or '-', at most 63 characters"
            )
