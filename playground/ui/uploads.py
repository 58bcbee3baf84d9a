"""A visitor's uploaded CSV, as the events receive it: checked, read once, never kept on disk.

Rule: the ``data`` input is the FileData payload Gradio sends for an upload (a dict with a
``path``, or the path itself; None for no file). The path must lie in Gradio's upload folder,
outside the app's downloads, so a raw API call cannot make the server read any other file. The
file is read once, at most ``MAX_BYTES``, then deleted from disk at once, and so is a file
refused for its size; its bytes stay in a small in-memory cache (``CACHED_FILES`` files) so the
page's later events, which send the same path, still find them, and so does the parsed data for
each d_out and task (the same UserData object, so the page's report cache knows it again).
"""

from __future__ import annotations

import collections
import os
import threading
from pathlib import Path
from typing import Any

from gradio.utils import get_upload_folder, is_in_or_equal

from playground.core.settings import ConfigError, shown
from playground.core.user_data import MAX_BYTES, UserData, parse_csv
from playground.views.file_store import download_dir

CACHED_FILES = 32
# Parsed uploads kept: a 1 MB file parses to at most about 2 MB of float32.
PARSED_FILES = 8
_files: collections.OrderedDict[str, tuple[str, bytes]] = collections.OrderedDict()
_parsed: collections.OrderedDict[tuple[str, int, str], UserData] = collections.OrderedDict()
_lock = threading.Lock()


def _path_of(payload: Any) -> tuple[str, str] | None:
    """(server path, the visitor's file name) of a payload, None for no file."""
    if payload in (None, "", [], {}):
        return None
    if isinstance(payload, dict) and isinstance(payload.get("path"), str):
        return payload["path"], str(payload.get("orig_name") or Path(payload["path"]).name)
    if isinstance(payload, str):
        return payload, Path(payload).name
    raise ConfigError("data", f"data must be an uploaded CSV file or empty; got {shown(payload)}")


def _read_once(path: str, name: str) -> tuple[str, bytes]:
    with _lock:
        if path in _files:
            _files.move_to_end(path)
            return _files[path]
    resolved = Path(path).resolve()
    uploaded = is_in_or_equal(resolved, get_upload_folder())
    if not uploaded or is_in_or_equal(resolved, download_dir()) or not resolved.is_file():
        raise ConfigError(
            "data",
            "data must be a CSV file uploaded to this page (it may have expired: upload it again)",
        )
    size = resolved.stat().st_size
    if size > MAX_BYTES:
        resolved.unlink(missing_ok=True)  # refused: nothing of it stays on disk
        raise ConfigError("data", f"data (your CSV file): {size:,} bytes; at most {MAX_BYTES:,}")
    content = resolved.read_bytes()
    resolved.unlink(missing_ok=True)  # nothing of the visitor's stays on disk
    with _lock:
        _files[path] = (name, content)
        while len(_files) > CACHED_FILES:
            _files.popitem(last=False)
    return name, content


def upload_key(payload: Any) -> tuple[str, str] | None:
    """(server path, the file's name as the page shows it) of an upload payload, None for no
    file or a payload that is no upload (its event refuses it)."""
    try:
        located = _path_of(payload)
    except ConfigError:
        return None
    return None if located is None else (located[0], os.path.basename(located[1]))


def user_data(payload: Any, d_out: int, task: str = "regression") -> UserData | None:
    """The parsed data of an upload payload for ``task`` (a classification's last column its
    classes), or None; ConfigError naming ``data`` (and the cell)."""
    located = _path_of(payload)
    if located is None:
        return None
    key = (located[0], d_out, task)
    with _lock:
        if key in _parsed:
            _parsed.move_to_end(key)
            return _parsed[key]
    name, content = _read_once(*located)
    data = parse_csv(content, d_out, name=os.path.basename(name), task=task)
    with _lock:
        _parsed[key] = data
        while len(_parsed) > PARSED_FILES:
            _parsed.popitem(last=False)
    return data


def uploaded_file(payload: Any, field: str) -> tuple[Path, str] | None:
    """(the file on disk, the visitor's name for it) of an upload payload for input ``field``,
    None for no file; ConfigError naming ``field`` for anything but a file in Gradio's upload
    folder (outside the app's downloads). The caller reads it once and deletes it."""
    if payload in (None, "", [], {}):
        return None
    path = payload.get("path") if isinstance(payload, dict) else payload
    if not isinstance(path, str):
        raise ConfigError(field, f"{field} must be an uploaded file or empty; got {shown(payload)}")
    name = payload.get("orig_name") if isinstance(payload, dict) else None
    resolved = Path(path).resolve()
    uploaded = is_in_or_equal(resolved, get_upload_folder())
    if not uploaded or is_in_or_equal(resolved, download_dir()) or not resolved.is_file():
        raise ConfigError(
            field,
            f"{field} must be a file uploaded to this page (it may have expired: upload it again)",
        )
    return resolved, os.path.basename(str(name or resolved.name))
