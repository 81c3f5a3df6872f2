"""kitti as a real model: a small PointPillars-style detector run for inference on SYNTHETIC
point clouds (uniform points with a few dense clusters standing in for cars)."""

from __future__ import annotations

import torch
from torch import nn

from engine.workloads.torch_job import TorchJob

SIZES = {"small": (2, 12000, 96), "tiny": (1, 2000, 32)}  # batch, points per cloud, BEV grid
FEATURES, ANCHORS, BOX = 64, 2, 7


class PillarFeatureNet(nn.Module):
    """Points (x, y, z, r) plus offsets from their pillar's centre → one feature per pillar."""

    def __init__(self, grid: int) -> None:
        super().__init__()
        self.grid = grid
        self.lin = nn.Linear(6, FEATURES, bias=False)
        self.norm = nn.BatchNorm1d(FEATURES)

    def forward(self, pts: torch.Tensor) -> torch.Tensor:  # pts: (B, N, 4) in [0, 1)
        b = pts.shape[0]
        cell = (pts[..., :2] * self.grid).long().clamp_(0, self.grid - 1)
        pid = cell[..., 0] * self.grid + cell[..., 1]  # (B, N)
        centre = (cell.float() + 0.5) / self.grid
        f = torch.cat([pts, pts[..., :2] - centre], dim=-1)  # (B, N, 6)
        h = torch.relu(self.norm(self.lin(f).transpose(1, 2))).transpose(1, 2)  # (B, N, F)
        bev = torch.zeros(b, self.grid * self.grid, FEATURES, device=pts.device, dtype=h.dtype)
        bev = bev.scatter_reduce(1, pid.unsqueeze(-1).expand(-1, -1, FEATURES), h, "amax")
        return bev.transpose(1, 2).reshape(b, FEATURES, self.grid, self.grid)


def _down(cin: int, cout: int, layers: int) -> nn.Sequential:
    mods: list[nn.Module] = [
        nn.Conv2d(cin, cout, 3, stride=2, padding=1),
        nn.BatchNorm2d(cout),
        nn.ReLU(),
    ]
    for _ in range(layers):
        mods += [nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU()]
    return nn.Sequential(*mods)


class PointPillars(nn.Module):
    def __init__(self, grid: int) -> None:
        super().__init__()
        self.pfn = PillarFeatureNet(grid)
        self.b1, self.b2 = _down(FEATURES, 64, 2), _down(64, 128, 2)
        self.up1 = nn.ConvTranspose2d(64, 64, 1)
        self.up2 = nn.ConvTranspose2d(128, 64, 2, stride=2)
        self.cls = nn.Conv2d(128, ANCHORS, 1)
        self.box = nn.Conv2d(128, ANCHORS * BOX, 1)

    def forward(self, pts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.pfn(pts)
        f1 = self.b1(x)
        f2 = self.b2(f1)
        h = torch.cat([self.up1(f1), self.up2(f2)], dim=1)
        return self.cls(h), self.box(h)


def job(device: str, size: str, seed: int) -> TorchJob:
    batch, points, grid = SIZES[size]
    torch.manual_seed(seed)
    model = PointPillars(grid).to(device).eval()
    g = torch.Generator().manual_seed(seed + 1)
    # SYNTHETIC: uniform clutter plus dense clusters (stand-ins for cars) in the unit square
    pts = torch.rand(batch, points, 4, generator=g)
    k = points // 4
    centres = torch.rand(batch, 8, 1, 2, generator=g)
    cluster = centres + 0.01 * torch.randn(batch, 8, k // 8, 2, generator=g)
    pts[:, : (k // 8) * 8, :2] = cluster.reshape(batch, -1, 2).clamp(0, 0.999)
    pts = pts.to(device)

    def step(p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.inference_mode():
            return model(p)

    name = "kitti: PointPillars-style detector, inference (SYNTHETIC point clouds)"
    return TorchJob(step, lambda: pts, model, None, name=name, samples_per_step=batch)
