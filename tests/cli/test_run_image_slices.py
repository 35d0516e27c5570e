"""`tpuctl run --image` on every worker of a slice: a 4-worker TPU API slice and a
Compute Engine v6e-16 slice (four VMs) each pull the image by its digest and run its
command; every worker says what the image's file says, the outputs written in every
container come home, the exit status is the containers' and nothing is left."""

from __future__ import annotations

import pytest

from tests.cli.test_run_image import IMAGE, images
from tests.emulator import registry_helpers as reg

__all__ = ["images"]  # the fixture, shared
pytestmark = reg.CONFINED

TPU_SLICE = ("-a", "v4-32", "--zone", "us-central2-b")  # 4 workers
COMPUTE_SLICE = ("-a", "v6e-16", "--api", "compute", "--zone", "us-east1-d")  # 4 VMs


@pytest.mark.parametrize("where", [TPU_SLICE, COMPUTE_SLICE], ids=["tpu-api", "compute"])
def test_every_worker_of_a_slice_runs_the_image_and_its_outputs_come_home(
    cli, emulator, images, tmp_path, where
) -> None:
    digest = images("v1", "hello from the slice")
    out = tmp_path / "out"
    r = cli("run", "--image", f"{IMAGE}:v1", *where, "--outputs", str(out), "--env", "CODE=3")
    assert r.code == 3, r.err
    for worker in range(4):
        assert f"[w{worker}] worker {worker} says hello from the slice\n" in r.out, r.out
        assert (out / f"from-image-{worker}.txt").read_text() == "made in the image\n"
    assert f"image: {IMAGE}:v1 is {IMAGE}@{digest}\n" in r.err
    assert "exit status 3" in r.err
    assert emulator.nodes() == [] and emulator.instances() == []
