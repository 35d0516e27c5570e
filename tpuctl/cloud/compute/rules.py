"""What Compute Engine takes and counts before any call: the flags it refuses, its
flex-start VMs (`flex.py`), its own TPU quota pool (`quota.py`), and what a create of a
slice makes. `ComputeTpuApi` inherits these."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tpuctl import catalog
from tpuctl.catalog.shapes import SliceShape
from tpuctl.cloud.backend import BackendDefaults, BackendKind, MonitoredWorkers
from tpuctl.cloud.compute import KIND, flex, quotas
from tpuctl.cloud.compute import quota as pool
from tpuctl.errors import NotFoundError, TpuctlError, UsageError
from tpuctl.models import CreateSpec, Node, QueuedResource, QueueSpec
from tpuctl.quota_pool import PoolRow, QuotaPool

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.cloud.quota import QuotaApi
    from tpuctl.config import Target
    from tpuctl.queueing import QueueOptions


def _takes_preemptible(spec: CreateSpec) -> bool:
    # flex-start takes preemptible quota, as spot does (Compute Engine's provisioning
    # models page; "consume preemptible quota", the flex-start VMs announcement)
    return spec.spot or spec.preemptible or spec.flex_start


class ComputeRules(BackendDefaults):
    kind: BackendKind = KIND

    def _me(self) -> TpuBackend:
        return self  # type: ignore[return-value]  # mixed into ComputeTpuApi

    def check_request(self, spec: CreateSpec, queue: QueueOptions, queued: bool) -> bool:
        if (spec.spot or spec.preemptible) and (spec.reservation or spec.reserved):
            # "You can't consume a reservation to create ... Spot VMs or preemptible
            # instances" (cloud.google.com/compute/docs/instances/reservations-consume)
            option = "--reservation" if spec.reservation else "--reserved"
            raise UsageError(
                f"--spot and {option} are exclusive: a spot VM on Compute Engine "
                "cannot consume a reservation"
            )
        if queue.flex_start and not queued:
            flex.check(spec, queue)  # a flex-start VM (or slice) waits by itself
            return True
        return False

    def check_quota(
        self, quotas: QuotaApi, target: Target, spec: CreateSpec, count: int = 1
    ) -> None:
        pool.check_create(
            quotas,
            self._me(),
            target.project,
            target.zone,
            spec.shape,
            _takes_preemptible(spec),
            count=count,
        )

    def headroom(
        self,
        quota_api: QuotaApi | None,
        project: str,
        shape: SliceShape,
        scheduling: str,
        zones: list[str],
    ) -> dict[str, str]:
        quota = quotas.quota_for(shape.generation, scheduling != "on-demand")
        if quota is None or not shape.known:
            return {z: "quota: not known for this type" for z in zones}
        if quota_api is None:
            return {z: "quota: not readable here" for z in zones}
        regions = sorted({catalog.region_of(z) for z in zones})
        try:
            rows = pool.rows(quota_api, self._me(), project, regions)
        except TpuctlError as e:
            return {z: f"quota: not readable ({e})" for z in zones}
        by_region = {r.region: r for r in rows if r.quota == quota}
        out: dict[str, str] = {}
        for zone in zones:
            row = by_region.get(catalog.region_of(zone))
            if row is None or row.limit is None:
                out[zone] = f"quota: {quota.quota_id} has no limit for this region"
                continue
            free = row.limit - row.used
            fits = "" if free >= shape.chips else f", {shape.chips} needed"
            out[zone] = (
                f"quota: {max(free, 0)} of {row.limit} chips free in region {row.region} "
                f"({quota.quota_id}{fits})"
            )
        return out

    def own_quota(
        self, quota_api: QuotaApi, project: str, regions: list[str] | None
    ) -> QuotaPool | None:
        rows = pool.rows(quota_api, self._me(), project, regions or pool.regions())
        return QuotaPool(
            title=self.kind.title,
            key=self.kind.key,
            about="a pool apart from the Cloud TPU API's; chips. TPU7x is only there; v6e and "
            'v5p go to the Cloud TPU API unless --api compute or api = "compute" in the config.',
            request_url=pool.request_url(project),
            rows=[
                PoolRow(
                    r.quota.quota_id,
                    r.quota.tpu_family,
                    r.quota.generation,
                    r.quota.preemptible,
                    r.region,
                    r.limit,
                    r.used,
                )
                for r in rows
            ],
        )

    def made_of(self, shape: SliceShape) -> str:
        if shape.known and not shape.multi_host:
            return "its VM"
        return "its VMs, instance template and workload policy"

    def monitored_workers(self, node: Node, workers: list[int]) -> MonitoredWorkers:
        # A Compute Engine TPU VM is a VM instance: its TPU metrics are on `gce_instance`
        # (project_id, instance_id, zone), each chip's with the metric label
        # `accelerator_id`. Google's TPU monitoring page
        # (https://docs.cloud.google.com/tpu/docs/monitor-tpu) says only that Compute
        # Engine VMs and the TPU runtime generate them; `tpuctl top` asks the metric's
        # descriptor (services/metrics.py), and finds them on this resource.
        from tpuctl.cloud.monitoring import COMPUTE_RESOURCE

        vm = {w.index: w.instance_id for w in node.workers}
        ids = {vm[w]: w for w in workers if vm.get(w)}
        return MonitoredWorkers(
            COMPUTE_RESOURCE,
            {"zone": (node.zone,), "instance_id": tuple(sorted(ids))},
            ("instance_id",),
            {(i,): w for i, w in ids.items()},
        )

    # -- queued requests: the TPU API's ---------------------------------------------
    def _no_queue(self) -> UsageError:
        return UsageError(
            "queued resources are the Cloud TPU API's (--api tpu); on Compute Engine, "
            "--flex-start without --queued makes a VM that waits for capacity by itself"
        )

    def create_queued_resource(
        self, parent: str, qr_id: str, spec: CreateSpec, queue: QueueSpec
    ) -> str | None:
        raise self._no_queue()

    def get_queued_resource(self, name: str) -> QueuedResource:
        raise NotFoundError(f"no queued resource {name} on Compute Engine")

    def list_queued_resources(self, parent: str) -> list[QueuedResource]:
        return []

    def delete_queued_resource(self, name: str, force: bool = True) -> str | None:
        return None
