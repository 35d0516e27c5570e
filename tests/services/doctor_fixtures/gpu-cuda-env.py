"""Choosing GPUs through CUDA_VISIBLE_DEVICES."""

import os

os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
