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

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from engine.analyze.options import AnalyzeOptions
from engine.analyze.remote import url_name
from engine.analyze.run import FileOutcome, analyze_file, output_names

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
    import os

    from distributed import Client, LocalCluster, as_completed

    cluster, workers = options.cluster or "local", options.workers
    options = replace(options, keep_arrays=False)  # a worker's arrays stay where it is
    local = None
    restore = _terminate_cleanly()
    try:
        if cluster == "local":
            n = max(1, min(len(files), workers or os.cpu_count() or 1))
            local = LocalCluster(
                n_workers=n,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=50,  # CRITICAL only: the terminal is ours
            )
            client = Client(local)
        else:
            client = _connect(Client, cluster)
        try:
            link = _dashboard_link(client) if dashboard is not None else None
            if link and dashboard is not None:
                dashboard(link)
            names = names or output_names(files)
            futs = {
                client.submit(
                    analyze_file,
                    f,
                    options,
                    out_name=names[f],
                    key=f"gitm-analyze-{i}-{url_name(f)}",
                    pure=False,
                    retries=RETRIES,
                ): i
                for i, f in enumerate(files)
            }
            out: list[FileOutcome | None] = [None] * len(files)
            for done, fut in enumerate(as_completed(futs), 1):
                i = futs[fut]
                try:
                    out[i] = fut.result()
                except Exception as e:  # the task itself failed on every try (a worker died)
                    out[i] = FileOutcome(
                        files[i], error=f"{files[i]}: not analysed on the cluster: {e!r}"[:400]
                    )
                if progress is not None:
                    progress(done, len(files), files[i])
            if worker_peaks is not None:
                worker_peaks.update(client.run(_peak_mib))
            return [o for o in out if o is not None]
        finally:
            client.close()
    finally:
        if local is not None:
            local.close()
        restore()


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


def _terminate_cleanly() -> Callable[[], None]:
    """SIGTERM (a job scheduler's stop, `kill`) ends the run through its ``finally``: the local
    cluster's worker processes are closed with it instead of lingering. The main thread only
    (signal handlers live there); returns what restores the previous handler."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)

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
