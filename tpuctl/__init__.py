"""tpuctl: a command-line manager for the whole life of Google Cloud TPU VMs."""

__version__ = "0.1.0"
