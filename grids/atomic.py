"""Files written atomically: into a temporary file beside the target, flushed to disk, then renamed,
so that a crash never leaves a half-written file under the target's name."""
from __future__ import annotations

import contextlib
import os
import uuid


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside `path`; when the block ends without an error, fsync it and
    rename it to `path`; on an error remove it and leave `path` as it was."""
    directory, base = os.path.split(os.path.abspath(os.fspath(path)))
    tmp = os.path.join(directory, f".{base}.{uuid.uuid4().hex}.tmp")
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
