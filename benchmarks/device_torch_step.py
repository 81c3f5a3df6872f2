"""A small CUDA program for the device check (needs torch, which the GPU image has; never a
gitm-tui dependency): a few steps of matmul + elementwise + a copy on two streams."""

import torch

assert torch.cuda.is_available(), "no CUDA device"
x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
side = torch.cuda.Stream()
host = torch.randn(8 << 20, pin_memory=True)
for _ in range(20):
    y = torch.relu(x @ w) * 0.5 + 1.0
    with torch.cuda.stream(side):
        dev = host.to("cuda", non_blocking=True)
    torch.cuda.current_stream().wait_stream(side)
    x = (y + dev[: y.numel()].view_as(y).to(y.dtype)).contiguous()
torch.cuda.synchronize()
print("done", float(x.float().mean()))
