"""tpuctl's one error hierarchy: every user-facing failure is a TpuctlError.

Each error carries an exit code (docs/commands.md, "Exit codes": 1 failed, 2 usage,
3 configuration or credentials, 4 not found, 5 quota or capacity, 6 cloud API
error, 130 interrupted) and an optional hint saying what to do next.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tpuctl.models import QueuedResource


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    CONFIG = 3
    NOT_FOUND = 4
    QUOTA = 5
    CLOUD = 6
    INTERRUPTED = 130


class TpuctlError(Exception):
    """Root of every error tpuctl reports to the user."""

    exit_code: int = ExitCode.FAILED

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(TpuctlError):
    """The user asked for something malformed (bad name, unknown flag value)."""

    exit_code = ExitCode.USAGE


class ConfigError(TpuctlError):
    """Project, zone or credentials are missing or wrong."""

    exit_code = ExitCode.CONFIG


class NotFoundError(TpuctlError):
    exit_code = ExitCode.NOT_FOUND


class UnreadableObjectError(TpuctlError):
    """An object of the bucket is not what tpuctl writes there (not JSON, too large)."""


class AlreadyExistsError(TpuctlError):
    exit_code = ExitCode.FAILED


class QuotaError(TpuctlError):
    """Quota exceeded, or no capacity in the zone."""

    exit_code = ExitCode.QUOTA


class NoCapacityError(QuotaError):
    """The zone has none of this TPU type free right now: no quota would change that."""


class NodeBusyError(TpuctlError):
    """`run --node` on a node another job holds (its claim): not free now, as a zone
    without capacity is not."""

    exit_code = ExitCode.QUOTA


class CloudError(TpuctlError):
    """The cloud refused or failed a call in a way no retry fixes."""

    exit_code = ExitCode.CLOUD


class AccessDeniedError(CloudError):
    """Permission denied (kept apart so the hint can name `gcloud auth`)."""


class ServiceDisabledError(ConfigError):
    """An API tpuctl needs is not enabled in the project (`tpuctl init` enables it)."""

    def __init__(self, message: str, service: str, project: str, hint: str | None = None):
        super().__init__(message, hint)
        self.service = service
        self.project = project


class BillingDisabledError(ConfigError):
    """The project has no (open) billing account: paid APIs refuse every call."""


class PolicyRefusedError(ConfigError):
    """An organisation policy constraint refuses the request (e.g. the zone)."""

    def __init__(self, message: str, constraint: str, hint: str | None = None):
        super().__init__(message, hint)
        self.constraint = constraint


class ServiceAgentError(ConfigError):
    """The project's Cloud TPU service agent is missing or has lost its role."""


class PermissionDeniedError(AccessDeniedError):
    """The caller lacks one IAM permission the call needs (named, with a role that has it)."""

    def __init__(self, message: str, permission: str, hint: str | None = None):
        super().__init__(message, hint)
        self.permission = permission


class Interrupted(TpuctlError):
    exit_code = ExitCode.INTERRUPTED


class PreconditionFailedError(CloudError):
    """A conditional write lost: the object changed (or exists) since it was read."""


class WaitTimedOut(CloudError):
    """A wait on the cloud ran out of the time it was given."""


class QueuedEnded(TpuctlError):
    """A queued resource ended (FAILED, SUSPENDED) before its node was READY."""

    def __init__(self, qr: QueuedResource) -> None:
        super().__init__(f"queued resource {qr.name} is {qr.state}")
        self.qr = qr


class Preempted(Exception):
    """The node went away under a running job (PREEMPTED, TERMINATED, or deleted by
    someone). A signal inside `tpuctl run`, never shown as it is: the runner restarts
    the job or turns it into the job's outcome. `reason` "maintenance" when the node went
    down for a host maintenance (the agents said so, or its state does)."""

    def __init__(self, state: str, reason: str = "preemption") -> None:
        super().__init__(state)
        self.state = state
        self.reason = reason


class SshError(TpuctlError):
    """An SSH connection or transfer to one worker failed."""


class Unreachable(SshError):
    """Nothing answered (refused, timed out, no route): the VM may still be booting."""


class AuthRejected(SshError):
    """The server refused tpuctl's key (the key may not have reached the VM yet)."""


class HostKeyMismatch(SshError):
    """The server's host key is not the one the cloud publishes for that worker."""


class UntrustedHostKey(SshError):
    """What the cloud publishes as a worker's host keys holds no well-formed key: there is
    nothing tpuctl may trust for that worker (docs/ssh.md, "Host keys")."""


class ConnectionDropped(SshError):
    """The connection broke while a command or a copy ran."""


class JobFailed(TpuctlError):
    """A job ended without success (`tpuctl run`)."""


class CheckFailed(TpuctlError):
    """`tpuctl doctor` found errors in the script `tpuctl run` was given (exit 1)."""


class GcFailed(TpuctlError):
    """`tpuctl gc` could not delete everything it set out to."""


class DeleteFailed(TpuctlError):
    """`tpuctl delete` could not delete every node or request it was given."""


class NotPythonError(UsageError):
    """`tpuctl doctor`: the script is not a Python file the checks can read."""
