"""Downloadable files: the step's entries, the sweep, the dynamics and the JSON summaries.

Each function here writes one file and returns its path, for a Gradio ``gr.File`` or
``gr.DownloadButton`` output; this module is what the page and the sections call. Rule::

    what    gradients_csv, sweep_csv, dynamics_csv  a report as CSV (``report_csv``)
            summary_json                            a JSON summary, strict JSON
            text_file                               any text (the exported script)
    where   the app's folder in Gradio's cache, every file in its own subdirectory, written
            once, old files cleaned up whenever one is written, all files within one total
            bound (``file_store``: DiskFull when no space is left)
    name    what it holds and the settings, such as
            gradients_bfloat16_linear_sgd_n256_64x16_lr0.1_S1024_seed0_data0.csv
            (``file_names``)
    format  CSV as ``csv_files`` writes it: every float32 the shortest decimal that reads back
            to exactly that float32 (``float32_text``)
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any

from playground.views.file_names import name_part, settings_tag
from playground.views.file_store import DiskFull, download_dir, write_file
from playground.views.float32_text import float32_text
from playground.views.report_csv import (
    DYNAMICS_LOSSES,
    DYNAMICS_PER_STEP,
    SWEEP_COLUMNS,
    dynamics_csv,
    gradients_csv,
    sweep_csv,
)

__all__ = [
    "DYNAMICS_LOSSES",
    "DYNAMICS_PER_STEP",
    "SWEEP_COLUMNS",
    "DiskFull",
    "download_dir",
    "dynamics_csv",
    "float32_text",
    "gradients_csv",
    "settings_tag",
    "summary_json",
    "sweep_csv",
    "text_file",
]


def text_file(text: str, filename: str) -> str:
    """Any text (a script, say) as a download named ``filename``; returns the file's path.

    The name is reduced to letters, digits, ``.``, ``_`` and ``-``; UTF-8.
    """
    return write_file(name_part(filename), lambda file: file.write(text.encode()))


def summary_json(summary: Mapping[str, Any], name: str) -> str:
    """A JSON summary (``summarize``, ``sweep_summary``, ``dynamics_summary``) as a file.

    The file is ``{name}_{settings}.json``, e.g. ``summary_bfloat16_linear_..._data0.json``, the
    settings read from ``summary["config"]`` as ``settings_tag`` writes them (S left out for a
    sweep summary, the run added for a dynamics summary; none without a complete config). Its
    text is strict JSON, indented by 2: a NaN or infinity in ``summary`` raises ValueError
    (the summaries write them as "nan", "inf", "-inf"), before any file is made.
    """
    text = json.dumps(summary, allow_nan=False, indent=2) + "\n"
    filename = name_part(name)
    config = summary.get("config")
    if isinstance(config, Mapping):
        sweep, run = "log2_scales" in summary, "steps" in summary and "mode" in summary
        with contextlib.suppress(KeyError, ValueError):  # not a StepConfig: the name alone
            filename += "_" + settings_tag(config, scale=not sweep, run=run)
    return write_file(filename + ".json", lambda file: file.write(text.encode()))
