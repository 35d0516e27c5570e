"""init's service-account step where the Policy Troubleshooter cannot be asked: the
step stays ready and says why (the emulator has no user credentials, so a client-based
API's "requires a quota project" refusal is given here as the adapter raises it)."""

from __future__ import annotations

from tpuctl.errors import ConfigError
from tpuctl.services.init_access import check_service_account

SA = "123-compute@developer.gserviceaccount.com"


class _NoQuotaProject:
    def project_number(self, project: str) -> str:
        return "123"

    def service_account(self, project: str, email: str) -> dict:
        return {"email": email}

    def troubleshoot(self, *args: str) -> str:
        raise ConfigError(
            "the Policy Troubleshooter API (policytroubleshooter.googleapis.com) needs a "
            "quota project, and your Application Default Credentials (user credentials) "
            "name none",
            hint="set one: `gcloud auth application-default set-quota-project p`",
        )


def test_a_troubleshooter_that_needs_a_quota_project_leaves_the_step_ready() -> None:
    step = check_service_account(_NoQuotaProject(), "p", "p-tpuctl", None, True)  # type: ignore[arg-type]
    assert step.status == "ok"
    assert step.found.startswith(
        f"the nodes' service account {SA} exists; what it holds was not checked (the Policy "
        "Troubleshooter API (policytroubleshooter.googleapis.com) needs a quota project, and "
        "your Application Default Credentials (user credentials) name none; set one: "
        "`gcloud auth application-default set-quota-project p`);"
    )
