"""Files that are either fully written or not there: a temporary beside the target, fsync, rename."""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; once the block succeeds it is synced and replaces `path`.

    A crash or a full disk mid-write leaves the previous file intact and no temporary behind.
    The file gets the usual permissions (0666 less the umask: the kernel applies it as the temporary is created),
    or, replacing a file, that file's. The process umask, which every thread shares, is never changed: a thread
    creating a file meanwhile would get it without its umask.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    keep = stat.S_IMODE(path.stat().st_mode) & 0o777 if path.exists() else None
    tmp = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # a new name: nobody else's file is opened
    try:
        with open(fd, "wb") as created:  # the block writes `tmp` by its name
            if keep is not None:
                os.fchmod(created.fileno(), keep)
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:  # a full disk says nothing of the file it was writing: name it
        if exc.filename is None:
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
        raise
    finally:
        tmp.unlink(missing_ok=True)


def write_text_atomic(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
