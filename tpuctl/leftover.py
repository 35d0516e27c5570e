"""What an unfinished create or delete left of a slice on an API that makes a slice of
several resources: plain data, built by the adapter (`TpuBackend.leftovers`), which gc
reads to collect it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Part:
    """One resource of a leftover."""

    kind: str  # what the API calls it ("instance template")
    name: str
    created: float | None  # its creationTimestamp


@dataclass
class Leftover:
    """What an unfinished create or delete left of the slice `slice` in `zone` on an API
    that makes a slice of several resources, and why it is no slice (no node to go by:
    gc finds it through `TpuBackend.leftovers`)."""

    project: str
    zone: str
    slice: str
    parts: list[Part]
    why: str
    # its template's (the VMs') labels; with no template, what its policy names (its owner)
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"projects/{self.project}/locations/{self.zone}/nodes/{self.slice}"

    @property
    def newest(self) -> float | None:
        """When its youngest part was made (None: a part shows no time)."""
        times = [p.created for p in self.parts]
        return None if any(t is None for t in times) else max(t for t in times if t is not None)

    def describe(self) -> str:
        return " and ".join(f"{p.kind} {p.name}" for p in self.parts)
