"""A client's uploaded CSV, as the events receive it: the client's own upload, read once,
never kept on disk.

Rules:
  record  Gradio's upload route answers the paths it wrote; at upload time each is recorded as
          a fresh upload of the client who sent it (``ui.fair_use``'s key; ``record``, called by
          ``ui.upload_records``), the client's VISITOR_RECORDS newest at most. Gradio names an
          upload by its content, so uploading the same file again gives the same path, and its
          record is fresh again.
  admit   a file input is None (no file) or the FileData payload of a path this client
          recorded (``admit``, from ``ui.public.PublicBlocks`` before Gradio touches the path).
          Anything else is refused naming the input and is neither read nor deleted: another
          client's upload, a download, the app's lock, Gradio's cache, any path outside the
          app's folder, an upload past UPLOAD_TTL_SECONDS (it expired from disk).
  read    the first event that admits a fresh upload of ``data`` (READ_HERE) reads it (at most
          MAX_BYTES; a larger one is refused) and deletes it from disk at once, every time it
          was uploaded; its record turns read. The bytes stay in memory (CACHED_FILES files)
          for the clients who read them, so the page's later events, which send the same path
          again, find them; once they leave the memory the path is refused (upload it again).
          The parsed data for each d_out and task is kept too (PARSED_FILES; the same UserData
          object, so the page's report cache knows it again). The handlers (``user_data``)
          read only these bytes, never the disk. Another file input's first event only turns
          the record read: its own handler reads the file once and deletes it.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from pathlib import Path
from typing import Any

import gradio as gr

from playground.core.data.user_data import MAX_BYTES, UserData, parse_csv
from playground.core.settings.settings import ConfigError, shown
from playground.views.file_store import UPLOAD_TTL_SECONDS, download_dir, gradio_folder, inside

CACHED_FILES = 32
# Parsed uploads kept: a 1 MB file parses to at most about 2 MB of float32.
PARSED_FILES = 8
# Fresh uploads remembered (each a path and a client), in all and per client (the page sends
# one at a time); an older one has expired from disk.
RECORDS = 4096
VISITOR_RECORDS = 16
NAME_CHARS = 200  # the longest file name shown (Gradio keeps at most 200 bytes of it)
# File inputs whose uploads this module reads (into memory, at admit): the CSV. Another file
# input's upload is admitted the same way and left on disk for its own handler to read once.
READ_HERE = ("data",)
NOT_YOURS = (
    "{field} must be a file you uploaded to this page, or null for none (an upload expires "
    "after a while: upload it again)"
)
NOT_FILE = "{field} must be an uploaded file (a FileData dict) or null for none"
_fresh: collections.OrderedDict[tuple[str, str], float] = collections.OrderedDict()
_files: collections.OrderedDict[str, tuple[str, bytes]] = collections.OrderedDict()
_readers: dict[str, set[str]] = {}
_parsed: collections.OrderedDict[tuple[str, int, str], UserData] = collections.OrderedDict()
_lock = threading.Lock()


def _key(path: str) -> str:
    """The path as Gradio writes an upload's: absolute, links resolved."""
    return os.path.realpath(path)


def record(visitor: str, paths: list[str]) -> None:
    """Record ``paths`` (Gradio's answer to an upload) as fresh uploads of the client key
    ``visitor``; only those in Gradio's upload folder, outside the app's downloads, count."""
    folder, downloads = gradio_folder(), download_dir()
    keys = (_key(path) for path in paths)
    paths = [key for key in keys if inside(key, folder) and not inside(key, downloads)]
    now = time.monotonic()
    with _lock:
        for path in paths:
            _fresh[(visitor, path)] = now
            _fresh.move_to_end((visitor, path))
        own = [key for key in _fresh if key[0] == visitor]
        for key in own[: max(0, len(own) - VISITOR_RECORDS)]:
            del _fresh[key]  # the client's oldest: no client's uploads push out another's
        while _fresh and (
            len(_fresh) > RECORDS or next(iter(_fresh.values())) < now - UPLOAD_TTL_SECONDS
        ):
            _fresh.popitem(last=False)


def _located(payload: Any, field: str) -> tuple[str, str] | None:
    """(server path, the user's file name) of a FileData payload (the raw input), None for
    no file; ConfigError naming ``field`` for anything else."""
    if payload is None:
        return None
    try:
        file = gr.FileData.model_validate(payload, context={"validate_meta": True})
    except (ValueError, TypeError):
        raise ConfigError(field, f"{NOT_FILE.format(field=field)}; got {shown(payload)}") from None
    name = os.path.basename(str(file.orig_name or "")) or os.path.basename(file.path)
    # Shown on the page: printable characters only (a line break would end its paragraph).
    name = "".join(char for char in name if char.isprintable())[:NAME_CHARS]
    return _key(file.path), name or os.path.basename(file.path)


def admit(visitor: str, payload: Any, read: bool = True, field: str = "data") -> None:
    """Admit ``payload`` (the file input ``field`` as sent) as the client key ``visitor``'s
    upload, reading and deleting it if it is fresh and ``read`` (see the module rule; an input
    outside READ_HERE only has its record turned read); ConfigError naming ``field``.

    ``read`` is False where Gradio preprocesses an input without running the event (a
    validator, when a run joins the queue): the file is checked and stays for the event."""
    located = _located(payload, field)
    if located is None:
        return
    path, name = located
    with _lock:  # one reader per upload: two events sent at once never both miss it
        fresh = (visitor, path) in _fresh
        if fresh and _fresh[(visitor, path)] < time.monotonic() - UPLOAD_TTL_SECONDS:
            del _fresh[(visitor, path)]
            fresh = False
        if not fresh and (field not in READ_HERE or visitor not in _readers.get(path, ())):
            raise ConfigError(field, NOT_YOURS.format(field=field))
        if not fresh or not read:
            return
        del _fresh[(visitor, path)]
        if field in READ_HERE:
            _read_fresh(path, name)
            _readers.setdefault(path, set()).add(visitor)


def _read_fresh(path: str, name: str) -> None:
    """Read a fresh upload into memory and delete it from disk. Call with ``_lock`` held.

    Its file is gone when another client uploaded the identical file and read it first: the
    bytes in memory are then this upload's too (the path is named by the content)."""
    try:
        size = os.lstat(path).st_size
        if os.path.islink(path) or not os.path.isfile(path):
            raise FileNotFoundError(path)
    except FileNotFoundError:
        if path in _files:
            return
        raise ConfigError("data", NOT_YOURS.format(field="data")) from None
    if size > MAX_BYTES:
        os.unlink(path)  # refused: nothing of it stays on disk
        raise ConfigError("data", f"data (your CSV file): {size:,} bytes; at most {MAX_BYTES:,}")
    with open(path, "rb") as file:
        content = file.read(MAX_BYTES + 1)
    os.unlink(path)  # nothing of the client's stays on disk
    if len(content) > MAX_BYTES:  # grew since it was measured
        raise ConfigError("data", f"data (your CSV file): more than {MAX_BYTES:,} bytes")
    if path in _files and _files[path][0] != name:  # the same bytes under another name
        for key in [key for key in _parsed if key[0] == path]:
            del _parsed[key]
    _files[path] = (name, content)
    _files.move_to_end(path)
    while len(_files) > CACHED_FILES:
        gone, _ = _files.popitem(last=False)
        _readers.pop(gone, None)


def _server_path(payload: Any) -> str | None:
    """The server path of the ``data`` input as a handler receives it (Gradio's preprocessed
    file path, or the FileData dict), None for no file."""
    if isinstance(payload, str) and payload:
        return _key(payload)
    if isinstance(payload, dict) and isinstance(payload.get("path"), str):
        return _key(payload["path"])
    return None


def upload_key(payload: Any) -> tuple[str, str] | None:
    """(server path, the file's name as the page shows it) of an upload payload, None for no
    file or a payload that is no upload (its event refuses it)."""
    path = _server_path(payload)
    if path is None:
        return None
    with _lock:
        name = _files[path][0] if path in _files else os.path.basename(path)
    return path, name


def user_data(payload: Any, d_out: int, task: str = "regression") -> UserData | None:
    """The parsed data of an admitted upload for ``task`` (a classification's last column its
    classes), or None for no file; ConfigError naming ``data`` (and the cell)."""
    path = _server_path(payload)
    if path is None:
        if payload is None:
            return None
        raise ConfigError("data", f"{NOT_FILE.format(field='data')}; got {shown(payload)}")
    key = (path, d_out, task)
    with _lock:
        if key in _parsed:
            _parsed.move_to_end(key)
            return _parsed[key]
        if path not in _files:
            raise ConfigError("data", NOT_YOURS.format(field="data"))
        name, content = _files[path]
    data = parse_csv(content, d_out, name=name, task=task)
    with _lock:
        _parsed[key] = data
        while len(_parsed) > PARSED_FILES:
            _parsed.popitem(last=False)
    return data


def uploaded_file(payload: Any, field: str) -> tuple[Path, str] | None:
    """(the file on disk, the user's name for it) of an upload payload for input ``field``,
    None for no file; ConfigError naming ``field`` for anything but a file in Gradio's upload
    folder (outside the app's downloads). The caller reads it once and deletes it."""
    if payload in (None, "", [], {}):
        return None
    path = payload.get("path") if isinstance(payload, dict) else payload
    if not isinstance(path, str):
        raise ConfigError(field, f"{field} must be an uploaded file or empty; got {shown(payload)}")
    name = payload.get("orig_name") if isinstance(payload, dict) else None
    resolved = Path(path).resolve()
    uploaded = inside(resolved, gradio_folder())
    if not uploaded or inside(resolved, download_dir()) or not resolved.is_file():
        raise ConfigError(
            field,
            f"{field} must be a file uploaded to this page (it may have expired: upload it again)",
        )
    return resolved, os.path.basename(str(name or resolved.name))
