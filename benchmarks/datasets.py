"""Pinned benchmark inputs: the sha256 and size of every input a benchmark reads, checked before
the benchmark runs and written into its results (what is pinned, and how each input is made
again: benchmarks/dataset_pins.py).

    python -m benchmarks.datasets --list              # the pins, and what reads each
    python -m benchmarks.datasets --check [NAME …]    # regenerate / re-read, compare with the pins
    python -m benchmarks.datasets --pin [NAME …]      # the same, then update datasets.json; show the diff

``benchmarks/datasets.json`` holds one pin per input: a real trace (its path and the sha256 of its
bytes) or a generated input (the generator as ``module:function``, its parameters and seed, and
the sha256 of the bytes it produces, so that an input made again is checked too). A benchmark
calls :func:`verify` on each input before it reads it: a checksum that differs from the pin stops
the benchmark with one line naming the input, the expected and the actual sha256 (exit 3, the
INPUT code of gitm_tui/exit_codes.py). Every input a run read — pinned or not — is written by
:func:`write_inputs` into ``results/<table>.inputs.json`` beside the table.

What is hashed (``digest_of``):

* ``bytes`` — a file's bytes (the real traces, a program);
* ``gunzip`` — a gzip file's decompressed bytes: the generators write gzip, whose header holds
  the time it was written, so the compressed bytes differ each time the same input is made (the
  results record the compressed file's own sha256 as well);
* ``files`` — a directory of gzip files: each file's decompressed sha256, and a sha256 over the
  sorted list of (name, sha256) lines; a file that differs is named;
* ``columns`` — data made in memory (numpy columns): for each column its name, dtype and row
  count, then its bytes, in the order the generator's data class declares them.

A generated input made from floating-point arithmetic (the simulator) can differ on a machine
whose numpy computes a last bit differently; the benchmark then refuses, which is true: its input
is not the one the committed figure was measured on.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

__all__ = [
    "Dataset",
    "Refused",
    "array_chunks",
    "column_chunks",
    "markdown",
    "read",
    "remember",
    "trace_chunks",
    "verify",
    "write_inputs",
]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PINS = HERE / "datasets.json"
#: exit code of a refused input: gitm_tui.exit_codes.ExitCode.INPUT (not imported: this module
#: must load before anything a benchmark measures)
EXIT_INPUT = 3
#: bytes read per update of a hash: large enough for hashlib's speed, small in memory
CHUNK = 1 << 20
#: rows hashed per update of an in-memory column (a broadcast column is copied this many at a time)
ROWS = 1 << 20

#: benchmarks that read no input, and why (each other benchmark calls verify on what it reads)
NO_INPUTS = {
    "bench_sampler": "every sample comes from the fake NVML library (tests/fakes.py) or the "
    "simulated H100, live; no file or generated data set is read",
}


# --------------------------------------------------------------------------- names


def tiled_name(n_events: int) -> str:
    """The synthetic Kineto trace bench_import.generate tiles from the real A100 trace."""
    return f"kineto-tiled-{n_events}"


def ranks_name(ranks: int, events: int) -> str:
    """The SYNTHETIC rank traces bench_ranks writes (engine.analyze.ranks.synth_ranks)."""
    return f"ranks-{ranks}x{events}"


def real_ranks_name(ranks: int, tile: int) -> str:
    """The SYNTHETIC ranks bench_ranks_real makes from the real A100 rank (tiled ``tile`` times)."""
    return f"real-ranks-{ranks}x{tile}"


def segments_name(rows: int) -> str:
    """bench_decode's in-memory rows (the simulated workloads, tiled)."""
    return f"decode-segments-{rows}"


def load_name(per: int) -> str:
    """bench_dashboard's SYNTHETIC load: 64 batches of ``per`` rows."""
    return f"dashboard-load-{per}"


def measure_name(workload: str, machine_seed: int, seed: int) -> str:
    """One simulated measurement of a workload's unchanged state (bench_replay)."""
    return f"sim-measure-{workload}-m{machine_seed}-s{seed}"


def profile_name(workload: str, seed: int, repeats: int) -> str:
    """The optimize loop's profile (its A/A measurements) of a simulated workload."""
    return f"sim-profile-{workload}-s{seed}-r{repeats}"


REAL_TRACE = "a100_training_3streams"
TRAIN_CNN = "train_cnn.py"


# --------------------------------------------------------------------------- results


class Refused(SystemExit):
    """An input whose checksum differs from its pin, or that cannot be read: the benchmark stops
    with exit 3 after :func:`verify` has written ``line`` to stderr."""

    def __init__(self, line: str) -> None:
        super().__init__(EXIT_INPUT)
        self.line = line


@dataclass(frozen=True)
class Dataset:
    """One input as a run read it: what was hashed, its sha256 and size, and its pin."""

    name: str
    sha256: str
    size: int
    digest_of: str
    pinned: bool
    path: str | None = None
    generator: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    seed: Any = None
    #: a gzip's own bytes, beside the decompressed ones the pin is of
    file_sha256: str | None = None
    file_size: int | None = None
    #: per file of a directory input: name → [sha256, size] of what was read
    files: Mapping[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The JSON the results hold: every field, the empty ones left out."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: v for k, v in out.items() if v not in (None, {}, [])}

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> Dataset:
        """The inverse of :meth:`record` (a worker process hands its inputs to its parent)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in rec.items() if k in names})


#: the inputs verified in this process, by name, in the order first read
_READ: dict[tuple[str, str | None], Dataset] = {}
#: digests already computed in this process: (what, path, size, mtime) → digest
_MEMO: dict[tuple[str, str, int, int], tuple[str, int, str | None, int | None]] = {}


def read() -> list[Dataset]:
    """Every input verified (or recorded unpinned) in this process so far."""
    return list(_READ.values())


def remember(rec: Mapping[str, Any] | Dataset) -> Dataset:
    """Add an input another process verified (its :meth:`Dataset.record`) to this one's list."""
    ds = rec if isinstance(rec, Dataset) else Dataset.from_record(rec)
    _READ.setdefault((ds.name, ds.path), ds)
    return ds


def write_inputs(out: Path, table: str) -> Path:
    """Write ``out/<table>.inputs.json``: the sha256 of every input this run read (atomic)."""
    dest = out / f"{table}.inputs.json"
    doc = {
        "table": table,
        "pins": "benchmarks/datasets.json",
        "inputs": [d.record() for d in read()],
    }
    out.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, dest)
    return dest


def markdown(table: str) -> list[str]:
    """Lines for a results table: the inputs this run read, with their sha256."""
    got = read()
    if not got:
        return ["Inputs: none read (see benchmarks/datasets.py, NO_INPUTS).", ""]
    pinned = sum(d.pinned for d in got)
    lines = [
        f"Inputs: {len(got)} read, {pinned} of them pinned in benchmarks/datasets.json and "
        f"verified before the run; every sha256 in `{table}.inputs.json`."
    ]
    if len(got) <= 8:  # a long list (the simulated workloads) stays in the JSON only
        lines += ["", "| input | sha256 | bytes | pinned |", "|---|---|---:|---|"]
        for d in got:
            lines.append(
                f"| {d.name} | `{d.sha256}` | {d.size:,} | {'yes' if d.pinned else 'NO'} |"
            )
    return [*lines, ""]


# --------------------------------------------------------------------------- hashing


class _Digest:
    """sha256 and byte count of everything fed to it."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.size = 0

    def update(self, b: Any) -> None:
        view = memoryview(b).cast("B")
        self.h.update(view)
        self.size += view.nbytes

    def hexdigest(self) -> str:
        return self.h.hexdigest()


def _file_digest(path: Path) -> tuple[str, int]:
    d = _Digest()
    with open(path, "rb") as f:
        while b := f.read(CHUNK):
            d.update(b)
    return d.hexdigest(), d.size


def _gunzip_digest(path: Path) -> tuple[str, int]:
    d = _Digest()
    with gzip.open(path, "rb") as f:
        while b := f.read(CHUNK):
            d.update(b)
    return d.hexdigest(), d.size


def _memo(what: str, path: Path) -> tuple[str, int, str | None, int | None]:
    """(sha256, size) of ``path`` by ``what`` ("bytes" or "gunzip"), with the file's own bytes'
    sha256 and size for a gzip; each file hashed once per process while it is unchanged."""
    st = path.stat()
    key = (what, str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _MEMO:
        if what == "gunzip":
            sha, size = _gunzip_digest(path)
            fsha, fsize = _file_digest(path)
            _MEMO[key] = (sha, size, fsha, fsize)
        else:
            sha, size = _file_digest(path)
            _MEMO[key] = (sha, size, None, None)
    return _MEMO[key]


def column_chunks(*objs: Any) -> Iterator[Any]:
    """The bytes of data classes of numpy columns (Segments, HostEvents), for a ``columns`` digest:
    per column its name, dtype and length, then its rows, a slice at a time (no copy of a
    contiguous column; a broadcast one is copied a slice at a time)."""
    import numpy as np

    for obj in objs:
        for f in fields(obj):
            a = getattr(obj, f.name)
            if not isinstance(a, np.ndarray):
                continue
            yield f"{f.name} {a.dtype.str} {len(a)}\n".encode()
            for i in range(0, len(a), ROWS):
                yield np.ascontiguousarray(a[i : i + ROWS])


def trace_chunks(*traces: Any) -> Iterator[Any]:
    """The bytes of traces (engine.trace.Trace) for a ``columns`` digest: per trace its device
    rows, its host rows and its names."""
    for tr in traces:
        yield from column_chunks(tr.segments, tr.host)
        yield ("\n".join(tr.names.names()) + "\n").encode()


def array_chunks(**arrays: Any) -> Iterator[Any]:
    """The bytes of named numpy arrays and string lists, in the order given."""
    import numpy as np

    for name, a in arrays.items():
        if isinstance(a, np.ndarray):
            yield f"{name} {a.dtype.str} {a.shape}\n".encode()
            yield np.ascontiguousarray(a)
        else:
            yield (f"{name}\n" + "\n".join(map(str, a)) + "\n").encode()


def _data_digest(chunks: Iterable[Any]) -> tuple[str, int]:
    d = _Digest()
    for c in chunks:
        d.update(c)
    return d.hexdigest(), d.size


def _files_digest(
    folder: Path, names: Iterable[str] | None = None
) -> tuple[str, int, dict[str, Any]]:
    """sha256 over the sorted "sha256  name" lines of the gzip files in ``folder`` (or ``names``
    there), each file's decompressed sha256; the total decompressed size; the per-file digests."""
    if names is None:
        names = [p.name for p in folder.iterdir() if p.name.endswith(".gz")]
    per: dict[str, Any] = {}
    for n in sorted(names):
        sha, size, _, _ = _memo("gunzip", folder / n)
        per[n] = [sha, size]
    listing = "".join(f"{sha}  {n}\n" for n, (sha, _) in per.items())
    return hashlib.sha256(listing.encode()).hexdigest(), sum(s for _, s in per.values()), per


# --------------------------------------------------------------------------- pins


def load_pins(path: Path = PINS) -> dict[str, dict[str, Any]]:
    """The pins in ``path`` by name (none when the file is absent)."""
    if not path.exists():
        return {}
    return dict(json.loads(path.read_text(encoding="utf-8"))["datasets"])


def _show(text: str) -> str:
    """Outside text (a path, a name) made safe for a terminal line (engine.text.clean)."""
    try:
        from engine.text import clean
    except ImportError:  # gitm not importable: keep what is printable
        return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return clean(text, limit=300)


def _refuse(line: str) -> Refused:
    print(f"benchmarks: {line}", file=sys.stderr, flush=True)
    return Refused(f"benchmarks: {line}")


def _resolve(name_or_path: str | os.PathLike[str], pins: Mapping[str, Any]) -> tuple[str, Any]:
    """(name, pin or None) for a pin's name or a path a pin names."""
    key = os.fspath(name_or_path)
    if key in pins:
        return key, pins[key]
    p = Path(key)
    if p.exists() or os.sep in key:
        real = p.resolve()
        for name, pin in pins.items():
            if pin.get("path") and (ROOT / pin["path"]).resolve() == real:
                return name, pin
        return key, None
    return key, None


def verify(
    name_or_path: str | os.PathLike[str],
    *,
    at: str | os.PathLike[str] | None = None,
    data: Iterable[Any] | None = None,
    generator: str | None = None,
    params: Mapping[str, Any] | None = None,
    pins: Path = PINS,
) -> Dataset:
    """Check one input against its pin before a benchmark reads it; return what was read.

    ``name_or_path``: a pin's name, or the path of a pinned file. ``at``: the file or directory
    actually read when it is a copy of the pinned one (a cache). ``data``: the bytes of an input
    made in memory (:func:`column_chunks`, :func:`trace_chunks`, :func:`array_chunks`).

    A checksum that differs from the pin, or a pinned file that cannot be read, writes one line
    to stderr and raises :class:`Refused` (exit 3). An input without a pin is hashed, written to
    stderr as not pinned and recorded (``pinned`` false): a benchmark run with other parameters
    than the pinned ones still says what it read."""
    name, pin = _resolve(name_or_path, load_pins(pins))
    shown = _show(name)
    if pin is None:
        return _unpinned(name, at if at is not None else name_or_path, data, generator, params)
    what = pin["digest_of"]
    if at is None and os.fspath(name_or_path) != name:  # a pinned file named by its path
        at = name_or_path
    target = Path(at) if at is not None else (ROOT / pin["path"] if pin.get("path") else None)
    if target is not None:
        target = Path(os.path.normpath(target))  # shown as a path a person would type
    where = f" ({_show(str(target))})" if target is not None and data is None else ""
    made = ""
    if pin.get("generator"):
        made = f", made by {pin['generator']}({_params(pin.get('params', {}))})"
        if pin.get("path"):  # a file the benchmark caches: made again when it is gone
            made += "; delete the cached copy to make it again"
    files: dict[str, Any] = {}
    fsha = fsize = None
    subset = False  # a directory input read in part: each of its files checked, not the whole
    try:
        if what == "columns":
            if data is None:
                raise TypeError(f"verify({name!r}): a columns input needs data=")
            sha, size = _data_digest(data)
        elif target is None:
            raise TypeError(f"verify({name!r}): the pin names no path and no at= was given")
        elif what == "files":
            sha, size, files = _check_files(name, pin, target, made)
            subset = sorted(files) != sorted(pin["files"])  # fewer ranks: links to the first
        elif what in ("bytes", "gunzip"):
            sha, size, fsha, fsize = _memo(what, target)
        else:
            raise ValueError(f"pin {name!r}: unknown digest_of {what!r}")
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise _refuse(
            f"input {shown}{where} cannot be read: {_show(str(getattr(e, 'strerror', None) or e))}"
        ) from None
    if sha != pin["sha256"] and not subset:
        raise _refuse(
            f"input {shown}{where} differs from its pin in benchmarks/datasets.json: expected "
            f"sha256 {pin['sha256']}, actual {sha} ({what}, {size:,} bytes vs {pin['size']:,}{made}); "
            "re-pin with `python -m benchmarks.datasets --pin` only if the change is intended"
        )
    ds = Dataset(
        name=name,
        sha256=sha,
        size=size,
        digest_of=what,
        pinned=True,
        path=str(target) if target is not None and data is None else pin.get("path"),
        generator=pin.get("generator"),
        params=pin.get("params", {}),
        seed=pin.get("seed"),
        file_sha256=fsha,
        file_size=fsize,
        files=files,
    )
    return remember(ds)


def _params(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


def _check_files(
    name: str, pin: Mapping[str, Any], folder: Path, made: str
) -> tuple[str, int, dict]:
    """A directory input: every gzip file in it must be pinned, and match; the pinned directory
    itself must hold every pinned file (a run on fewer ranks reads a directory of links to the
    first of them)."""
    pinned: Mapping[str, Any] = pin["files"]
    present = sorted(p.name for p in folder.iterdir() if p.name.endswith(".gz"))
    extra = [n for n in present if n not in pinned]
    if extra:
        raise _refuse(
            f"input {_show(name)} ({_show(str(folder))}) holds a file its pin does not: "
            f"{_show(extra[0])}{made}"
        )
    if not present:
        raise _refuse(f"input {_show(name)} ({_show(str(folder))}) holds none of its files{made}")
    if pin.get("path") and (ROOT / pin["path"]).resolve() == folder.resolve():
        missing = [n for n in pinned if n not in present]
        if missing:
            raise _refuse(
                f"input {_show(name)} ({_show(str(folder))}) lacks the pinned file "
                f"{_show(missing[0])}{made}"
            )
    sha, size, per = _files_digest(folder, present)
    for n, (s, sz) in per.items():
        want = pinned[n]
        if s != want[0]:
            raise _refuse(
                f"input {_show(name)}: file {_show(str(folder / n))} differs from its pin in "
                f"benchmarks/datasets.json: expected sha256 {want[0]}, actual {s} (gunzip, "
                f"{sz:,} bytes vs {want[1]:,}{made}); re-pin with "
                "`python -m benchmarks.datasets --pin` only if the change is intended"
            )
    return sha, size, per


def _unpinned(
    name: str,
    where: Any,
    data: Iterable[Any] | None,
    generator: str | None,
    params: Mapping[str, Any] | None,
) -> Dataset:
    files: dict[str, Any] = {}
    fsha = fsize = None
    path = None
    if data is not None:
        what = "columns"
        sha, size = _data_digest(data)
    else:
        p = Path(where)
        path = str(p)
        try:
            if p.is_dir():
                what = "files"
                sha, size, files = _files_digest(p)
            else:
                what = "gunzip" if p.name.endswith(".gz") else "bytes"
                sha, size, fsha, fsize = _memo(what, p)
        except (OSError, EOFError, gzip.BadGzipFile) as e:
            raise _refuse(f"input {_show(name)} cannot be read: {_show(str(e))}") from None
    print(
        f"benchmarks: input {_show(name)} is not pinned in benchmarks/datasets.json: its sha256 "
        f"{sha} is recorded in the results, not verified",
        file=sys.stderr,
        flush=True,
    )
    return remember(
        Dataset(
            name=name,
            sha256=sha,
            size=size,
            digest_of=what,
            pinned=False,
            path=path,
            generator=generator,
            params=dict(params or {}),
            file_sha256=fsha,
            file_size=fsize,
            files=files,
        )
    )


if __name__ == "__main__":  # python -m benchmarks.datasets --pin | --check | --list
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(ROOT))
    from dataset_pins import main

    raise SystemExit(main())
