"""An emulated worker answers `hostname` with its VM's name, as on the cloud: a Cloud TPU
API VM `t1v-n-<8 hex>-w-<worker>`, a Compute Engine VM its instance's name (the metadata
server's `instance/name`), not the name of the machine running the emulator."""

from __future__ import annotations

import re


def _lines(out: str) -> dict[str, str]:
    return dict(re.findall(r"^\[(w\d+)\] (\S+)$", out, re.M))


def test_each_worker_is_named_as_its_vm(cli, emulator) -> None:
    assert cli("create", "pod", "-a", "v4-16", "--zone", "us-central2-b").code == 0
    r = cli("exec", "pod", "--zone", "us-central2-b", "--", "hostname")
    assert r.code == 0, r.err
    names = _lines(r.out)
    assert set(names) == {"w0", "w1"} and names["w0"] != names["w1"]
    assert all(re.fullmatch(rf"t1v-n-[0-9a-f]{{8}}-w-{w[1:]}", n) for w, n in names.items())
    assert cli("delete", "pod", "--zone", "us-central2-b", "--yes").code == 0


def test_a_compute_engine_vm_is_named_as_its_instance(cli, emulator) -> None:
    assert cli("create", "iron", "-a", "tpu7x-8", "--zone", "us-central1-c").code == 0
    r = cli("exec", "iron", "--zone", "us-central1-c", "--", "hostname")
    assert r.code == 0, r.err
    assert r.out.strip().rsplit(" ", 1)[-1] == "iron"
    assert cli("delete", "iron", "--zone", "us-central1-c", "--yes").code == 0
