"""What tells v2alpha1's wire format from v2's, for both fronts (REST, `front.py`; gRPC,
`grpc_front.py`): its type URLs, and `multiNodeParams` for v2's `multisliceParams` in a
queued resource's node spec. Its fields v2 lacks are `flex.py`'s."""

from __future__ import annotations

from typing import Any

_V2_TYPES, _ALPHA_TYPES = "google.cloud.tpu.v2.", "google.cloud.tpu.v2alpha1."


def _rename(data: Any, types: tuple[str, str], keys: tuple[str, str]) -> Any:
    """`data` with type URLs of one package moved to another and a key renamed."""
    if isinstance(data, list):
        return [_rename(item, types, keys) for item in data]
    if not isinstance(data, dict):
        return data
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == "@type" and isinstance(value, str):
            value = value.replace(types[0], types[1])
        out[keys[1] if key == keys[0] else key] = _rename(value, types, keys)
    return out


def to_alpha(answer: Any) -> Any:
    """A v2 answer in v2alpha1's names."""
    return _rename(answer, (_V2_TYPES, _ALPHA_TYPES), ("multisliceParams", "multiNodeParams"))


def from_alpha(request: dict[str, Any]) -> Any:
    """A v2alpha1 request in v2's names (its other fields are refused as v2 refuses them)."""
    return _rename(request, (_ALPHA_TYPES, _V2_TYPES), ("multiNodeParams", "multisliceParams"))
