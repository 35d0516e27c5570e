"""What a first run with nothing set up is told: everything missing at once."""

from __future__ import annotations

from tpuctl.errors import ConfigError


def not_set_up(missing: list[str]) -> ConfigError:
    """One error for everything a first run lacks ("project", "zone", "credentials"),
    with the two ways forward: Google Cloud, or the local emulator."""
    said = {
        "project": "no project",
        "zone": "no zone",
        "credentials": "no Google Cloud credentials",
    }
    listed = [said[m] for m in missing]
    steps = []
    if "credentials" in missing:
        steps.append("`gcloud auth application-default login`")
    if "project" in missing:
        steps.append("`gcloud config set project P`")
    if "zone" in missing:
        steps.append(
            "`gcloud config set compute/zone Z` (or --project P --zone Z)"
            if "project" in missing
            else "`gcloud config set compute/zone Z`"
        )
    return ConfigError(
        "tpuctl is not set up: " + ", ".join(listed[:-1]) + f" and {listed[-1]}",
        hint="for Google Cloud: " + ", then ".join(steps) + "; or try it locally with no "
        "account: `tpuctl emulator start --detach`, then paste the line it prints",
    )
