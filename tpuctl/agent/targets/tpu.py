"""`--target tpu:NAME`: a node of the Cloud TPU API (tpu_api.py)."""

from ..tpu_api import TpuNode as TARGET

__all__ = ["TARGET"]
