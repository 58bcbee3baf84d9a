"""Where download files go, how long they live, and how they are cleaned up.

Rule::

    where   one temporary directory of this module (created on first use, under the system
            temporary directory, which Gradio serves from); every file gets its own
            subdirectory, so two requests never write the same path
    cleanup whenever a file is written: files older than MAX_AGE_SECONDS are deleted, then the
            oldest until at most MAX_FILES files and MAX_BYTES bytes remain (the new file and
            files still being written are kept); the directory is removed at interpreter exit

``write_file(filename, write)`` is the one way in: it makes the file's subdirectory, lets
``write`` fill the file, removes it again if that fails, then cleans up.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

MAX_AGE_SECONDS = 30 * 60
MAX_FILES = 200
MAX_BYTES = 2**30

_lock = threading.Lock()
_root: str | None = None
_writing: set[str] = set()


def download_dir() -> str:
    """This module's temporary directory, created on first use and removed at exit."""
    global _root
    with _lock:
        if _root is None or not os.path.isdir(_root):
            _root = tempfile.mkdtemp(prefix="playground-downloads-")
            atexit.register(shutil.rmtree, _root, ignore_errors=True)
        return _root


def _entries(root: str) -> list[tuple[float, int, str]]:
    """(mtime, bytes, subdirectory) of every kept file, oldest first.

    An empty subdirectory counts with its own mtime: a writer that has just made it, or one
    that failed; it expires like a file.
    """
    entries = []
    for name in os.listdir(root):
        folder = os.path.join(root, name)
        try:
            files = [os.path.join(folder, f) for f in os.listdir(folder)]
            stats = [os.stat(f) for f in files] or [os.stat(folder)]
        except OSError:  # removed meanwhile, or not a directory of ours
            continue
        entries.append((max(s.st_mtime for s in stats), sum(s.st_size for s in stats), folder))
    return sorted(entries)


def cleanup(keep: str | None = None) -> None:
    """Delete expired files, then the oldest past MAX_FILES or MAX_BYTES (see the module rule).

    ``keep`` (a file path) and the files still being written are never deleted.
    """
    root = download_dir()
    with _lock:
        protected = {os.path.dirname(path) for path in _writing | ({keep} if keep else set())}
        entries = _entries(root)
        now = time.time()
        count, size = len(entries), sum(entry[1] for entry in entries)
        for mtime, nbytes, folder in entries:
            expired = now - mtime > MAX_AGE_SECONDS
            if folder in protected or not (expired or count > MAX_FILES or size > MAX_BYTES):
                continue
            shutil.rmtree(folder, ignore_errors=True)
            count, size = count - 1, size - nbytes


def write_file(filename: str, write: Callable[[Any], None]) -> str:
    """Write a new file ``filename`` with ``write(binary file)``, clean up, return its path."""
    root = download_dir()
    with _lock:  # made and marked at once: no cleanup sees it unprotected
        folder = tempfile.mkdtemp(dir=root)
        path = os.path.join(folder, filename)
        _writing.add(path)
    try:
        with open(path, "wb") as file:
            write(file)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        with _lock:
            _writing.discard(path)
    cleanup(keep=path)
    return path
