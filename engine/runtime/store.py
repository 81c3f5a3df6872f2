"""Run store paths and atomic writes (DESIGN §7): nothing the user keeps is ever half-written."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def scratch_dir() -> Path:
    """Return $GITM_SCRATCH, or the platform's user data dir for gitm-tui."""
    env = os.environ.get("GITM_SCRATCH")
    if env:
        return Path(env)
    from platformdirs import user_data_path

    return user_data_path("gitm-tui", appauthor=False)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` via a temp file in the same folder, fsync and os.replace."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
