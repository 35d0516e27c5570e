"""What the Cloud TPU API takes and counts, before any call: its default runtime, the
flags it refuses, and its quota pool (`quota_check.py`). `TpuApi` inherits these."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tpuctl import catalog
from tpuctl.catalog.shapes import SliceShape
from tpuctl.cloud.backend import BackendDefaults, BackendKind, MonitoredWorkers
from tpuctl.cloud.tpu import KIND, quota_check
from tpuctl.errors import QuotaError, UsageError
from tpuctl.models import CreateSpec, Node

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.cloud.quota import QuotaApi
    from tpuctl.cloud.usage import Usage
    from tpuctl.config import Target
    from tpuctl.queueing import QueueOptions


class TpuRules(BackendDefaults):
    kind: BackendKind = KIND

    def _me(self) -> TpuBackend:
        return self  # type: ignore[return-value]  # mixed into TpuApi

    def default_runtime(self, shape: SliceShape) -> str | None:
        return catalog.default_runtime(shape.generation)

    def check_request(self, spec: CreateSpec, queue: QueueOptions, queued: bool) -> bool:
        if spec.reservation:
            raise UsageError(
                "--reservation NAME is Compute Engine's (--api compute); on the Cloud TPU API "
                "use --reserved, which takes the project's reservation"
            )
        return False  # flex-start here is a queued resource's (request-using-flex-start)

    def check_quota(
        self, quotas: QuotaApi, target: Target, spec: CreateSpec, count: int = 1
    ) -> None:
        quota_check.check_create(
            self._me(), quotas, target, spec.shape, spec.scheduling, count=count
        )

    def explain_quota_refusal(
        self, error: QuotaError, target: Target, spec: CreateSpec
    ) -> QuotaError:
        return quota_check.explain_refusal(error, self._me(), target, spec.shape, spec.scheduling)

    def headroom(
        self,
        quotas: QuotaApi | None,
        project: str,
        shape: SliceShape,
        scheduling: str,
        zones: list[str],
    ) -> dict[str, str]:
        return quota_check.headroom(self._me(), quotas, project, shape, scheduling, zones)

    def quota_usage(self, project: str) -> list[Usage]:
        from tpuctl.cloud.tpu.usage import project_usage

        return project_usage(self._me(), project)

    def monitored_workers(self, node: Node, workers: list[int]) -> MonitoredWorkers:
        # A Cloud TPU API node's workers write their metrics on the `tpu_worker` resource
        # (project_id, zone, node_id, worker_id); the per-chip ones carry the metric label
        # `accelerator_id` (https://cloud.google.com/monitoring/api/metrics_gcp_p_z, "tpu")
        from tpuctl.cloud.monitoring import RESOURCE

        ids = tuple(str(w) for w in workers)
        return MonitoredWorkers(
            RESOURCE,
            {"zone": (node.zone,), "node_id": (node.name,), "worker_id": ids},
            ("node_id", "worker_id"),
            {(node.name, i): w for i, w in zip(ids, workers, strict=True)},
        )
