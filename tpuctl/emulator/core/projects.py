"""What every service knows of a project by its id alone."""

from __future__ import annotations

import hashlib


def project_number(project: str) -> str:
    """A stable fake 12-digit project number (the default service account is named by it)."""
    digest = hashlib.sha256(project.encode()).hexdigest()
    return str(100000000000 + int(digest, 16) % 900000000000)
