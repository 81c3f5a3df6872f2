"""Run the per-file analyses of many rank traces on Dask (``analyze --cluster``).

``local`` starts a ``LocalCluster`` of worker processes sized to the machine (one thread each:
the analysis holds the GIL in places); ``tcp://HOST:PORT`` connects to a scheduler started with
Dask's own ``dask scheduler`` / ``dask worker`` commands. Each file is one task that runs
engine.analyze.run.analyze_file where the worker is — it reads the trace itself — and returns a
FileOutcome: the file's analysis and its cross-rank summary (a few kB), never its events, so
the client's memory does not grow with the traces. A task whose worker dies is retried by the
scheduler (``retries``); a file that still fails is named with its one line and the rest are
analysed. ``progress(done, total, path)`` is called as each file finishes.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from engine.analyze.options import AnalyzeOptions
from engine.analyze.remote import url_name
from engine.analyze.run import FileOutcome, Part, analyze_file, forget_kept, output_names

if TYPE_CHECKING:
    from engine.analyze.advice.peers import PeerBounds

#: how often the scheduler re-runs a file's task whose worker died before giving up on it
RETRIES = 2


def analyze_on_cluster(
    files: list[str],
    options: AnalyzeOptions,
    progress: Callable[[int, int, str], None] | None = None,
    worker_peaks: dict[str, float] | None = None,
    dashboard: Callable[[str], None] | None = None,
    names: dict[str, str] | None = None,
) -> list[FileOutcome]:
    """The outcomes of ``files`` (input order) analysed on ``options.cluster`` ("local", the
    default, or an address) with ``options.workers`` local workers (default: one per core);
    each worker is given ``options`` whole (its ``keep_arrays`` aside: no arrays come back).
    Raises ConnectionError (one line) when the scheduler cannot be reached.
    ``worker_peaks``, when given, receives each worker's peak resident memory (MiB) at the end
    (benchmarks/bench_ranks.py). ``dashboard`` is told the Dask dashboard's address when the
    scheduler serves one (a running cluster's; the local one starts without). ``names``: each
    file's output folder (default: ``output_names(files)``; given when these files are part of
    a larger set, whose names do not collide)."""
    with Workers(options, len(files), dashboard) as pool:
        out = pool.analyze(files, options, progress, names)
        if worker_peaks is not None:
            worker_peaks.update(pool.peaks())
        return out


class Workers:
    """A Dask cluster held for several rounds of tasks (a job's ranks: their collectives first,
    then each rank's analysis held to its peers, then the merged Perfetto file's parts), so its
    worker processes start — and import, and load the compiled kernels — once. Started on
    entry (``options.cluster``: "local", the default, or an address; ``options.workers``
    local workers, default one per core, never more than ``files``); ConnectionError (one line)
    when the scheduler cannot be reached."""

    def __init__(
        self,
        options: AnalyzeOptions,
        files: int,
        dashboard: Callable[[str], None] | None = None,
    ) -> None:
        self._cluster, self._workers = options.cluster or "local", options.workers
        self._files, self._dashboard = files, dashboard
        self.local = self._cluster == "local"
        self._local: Any = None
        self._client: Any = None
        self._restore: Callable[[], None] = lambda: None
        #: the worker that read each file in a first round (it keeps the trace for the second)
        self._where: dict[str, str] = {}

    def __enter__(self) -> Workers:
        return self

    @property
    def started(self) -> bool:
        """Whether the cluster is started (it starts with the first round that needs it)."""
        return self._client is not None

    def _start(self) -> Any:
        """The client, the cluster started on first use."""
        if self._client is not None:
            return self._client
        import os

        from distributed import Client, LocalCluster

        self._restore = _terminate_cleanly()
        if self.local:
            n = max(1, min(self._files, self._workers or os.cpu_count() or 1))
            with _forked_workers():
                self._local = LocalCluster(
                    n_workers=n,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=50,  # CRITICAL only: the terminal is ours
                )
            self._client = Client(self._local)
        else:
            self._client = _connect(Client, self._cluster)
        link = _dashboard_link(self._client) if self._dashboard is not None else None
        if link and self._dashboard is not None:
            self._dashboard(link)
        return self._client

    def __exit__(self, *_exc: object) -> None:
        client, local, restore = self._client, self._local, self._restore
        self._client, self._local, self._restore = None, None, lambda: None
        try:
            if client is not None:
                if self._where and local is None:  # a running cluster's workers go on
                    with contextlib.suppress(Exception):
                        client.run(forget_kept)
                client.close()
        finally:
            try:
                if local is not None:
                    local.close()
            finally:
                restore()

    def analyze(
        self,
        files: list[str],
        options: AnalyzeOptions,
        progress: Callable[[int, int, str], None] | None = None,
        names: dict[str, str] | None = None,
        peers: dict[str, PeerBounds] | None = None,
        summary_only: bool = False,
        ranks: bool | None = None,
        parts: dict[str, Part] | None = None,
    ) -> list[FileOutcome]:
        """Each file's outcome (input order), one task per file (engine.analyze.run.analyze_file
        where the worker is, ``peers``, ``summary_only``, ``ranks`` and ``parts`` as it takes them); a task
        that failed on every try is that file's error line."""
        client = self._start()
        options = replace(options, keep_arrays=False)  # a worker's arrays stay where it is
        names = names or output_names(files)
        peers, parts = peers or {}, parts or {}
        tag = "gitm-collectives" if summary_only else "gitm-analyze"

        def submit(i: int, f: str) -> Any:
            # a second round's task goes where the first read the file (it kept the trace:
            # engine.analyze.run.keep_trace), or to any worker when that one is busy or gone
            where = self._where.get(f)
            return client.submit(
                _analyze_where, f, options, out_name=names[f], ranks=ranks, peers=peers.get(f),
                summary_only=summary_only, part=parts.get(f), key=f"{tag}-{i}-{url_name(f)}",
                pure=False,
                retries=RETRIES,
                **({"workers": [where], "allow_other_workers": True} if where else {}),
            )  # fmt: skip

        def failed(f: str, e: Exception) -> FileOutcome:
            return FileOutcome(f, error=f"{f}: not analysed on the cluster: {e!r}"[:400])

        out = self._each(files, submit, failed, progress)
        for f, (o, where) in zip(files, out, strict=True):
            if summary_only and o.summary is not None and where:
                self._where[f] = where
        return [o for o, _ in out]

    def map(self, fn: Callable[..., Any], args: list[tuple[Any, ...]]) -> list[Any]:
        """``fn(*a)`` for each ``a`` on the workers, in order; a task's exception is raised."""
        client = self._start()
        futs = [
            client.submit(fn, *a, key=f"gitm-{fn.__name__}-{i}", pure=False)
            for i, a in enumerate(args)
        ]
        return list(client.gather(futs))

    def peaks(self) -> dict[str, float]:
        """Each worker's peak resident memory (MiB) so far."""
        return dict(self._start().run(_peak_mib))

    def _each(
        self,
        items: list[str],
        submit: Callable[[int, str], Any],
        failed: Callable[[str, Exception], FileOutcome],
        progress: Callable[[int, int, str], None] | None,
    ) -> list[tuple[FileOutcome, str | None]]:
        from distributed import as_completed

        futs = {submit(i, f): i for i, f in enumerate(items)}
        out: list[tuple[FileOutcome, str | None] | None] = [None] * len(items)
        for done, fut in enumerate(as_completed(futs), 1):
            i = futs[fut]
            try:
                out[i] = fut.result()
            except Exception as e:  # the task itself failed on every try (a worker died)
                out[i] = (failed(items[i], e), None)
            if progress is not None:
                progress(done, len(items), items[i])
        return [o for o in out if o is not None]


def _analyze_where(path: str, options: AnalyzeOptions, **kw: Any) -> tuple[FileOutcome, str]:
    """analyze_file on a worker, and the worker's address (where its kept trace is)."""
    from distributed import get_worker

    return analyze_file(path, options, **kw), get_worker().address


#: seconds to wait for a scheduler's first answer (connect and handshake): a listener that
#: accepts and never answers kept `analyze --cluster` waiting forever (Dask's own connect
#: timeout does not cover the handshake)
CONNECT_S = 15.0


def _connect(client_cls: Any, address: str) -> Any:
    """A Client of the scheduler at ``address``, or ConnectionError (one line) when it cannot be
    reached, or does not answer within ``CONNECT_S``. The attempt runs on a daemon thread, so
    a scheduler that never answers cannot hold the process (nor its exit)."""
    box: dict[str, Any] = {}

    def attempt() -> None:
        try:
            box["client"] = client_cls(address, timeout=f"{CONNECT_S:g}s")
        except Exception as e:  # any failure to connect is said in one line
            box["error"] = e

    t = threading.Thread(target=attempt, name="gitm-dask-connect", daemon=True)
    t.start()
    t.join(CONNECT_S + 5.0)
    if "client" in box:
        return box["client"]
    why = (
        f"{type(box['error']).__name__}: {box['error']}"
        if "error" in box
        else f"no answer within {CONNECT_S + 5.0:g} s"
    )
    raise ConnectionError(f"cannot reach the Dask scheduler at {address}: {why}"[:400])


def _forked_workers() -> contextlib.AbstractContextManager[object]:
    """The local cluster's worker processes forked from this one, on Linux, where Dask's
    default would spawn them: a spawned worker starts a fresh interpreter and imports Dask, the
    analysis and numba and loads the kernels again — ~1 s of CPU a worker, paid before its first
    file, while a forked one has them already (8 ranks of a 109k-event trace on 2 cores: 4.6–4.9 s
    and 7.3 s of CPU spawned, 2.7–3.3 s and 3.9 s forked; benchmarks/results/ranks_real.md).
    Only a process whose one thread is this one forks (the command's, at this point): the
    fork is made by Dask's event-loop thread while this one waits, and no other thread can be
    holding a lock the child would need — in a process with other threads (a library caller's,
    a test runner's) a LocalCluster start hung 300 s in its forked worker, so such a process
    spawns, as Dask does. The kernels have no threading layer (no ``parallel=True``).
    Elsewhere (macOS: fork is unsafe there), or where the user set another method than Dask's
    default, Dask's setting stands."""
    import sys

    import dask

    key = "distributed.worker.multiprocessing-method"
    if sys.platform != "linux" or dask.config.get(key, "spawn") != "spawn":
        return contextlib.nullcontext()
    import threading

    if threading.active_count() > 1:  # another thread may hold a lock the child would need
        return contextlib.nullcontext()
    return dask.config.set({key: "fork"})


#: the SIGTERM handlers _terminate_cleanly installed: a worker forked while one is installed
#: gets SIGTERM's default back (a forked worker inherits its parent's handlers: the nanny's
#: SIGTERM at the cluster's close raised KeyboardInterrupt in a starting worker, which printed
#: a traceback on the command's stderr)
_STOPS: set[Callable[..., None]] = set()


def _default_sigterm_in_child() -> None:
    import signal

    if signal.getsignal(signal.SIGTERM) in _STOPS:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_default_sigterm_in_child)


def _terminate_cleanly() -> Callable[[], None]:
    """SIGTERM (a job scheduler's stop, `kill`) ends the run through its ``finally``: the local
    cluster's worker processes are closed with it instead of lingering. The main thread only
    (signal handlers live there); returns what restores the previous handler."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def stop(signum: int, _frame: object) -> None:
        # as Ctrl-C: the command's "interrupted" line and exit 130 (README); SystemExit(143)
        # ended `analyze DIR` silently
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    _STOPS.add(stop)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore


def _dashboard_link(client: object) -> str | None:
    """The scheduler's dashboard address, or None when it serves none."""
    try:
        info = client.scheduler_info()  # type: ignore[attr-defined]
        if "dashboard" not in info.get("services", {}):
            return None
        return str(client.dashboard_link)  # type: ignore[attr-defined]
    except Exception:  # an address is a courtesy: never a reason to fail the run
        return None


def _peak_mib() -> float:
    """This process's peak resident memory in MiB: VmHWM (Linux; unlike ru_maxrss it does not
    carry over a parent's peak through fork and exec), else ru_maxrss."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
