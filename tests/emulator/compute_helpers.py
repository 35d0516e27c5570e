"""Calls to the emulated Compute Engine API, through google-auth's AuthorizedSession with
anonymous credentials (as a REST client of Compute would call it)."""

from __future__ import annotations

from typing import Any

ZONE = "us-east1-d"  # v6e is offered there
IMAGE = ("projects/ubuntu-os-accelerator-images/global/images/family/"
         "ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e")  # fmt: skip


class Compute:
    def __init__(self, address: str, project: str = "p", version: str = "v1") -> None:
        from google.auth.credentials import AnonymousCredentials
        from google.auth.transport.requests import AuthorizedSession

        self.session = AuthorizedSession(AnonymousCredentials())
        self.base = f"http://{address}/compute/{version}/projects/{project}"

    def call(self, method: str, path: str, body: Any = None, **params: Any) -> tuple[int, Any]:
        answer = self.session.request(method, f"{self.base}/{path}", json=body, params=params,
                                      timeout=30)  # fmt: skip
        return answer.status_code, answer.json()

    def ok(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        status, data = self.call(method, path, body, **params)
        assert status == 200, data
        return data

    def wait(self, op: dict[str, Any]) -> dict[str, Any]:
        zone = op["zone"].rsplit("/", 1)[-1]
        return self.ok("POST", f"zones/{zone}/operations/{op['name']}/wait")


def body(name: str = "vm1", machine: str = "ct6e-standard-4t", zone: str = ZONE,
         **extra: Any) -> dict[str, Any]:  # fmt: skip
    """An insert body as the facts of Compute's TPU VMs give it."""
    out: dict[str, Any] = {
        "name": name,
        "machineType": f"zones/{zone}/machineTypes/{machine}",
        "disks": [{"boot": True, "autoDelete": True,
                   "initializeParams": {"sourceImage": IMAGE, "diskSizeGb": "100"}}],
        "networkInterfaces": [{"network": "global/networks/default", "nicType": "GVNIC",
                               "accessConfigs": [{"type": "ONE_TO_ONE_NAT"}]}],
        "scheduling": {"onHostMaintenance": "TERMINATE", "automaticRestart": False},
        "serviceAccounts": [{"email": "default",
                             "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}],
        "labels": {"tpuctl": "managed"},
    }  # fmt: skip
    out.update(extra)
    return out
