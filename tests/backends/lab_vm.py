"""The lab's agent target: what `--target lab:NAME` is on the VM (tests/backends/lab.py's
`agent_module`). The agent bundle carries this file as `tpuctl_agent/targets/lab.py`
(agent/bundle.py); the agent takes its `TARGET` (agent/target.py). A lab node stands on
a Cloud TPU API node of its name, so its target is the TPU API's, named as the lab's.

Standard library only, Python 3.8+, as every module of the agent: it reaches the agent's
own modules through its package, whichever name that has (tpuctl_agent in the bundle).
"""

from __future__ import annotations

import importlib

_AGENT = (__package__ or "").rpartition(".")[0]
_TpuNode = importlib.import_module(_AGENT + ".tpu_api").TpuNode


class LabNode(_TpuNode):  # type: ignore[misc,valid-type]
    """A lab node: the TPU API's node under it, as the log names a lab's."""

    called = "the lab"

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.what = f"lab node {self.name}"


TARGET = LabNode
