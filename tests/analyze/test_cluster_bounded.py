"""`analyze --cluster` never waits forever and never crashes on an address (issue 36)."""

from __future__ import annotations

import socket
import threading

from gitm_tui.cli import main
from tests.paths import TRACES

FILES = [
    str(TRACES / "kineto" / "a100_alexnet_2streams.json.gz"),
    str(TRACES / "kineto" / "a100_triton_one_kernel.json.gz"),
]


def test_a_scheduler_that_accepts_and_never_answers_is_given_up_on(monkeypatch, capsys):
    """A listener that accepts connections and never says a word (the probe waited 349 s):
    one line and exit 3 once the first answer is overdue."""
    from engine.analyze import cluster

    monkeypatch.setattr(cluster, "CONNECT_S", 1.0)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    held: list[socket.socket] = []

    def accept_forever() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)

    threading.Thread(target=accept_forever, daemon=True).start()
    try:
        rc = main(["analyze", *FILES, "--no-write", "--cluster", f"tcp://127.0.0.1:{port}"])
    finally:
        srv.close()
        for c in held:
            c.close()
    err = capsys.readouterr().err
    assert rc == 3
    assert "cannot reach the Dask scheduler" in err and "Traceback" not in err


def test_a_transport_this_install_cannot_speak_is_a_usage_error(capsys):
    """ucx:// made Dask raise TypeError (exit 1, a crash report): now one line, exit 2."""
    rc = main(["analyze", *FILES, "--no-write", "--cluster", "ucx://127.0.0.1:1"])
    err = capsys.readouterr().err
    assert rc == 2 and "tcp:// or tls://" in err and "Traceback" not in err
