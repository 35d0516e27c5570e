"""A PyTorch/XLA training loop that never ends the step."""

import torch
import torch_xla.core.xla_model as xm

device = xm.xla_device()
model = torch.nn.Linear(4, 1).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _step in range(100):
    x = torch.randn(8, 4, device=device)
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
