"""engine.jit.cold tells a first run from a warm one by numba's disk cache: a kernel whose index
file is missing, or was written for another version of its source (an upgrade or an edit leaves
the old index files behind), is cold — a run that trusted the old files compiled everything in
the foreground."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.paths import ROOT

KERNEL = """
from engine.jit import jit


@jit
def twice(x):
    return 2 * x
"""

PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
import mod
from engine.jit import cold
was = cold([mod.twice])
if sys.argv[2] == "call":
    mod.twice(3)
print(was)
"""


def _cold(tmp_path, call: bool = False) -> bool:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("NUMBA_CACHE_DIR", None)  # the cache beside the source, as an install's
    p = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path), "call" if call else "-"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout.strip().splitlines()[-1] == "True"


def test_a_stale_index_is_cold(tmp_path):
    src = tmp_path / "mod.py"
    src.write_text(KERNEL)
    assert _cold(tmp_path, call=True)  # nothing cached yet; the call compiles and caches it
    assert not _cold(tmp_path)  # cached for this source
    src.write_text(KERNEL + "\n# a new version of the file\n")
    st = src.stat()
    os.utime(src, (st.st_atime, st.st_mtime + 10))
    assert (tmp_path / "__pycache__").is_dir() and any((tmp_path / "__pycache__").glob("*.nbi"))
    assert _cold(tmp_path)  # the index is there, written for the old source


def test_an_index_without_its_compiled_code_is_cold(tmp_path):
    """numba writes a kernel's index before its code: a child still compiling may have written
    only the index, and loading then would compile here after all."""
    src = tmp_path / "mod.py"
    src.write_text(KERNEL)
    _cold(tmp_path, call=True)
    assert not _cold(tmp_path)
    for data in (tmp_path / "__pycache__").glob("*.nbc"):
        data.unlink()
    assert _cold(tmp_path)


def test_the_compile_child_runs_this_engine_not_one_in_the_working_directory(tmp_path, monkeypatch):
    """``python -m`` puts the working directory first on the path: from a folder with an
    ``engine`` of its own (a clone beside an installed copy), the child ran that one."""
    from engine.jit import compile_elsewhere, wait_compiled

    decoy = tmp_path / "engine"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("")
    marker = tmp_path / "ran"
    (decoy / "decoy_probe.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    child = compile_elsewhere("engine.decoy_probe")
    assert child is not None
    wait_compiled(child, timeout=120)
    assert not marker.exists()


ALLOCATING = """
import numpy as np
from engine.jit import jit


@jit
def cumulative(x, text):
    out = np.empty(len(x) + 1, np.int64)  # numba's runtime (NRT) allocates it
    out[0] = 0
    for i in range(len(x)):
        out[i + 1] = out[i] + x[i]
    return out, hash(text)  # numba's string hash reads the hash-secret symbols
"""

LOAD = """
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import mod
out, h = mod.cumulative(np.arange(5, dtype=np.int64), "a text")
same = h == hash("a text")
hits = sum(mod.cumulative._cache_hits.values())
print(out.tolist(), same, hits, "numba.np.arraymath" in sys.modules)
"""


def test_cached_kernels_load_and_run_without_numbas_compiler_set_up(tmp_path):
    """engine.jit loads a cached kernel without numba's target refresh (0.31 s a process: every
    lowering registry imported): the kernel, which allocates and hashes, runs from the cache in
    a fresh process, and the registries only compiling needs (numba.np.arraymath) stay out."""
    (tmp_path / "mod.py").write_text(ALLOCATING)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("NUMBA_CACHE_DIR", None)
    runs = []
    for _ in range(2):  # the first compiles and caches, the second loads
        p = subprocess.run(
            [sys.executable, "-c", LOAD, str(tmp_path)],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr[-2000:]
        runs.append(p.stdout.split())
    compiled, loaded = runs
    assert compiled[-2:] == ["0", "True"]  # compiled here: the compiler refreshed the context
    assert " ".join(loaded[:-2]) == "[0, 0, 1, 3, 6, 10] True"
    assert loaded[-2:] == ["1", "False"]  # from the cache, the registries never imported


LOAD_COUNTING_NRT = """
import sys
sys.path.insert(0, sys.argv[1])
from numba.core.runtime import nrtdynmod
made = []
real = nrtdynmod.create_nrt_module
nrtdynmod.create_nrt_module = lambda ctx: (made.append(1), real(ctx))[1]
import numpy as np
import mod
out, h = mod.cumulative(np.arange(5, dtype=np.int64), "a text")
print(out.tolist(), h == hash("a text"), len(made))
"""


def test_numbas_runtime_is_loaded_from_disk_once_compiled(tmp_path):
    """numba's runtime module (NRT: 23-26 ms to compile in every process) is compiled once and
    its machine code kept beside the kernels; a later process loads it and the kernel, which
    allocates through it, runs. A file that is not what was written is made anew."""
    (tmp_path / "mod.py").write_text(ALLOCATING)
    cache = tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_CACHE_DIR=str(cache))

    def run() -> str:
        p = subprocess.run(
            [sys.executable, "-c", LOAD_COUNTING_NRT, str(tmp_path)],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr[-2000:]
        return p.stdout.split()[-1]  # how many times the runtime's module was built

    assert run() == "1"  # the kernel compiled here; the runtime built here, and saved
    (saved,) = cache.glob("gitm-nrt-*.nbo")
    assert run() == "0"  # the kernel and the runtime's machine code from the disk
    saved.write_bytes(b"not a pickle")
    assert run() == "1"  # made anew,
    assert run() == "0"  # and kept


CALLER = """
import numpy as np
from engine.jit import jit


@jit
def inner(x):
    out = np.empty(len(x), np.int64)
    for i in range(len(x)):
        out[i] = x[i] * x[i]
    return out


@jit
def outer(x):
    return inner(x).sum() + 1
"""

LOAD_THEN_LINK = """
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import mod
x = np.arange(6, dtype=np.int64)
first = mod.inner(x).tolist()  # from the cache after the first run
if sys.argv[2] == "both":
    print(first, mod.outer(x), sum(mod.inner._cache_hits.values()), sum(mod.outer._cache_hits.values()))
else:
    print(first, sum(mod.inner._cache_hits.values()))
"""


def test_a_kernel_loaded_without_its_bitcode_links_into_one_compiled_later(tmp_path):
    """A cached kernel is loaded without parsing its bitcode for linking (engine.jit
    _linking_deferred); a kernel compiled afterwards in the same process that calls it links
    that bitcode then, and both give the right answers — in that process and in the next,
    where both come from the cache."""
    (tmp_path / "mod.py").write_text(CALLER)
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_CACHE_DIR=str(tmp_path / "cache"))

    def run(what: str) -> list[str]:
        p = subprocess.run(
            [sys.executable, "-c", LOAD_THEN_LINK, str(tmp_path), what],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr[-2000:]
        return p.stdout.split("]")[-1].split()

    squares = [0, 1, 4, 9, 16, 25]
    assert run("inner") == ["0"]  # compiled and cached
    assert run("inner") == ["1"]  # loaded
    assert run("both") == [str(sum(squares) + 1), "1", "0"]  # inner loaded, outer compiled
    assert run("both") == [str(sum(squares) + 1), "1", "1"]  # both loaded


EXTENSION = """
import os
def init():
    with open(os.environ["GITM_TEST_EXT_LOG"], "a") as f:
        f.write("init\\n")
"""

USE_KERNEL = """
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import mod
out, _ = mod.cumulative(np.arange(4, dtype=np.int64), "x")
print(out.tolist(), sum(mod.cumulative._cache_hits.values()))
"""


def test_numba_extensions_load_before_a_compile_not_before_a_cached_load(tmp_path):
    """A third-party numba extension (a ``numba_extensions`` entry point) is initialised before
    a kernel compiles, as numba's dispatcher does; a kernel loaded from the cache runs without
    numba reading every package's entry points for them (28 ms a process)."""
    (tmp_path / "mod.py").write_text(ALLOCATING)
    (tmp_path / "fakeext.py").write_text(EXTENSION)
    dist = tmp_path / "fakeext-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeext\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[numba_extensions]\ninit = fakeext:init\n")
    log = tmp_path / "ext.log"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]),
        NUMBA_CACHE_DIR=str(tmp_path / "cache"),
        GITM_TEST_EXT_LOG=str(log),
    )

    def run() -> tuple[str, str]:
        p = subprocess.run(
            [sys.executable, "-c", USE_KERNEL, str(tmp_path)],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr[-2000:]
        inits = log.read_text() if log.exists() else ""
        log.unlink(missing_ok=True)
        return p.stdout.split("]")[-1].strip(), inits

    assert run() == ("0", "init\n")  # compiled: the extension first
    assert run() == ("1", "")  # loaded from the cache: no entry points read


WAITER = """
import sys
from pathlib import Path
from engine.jit import one_compiler
with one_compiler(sys.argv[2], wait_s=float(sys.argv[3])):
    Path(sys.argv[1]).write_text("compiling")
"""


def _waiter(
    marker, env: dict[str, str], kind: str = "analyze", wait_s: float = 300
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WAITER, str(marker), kind, str(wait_s)], env=env, text=True
    )


def test_one_compile_child_at_a_time_per_cache(tmp_path, monkeypatch):
    """Back-to-back first runs each start a compile child: a second child waits for the first
    (here: this test holding the lock) and compiles only after it — into the same cache. One
    with a cache of its own, or compiling other kernels (the dashboard's), does not wait; nor
    does one whose wait has run out (a holder that hangs)."""
    from engine.jit import one_compiler

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # where the lock files go
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    waiting = tmp_path / "waiting"
    with one_compiler("analyze"):
        child = _waiter(waiting, env)
        free = [
            (tmp_path / "other-cache", _waiter(
                tmp_path / "other-cache", dict(env, NUMBA_CACHE_DIR=str(tmp_path / "other")))),
            (tmp_path / "live", _waiter(tmp_path / "live", env, kind="live")),
            (tmp_path / "gave-up", _waiter(tmp_path / "gave-up", env, wait_s=0.5)),
        ]  # fmt: skip
        for marker, p in free:
            assert p.wait(timeout=120) == 0 and marker.exists(), marker.name
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(timeout=2)  # blocked on the lock while this test holds it
        assert not waiting.exists()
    assert child.wait(timeout=120) == 0 and waiting.exists()  # released: it goes on
