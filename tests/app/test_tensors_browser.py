"""The Your tensors tab in headless Chromium at 1400 x 1000: the tab bar still fits one row, the
file input takes only .safetensors, and an upload of a real model's gradients fills the table
(a row per tensor, names as in the file, sorted by a column from its heading's menu), the
sentences (float16's zero share, counted here with ml_dtypes) and the chosen tensor's figure;
choosing another tensor redraws it. The screenshots land in tests/artifacts/tensors_tab.png
and tensors_figure.png."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from test_browser import ARTIFACTS, TIMEOUT_MS

from helpers import open_page
from playground.sections.tensors.summary import percent
from playground.sections.tensors.tab import TAB_LABEL

pytestmark = pytest.mark.slow

FIGURE_TITLE = """() => {
  const chart = document.querySelector('#tensor-plot .js-plotly-plot');
  return chart && chart.layout ? String(chart.layout.title.text || chart.layout.title) : null;
}"""
TABLE_FITS = """() => {
  const table = document.querySelector('#tensors-table table');
  const frame = document.querySelector('#tensors-table');
  return table.getBoundingClientRect().right <= frame.getBoundingClientRect().right + 1;
}"""
BODY_ROWS = "#tensors-table div[role=row]"  # the Dataframe's body rows (its header is a tr)
TAB_ROWS = """() => new Set([...document.querySelectorAll('#sections [role=tab]')]
  .filter(t => t.offsetParent !== null).map(t => Math.round(t.getBoundingClientRect().top))).size"""


def gradients(path) -> dict[str, np.ndarray]:
    """A small MLP's gradients after one backward() on a tiny loss (as before loss scaling)."""
    torch.manual_seed(3)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 64), torch.nn.GELU()
    )
    model.append(torch.nn.Linear(64, 8))
    loss = torch.nn.functional.mse_loss(model(torch.randn(64, 32)), torch.randn(64, 8)) * 2.0**-20
    loss.backward()
    grads = {f"mlp.{name}.grad": p.grad.contiguous() for name, p in model.named_parameters()}
    save_file(grads, str(path))
    return {name: value.numpy() for name, value in grads.items()}


def test_an_upload_fills_the_table_sentences_and_figure(browser, app_url, tmp_path):
    path = tmp_path / "mlp_grads.safetensors"
    tensors = gradients(path)
    page = open_page(browser, app_url, 1400, 1000)
    try:
        assert page.evaluate(TAB_ROWS) == 1, "the tab bar wraps at 1400 px"
        page.locator("#sections").get_by_role("tab", name=TAB_LABEL).click()
        file_input = page.locator("#tensors-file input[type=file]")
        assert ".safetensors" in (file_input.get_attribute("accept") or "")
        file_input.set_input_files(str(path))
        reading = page.locator("#tensors-reading")
        reading.get_by_text(f"holds {len(tensors)} tensors").wait_for(timeout=3 * TIMEOUT_MS)
        page.wait_for_function(f"() => document.querySelectorAll({BODY_ROWS!r}).length > 0")
        first_cells = f"[...document.querySelectorAll({BODY_ROWS!r})].map(r => r.innerText)"
        names = [text.split("\n")[0].strip() for text in page.evaluate(f"() => {first_cells}")]
        assert sorted(names) == sorted(tensors), names
        page.wait_for_function(f"() => ({FIGURE_TITLE})() !== null")
        chosen = page.locator("#tensor-name input").input_value()
        assert chosen in tensors
        assert page.evaluate(FIGURE_TITLE).startswith(chosen)
        values = tensors[chosen]
        share = np.count_nonzero(values.astype(np.float16) == 0) / np.count_nonzero(values)
        text = " ".join(page.locator("#tensor-reading").inner_text().split())
        assert f"float16: {percent(share)} of {chosen}'s nonzero entries round to 0" in text
        # The table fits the page: no column clipped at 1400 px.
        assert page.evaluate(TABLE_FITS), "the tensors table clips at 1400 px"
        for target, shot in (
            ("#tensors-reading", "tensors_tab.png"),
            ("#tensor-name", "tensors_figure.png"),
        ):
            page.evaluate(f"() => document.querySelector({target!r}).scrollIntoView()")
            page.screenshot(path=str(ARTIFACTS / shot))
        # The table sorts by a column from its heading's menu: float16's zero share, largest first.
        heading = page.locator("#tensors-table th[title=float16]")
        heading.hover()
        heading.locator("button").last.click()
        page.get_by_text("Sort descending").first.click()
        column = 4  # tensor (name, then its shape and dtype), non-finite, bfloat16, float16
        cells = f"[...document.querySelectorAll({BODY_ROWS!r})].map(r => r.innerText)"
        page.wait_for_function(
            f"() => {{ const v = {cells}.map(t => parseFloat(t.split('\\n')[{column}]));"
            " return v.every((x, i) => i === 0 || v[i - 1] >= x); }"
        )
        other = next(name for name in tensors if name != chosen)
        page.locator("#tensor-name input").click()
        page.get_by_role("option", name=other, exact=True).click()
        page.wait_for_function(f"() => ({FIGURE_TITLE})()?.startsWith({other!r})")
    finally:
        page.close()
