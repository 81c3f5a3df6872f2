"""What a collective kernel's args say about its communicator (Kineto JSON).

Recent PyTorch profilers copy the ``record_param_comms`` metadata of a collective onto the
NCCL/RCCL kernel it launched: "Process Group Name", "Process Group Description" (or "Process
Group Desc"), "Process Group Ranks", "Group size", "Seq", "Collective name", "In msg nelems" /
"Out msg nelems", "dtype", and for a point-to-point transfer "Src Rank" / "Dst Rank" (the
peer's global rank). The collective's name says what it is where the kernel's name does not (an
all-to-all and an all-reduce may both run as ``ncclKernel_SendRecv…``). Older traces carry none of it; then a collective is known only by its
kernel name, and what needs a peer or a communicator (slow links) cannot be judged.

Everything here comes from the trace: values of the wrong shape are dropped, strings are cut to
a label's length, a rank list is kept only when it is whole (PyTorch truncates long ones with
"...").
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

#: bytes per element of the c10 ScalarType names PyTorch writes as "dtype"
DTYPE_BYTES = {
    "Double": 8, "Float": 4, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2,
    "Char": 1, "Byte": 1, "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16, "ComplexHalf": 4,
    "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1,
    "UInt16": 2, "UInt32": 4, "UInt64": 8,
}  # fmt: skip
#: the longest group name kept (a label, not data)
NAME_MAX = 64
#: the most ranks of one process group kept
RANKS_MAX = 65_536
_INT = re.compile(r"-?\d+")
#: "Collective name" (c10d's names: allreduce, _allgather_base, all_to_all, reduce_scatter_tensor
#: _coalesced, send …) → the op as engine.analyze.ranks.ranks names it; longest first
_COLL = (
    ("reducescatter", "ReduceScatter"),
    ("alltoall", "AllToAll"),
    ("allgather", "AllGather"),
    ("allreduce", "AllReduce"),
    ("broadcast", "Broadcast"),
    ("gather", "Gather"),
    ("scatter", "Scatter"),
    ("reduce", "Reduce"),
    ("barrier", "Barrier"),
    ("sendrecv", "SendRecv"),
    ("send", "Send"),
    ("recv", "Recv"),
)


def _int(v: Any) -> int | None:
    """An integer from an int or a decimal string ("3"); None otherwise (bools included)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if -(2**62) < v < 2**62 else None
    if isinstance(v, str) and 0 < len(v) <= 20 and _INT.fullmatch(v.strip()):
        x = int(v.strip())
        return x if -(2**62) < x < 2**62 else None
    return None


def _ranks(v: Any) -> tuple[int, ...] | None:
    """The ranks of "Process Group Ranks" ("[0, 1, 2]" or a JSON list); None when truncated
    ("...") or not a list of ranks. Every kernel of a group repeats the same string: it is
    parsed once (and one tuple kept for all of them)."""
    if isinstance(v, str):
        return _ranks_text(v)
    if isinstance(v, list):
        return _rank_list(v)
    return None


@lru_cache(maxsize=8)  # a few groups per trace; a string may be 1 MB
def _ranks_text(v: str) -> tuple[int, ...] | None:
    if len(v) <= 16 * RANKS_MAX and "..." not in v:
        body = v.strip()
        if not (body.startswith("[") and body.endswith("]")):
            return None
        return _rank_list([p for p in body[1:-1].split(",") if p.strip()])
    return None


def _rank_list(items: list[Any]) -> tuple[int, ...] | None:
    out = [_int(x) for x in items[: RANKS_MAX + 1]]
    if not out or len(out) > RANKS_MAX or any(x is None or x < 0 for x in out):
        return None
    return tuple(x for x in out if x is not None)


def collective_name(v: Any) -> str | None:
    """The op of a "Collective name" ("allreduce", "_allgather_base", "all_to_all" …): one of
    engine.analyze.ranks.ranks' op names, or None when it names none of them."""
    if not isinstance(v, str) or not 0 < len(v) <= NAME_MAX:
        return None
    key = v.lower().replace("_", "").replace(" ", "")
    for part, op in _COLL:
        if part in key:
            return op
    return None


def collective_meta(args: Any) -> dict[str, Any] | None:
    """The communicator facts in a collective kernel's ``args``; None when it carries none.
    Keys: group, desc (str | None), group_ranks (tuple | None), group_size, seq, src, dst,
    nelems (the larger of in/out), nbytes (int | None), op (str | None: "Collective name")."""
    if not isinstance(args, dict):
        return None
    name = args.get("Process Group Name")
    group = name[:NAME_MAX] if isinstance(name, str) and name else None
    d = args.get("Process Group Description", args.get("Process Group Desc"))
    desc = d[:NAME_MAX] if isinstance(d, str) and d else None
    src, dst = _int(args.get("Src Rank")), _int(args.get("Dst Rank"))
    seq = _int(args.get("Seq"))
    gsize = _int(args.get("Group size"))
    dtype = args.get("dtype")
    size = DTYPE_BYTES.get(dtype) if isinstance(dtype, str) else None
    nel = [n for n in (_int(args.get("In msg nelems")), _int(args.get("Out msg nelems"))) if n]
    nelems = max(nel) if nel and max(nel) > 0 else None
    nbytes = nelems * size if nelems and size else None
    op = collective_name(args.get("Collective name"))
    if all(x is None for x in (group, src, dst, seq, nelems, op, gsize)):
        return None
    return {
        "group": group,
        "desc": desc,
        "group_ranks": _ranks(args.get("Process Group Ranks")),
        "group_size": gsize if gsize is not None and 0 < gsize <= 2**31 else None,
        "seq": seq if seq is not None and seq >= 0 else None,
        "src": src if src is not None and src >= 0 else None,
        "dst": dst if dst is not None and dst >= 0 else None,
        "nelems": nelems,
        "nbytes": nbytes,
        "op": op,
    }
