"""One step of `tpuctl init`: what it found, what it did, what is left for the user."""

from __future__ import annotations

from dataclasses import dataclass

from tpuctl.errors import TpuctlError

# status: ok: found ready; done: made ready now; pending: asked for, Google decides
# (quota); todo: left for the user (declined, or cannot be done from here); skipped: an
# optional change offered and declined (not left to do); failed: an error


@dataclass
class Step:
    name: str
    status: str
    found: str
    did: str = ""
    todo: str = ""

    def to_json(self) -> dict[str, str]:
        return {
            "step": self.name,
            "status": self.status,
            "found": self.found,
            "did": self.did,
            "todo": self.todo,
        }


def failed(name: str, found: str, error: TpuctlError) -> Step:
    hint = f"; {error.hint}" if error.hint else ""
    return Step(name, "failed", found, todo=error.message + hint)
