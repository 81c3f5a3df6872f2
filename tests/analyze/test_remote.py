"""Trace paths as fsspec URLs: a directory URL is listed, each file is read where it is
analysed (here, or on a Dask worker), and every failure is one line naming the URL."""

from __future__ import annotations

import pytest

from engine.analyze.api import AnalyzeOptions, analyze
from engine.analyze.ranks.synth_ranks import write_ranks
from engine.analyze.remote import expand_url, is_url, url_name
from engine.analyze.run import TRACE_SUFFIXES


@pytest.fixture
def memory_ranks(tmp_path):
    """Four SYNTHETIC rank traces in fsspec's in-memory filesystem (this process only)."""
    import fsspec

    fs = fsspec.filesystem("memory")
    root = f"/gitm-test-{tmp_path.name}"
    for p in write_ranks(tmp_path / "ranks", ranks=4, steps=2, straggler=3, slow_link=(1, 2)):
        fs.pipe(f"{root}/{p.name}", p.read_bytes())
    fs.pipe(f"{root}/notes.txt", b"not a trace")
    yield f"memory://{root}"
    fs.rm(root, recursive=True)


def test_urls_are_told_from_paths():
    assert is_url("s3://bucket/run/") and is_url("simplecache::s3://b/k") and is_url("file:///x")
    assert not is_url("/tmp/x.json") and not is_url("rank0.json.gz") and not is_url("C:/x")
    assert url_name("s3://bucket/run/rank0003.json.gz") == "rank0003.json.gz"


def test_a_url_directory_is_listed_and_its_ranks_analysed(memory_ranks):
    urls, why = expand_url(memory_ranks, TRACE_SUFFIXES)
    assert why is None and [url_name(u) for u in urls] == [f"rank{r:04d}.json.gz" for r in range(4)]
    got = analyze([memory_ranks], AnalyzeOptions(workers=1))
    outs = got.outcomes
    assert [o.error for o in outs] == [None] * 4
    assert all(o.analysis.source.startswith("memory://") for o in outs)  # the URL, not a copy
    c = got.crossed
    assert c is not None and {s.straggler for s in c.steps} == {3}
    assert [ln.link for ln in c.links if ln.slow] == ["1→2"]


def test_the_cli_analyses_one_url_in_process(memory_ranks, capsys):
    from gitm_tui.cli import main

    rc = main(["analyze", f"{memory_ranks}/rank0002.json.gz", "--no-write"])
    assert rc == 0 and "rank 2" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("memory:///gitm-nope/rank0.json.gz", "no such file or directory"),
        ("gitmnosuchprotocol://x/rank0.json", "cannot read"),
        ("s3://gitm-no-bucket/run/", "s3fs"),
    ],
)
def test_an_unreadable_url_is_one_line_and_exit_3(url, said, capsys, monkeypatch):
    import builtins
    import sys

    from gitm_tui.cli import main

    if url.startswith("s3://"):  # whatever is installed here: s3fs missing
        real = builtins.__import__

        def no_s3fs(name, *a, **k):
            if name == "s3fs" or name.startswith("s3fs."):
                raise ImportError("No module named 's3fs'")
            return real(name, *a, **k)

        monkeypatch.setattr(builtins, "__import__", no_s3fs)
        monkeypatch.delitem(sys.modules, "s3fs", raising=False)
    rc = main(["analyze", url, "--no-write"])
    err = capsys.readouterr().err
    assert rc == 3 and "Traceback" not in err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and url in lines[0] and said in lines[0]


def test_a_url_larger_than_the_trace_limit_is_refused(memory_ranks, monkeypatch):
    monkeypatch.setenv("GITM_MAX_TRACE_BYTES", "1K")
    outs = analyze([f"{memory_ranks}/rank0000.json.gz"]).outcomes
    assert len(outs) == 1 and "larger than the trace limit" in (outs[0].error or "")


def test_dask_workers_read_file_urls_themselves_and_a_corrupt_one_is_named(tmp_path):
    paths = write_ranks(tmp_path / "ranks", ranks=4, steps=2, straggler=0)
    paths[2].write_bytes(paths[2].read_bytes()[:300])
    url = (tmp_path / "ranks").as_uri()  # file:///…: read through fsspec on each worker
    got = analyze([url], AnalyzeOptions(cluster="local", workers=2))
    outs = got.outcomes
    assert [o.path for o in outs] == [p.as_uri() for p in paths]
    errors = [o.error for o in outs if o.error]
    assert len(errors) == 1 and paths[2].as_uri() in errors[0] and got.errors == errors
    c = got.crossed
    # 3 of the 4 ranks read: the rank the others waited for may be the one missing, so no
    # straggler is named (issue 35)
    assert c is not None and len(c.ranks) == 3 and c.straggler.startswith("cannot tell")
