"""Flex-start on the TPU API: the v2alpha1 fields of a queued resource that v2 lacks,
`provisioningModel` and `runDuration{maxRunDuration, terminationTime}` (gcloud's
generated v2alpha1 messages, `tpu_v2alpha1_messages.py`; the v2alpha1 discovery
document), as `gcloud alpha compute tpus queued-resources create
--provisioning-model=flex-start --max-run-duration=...` sends them.

A flex-start request waits for capacity as any queued resource does. Once its nodes
are provisioned they run for the requested time and then, in the words of Google's
page (cloud.google.com/tpu/docs/request-using-flex-start): "After the requested run
time has elapsed, the TPU VMs are deleted and the queued resource moves to the
SUSPENDED state." The same page: "Flex-start resources can be requested for a maximum
of 7 days". The emulator's wording of its refusals is its own.
"""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.core.timestamps import proto_timestamp
from tpuctl.emulator.tpu.rules import parse_duration, parse_time

# QueuedResource.ProvisioningModel in v2alpha1, by number (gcloud's generated messages)
PROVISIONING_MODELS = (
    "PROVISIONING_MODEL_UNSPECIFIED",
    "STANDARD",
    "SPOT",
    "RESERVATION_BOUND",
    "FLEX_START",
)
ALPHA_FIELDS = ("provisioningModel", "runDuration")  # on the request, not in v2
MAX_RUN_SECONDS = 7 * 24 * 3600


# v2alpha1's Node fields v2 lacks that gcloud alpha sends (`autocheckpointEnabled: false`
# with every node): accepted, and not kept (the emulator takes no checkpoints).
ALPHA_NODE_FIELDS = ("autocheckpointEnabled",)


def split(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A v2alpha1 queued-resource body: (its v2 fields, its v2alpha1-only ones)."""
    alpha = {k: body[k] for k in ALPHA_FIELDS if k in body}
    v2 = {k: v for k, v in body.items() if k not in ALPHA_FIELDS}
    tpu = v2.get("tpu")
    if isinstance(tpu, dict) and isinstance(tpu.get("nodeSpec"), list):
        specs = [
            {**spec, "node": v2_node(spec["node"])}
            if isinstance(spec, dict) and "node" in spec
            else spec
            for spec in tpu["nodeSpec"]
        ]
        v2["tpu"] = {**tpu, "nodeSpec": specs}
    return v2, alpha


def v2_node(node: Any) -> Any:
    """A v2alpha1 Node body without the fields v2 lacks that the emulator ignores."""
    if not isinstance(node, dict):
        return node
    return {k: v for k, v in node.items() if k not in ALPHA_NODE_FIELDS}


def check(alpha: dict[str, Any]) -> dict[str, Any]:
    """The v2alpha1-only fields as the request keeps them (proto3 defaults left out),
    after the rules: a model the enum has, a run duration of at most 7 days, and a run
    duration (or end) for flex-start."""
    out: dict[str, Any] = {}
    model = alpha.get("provisioningModel") or PROVISIONING_MODELS[0]  # unset: the zero
    if isinstance(model, int) and 0 <= model < len(PROVISIONING_MODELS):
        model = PROVISIONING_MODELS[model]  # enum-encoding=int
    if model not in PROVISIONING_MODELS:
        raise errors.invalid_argument(
            f"Invalid value for field 'provisioningModel': '{model}' (one of "
            f"{', '.join(PROVISIONING_MODELS[1:])})",
            "queued_resource.provisioning_model",
        )
    if model != PROVISIONING_MODELS[0]:
        out["provisioningModel"] = model
    run = alpha.get("runDuration") or {}
    if not isinstance(run, dict) or set(run) - {"maxRunDuration", "terminationTime"}:
        raise errors.invalid_argument(
            f"Invalid value for field 'runDuration': {run!r}", "queued_resource.run_duration"
        )
    if run.get("maxRunDuration"):
        seconds = parse_duration(run["maxRunDuration"], "run_duration.max_run_duration")
        if not 0 < seconds <= MAX_RUN_SECONDS:
            raise errors.invalid_argument(
                f"runDuration.maxRunDuration {run['maxRunDuration']} is out of range: "
                "flex-start resources run for at most 7 days (604800s)",
                "queued_resource.run_duration.max_run_duration",
            )
        out.setdefault("runDuration", {})["maxRunDuration"] = run["maxRunDuration"]
    if run.get("terminationTime"):
        parse_time(run["terminationTime"], "run_duration.termination_time")
        out.setdefault("runDuration", {})["terminationTime"] = run["terminationTime"]
    if model == "FLEX_START" and "runDuration" not in out:
        raise errors.invalid_argument(
            "A FLEX_START queued resource needs runDuration.maxRunDuration (or "
            "runDuration.terminationTime): how long its TPUs run",
            "queued_resource.run_duration",
        )
    return out


def ends_at(alpha: dict[str, Any], provisioned: float) -> float | None:
    """When nodes provisioned at `provisioned` end, by the request's run duration."""
    run = alpha.get("runDuration") or {}
    ends = []
    if run.get("maxRunDuration"):
        ends.append(provisioned + parse_duration(run["maxRunDuration"], "max_run_duration"))
    if run.get("terminationTime"):
        ends.append(parse_time(run["terminationTime"], "termination_time"))
    return min(ends) if ends else None


def termination_timestamp(at: float | None) -> str | None:
    """v2alpha1's `schedulingConfig.terminationTimestamp` (output only) of a node."""
    return None if at is None else proto_timestamp(at)
