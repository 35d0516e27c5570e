"""`--api auto` tries, in each zone, every API that offers the accelerator, the chosen one
first: not just one other (a third API is one adapter away)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from tpuctl.services.run import provision


def _api(title: str) -> Any:
    return SimpleNamespace(kind=SimpleNamespace(title=title))


def test_every_api_is_tried_in_each_zone_the_chosen_one_first() -> None:
    tpu, compute, lab = _api("Cloud TPU API"), _api("Compute Engine"), _api("Lab")
    job: Any = SimpleNamespace(adapters=SimpleNamespace(backend=tpu, others=(compute, lab)))
    where = provision.places(job, ["z-a", "z-b"])
    assert list(where) == [
        "z-a (Cloud TPU API)", "z-a (Compute Engine)", "z-a (Lab)",
        "z-b (Cloud TPU API)", "z-b (Compute Engine)", "z-b (Lab)",
    ]  # fmt: skip
    assert where["z-b (Lab)"] == (lab, "z-b")


def test_one_api_keeps_plain_zone_names() -> None:
    tpu = _api("Cloud TPU API")
    job: Any = SimpleNamespace(adapters=SimpleNamespace(backend=tpu, others=()))
    assert provision.places(job, ["z-a"]) == {"z-a": (tpu, "z-a")}
