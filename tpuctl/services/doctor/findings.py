"""What a check reports: one `Finding` per mistake, at a file and line."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Severity = Literal["error", "warning", "hint"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "hint")


@dataclass(frozen=True)
class Finding:
    """One mistake: where it is, how bad, what goes wrong on a TPU and how to fix it.

    `file` is relative to the work dir (posix); `check` is the check's id, e.g.
    `tf-outside-scope` (docs/doctor.md lists them all).
    """

    file: str
    line: int
    severity: Severity
    check: str
    message: str
    fix: str

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.file, self.line, SEVERITIES.index(self.severity), self.check)
