"""Where the app's files live on disk, and one bound on all of them together.

Rule::

    folder    at launch the app claims a folder of its own (``claim``): ``playground-<k>`` under
              Gradio's temporary folder (GRADIO_TEMP_DIR, else <system temp>/gradio), the first
              that no live process holds (an exclusive lock on its ``.lock`` file, which the
              system releases when the process ends, SIGTERM or SIGKILL included). It points
              GRADIO_TEMP_DIR there, so Gradio's uploads and cache and the app's downloads share
              it. Every other ``playground-*`` folder nobody holds is a leftover of an earlier
              run, and is removed then. Without a claim (a test, the CLI) the downloads go to a
              temporary directory of this process, removed at interpreter exit.
    downloads under ``downloads/``, every file in its own subdirectory, so two requests never
              write the same path; Gradio serves them from there without a copy (they already
              lie in its cache). Written only when asked for.
    total     everything in the folder (uploads, downloads, Gradio's own files) stays within
              MAX_BYTES: a download frees space as it is written, chunk by chunk, by deleting
              the oldest other downloads, and is refused (DiskFull, its partial file deleted)
              when no space is left; an upload reserves its size the same way before Gradio reads a
              byte of it (``reserve``, used by ``ui.upload_guard``).
    expiry    whenever a file is written, and every SWEEP_SECONDS after a claim: downloads older
              than MAX_AGE_SECONDS go, then the oldest past MAX_FILES; every file of Gradio's
              (an upload no event has read: an event deletes what it reads, or an upload cut
              off midway) older than UPLOAD_TTL_SECONDS goes.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MAX_AGE_SECONDS = 30 * 60
MAX_FILES = 200
# The app's whole folder: a free Space has about 50 GB of disk; the largest download is 114 MB.
MAX_BYTES = int(float(os.environ.get("PLAYGROUND_DISK_MB", 1024)) * 2**20)
# An upload no event has read by then is deleted (the page reads its upload at once).
UPLOAD_TTL_SECONDS = float(os.environ.get("PLAYGROUND_UPLOAD_TTL", 600))
SWEEP_SECONDS = min(60.0, UPLOAD_TTL_SECONDS / 2)
PREFIX = "playground-"
DOWNLOADS = "downloads"
LOCK = ".lock"

_lock = threading.RLock()  # re-entered: cleanup and _make_room find the downloads folder
_area: str | None = None  # the claimed folder
_root: str | None = None  # the downloads folder
_writing: set[str] = set()
_reserved = 0  # bytes of uploads being received


class DiskFull(ValueError):
    """No space is left within MAX_BYTES; the message names the cap."""

    def __init__(self) -> None:
        super().__init__(
            f"The server keeps at most {MAX_BYTES / 2**20:,.0f} MB of files (uploads and "
            "downloads together) and has no room left now; try again in a few minutes."
        )


def _held(folder: Path) -> int | None:
    """An exclusive lock on ``folder``'s lock file (a file descriptor), None if a live process
    holds it; the folder is made if missing."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_ino == os.stat(folder / LOCK).st_ino:  # not removed meanwhile
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def gradio_folder() -> str:
    """Gradio's temporary folder, where its uploads and cache go: GRADIO_TEMP_DIR (Gradio's
    documented setting, pointed at the app's folder by ``claim``), else <system temp>/gradio."""
    return os.environ.get("GRADIO_TEMP_DIR") or str(Path(tempfile.gettempdir()) / "gradio")


def inside(path: str | Path, folder: str | Path) -> bool:
    """Whether ``path`` is ``folder`` or lies inside it, links and ``..`` resolved.

    >>> inside("/tmp/x/../y/z", "/tmp/y"), inside("/tmp/y", "/tmp/y/z")
    (True, False)
    """
    return Path(path).resolve().is_relative_to(Path(folder).resolve())


def claim() -> str:
    """Claim the app's folder (see the module rule), point Gradio at it, remove leftovers of
    earlier runs, start the sweeper; returns the folder. Idempotent."""
    global _area, _root
    with _lock:
        if _area is not None:
            return _area
        base = Path(gradio_folder())
        base.mkdir(parents=True, exist_ok=True)
        base = base.resolve()  # as Gradio compares paths
        mine, fd, index = None, None, 0
        while fd is None:
            mine = base / f"{PREFIX}{index}"
            fd, index = _held(mine), index + 1
        for entry in mine.iterdir():  # a dead run's files in the folder taken over
            if entry.name != LOCK:
                _remove(entry)
        for folder in base.glob(f"{PREFIX}*"):
            other = _held(folder) if folder != mine and folder.is_dir() else None
            if other is not None:  # nobody holds it: an earlier run's leftover
                shutil.rmtree(folder, ignore_errors=True)
                os.close(other)
        _area, _root = str(mine), str(mine / DOWNLOADS)
        os.environ["GRADIO_TEMP_DIR"] = _area
        atexit.register(shutil.rmtree, _area, ignore_errors=True)
    threading.Thread(target=_sweep_forever, name="file-sweeper", daemon=True).start()
    return _area


def download_dir() -> str:
    """The downloads folder: the claimed folder's, else this process's own temporary one."""
    global _root
    with _lock:
        if _root is None or not os.path.isdir(_root):
            if _area is not None:
                os.makedirs(os.path.join(_area, DOWNLOADS), exist_ok=True)
                _root = os.path.join(_area, DOWNLOADS)
            else:
                _root = tempfile.mkdtemp(prefix="playground-downloads-")
                atexit.register(shutil.rmtree, _root, ignore_errors=True)
        return _root


def _remove(path: Path | str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _stats(path: str) -> tuple[float, int]:
    """(newest mtime, bytes) of a file, or of every file under a directory (an empty one counts
    with its own mtime: a writer that has just made it, or one that failed; it expires too)."""
    own = os.lstat(path)
    if not os.path.isdir(path):
        return own.st_mtime, own.st_size
    newest, size = None, 0
    for folder, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                stat = os.lstat(os.path.join(folder, name))
                newest = stat.st_mtime if newest is None else max(newest, stat.st_mtime)
                size += stat.st_size
    return (own.st_mtime if newest is None else newest), size


def _downloads(root: str) -> list[tuple[float, int, str]]:
    """(mtime, bytes, subdirectory) of every download, oldest first."""
    entries = []
    for name in os.listdir(root):
        with contextlib.suppress(OSError):  # removed meanwhile
            entries.append((*_stats(os.path.join(root, name)), os.path.join(root, name)))
    return sorted(entries)


def used_bytes() -> int:
    """Bytes on disk in the app's folder (the downloads folder without a claim)."""
    return _stats(_area or download_dir())[1]


def _protected(keep: str | None) -> set[str]:
    return {os.path.dirname(path) for path in _writing | ({keep} if keep else set())}


def _make_room(nbytes: int, keep: str | None) -> bool:
    """Delete the oldest downloads (never those being written, nor ``keep``'s) until ``nbytes``
    more fit within MAX_BYTES; False when they cannot. Call with ``_lock`` held."""
    used = used_bytes() + _reserved
    if used + nbytes <= MAX_BYTES:
        return True
    protected = _protected(keep)
    for _, size, folder in _downloads(download_dir()):
        if folder not in protected:
            shutil.rmtree(folder, ignore_errors=True)
            used -= size
            if used + nbytes <= MAX_BYTES:
                return True
    return False


def reserve(nbytes: int) -> bool:
    """Reserve space for an upload of ``nbytes`` (old downloads deleted to free it), held
    until ``release``; False when it does not fit."""
    global _reserved
    with _lock:
        if not _make_room(nbytes, None):
            return False
        _reserved += nbytes
        return True


def release(nbytes: int) -> None:
    """Free an upload's reservation once Gradio has written (or refused) it."""
    global _reserved
    with _lock:
        _reserved = max(0, _reserved - nbytes)


def cleanup(keep: str | None = None) -> None:
    """Delete expired downloads, then the oldest past MAX_FILES or past MAX_BYTES in all;
    ``keep`` (a file path) and the files still being written stay."""
    with _lock:
        protected = _protected(keep)
        entries = _downloads(download_dir())
        now, count = time.time(), len(entries)
        for mtime, _, folder in entries:
            if folder not in protected and (now - mtime > MAX_AGE_SECONDS or count > MAX_FILES):
                shutil.rmtree(folder, ignore_errors=True)
                count -= 1
        _make_room(0, keep)


def expire_uploads() -> None:
    """Delete every file of Gradio's in the claimed folder older than UPLOAD_TTL_SECONDS."""
    if _area is None:
        return
    now = time.time()
    for entry in os.scandir(_area):
        if entry.name in (DOWNLOADS, LOCK):
            continue
        with contextlib.suppress(OSError):
            if now - _stats(entry.path)[0] > UPLOAD_TTL_SECONDS:
                _remove(entry.path)


def _sweep_forever() -> None:
    while True:
        time.sleep(SWEEP_SECONDS)
        with contextlib.suppress(OSError):
            expire_uploads()
            cleanup()


class _Bounded:
    """A binary file that frees space for each chunk before writing it (see ``total``)."""

    def __init__(self, file: Any, path: str):
        self.file, self.path = file, path

    def write(self, data: bytes) -> int:
        with _lock:
            if not _make_room(len(data), self.path):
                raise DiskFull
            written = self.file.write(data)
            self.file.flush()  # on disk now, so the next check counts it
            return written


def write_file(filename: str, write: Callable[[Any], None]) -> str:
    """Write a new file ``filename`` with ``write(binary file)``, clean up, return its path.

    Raises DiskFull (the partial file deleted) when the total cap leaves no space for it."""
    root = download_dir()
    with _lock:  # made and marked at once: no cleanup sees it unprotected
        folder = tempfile.mkdtemp(dir=root)
        path = os.path.join(folder, filename)
        _writing.add(path)
    try:
        with open(path, "wb") as file:
            write(_Bounded(file, path))
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        with _lock:
            _writing.discard(path)
    cleanup(keep=path)
    return path
