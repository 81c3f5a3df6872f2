"""What `analyze` writes for the ranks of one job, beside each rank's own outputs:

* ``cross_rank.json`` — engine.analyze.ranks.ranks.CrossRank (its JSON Schema:
  manifests/schemas/cross_rank.schema.json);
* ``cross_rank.md`` — the same for a person: stragglers per step, waits, links, outliers;
* ``ranks.perfetto.json.gz`` — every rank's perfetto.json in one file, one process per rank, its
  times moved onto the reference rank's clock (the offsets of the cross-rank analysis), so the
  ranks line up in Perfetto. Merged line by line from the files already written: the events are
  streamed, never held, and each rank's part is made on its own (on a job's workers, side by
  side), then joined into one gzip member.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.analyze.output.export import merged_meta, merged_tid, rank_process
from engine.analyze.ranks.ranks import STRAGGLER_SHARE, CrossRank
from engine.store.runs import atomic_write_text
from engine.text import md_code, md_text, us_text

_X = re.compile(
    rb'^\{"ph":"X","cat":"[A-Za-z_]+","name":.*?,"pid":(-?\d+),"tid":(-?\d+),"ts":(-?\d+\.\d{3}),'
)


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f}"


def cross_rank_markdown(c: CrossRank) -> str:
    """The cross-rank analysis for a person (every string from a trace cleaned)."""
    lines = [
        f"# gitm-tui — {len(c.ranks)} ranks of one job",
        "",
        f"* collectives matched on every rank taking part: {c.matched}; not on every rank "
        f"(not compared): {c.unmatched}",
        f"* matching: {c.matching}",
        f"* clocks: {md_text(c.clocks)}"
        + ("" if c.trusted else " — **not trusted**: no straggler is named from them"),
        f"* {c.rule}",
        "",
        "## Stragglers per step",
        "",
        f"**Straggler:** {md_text(c.straggler)}",
        *(["", f"**The job's critical path:** {md_text(c.job_path)}"] if c.job_path else []),
        "",
    ]
    if c.steps:
        lines += [
            "| step | step ms | straggler | the others waited for the rank they waited for most "
            "(mean ms) |",
            "|---:|---:|---:|---:|",
        ]
        for s in c.steps:
            who = "none" if s.straggler is None else str(s.straggler)
            lines.append(f"| {s.step} | {_ms(s.step_ns)} | {who} | {_ms(s.others_waited_ns)} |")
        lines += [
            "",
            f"A straggler is named when the others waited for it {STRAGGLER_SHARE:.0%} of the "
            "step or more; each collective's waits are blamed on the rank that arrived last.",
        ]
    else:
        lines.append(
            "No step is judged (no step, the collectives cannot be trusted, or none has all its "
            "ranks here)."
        )
    lines += [
        "",
        "## Ranks",
        "",
        "| rank | clock offset ms | waited ms | last arrivals | comm share | overlapped | "
        "step ms |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in c.per_rank:
        step = "unknown" if p.step_ns is None else _ms(p.step_ns)
        lines.append(
            f"| {p.rank} | {_ms(p.clock_offset_ns)} | "
            f"{'unknown' if p.waited_ns is None else _ms(p.waited_ns)} | "
            f"{'unknown' if p.last_arrivals is None else p.last_arrivals} | "
            f"{p.comm_share:.1%} | {p.overlap_share:.1%} | {step} |"
        )
    lines += _wait_lines(c)
    lines += ["", "Outliers: " + (
        ", ".join(f"rank {o.rank} {o.metric} ({o.value:,.4g} vs median {o.median:,.4g})"
                  for o in c.outliers) or "none"
    )]  # fmt: skip
    lines += ["", "## Links", ""]
    if c.links:
        lines += [
            "| link | op | transfers | transfer ms | ns/byte | × peers' median | slow |",
            "|---|---|---:|---:|---:|---:|---|",
        ]
        for ln in c.links[:64]:
            per = "unknown" if ln.ns_per_byte is None else f"{ln.ns_per_byte:.4g}"
            x = "not compared" if ln.times_median is None else f"{ln.times_median:.2f}"
            lines.append(
                f"| `{md_code(ln.link, 60)}` | {ln.op} | {ln.transfers} | {_ms(ln.transfer_ns)} | "
                f"{per} | {x} | {'**slow**' if ln.slow else ''} |"
            )
        lines += ["", f"Rule: {c.link_rule}", ""]
        lines += [f"* **slow:** {md_text(x)}" for x in c.slow_links]  # names cleaned
    else:
        lines.append("No link could be compared (see the notes).")
    if c.notes:
        lines += ["", "## Notes", ""] + [f"* {md_text(n)}" for n in c.notes]
    return "\n".join(lines) + "\n"


def _wait_lines(c: CrossRank) -> list[str]:
    """Who the others waited for, each judged collective split into its waits and transfer,
    and what no wait is taken from (every string from a trace cleaned)."""
    lines: list[str] = []
    if c.caused_ns:
        top = sorted(c.caused_ns.items(), key=lambda kv: -kv[1])[:8]
        total = sum(c.caused_ns.values()) or 1
        lines += ["", "The others' wait blamed on the last arrival, over every judged collective "
                  "(summed over the ranks that waited): "
                  + ", ".join(f"rank {r} {_ms(v)} ms ({v / total:.0%})" for r, v in top)]  # fmt: skip
    if c.collectives:
        link = f"× {c.peer_link}" if c.peer_link else "× link"
        lines += [
            "",
            "## Collectives",
            "",
            "The judged collectives, the worst arrival skews first (at most 50 kept); transfer = median "
            "aligned end − last arrival (at least the shortest kernel); bus bandwidth by NCCL's "
            "busBw factors.",
            "",
            f"| op | # | step | matched by | ranks | last | skew ms | others waited ms | "
            f"transfer ms | bus GB/s | {link} |",
            "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for k in c.collectives:
            bw = "unknown" if k.bus_bw_Bps is None else f"{k.bus_bw_Bps / 1e9:,.1f}"
            share = "unknown" if k.link_share is None else f"{k.link_share:.1%}"
            where = f" `{md_code(k.group, 40)}`" if k.group else ""
            lines.append(
                f"| {md_text(k.op)}{where} | {k.ordinal} | "
                f"{'' if k.step is None else k.step} | {k.matched_by} | {k.ranks} | "
                f"{k.last_rank} | {_ms(k.skew_ns)} | {_ms(k.waited_ns)} | {_ms(k.transfer_ns)} | "
                f"{bw} | {share} |"
            )
    if c.unmatched_ops:
        lines += [
            "",
            "## Not judged",
            "",
            f"{c.unjudged_share:.1%} of collective time (kernel time summed over the ranks) no "
            "wait is taken from:",
            "",
            "| op | why | kernels | ms | share |",
            "|---|---|---:|---:|---:|",
        ]
        lines += [
            f"| {md_text(u.op)} | {u.why} | {u.kernels} | {_ms(u.time_ns)} | {u.share:.1%} |"
            for u in c.unmatched_ops
        ]
    return lines


def _us_shift(ts: bytes, ns: int) -> bytes:
    """Exact decimal µs ``ts`` (b"-12.345") moved by ``ns`` nanoseconds."""
    neg = ts.startswith(b"-")
    whole, frac = ts.lstrip(b"-").split(b".")
    v = (int(whole) * 1000 + int(frac)) * (-1 if neg else 1) + ns
    return us_text(v).encode()


#: what runs each rank's part of the merged file: ``run(perfetto_part, [args, …])`` → results
#: in order (a job's Dask workers, engine.analyze.cluster.Workers.map; default: here, in turn)
PartRunner = Callable[[Callable[..., tuple[int, int]], list[tuple[Any, ...]]], list[Any]]

#: raw deflate (no zlib or gzip framing): each rank's part is a run of deflate blocks of its own
_RAW = -15
_GZIP = 31  # zlib's gzip framing


#: a part a job's second round made already, by rank: its file, CRC-32 and length
Made = dict[int, tuple[Path, int, int]]


def part_path(out: Path, rank: int) -> Path:
    """Where rank ``rank``'s part of the merged file ``out`` is made (a scratch folder beside
    it, removed once the file is written)."""
    return out.with_name(f".{out.name}.parts") / f"rank{rank}.deflate"


def merge_perfetto(
    parts: list[tuple[int, Path]],
    offsets: dict[int, int],
    out: Path,
    run: PartRunner | None = None,
    made: Made | None = None,
) -> Path:
    """Merge the ranks' perfetto.json files (written by engine.analyze.output.export) into ``out``
    (gzip): process = rank, times + the rank's clock offset. Each rank's part is made on its
    own — by the job's second round from the rank's analysis (``made``, where every rank's is),
    else converted from its file (``run``: on the job's workers, side by side) — then the parts
    are joined into one gzip member: raw deflate blocks ended by a sync flush follow one
    another, as pigz writes them, and the member's CRC is combined from the parts' (Perfetto
    reads one member only: google/perfetto#872). Raises OSError; a file not in our own format
    raises ValueError."""
    tmp = out.with_name(out.name + ".tmp")
    scratch = part_path(out, 0).parent
    try:
        ranks = sorted(parts)
        if made is not None and sorted(made) == [r for r, _ in ranks]:
            files = [made[r][0] for r, _ in ranks]
            sums = [made[r][1:] for r, _ in ranks]
        else:
            scratch.mkdir(exist_ok=True)
            jobs = [
                (rank, str(path), offsets.get(rank, 0), str(part_path(out, rank)), i > 0)
                for i, (rank, path) in enumerate(ranks)
            ]
            sums = (run or _in_turn)(perfetto_part, jobs)
            files = [Path(j[3]) for j in jobs]
        _join(tmp, files, sums)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    finally:
        forget_parts(out)
    tmp.replace(out)
    return out


def forget_parts(out: Path) -> None:
    """Remove the scratch folder of ``out``'s parts (they are in the file, or of no use)."""
    scratch = part_path(out, 0).parent
    for f in scratch.glob("rank*.deflate"):
        with contextlib.suppress(OSError):
            f.unlink()
    with contextlib.suppress(OSError):
        scratch.rmdir()


def _in_turn(fn: Callable[..., tuple[int, int]], jobs: list[tuple[Any, ...]]) -> list[Any]:
    return [fn(*j) for j in jobs]


_HEAD = b'{"displayTimeUnit":"ns","otherData":{"producer":"gitm-tui analyze (ranks)"},'
_HEAD += b'"traceEvents":[\n'
_SEP, _TAIL = b",\n", b"\n]}\n"


def _join(tmp: Path, parts: list[Path], sums: list[tuple[int, int]]) -> None:
    """One gzip member: the opening, each part (raw deflate, sync-flushed; each after the first
    starts with its comma), the closing and the final block; CRC-32 and length combined from
    the parts'."""
    crc, size = zlib.crc32(_HEAD), len(_HEAD)
    with tmp.open("wb") as w:
        # zlib's gzip framing writes the member's header; the opening follows, sync-flushed
        c = zlib.compressobj(1, zlib.DEFLATED, _GZIP)
        w.write(c.compress(_HEAD) + c.flush(zlib.Z_SYNC_FLUSH))
        for part, (pcrc, plen) in zip(parts, sums, strict=True):
            with part.open("rb") as f:
                shutil.copyfileobj(f, w, 1 << 20)
            crc, size = crc32_combine(crc, pcrc, plen), size + plen
        c = zlib.compressobj(1, zlib.DEFLATED, _RAW)
        w.write(c.compress(_TAIL) + c.flush(zlib.Z_FINISH))
        crc, size = crc32_combine(crc, zlib.crc32(_TAIL), len(_TAIL)), size + len(_TAIL)
        w.write(struct.pack("<II", crc, size & 0xFFFFFFFF))


def perfetto_part(
    rank: int, src: str, shift: int, dest: str, comma: bool = False
) -> tuple[int, int]:
    """Rank ``rank``'s perfetto.json (``src``) as the merged file holds it — its process named,
    its threads in the rank's bands, its times moved by ``shift`` ns; after a comma when
    ``comma`` (not the first part) — written to ``dest`` as raw deflate ended by a sync flush (a
    part for ``merge_perfetto`` to join); returns the CRC-32 and the length of what was
    compressed. Runs where the file is (a job's worker)."""
    crc, size = 0, 0
    c = zlib.compressobj(1, zlib.DEFLATED, _RAW)
    out: list[bytes] = [line.encode() for line in rank_process(rank)]
    with Path(src).open("rb") as f, Path(dest).open("wb") as w:

        def put() -> None:
            nonlocal crc, size
            data = (_SEP if size or comma else b"") + _SEP.join(out)
            crc, size = zlib.crc32(data, crc), size + len(data)
            w.write(c.compress(data))
            out.clear()

        match, add = _X.match, out.append
        while lines := f.readlines(_BLOCK_BYTES):
            for raw in lines:
                line = raw.rstrip(b"\r\n").rstrip(b",")
                m = match(line)
                if m is not None:
                    add(line[: m.start(1) - 6] + b'"pid":%d,"tid":%d,"ts":%s,' % (
                        rank, merged_tid(int(m.group(1)), int(m.group(2))),
                        _us_shift(m.group(3), shift),
                    ) + line[m.end(3) + 1 :])  # fmt: skip
                elif line.startswith(b'{"ph"'):
                    ev = json.loads(line)
                    if not isinstance(ev, dict) or ev.get("ph") != "M":
                        raise ValueError(f"{src}: not a perfetto.json written by gitm-tui")
                    meta = merged_meta(ev, rank)
                    if meta is not None:
                        add(json.dumps(meta).encode())
                # (else: the file's opening and closing lines)
            if out:
                put()
        w.write(c.flush(zlib.Z_SYNC_FLUSH))
    return crc, size


def write_part(lines: list[str], dest: str | Path, comma: bool = False) -> tuple[int, int]:
    """A part for ``merge_perfetto`` to join, from its event lines as the merged file holds them
    (engine.analyze.output.export.perfetto_placed: a job's second round writes its part so,
    from the analysis it has just made, in one pass with the rank's own perfetto.json): after
    a comma when ``comma``, raw deflate ended by a sync flush; returns its CRC-32 and length."""
    c = zlib.compressobj(1, zlib.DEFLATED, _RAW)
    crc, size = 0, 0
    with Path(dest).open("wb") as w:
        for lo in range(0, len(lines), 1 << 16):  # one str joined and encoded a chunk
            data = (_SEP if size or comma else b"") + ",\n".join(
                lines[lo : lo + (1 << 16)]
            ).encode()
            crc, size = zlib.crc32(data, crc), size + len(data)
            w.write(c.compress(data))
        w.write(c.flush(zlib.Z_SYNC_FLUSH))
    return crc, size


#: bytes of perfetto.json converted at a time (whole lines)
_BLOCK_BYTES = 8 << 20


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC-32 of A + B from A's (``crc1``), B's (``crc2``) and B's length (``len2``): A's
    CRC times x^(8·len2) modulo the CRC polynomial, plus B's (zlib's crc32_combine, which
    Python's zlib does not expose)."""
    return _multmodp(_x2nmodp(len2, 3), crc1) ^ crc2


_POLY = 0xEDB88320  # CRC-32's polynomial, bit-reflected (x^0 is the top bit)


def _multmodp(a: int, b: int) -> int:
    """a × b modulo the polynomial (reflected)."""
    m, p = 1 << 31, 0
    while True:
        if a & m:
            p ^= b
            if not a & (m - 1):
                return p
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1


_X2N = [1 << 30]  # x^(2^k) modulo the polynomial, k = 0 … 31 (x^1 first)
for _ in range(31):
    _X2N.append(_multmodp(_X2N[-1], _X2N[-1]))


def _x2nmodp(n: int, k: int) -> int:
    """x^(n·2^k) modulo the polynomial."""
    p = 1 << 31  # x^0
    while n:
        if n & 1:
            p = _multmodp(_X2N[k & 31], p)
        n >>= 1
        k += 1
    return p


def write_rank_outputs(
    c: CrossRank,
    out_dir: Path,
    perfetto: list[tuple[int, Path]],
    run: PartRunner | None = None,
    made: Made | None = None,
) -> tuple[list[Path], list[str]]:
    """Write cross_rank.json, cross_rank.md and (when every rank's perfetto.json is here)
    ranks.perfetto.json.gz into ``out_dir`` (its ranks' parts made by ``run``: see
    merge_perfetto); return what was written and one line per problem."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "cross_rank.json", out_dir / "cross_rank.md"]
    atomic_write_text(written[0], c.model_dump_json(indent=1))
    atomic_write_text(written[1], cross_rank_markdown(c))
    problems: list[str] = []
    have = {r for r, p in perfetto if p.is_file()}
    absent = [r for r in c.ranks if r not in have]
    if absent:
        problems.append(
            f"ranks.perfetto.json.gz not written: no perfetto.json here for {len(absent)} of the "
            f"{len(c.ranks)} ranks ({', '.join(map(str, absent[:8]))}{'…' if len(absent) > 8 else ''}"
            "; a rank whose outputs could not be written, or a remote cluster's workers, which "
            "write them where they run)"
        )
        _stale(out_dir / "ranks.perfetto.json.gz", problems)
        forget_parts(out_dir / "ranks.perfetto.json.gz")
        return written, problems
    if c.ranks_lost:
        problems.append(
            "ranks.perfetto.json.gz: ranks "
            f"{', '.join(map(str, c.ranks_lost[:8]))} share no collective with the others — "
            "their times are not moved (their clocks could not be aligned)"
        )
    offsets = {p.rank: p.clock_offset_ns for p in c.per_rank}
    merged = out_dir / "ranks.perfetto.json.gz"
    try:
        written.append(merge_perfetto(perfetto, offsets, merged, run, made))
    except (ValueError, KeyError, TypeError) as e:
        problems.append(f"ranks.perfetto.json.gz not written: {e}")
        _stale(merged, problems)
    return written, problems


def _stale(merged: Path, problems: list[str]) -> None:
    """No merged file this time: one from an earlier run would not match these ranks."""
    with contextlib.suppress(OSError):
        merged.with_name(merged.name + ".tmp").unlink(missing_ok=True)
    try:
        if merged.exists():
            merged.unlink()
            problems.append(f"removed {merged.name} of an earlier run (not these ranks)")
    except OSError as e:
        problems.append(f"{merged.name} of an earlier run is still there: {e.strerror or e}")


def cross_rank_schema_json() -> str:
    """The JSON Schema of cross_rank.json (committed as manifests/schemas/cross_rank.schema.json)."""
    return json.dumps(CrossRank.model_json_schema(), indent=2) + "\n"
