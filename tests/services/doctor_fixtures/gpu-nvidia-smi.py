"""Logging the GPUs with nvidia-smi."""

import subprocess

subprocess.run(["nvidia-smi"], check=True)
