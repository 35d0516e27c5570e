"""IAM: service accounts, OS Login, the Policy Troubleshooter; and what the cloud's
front end checks before every call (enabled APIs, billing, permissions, organisation
policies)."""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.core.service import Service
from tpuctl.emulator.core.slots import Slot, configured
from tpuctl.emulator.iam import oslogin, urls
from tpuctl.emulator.iam.access import CONFIG_KEYS as ACCESS_KEYS
from tpuctl.emulator.iam.access import Access
from tpuctl.emulator.iam.org_policy import CONFIG_KEYS as POLICY_KEYS
from tpuctl.emulator.iam.org_policy import Policies


def _load_access(state: Any, config: dict[str, Any], tokens: Any) -> None:
    state.access.load(config)
    state.access.accounts.load_tokens(tokens or [])


# `state.access`: enabled APIs, billing, the caller's permissions; the file keeps the
# tokens minted for the VMs' service accounts too
ACCESS = configured(
    "access",
    Access,
    ACCESS_KEYS,
    file_key="tokens",
    save=lambda state: state.access.accounts.tokens_state(),
    load=_load_access,
)

# `state.policies`: organisation policies, the TPU service agent
POLICIES = configured(
    "policies",
    Policies,
    POLICY_KEYS,
    validate=Policies.validate,
    load=lambda state, config, _: state.policies.update(
        {k: config[k] for k in POLICY_KEYS if k in config}
    ),
)


def _validate_metadata(body: dict[str, Any]) -> None:
    if "project_metadata" in body:
        oslogin.validate_project_metadata(body["project_metadata"])


def _update_metadata(state: Any, body: dict[str, Any]) -> None:
    if "project_metadata" in body:
        oslogin.update_project_metadata(state, body["project_metadata"])


# `state.project_metadata`: Compute's project metadata (e.g. enable-oslogin), config
PROJECT_METADATA = Slot(
    "project_metadata",
    dict,
    frozenset({"project_metadata"}),
    config=lambda state: {
        "project_metadata": {p: dict(md) for p, md in state.project_metadata.items()}
    },
    validate=_validate_metadata,
    update=_update_metadata,
    load=lambda state, config, _: state.project_metadata.update(
        {p: dict(md) for p, md in config.get("project_metadata", {}).items()}
    ),
)

# `state.oslogin`: OS Login profiles by user (oslogin.py)
OS_LOGIN = Slot(
    "oslogin",
    dict,
    save=oslogin.to_state,
    load=lambda state, config, kept: oslogin.load(state, kept or {}),
)

SERVICE = Service(
    "iam.googleapis.com",
    tuple(urls.ROUTES),
    slots=(ACCESS, POLICIES, PROJECT_METADATA, OS_LOGIN),
)
