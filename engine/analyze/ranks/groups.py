"""Which ranks are one job: workload fingerprints and profile times grouped, and the line
that says why a set of traces is not one job, or only a part of one."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from engine.analyze.ranks.matching import _Instance
from engine.analyze.ranks.summary import RankSummary, rank_ranges
from engine.optimizer.fingerprint import distance, load_params
from engine.text import clean

#: times after this (ns since 1970: 2001) are wall-clock times, comparable across hosts
EPOCH_NS = 10**18
#: ranks of one job profiled further apart than this (wall clock) are not one profile
APART_NS = 3_600 * 10**9


#: what each fingerprint part is called in a line
_PARTS = {
    "kernels": "kernel mix",
    "classes": "class mix",
    "dtypes": "dtype mix",
    "activity": "launches/copies/collectives per step",
    "operators": "operator mix",
}


def workload_groups(summaries: list[RankSummary]) -> list[list[int]]:
    """The summaries (indices) grouped by workload: each joins the first group whose first
    member's fingerprint is within ``ranks_threshold`` of its own (distance across ranks:
    manifests/fingerprint.json), else starts one; largest group first. Summaries without a
    fingerprint join the largest. O(files × groups) comparisons, not every pair."""
    thr = load_params().ranks_threshold
    groups: list[list[int]] = []
    loose: list[int] = []
    for k, s in enumerate(summaries):
        fp = s.fingerprint
        if fp is None:
            loose.append(k)
            continue
        for g in groups:
            ref = summaries[g[0]].fingerprint
            if ref is not None and distance(ref, fp, across_ranks=True).value <= thr:
                g.append(k)
                break
        else:
            groups.append([k])
    groups.sort(key=lambda g: (-len(g), g[0]))
    if loose:
        if groups:
            groups[0] = sorted(groups[0] + loose)
        else:
            groups = [loose]
    return groups


def job_groups(summaries: list[RankSummary]) -> list[list[RankSummary]]:
    """The files split into the jobs they can be: by workload (``workload_groups``), then by
    world size; largest first. Each group with two distinct ranks or more can be crossed
    (``cross_rank``) on its own: files of two jobs in one run are kept apart, not merged."""
    out: list[list[RankSummary]] = []
    for g in workload_groups(summaries):
        by_world: dict[int | None, list[RankSummary]] = defaultdict(list)
        for k in g:
            by_world[summaries[k].world_size].append(summaries[k])
        out += by_world.values()
    out.sort(key=lambda g: -len(g))
    return out


def _other_workloads(ss: list[RankSummary]) -> dict[int, str]:
    """Why each file that is not of the main workload group is another workload (its distance
    from the group's first file, the parts that differ); with no single largest group, every
    file of every group."""
    groups = workload_groups(ss)
    if len(groups) < 2:
        return {}
    thr = load_params().ranks_threshold
    tie = len(groups[0]) == len(groups[1])
    out: dict[int, str] = {}
    for gi, g in enumerate(groups):
        if gi == 0 and not tie:
            continue
        ref = groups[1][0] if gi == 0 else groups[0][0]
        a, b = ss[ref].fingerprint, ss[g[0]].fingerprint
        if a is None or b is None:
            continue
        d = distance(a, b, across_ranks=True)
        hard = [r for r in d.reasons if r.startswith(("device ", "kind of trace"))]
        moved = sorted(
            ((v, _PARTS[k]) for k, v in d.parts.items() if k in _PARTS and v),
            reverse=True,
        )
        what = ", ".join([*hard, *(f"{label} {v:.2f}" for v, label in moved[:3])])
        line = (
            f"another workload (fingerprint distance {d.value:.2f} from "
            f"{clean(Path(ss[ref].source).name, 40)}'s, above {thr:g}: {what})"
        )
        for k in g:
            out[k] = line
    return out


def not_one_job(summaries: list[RankSummary]) -> str | None:
    """One line naming the files that are not of one job with the others — another world size,
    a rank twice, a process group recorded differently, another workload (its fingerprint:
    ``workload_groups``), or profiled hours apart — or None when nothing says so. The odd ones are the minority;
    with no majority, every file is named with what it says."""
    ss = [s for s in summaries if s.rank is not None]
    if len(ss) < 2:
        return None
    odd: dict[int, list[str]] = defaultdict(list)

    def minority(values: dict[int, object], what: str) -> None:
        counts: dict[object, int] = defaultdict(int)
        for v in values.values():
            counts[v] += 1
        if len(counts) < 2:
            return
        top = max(counts.values())
        major = [v for v, n in counts.items() if n == top]
        ref = major[0] if len(major) == 1 else None
        for k, v in values.items():
            if v != ref:
                others = sorted({str(x) for x in values.values() if x != v})
                odd[k].append(f"{what} {v} (the others: {', '.join(others[:3])})")

    minority({k: s.world_size for k, s in enumerate(ss) if s.world_size}, "world size")
    for k, s in enumerate(ss):
        if s.world_size and s.rank is not None and s.rank >= s.world_size:
            odd[k].append(f"rank {s.rank} in a world of {s.world_size}")
    by_rank: dict[int, list[int]] = defaultdict(list)
    for k, s in enumerate(ss):
        by_rank[int(s.rank or 0)].append(k)
    for r, ks in by_rank.items():
        if len(ks) > 1:
            for k in ks:
                odd[k].append(f"rank {r} is in {len(ks)} files")
    names = sorted({g for s in ss for g in (*s.group_ranks, *s.group_size, *s.group_desc)})
    for g in names[:64]:
        label = f"process group {clean(g, 24)!r}"
        members = {
            k: tuple(x for a, b, c in s.group_ranks[g] for x in range(a, b, c))
            for k, s in enumerate(ss)
            if g in s.group_ranks
        }
        minority({k: _short(m) for k, m in members.items()}, label + " of ranks")
        minority(
            {k: s.group_size[g] for k, s in enumerate(ss) if g in s.group_size}, label + " of size"
        )
        minority(
            {k: clean(s.group_desc[g], 24) for k, s in enumerate(ss) if g in s.group_desc}, label
        )
        for k, m in members.items():
            if ss[k].rank not in m:
                odd[k].append(f"{label} without its own rank {ss[k].rank}")
    for k, why in _other_workloads(ss).items():
        odd[k].append(why)
    wall = {k: s.first_ns for k, s in enumerate(ss) if s.first_ns >= EPOCH_NS}
    if len(wall) >= 2:
        mid = float(np.median(list(wall.values())))
        for k, t in wall.items():
            if abs(t - mid) > APART_NS:
                odd[k].append(f"profiled {abs(t - mid) / 3.6e12:,.1f} h from the others")
    if not odd:
        return None
    parts = [
        f"{clean(Path(ss[k].source).name, 60)} (rank {ss[k].rank}: {'; '.join(odd[k])})"
        for k in sorted(odd)
    ]
    return (
        f"not one job, so the ranks are not compared — {len(odd)} of {len(ss)} file(s) differ: "
        + ", ".join(parts[:8])
        + (f", and {len(parts) - 8} more" if len(parts) > 8 else "")
    )


def _short(ranks: tuple[int, ...]) -> str:
    """A rank list as text for one line: '[0..7]' for a range, else the first few."""
    spans = rank_ranges(list(ranks))
    if len(spans) == 1 and spans[0][2] == 1:
        return f"[{spans[0][0]}..{spans[0][1] - 1}]"
    head = ", ".join(map(str, ranks[:6]))
    return f"[{head}{', …' if len(ranks) > 6 else ''}]"


def _whole(inst: _Instance, here: frozenset[int], world: int) -> bool:
    """Whether every rank of the collective is among the files: its group's ranks (or size)
    where the trace says them; a transfer's two ends; otherwise the whole job (its world size),
    or — where no rank says the world size — the files are taken to be the job."""
    if inst.p2p is not None:
        return True
    if inst.members is not None:
        return inst.members <= here
    if inst.gsize is not None:
        return len(inst.seen) >= inst.gsize
    return world <= len(here)


def _subset_reason(complete: list[_Instance], here: frozenset[int], world: int) -> str:
    """Why no matched collective has all its ranks here (for the 'cannot tell' verdict)."""
    sizes = sorted(
        {
            (i.group, len(i.members) if i.members is not None else i.gsize)
            for i in complete
            if i.group and i.p2p is None
        },
        key=lambda x: (x[1] or 0, x[0]),
    )
    job = f" of the job's {world}" if world > len(here) else ""
    if not sizes:
        what = (
            "the traces name no process group for their collectives, so each may take in ranks "
            "not given"
        )
    else:
        shown = ", ".join(f"{g} of {n or 'unknown'} ranks" for g, n in sizes[:4])
        what = (
            f"{len(complete)} matched collective(s) belong to process groups with ranks not "
            f"given ({shown})"
        )
    return (
        f"{len(here)}{job} ranks are here and {what}: the rank the others waited for may be one "
        "not given"
    )
