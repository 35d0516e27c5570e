"""A job with a dependency: `tpuctl run` builds its environment once from the work dir's
requirements.txt (this folder's), caches it in the bucket, and every later run, worker
and restart installs it from there.

    tpuctl run examples/env/train.py --accelerator v3-8
"""

import importlib.metadata

import tabulate  # from the job's environment (a venv on the VM), not the image's Python

print("tabulate", importlib.metadata.version("tabulate"), "from", tabulate.__file__)
