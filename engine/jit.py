"""The one numba decorator every kernel uses (EESM, importers, replay): cached to disk, GIL released,
no object mode. At the bottom of the package layers: any layer may compile a kernel.

The first run after an install compiles every kernel it calls (about 20 s for `analyze` on a
2-core machine, nearly all numba's type inference: Python holding the GIL). Two helpers let a
caller spend that time better: ``cold(kernels)`` says whether kernels are missing from the disk
cache (so a caller can say "first run: compiling"), and ``compile_elsewhere(module)`` runs
``python -m module`` — a module whose main calls the production code on tiny inputs — in a child
process, which fills the cache on another core (and off the UI's thread: compiling in a thread
would hold the GIL for seconds) while this process does other work; ``wait_compiled`` then lets
this process load what the child compiled. A child that fails costs nothing: what is still
missing compiles here on first call, as without it.

A first run on a small trace need not wait at all: within ``interpreted()`` every kernel runs as
the Python it is written in (its ``py_func``, or a faster pure-Python ``twin`` registered for it,
same results), so a caller can answer at once while a child fills the cache for the next run.
Interpreted kernels are 10-100x slower than compiled ones: worth it only below a size where
interpreting takes less than compiling (engine.analyze.run decides).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_KERNELS: dict[int, Any] = {}  # id → every Kernel ``jit`` made, and every dispatcher built
_OWNER: dict[int, Kernel] = {}  # a dispatcher's id → the Kernel it was built for
_TWINS: dict[int, Callable[..., Any]] = {}  # Kernel id → its pure-Python twin
_DEFERRED: list[Deferred] = []  # numba objects made when numba is first needed (``deferred``)
_SWAP = threading.RLock()  # one interpreted() at a time; building swaps names under it too
_interpreting = 0  # depth of interpreted() blocks
_built = False  # numba imported and every kernel's dispatcher made (``_build``)


# numba is imported on the first compiled call, not when a module defining kernels is: numba
# and llvmlite take ~0.15 s to import and loading the kernels' machine code ~0.1 s more, half
# of a small trace's whole analysis, which runs as fast interpreted (engine.analyze.run). So
# ``jit`` returns a ``Kernel``: its Python now, numba's dispatcher from its first compiled call
# on. That call builds every kernel's dispatcher at once and puts it in place of the Kernel in
# every module that names one (numba, compiling a kernel that calls another, must find a
# dispatcher under the callee's name), as ``interpreted`` swaps names the other way.
class Kernel:
    """A ``jit`` kernel: ``py_func`` (its Python), and numba's compiled dispatcher once anything
    runs it compiled (``dispatcher``); called, it runs compiled — or as Python inside an
    ``interpreted`` block. Attributes it lacks are the dispatcher's (``_cache``, signatures…)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.py_func = fn
        self.disp: Any = None
        for a in ("__module__", "__name__", "__qualname__", "__doc__"):
            with contextlib.suppress(AttributeError):
                setattr(self, a, getattr(fn, a))

    def dispatcher(self) -> Any:
        """numba's dispatcher (numba imported and every kernel built on the first call)."""
        if self.disp is None:
            _build()
        return self.disp

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _interpreting:
            return _TWINS.get(id(self), self.py_func)(*args, **kwargs)
        return (self.disp or self.dispatcher())(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "disp":  # (copy, pickle, repr probe these)
            raise AttributeError(name)
        return getattr(self.dispatcher(), name)

    def __repr__(self) -> str:
        return f"<kernel {self.__qualname__}{'' if self.disp is None else ' (built)'}>"

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        """Pickled by name, as a function is (a process pool, Dask): the kernel its module names
        in the process that loads it."""
        return (_named, (self.py_func.__module__, self.py_func.__qualname__))


def _named(module: str, qualname: str) -> Any:
    """What ``module`` names ``qualname`` (an unpickled Kernel: a Kernel or a dispatcher)."""
    import importlib

    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


class Deferred:
    """A numba object (an intrinsic) that only compiled code uses, made by ``factory`` when
    numba is first needed and put in place of this placeholder wherever a module names it."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory = factory
        self.made: Any = None


def deferred(factory: Callable[[], Any]) -> Any:
    """``factory()`` (which imports numba) now if numba is in use, else a placeholder made real
    when it is (see ``Kernel``)."""
    if _built:
        return factory()
    d = Deferred(factory)
    _DEFERRED.append(d)
    return d


def numba_in_use() -> bool:
    """Whether this process has imported numba for its kernels."""
    return _built


def _build() -> None:
    """Import numba, make every kernel's dispatcher (none compiles yet: numba compiles, or loads
    from its disk cache, on a dispatcher's first call) and every deferred object, and put them
    in place of their placeholders in every loaded module."""
    global _built
    with _SWAP:
        if _built:
            return
        for d in _DEFERRED:
            d.made = d.factory()
        for k in [v for v in _KERNELS.values() if type(v) is Kernel]:
            k.disp = _dispatcher(k.py_func)
            _OWNER[id(k.disp)] = k
        for mod in list(sys.modules.values()):
            space = getattr(mod, "__dict__", None)
            if not isinstance(space, dict):
                continue
            for attr, value in list(space.items()):
                if type(value) is Kernel and value.disp is not None:
                    space[attr] = value.disp
                elif type(value) is Deferred and value.made is not None:
                    space[attr] = value.made
        _built = True


def _dispatcher(fn: Callable[..., Any]) -> Any:
    """numba's dispatcher of ``fn``: cache=True keeps compiled kernels in __pycache__ (or numba's
    user cache dir when that is not writable) so only the very first run pays compilation;
    nogil=True lets a worker thread run a kernel while the UI thread keeps drawing. Its code is
    loaded from the disk cache without numba's compiler set-up (``_LoadOnly``)."""
    from numba import njit

    function_cache, load_only = _cache_classes()
    disp = njit(cache=True, nogil=True)(fn)
    if load_only is not None and type(getattr(disp, "_cache", None)) is function_cache:
        disp._cache.__class__ = load_only  # type: ignore[attr-defined]
        if hasattr(disp, "_compilation_chain_init_hook"):  # extensions when compiling only
            disp._compilation_chain_init_hook = _extensions_when_compiling
    _KERNELS[id(disp)] = disp
    return disp


# Loading a kernel from numba's disk cache, numba first refreshes its whole target context: it
# imports and installs every lowering registry (numba.np.arraymath, linalg, typed containers,
# …) — 0.31 s of every process here, a third of `analyze` on a 109k-event trace — which only
# compiling needs. What running cached machine code needs is the target context itself (its
# construction adds numba's C helpers and the math functions to LLVM's symbol table), numba's
# runtime (NRT: allocation) and the hash-secret symbols numba.cpython.hashing adds when it is
# imported (third-party numba extensions are loaded by the dispatcher before any load, and a
# parallel kernel's threading layer by the load itself). ``_LoadOnly`` loads with those
# (0.09 s). Compiling is unchanged: numba's compiler refreshes the context itself, so a kernel
# missing from the cache compiles as before. Where numba's internals are not as expected, or a
# lean load raises, numba's own path runs. A symbol the set-up did not register would not
# raise but crash the call: a review listed the undefined symbols of all 522 cached kernels
# (`nm -u`) and found each resolved after this set-up alone; the tests load every kernel
# this way in fresh processes.
_runtime = threading.Lock()
_runtime_ready = False


def _ready_to_run(target_context: Any) -> bool:
    """Set up what running cached code needs (once per process); False if it cannot be."""
    global _runtime_ready
    with _runtime:
        if not _runtime_ready:
            try:
                import numba.cpython.hashing  # noqa: F401 - adds the _Py_HashSecret symbols
                from numba.core.runtime import rtsys

                if not _runtime_from_disk(target_context):
                    rtsys.initialize(target_context)
            except Exception:  # pragma: no cover - numba's internals changed
                return False
            _runtime_ready = True
    return True


# numba's runtime (NRT) is a small LLVM module that numba compiles in every process that runs
# a kernel: 23-26 ms of each `analyze` here. Its machine code depends only on numba, llvmlite
# and the CPU, so it is kept on disk beside the kernels like them (object code, as numba keeps
# a kernel's), under a name that says those three, and loaded from there (4 ms). The file is
# trusted as numba's own cache files are (both are pickles numba's loader reads).
def _nrt_file(codegen: Any) -> Path:
    import hashlib

    import llvmlite
    import numba

    key = repr((numba.__version__, llvmlite.__version__, codegen.magic_tuple()))
    name = f"gitm-nrt-{hashlib.sha256(key.encode()).hexdigest()[:20]}.nbo"
    where = os.environ.get("NUMBA_CACHE_DIR")  # as numba: its cache directory when given,
    if where:
        return Path(where) / name
    local = Path(__file__).parent / "__pycache__"  # else beside the source where writable,
    if os.access(local if local.exists() else local.parent, os.W_OK):
        return local / name
    from platformdirs import user_cache_path  # else the user's cache

    return user_cache_path("gitm-tui") / name


def _runtime_from_disk(ctx: Any) -> bool:
    """Install numba's runtime as ``rtsys.initialize`` does, its module's machine code loaded
    from ``_nrt_file`` (compiled and saved there when missing); False where that cannot be
    done (numba's layout is not as expected: ``rtsys.initialize`` then runs)."""
    import pickle

    import llvmlite.binding as ll
    from numba.core import config
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.runtime import _nrt_python, nrtdynmod, rtsys  # type: ignore[attr-defined]

    if getattr(rtsys, "_init", None) is not False:  # set up already, or another layout
        return bool(getattr(rtsys, "_init", False))
    codegen = ctx.codegen()
    path = _nrt_file(codegen)
    state = None
    with contextlib.suppress(Exception):  # missing, unreadable, or another layout: made anew
        with open(path, "rb") as f:
            state = pickle.load(f)  # (written by _runtime_from_disk only, like numba's cache)
        if not (isinstance(state, tuple) and len(state) == 3 and state[1] == "object"):
            state = None
    if getattr(config, "NRT_STATS", False):  # pragma: no cover - as rtsys.initialize
        _nrt_python.memsys_enable_stats()
    for py_name, address in _nrt_python.c_helpers.items():  # as rtsys.initialize
        ll.add_symbol(py_name if py_name.startswith("_") else "NRT_" + py_name, address)
    with global_compiler_lock:
        library = None
        if state is not None:
            with contextlib.suppress(Exception):  # not what was written: made anew
                library = codegen.unserialize_library(state)
        if library is None:
            module, library = nrtdynmod.create_nrt_module(ctx)
            library.enable_object_caching()  # (so its machine code can be saved)
            library.add_ir_module(module)
            library.finalize()
            _save(path, pickle.dumps(library.serialize_using_object_code()))
    rtsys._library = library
    rtsys._init = True
    return True


def _save(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (another process may read it meanwhile);
    nothing where it cannot be written."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


# A cached kernel is machine code plus its LLVM bitcode, kept so that a kernel compiled later
# can link (inline) it. numba parses that bitcode at every load, and lists every symbol it
# defines: 25-35 ms of the 13 loads of an `analyze` (~5 % of it), for linking that running
# cached code never does. ``_linking_deferred`` loads the machine code alone; the bitcode is
# parsed (and its symbols listed) when a compile first links the kernel. The one symbol a
# load looks up, the kernel's entry point, is found in the machine code by the JIT itself.
_lazy_classes: dict[type, type] = {}


def _lazy_class(base: type) -> type:
    """``base`` (numba's JIT code library) with its bitcode for linking parsed on first use."""
    if base not in _lazy_classes:

        class Lazy(base):
            def _get_module_for_linking(self) -> Any:
                bitcode = self.__dict__.pop("_gitm_bitcode", None)
                self.__dict__.pop("_gitm_object", None)
                if bitcode is not None:  # as numba's own load does, now that it is needed
                    import llvmlite.binding as ll

                    self._shared_module = ll.parse_bitcode(bitcode)
                    self._codegen._engine._load_defined_symbols(self._shared_module)
                return super()._get_module_for_linking()

            def get_pointer_to_function(self, name: str) -> Any:
                self._ensure_finalized()
                if "_gitm_bitcode" in self.__dict__:
                    engine = self._codegen._engine
                    if not engine.is_symbol_defined(name):
                        if name.encode() in self._gitm_object:  # its own symbol
                            address = engine.get_function_address(name)
                            if address:
                                engine._defined_symbols.add(name)
                                return address
                        self._get_module_for_linking()  # every symbol it defines, known now
                return super().get_pointer_to_function(name)

        _lazy_classes[base] = Lazy
    return _lazy_classes[base]


@contextlib.contextmanager
def _linking_deferred(codegen: Any) -> Iterator[None]:
    """Within (a load, under numba's compiler lock), libraries of machine code are rebuilt
    without their bitcode for linking (see ``_lazy_class``); others as numba rebuilds them."""
    real = codegen.unserialize_library

    def lean(state: Any) -> Any:
        name, kind, data = state
        if kind != "object":
            return real(state)
        object_code, bitcode = data
        library = codegen.create_library(name)
        library.__class__ = _lazy_class(type(library))
        library._gitm_bitcode = bitcode
        library._gitm_object = object_code  # (numba's hook drops its own reference on loading)
        library.enable_object_caching()
        library._set_compiled_object(object_code)
        library._finalize_final_module()
        return library

    own = vars(codegen)
    before = own.get("unserialize_library")  # (set only by an enclosing load of this kind)
    codegen.unserialize_library = lean
    try:
        yield
    finally:
        if before is not None:
            codegen.unserialize_library = before
        else:
            own.pop("unserialize_library", None)  # the class's own again


def _numba_extensions() -> None:
    """Load third-party numba extensions (the ``numba_extensions`` entry points), as numba's
    dispatcher does before it first compiles or loads anything. Reading every installed
    package's entry points took 28 ms of each process (a fresh venv); running cached code
    needs no extension, so ``jit``'s kernels put it off until numba compiles or loads by its
    own path (and numba's compiler set-up, ``refresh``, loads them itself)."""
    from numba.core import entrypoints

    entrypoints.init_all()


def _extensions_when_compiling() -> None:
    """A ``jit`` kernel's compilation-chain hook (numba's loads the extensions): see above."""


_CACHE_CLASSES: tuple[Any, Any] | None = None


def _cache_classes() -> tuple[Any, Any]:
    """(numba's FunctionCache, ``_LoadOnly``), or Nones where numba's layout is not as expected
    (numba's own loading then runs)."""
    global _CACHE_CLASSES
    if _CACHE_CLASSES is None:
        _CACHE_CLASSES = (None, None)
        try:
            from numba.core.caching import FunctionCache
        except ImportError:  # pragma: no cover - another numba layout: numba's own loading
            return _CACHE_CLASSES
        if all(
            hasattr(FunctionCache, a)
            for a in ("_load_overload", "_guard_against_spurious_io_errors")
        ):
            _CACHE_CLASSES = (FunctionCache, _load_only(FunctionCache))
    return _CACHE_CLASSES


def _load_only(base: type) -> type:
    """numba's function cache, loading without refreshing the target context."""

    class _LoadOnly(base):
        def load_overload(self, sig: Any, target_context: Any) -> Any:
            if _ready_to_run(target_context):
                try:
                    with (
                        self._guard_against_spurious_io_errors(),
                        _linking_deferred(target_context.codegen()),
                    ):
                        got = self._load_overload(sig, target_context)
                    if got is None:  # not cached: numba compiles it next
                        _numba_extensions()
                    return got
                except Exception:  # pragma: no cover - numba's own path says what is wrong
                    pass
            _numba_extensions()
            return super().load_overload(sig, target_context)

    return _LoadOnly


def jit(fn: F) -> F:
    """Register ``fn`` as a kernel: compiled by numba (cached, GIL released) on its first
    compiled call — before that, numba is not imported (see ``Kernel``) — and run as Python
    within ``interpreted``."""
    if _built:
        return _dispatcher(fn)
    k = Kernel(fn)
    _KERNELS[id(k)] = k
    return k  # type: ignore[return-value]


def python_of(kernel: Any) -> Callable[..., Any]:
    """The Python a kernel was compiled from (for a twin that runs it on other inputs)."""
    return kernel.py_func


def twin(kernel: Any) -> Callable[[F], F]:
    """Register the decorated function as ``kernel``'s interpreted twin: pure Python that returns
    what the kernel returns (tests hold them equal), faster than the kernel's own code run by
    the interpreter (lists instead of numpy scalars, numpy instead of loops)."""

    def register(fn: F) -> F:
        _TWINS[id(_OWNER.get(id(kernel), kernel))] = fn
        return fn

    return register


@contextlib.contextmanager
def interpreted() -> Iterator[None]:
    """Within, every kernel named by a loaded ``engine``/``gitm_tui`` module runs as Python (its
    twin, else its ``py_func``): nothing is compiled, and numba is not imported for it. A kernel
    calling another finds the callee in its module's globals, which are swapped too; a
    ``Kernel`` held elsewhere runs as Python too. Process-wide: use it where nothing else runs
    kernels meanwhile (the one-file ``analyze`` path); the names are restored on exit (to the
    dispatchers, where numba was needed meanwhile)."""
    global _interpreting
    with _SWAP:
        swapped: list[tuple[dict[str, Any], str, Any]] = []
        for name, mod in list(sys.modules.items()):
            if mod is None or name.split(".", 1)[0] not in ("engine", "gitm_tui"):
                continue
            space = vars(mod)
            for attr, value in list(space.items()):
                if id(value) in _KERNELS and _KERNELS[id(value)] is value:
                    k = _OWNER.get(id(value), value)  # the Kernel (or a dispatcher of its own)
                    swapped.append((space, attr, value))
                    space[attr] = _TWINS.get(id(k), k.py_func)
        _interpreting += 1
        try:
            yield
        finally:
            _interpreting -= 1
            for space, attr, value in swapped:
                built = type(value) is Kernel and value.disp is not None
                space[attr] = value.disp if built else value


def interpreting() -> bool:
    """Whether an ``interpreted()`` block is running (kernels are Python until it ends)."""
    return _interpreting > 0


def cold(kernels: Iterable[Any]) -> bool:
    """True when one of ``kernels`` (numba dispatchers) has no usable compiled code in the disk
    cache: its index file is missing, or was written for another version of its source file
    (numba then recompiles it — after an upgrade or an edit, the old index files stay behind,
    and a first run that trusted their mere existence compiled everything in the foreground:
    38 s). False when all are there — or when it cannot be told: numba's cache layout is not
    public API, and an unknown layout never claims a first run."""
    for disp in kernels:
        try:
            cache_file = disp._cache._cache_file
            load_index, data_path = cache_file._load_index, cache_file._data_path
        except AttributeError:
            return False
        try:
            index = load_index()  # {} when missing, stale or of another numba version
            # numba writes the index before the code: a child compiling now may have written
            # one and not the other yet
            if not index or not all(os.path.exists(data_path(n)) for n in index.values()):
                return True
        except Exception:  # an unreadable index: numba will compile afresh
            return True
    return False


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one), at least 1:
    what parallel work is sized by — compile children, lever threads, a program's workers."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def compile_elsewhere(module: str, *args: str) -> subprocess.Popen[bytes] | None:
    """Start ``python -m module args…`` (a warm-up main) in a child; None when it cannot start.
    Its output is discarded: its only product is numba's disk cache.

    The child runs in the directory holding this process's ``engine``: ``python -m`` puts its
    working directory first on the path, and from the user's — a clone of this repository
    beside an installed copy, or any folder with an ``engine`` of its own — the child compiled
    (or ran) that other code: the installed dashboard then compiled its kernels again in its
    own thread ("numba ✓" 5.9 s instead of 3.4 s)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)  # this checkout first, as in this process
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=root,
            start_new_session=True,  # a ctrl-c at the terminal is meant for the user's process
        )
    except OSError:
        return None


def _compile_lock(kind: str) -> Path:
    """The lock file ``one_compiler(kind)`` holds: per kind, checkout and NUMBA_CACHE_DIR."""
    import hashlib

    from platformdirs import user_cache_path

    root = str(Path(__file__).resolve().parent.parent)
    key = hashlib.sha256(f"{root}\0{os.environ.get('NUMBA_CACHE_DIR', '')}".encode())
    return user_cache_path("gitm-tui") / f"compile-{kind}-{key.hexdigest()[:16]}.lock"


def compiling_since(kind: str) -> float | None:
    """Seconds since the holder of ``one_compiler(kind)`` took it, if another process holds it
    now (a compile child an earlier run started); else None."""
    if not compiling_elsewhere(kind):
        return None
    try:
        return max(0.0, time.time() - os.stat(_compile_lock(kind)).st_mtime)
    except OSError:
        return 0.0


def compiling_elsewhere(kind: str) -> bool:
    """Whether another process holds ``one_compiler(kind)`` now (a compile child started by an
    earlier run, still compiling). False where it cannot be told."""
    try:
        import fcntl

        with open(_compile_lock(kind), "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(f, fcntl.LOCK_UN)
    except (ImportError, OSError):
        pass
    return False


@contextlib.contextmanager
def one_compiler(kind: str, wait_s: float = 300.0) -> Iterator[None]:
    """Within, this process is the only one compiling ``kind``'s kernels into this numba cache
    (an exclusive lock on a file per ``kind``, checkout and NUMBA_CACHE_DIR, in the user's cache
    directory); another waits here until the first is done, and then finds them cached. Each
    first run after an install starts a compile child, and `analyze` run on file after file
    started one each: three back-to-back runs had three children compiling the same kernels at
    once on two cores (the runs took 2.6, 4.3 and 3.9 s). After ``wait_s`` (a holder that
    hangs) it goes on without the lock; where no lock can be taken (no fcntl, no writable cache
    directory) nothing waits. Not re-entrant: a process holding it must not enter it again."""
    try:
        import fcntl

        where = _compile_lock(kind)
        where.parent.mkdir(parents=True, exist_ok=True)
        f = open(where, "a")  # noqa: SIM115 - held until the block ends
    except (ImportError, OSError):  # pragma: no cover - not POSIX, or nowhere to write
        yield
        return
    with f:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                with contextlib.suppress(OSError):  # when it started (compiling_since)
                    os.utime(where)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break  # the holder hung: compile anyway
                time.sleep(0.1)
            except OSError:  # pragma: no cover - a filesystem without locks: compile anyway
                break
        yield  # (the lock goes with the file)


def prepare_loading() -> None:
    """Set up what loading kernels from the disk cache needs (numba's CPU target, its code
    generator, its runtime): a fixed cost a process pays before its first load — 0.09 s with
    ``_LoadOnly``, ~0.35 s where numba's own loading runs (it refreshes every registry). Call
    it while a child of ``compile_elsewhere`` compiles, and the loads that follow take
    milliseconds."""
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.registry import cpu_target

    _build()
    with global_compiler_lock:  # as numba holds it around its own set-up
        ctx = cpu_target.target_context
        ctx.codegen()
        if _cache_classes()[1] is None or not _ready_to_run(
            ctx
        ):  # pragma: no cover - another numba
            cpu_target.typing_context.refresh()
            ctx.refresh()


def wait_compiled(child: subprocess.Popen[bytes] | None, timeout: float = 180.0) -> bool:
    """Wait for a child of ``compile_elsewhere``; True when it finished cleanly. One still
    running after ``timeout`` is stopped (this process compiles what is missing itself)."""
    if child is None:
        return False
    try:
        return child.wait(timeout=timeout) == 0
    except subprocess.TimeoutExpired:
        child.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)
        return False
