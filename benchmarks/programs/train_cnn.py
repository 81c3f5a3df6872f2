"""An ordinary small PyTorch training script (synthetic data, generated here; it knows nothing
of gitm-tui): a small CNN, a DataLoader and Adam — about 20 ms a step on one 2-core VM. The
loaded-machine benchmark (benchmarks/bench_loaded_machine.py) optimizes it unmodified."""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=2000)
parser.add_argument("--batch", type=int, default=32)
args = parser.parse_args()

torch.manual_seed(0)
n = 512
data = TensorDataset(torch.randn(n, 3, 32, 32), torch.randint(0, 10, (n,)))
loader = DataLoader(data, batch_size=args.batch, shuffle=True)
model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Flatten(),
    nn.Linear(32 * 8 * 8, 10),
)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()
step = 0
while step < args.steps:
    for x, y in loader:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        step += 1
        if step >= args.steps:
            break
print("done")
