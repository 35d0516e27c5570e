"""The GPU script's device choice: on a TPU VM it is the CPU."""

import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
model = torch.nn.Linear(4, 1).to(device)
