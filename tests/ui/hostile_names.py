"""A SYNTHETIC hostile-input corpus: small traces built from a real one whose strings attack the
terminal, the Markdown report and the markup renderer (nothing here was captured from a GPU).

Kernel names and the device name of ``a100_alexnet_2streams.json.gz`` (a real PyTorch profiler
trace of this repository's test data) are prefixed with escape sequences (ESC/CSI/OSC, BEL, NUL,
a C1 CSI, DEL), bidi overrides, Rich markup and a lone-surrogate JSON escape; one trace has an
8 MB kernel name; one has a file name made of escapes and markup; one SQLite file has a corrupt
schema whose error message quotes a multi-line, escape-laden statement.

``python tests/ui/hostile_names.py DIR`` writes the corpus into DIR (the tests call
:func:`write_corpus`).
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import sys
from pathlib import Path

from tests.paths import TRACES

KINETO = TRACES / "kineto"

#: one hostile prefix per kernel name, most dangerous first: the terminal summary shows the top
#: kernels by time, which receive these in order
PAYLOADS = (
    "\x1b[2J\x1b[H",  # clear the screen, cursor home
    "\x1b]0;pwned\x07",  # OSC 0: retitle the terminal, ended by BEL
    "[bold red]x[/]",  # Rich markup: must show literally
    "[/]",  # a closing tag with nothing open: a MarkupError when parsed
    "\x9b2J",  # C1 CSI (one byte on 8-bit terminals): clear the screen
    "\u202egnp.exe\u202c",  # right-to-left override (Trojan Source)
    "\ud800",  # lone surrogate: written as the six characters \ud800 in the JSON text
    "\x07bell\x00nul\x7fdel",  # BEL, NUL, DEL
    "[link=file:///etc/passwd]click[/link]",  # a hyperlink in markup
    "\x1b[31mred\x1b[0m",  # even a harmless-looking SGR is not the app's to pass on
    "line\nbreak\ttab\r",  # line breaks inside a name
    "\u2066isolate\u2069",  # bidi isolate
)
#: the device name the trace reports (so the hardware is unknown and this name is shown)
DEVICE_NAME = "\x1b]0;gpu\x07NVIDIA [bold]A100[/] \u202e\ud800"
#: a file name made of escapes and markup (no NUL and no "/": no closing tag)
HOSTILE_FILE_STEM = "\x1b]0;pwned\x07[bold red]x\u202e\x1b[2J"
#: the size of the one kernel name of huge_name.json (bytes; ASCII)
HUGE_NAME_BYTES = 8 * 2**20


def _load(name: str) -> dict:
    with gzip.open(KINETO / name, "rt", encoding="utf-8") as f:
        return json.load(f)


def _dump(trace: dict, path: Path) -> Path:
    # ensure_ascii: control characters and the lone surrogate become JSON escapes (\u001b,
    # \ud800), which is how they arrive in a real trace (raw control bytes are not valid JSON)
    path.write_text(json.dumps(trace, ensure_ascii=True), encoding="ascii")
    return path


def hostile_names_trace() -> dict:
    """Return the alexnet trace with each distinct kernel name prefixed by a payload (in order
    of total time) and every device named ``DEVICE_NAME``."""
    trace = _load("a100_alexnet_2streams.json.gz")
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    total: dict[str, float] = {}
    for e in kernels:
        total[e["name"]] = total.get(e["name"], 0.0) + float(e.get("dur", 0))
    ranked = sorted(total, key=lambda n: -total[n])
    renamed = {n: PAYLOADS[i % len(PAYLOADS)] + " " + n for i, n in enumerate(ranked)}
    for e in kernels:
        e["name"] = renamed[e["name"]]
    for dev in trace.get("deviceProperties", []):
        dev["name"] = DEVICE_NAME
    return trace


def huge_name_trace() -> dict:
    """Return the one-kernel Triton trace with its kernel renamed to 8 MB (an ESC at each end)."""
    trace = _load("a100_triton_one_kernel.json.gz")
    name = "\x1b[2J" + "k" * (HUGE_NAME_BYTES - 8) + "\x1b[2J"
    for e in trace["traceEvents"]:
        if e.get("cat") == "kernel":
            e["name"] = name
    return trace


def malformed_schema_sqlite(path: Path) -> Path:
    """Write an SQLite file with an Nsight kernel table and a second table whose stored schema
    is a broken statement: opening it fails with an error that quotes the statement — a newline,
    an OSC title sequence, BEL and a clear-screen CSI."""
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    try:
        con.execute('CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INT, "end" INT)')
        con.execute("CREATE TABLE broken(a INT)")
        con.commit()
        con.execute("PRAGMA writable_schema=ON")
        con.execute(
            "UPDATE sqlite_master SET sql=? WHERE name='broken'",
            ("CREATE TABLE broken(a INT DEFAULT 'x\nline two \x1b]0;pwned\x07\x1b[2J",),
        )
        con.commit()
    finally:
        con.close()
    return path


def write_corpus(out: Path) -> dict[str, Path]:
    """Write the corpus into ``out``; return its files by role."""
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "names": _dump(hostile_names_trace(), out / "hostile_names.json"),
        "huge_name": _dump(huge_name_trace(), out / "huge_name.json"),
        # a valid trace under a hostile file name: the name is shown in headers and paths
        "file_name": _dump(
            _load("a100_triton_one_kernel.json.gz"), out / f"{HOSTILE_FILE_STEM}.json"
        ),
        "sqlite": malformed_schema_sqlite(out / "malformed_schema.sqlite"),
    }
    # not a trace, under a hostile name: its error line quotes the name
    bad = out / f"{HOSTILE_FILE_STEM} garbage.json"
    bad.write_bytes(b"{not json")
    files["garbage"] = bad
    return files


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/ui/hostile_names.py OUT_DIR")
    for role, path in write_corpus(Path(sys.argv[1])).items():
        print(f"{role}: {str(path)!a}")
