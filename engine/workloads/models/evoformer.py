"""af2 as a real model: a small Evoformer-style stack run for inference on SYNTHETIC MSA and
pair representations (random features; the block's structure, not AlphaFold2's weights)."""

from __future__ import annotations

import torch
from torch import nn

from engine.workloads.torch_job import TorchJob

SIZES = {"small": (1, 16, 64, 2), "tiny": (1, 4, 16, 1)}  # batch, sequences, residues, blocks
C_M, C_Z, HEADS = 64, 32, 4


class RowAttentionWithPairBias(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm_m, self.norm_z = nn.LayerNorm(C_M), nn.LayerNorm(C_Z)
        self.qkv = nn.Linear(C_M, 3 * C_M, bias=False)
        self.bias = nn.Linear(C_Z, HEADS, bias=False)
        self.gate = nn.Linear(C_M, C_M)
        self.out = nn.Linear(C_M, C_M)

    def forward(self, m: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        b, s, r, _ = m.shape
        x = self.norm_m(m)
        q, k, v = self.qkv(x).view(b, s, r, 3, HEADS, C_M // HEADS).unbind(3)
        q, k, v = (t.transpose(2, 3) for t in (q, k, v))  # (b, s, h, r, d)
        bias = self.bias(self.norm_z(z)).permute(0, 3, 1, 2).unsqueeze(1)  # (b, 1, h, r, r)
        a = torch.softmax(q @ k.transpose(-1, -2) / (C_M // HEADS) ** 0.5 + bias, dim=-1)
        o = (a @ v).transpose(2, 3).reshape(b, s, r, C_M)
        return m + self.out(torch.sigmoid(self.gate(x)) * o)


class ColumnAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(C_M)
        self.attn = nn.MultiheadAttention(C_M, HEADS, batch_first=True)

    def forward(self, m: torch.Tensor) -> torch.Tensor:
        b, s, r, c = m.shape
        x = self.norm(m).transpose(1, 2).reshape(b * r, s, c)
        o, _ = self.attn(x, x, x, need_weights=False)
        return m + o.view(b, r, s, c).transpose(1, 2)


class OuterProductMean(nn.Module):
    def __init__(self, c: int = 16) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(C_M)
        self.a, self.b = nn.Linear(C_M, c), nn.Linear(C_M, c)
        self.out = nn.Linear(c * c, C_Z)

    def forward(self, m: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        x = self.norm(m)
        a, b = self.a(x), self.b(x)  # (B, s, r, c)
        o = torch.einsum("bsic,bsjd->bijcd", a, b) / m.shape[1]
        return z + self.out(o.flatten(-2))


class TriangleMultiplication(nn.Module):
    def __init__(self, outgoing: bool) -> None:
        super().__init__()
        self.outgoing = outgoing
        self.norm, self.norm_out = nn.LayerNorm(C_Z), nn.LayerNorm(C_Z)
        self.a, self.b = nn.Linear(C_Z, C_Z), nn.Linear(C_Z, C_Z)
        self.ga, self.gb, self.g = nn.Linear(C_Z, C_Z), nn.Linear(C_Z, C_Z), nn.Linear(C_Z, C_Z)
        self.out = nn.Linear(C_Z, C_Z)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = self.norm(z)
        a = torch.sigmoid(self.ga(x)) * self.a(x)
        b = torch.sigmoid(self.gb(x)) * self.b(x)
        eq = "bikc,bjkc->bijc" if self.outgoing else "bkic,bkjc->bijc"
        o = self.out(self.norm_out(torch.einsum(eq, a, b)))
        return z + torch.sigmoid(self.g(x)) * o


def _transition(c: int) -> nn.Module:
    return nn.Sequential(nn.LayerNorm(c), nn.Linear(c, 4 * c), nn.ReLU(), nn.Linear(4 * c, c))


class EvoformerBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.row, self.col = RowAttentionWithPairBias(), ColumnAttention()
        self.m_trans, self.z_trans = _transition(C_M), _transition(C_Z)
        self.opm = OuterProductMean()
        self.tri_out, self.tri_in = TriangleMultiplication(True), TriangleMultiplication(False)

    def forward(self, m: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        m = self.col(self.row(m, z))
        m = m + self.m_trans(m)
        z = self.opm(m, z)
        z = self.tri_in(self.tri_out(z))
        return m, z + self.z_trans(z)


class Evoformer(nn.Module):
    def __init__(self, blocks: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(EvoformerBlock() for _ in range(blocks))

    def forward(self, m: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        for blk in self.blocks:
            m, z = blk(m, z)
        return m, z


def job(device: str, size: str, seed: int) -> TorchJob:
    batch, seqs, res, blocks = SIZES[size]
    torch.manual_seed(seed)
    model = Evoformer(blocks).to(device).eval()
    g = torch.Generator().manual_seed(seed + 1)
    # SYNTHETIC: random MSA and pair features
    m = torch.randn(batch, seqs, res, C_M, generator=g).to(device)
    z = torch.randn(batch, res, res, C_Z, generator=g).to(device)

    def step(b: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.inference_mode():
            return model(*b)

    name = "af2: Evoformer-style block stack, inference (SYNTHETIC MSA/pair features)"
    return TorchJob(step, lambda: (m, z), model, None, name=name, samples_per_step=batch)
