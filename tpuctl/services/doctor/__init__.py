"""`tpuctl doctor`: static checks for the mistakes of moving training from GPUs to TPUs.

The script and the work dir's modules it imports are parsed with `ast` (no framework is
needed on the laptop); each check family reads the program and reports `Finding`s:
`tf_setup` (TPU initialization, strategy, scope, tf.function), `tf_data` (batches,
input pipeline, epochs), `jax_checks`, `torch_xla_checks` and `common` (outputs, inputs,
GPU leftovers). docs/doctor.md lists every check.
"""

from tpuctl.errors import NotPythonError
from tpuctl.services.doctor.check import check
from tpuctl.services.doctor.findings import SEVERITIES, Finding, Severity

__all__ = ["SEVERITIES", "Finding", "NotPythonError", "Severity", "check"]
