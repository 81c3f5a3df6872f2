"""hft-lob as a real model: a DeepLOB-style classifier trained on SYNTHETIC limit-order-book
windows (10 price levels × bid/ask × price/size = 40 features per tick)."""

from __future__ import annotations

import torch
from torch import nn

from engine.workloads.torch_job import TorchJob

SIZES = {"small": (64, 100, 32), "tiny": (8, 40, 8)}  # batch, ticks per window, channels


class DeepLOB(nn.Module):
    def __init__(self, ch: int = 32, hidden: int = 64, classes: int = 3) -> None:
        super().__init__()

        def block(cin: int, k: tuple[int, int], s: tuple[int, int]) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv2d(cin, ch, k, stride=s),
                nn.LeakyReLU(0.01),
                nn.BatchNorm2d(ch),
                nn.Conv2d(ch, ch, (3, 1), padding=(1, 0)),
                nn.LeakyReLU(0.01),
                nn.BatchNorm2d(ch),
            )

        # price/size pairs → levels → one feature column, as DeepLOB's three conv blocks do
        self.conv = nn.Sequential(
            block(1, (1, 2), (1, 2)), block(ch, (1, 2), (1, 2)), block(ch, (1, 10), (1, 1))
        )
        self.inc1 = nn.Sequential(
            nn.Conv2d(ch, ch, 1), nn.LeakyReLU(0.01), nn.Conv2d(ch, ch, (3, 1), padding=(1, 0))
        )
        self.inc2 = nn.Sequential(
            nn.Conv2d(ch, ch, 1), nn.LeakyReLU(0.01), nn.Conv2d(ch, ch, (5, 1), padding=(2, 0))
        )
        self.inc3 = nn.Sequential(
            nn.MaxPool2d((3, 1), stride=1, padding=(1, 0)), nn.Conv2d(ch, ch, 1)
        )
        self.lstm = nn.LSTM(3 * ch, hidden, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, 1, T, 40)
        h = self.conv(x)  # (B, ch, T, 1)
        h = torch.cat([self.inc1(h), self.inc2(h), self.inc3(h)], dim=1)  # (B, 3ch, T, 1)
        h = h.squeeze(-1).transpose(1, 2)  # (B, T, 3ch)
        out, _ = self.lstm(h)
        return self.head(out[:, -1])


def job(device: str, size: str, seed: int) -> TorchJob:
    batch, ticks, ch = SIZES[size]
    torch.manual_seed(seed)
    model = DeepLOB(ch).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(seed + 1)
    # SYNTHETIC: a random walk of mid prices with level offsets and sizes, z-normalised
    n = 8
    mid = torch.cumsum(torch.randn(n, batch, ticks, 1, generator=g) * 0.01, dim=2)
    book = mid + torch.randn(n, batch, ticks, 40, generator=g) * 0.1
    xs = ((book - book.mean()) / book.std()).unsqueeze(2).to(device)  # (n, B, 1, T, 40)
    ys = torch.randint(0, 3, (n, batch), generator=g).to(device)
    state = {"i": 0}

    def batches() -> tuple[torch.Tensor, torch.Tensor]:
        i = state["i"] = (state["i"] + 1) % n
        return xs[i], ys[i]

    def step(b: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = b
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    name = "hft-lob: DeepLOB-style conv+inception+LSTM, training (SYNTHETIC order-book data)"
    return TorchJob(step, batches, model, opt, name=name, samples_per_step=batch)
