"""`--target compute:NAME`: a Compute Engine TPU VM or slice (compute_api.py)."""

from ..compute_api import ComputeNode as TARGET

__all__ = ["TARGET"]
