"""The export on the page, in Chromium: picking PyTorch and exporting shows the PyTorch script of
the page's settings, and the PyTorch note names the settings' dtype, scale and what differs;
after the settings change, the note and the script are marked stale, naming what changed, until
the next export. Screenshot: tests/artifacts/export_panel.png."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urljoin

import pytest

from browser_waits import headline, wait_for_new_headline

pytestmark = pytest.mark.slow

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


def test_the_page_exports_pytorch_with_its_note(browser, app_url):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(f"{app_url}?compute_dtype=float16&loss_scale=131072", timeout=120_000)
        page.wait_for_selector("#headline #mixed-new-loss", timeout=120_000)
        page.get_by_text("The code: rerun this step and run in JAX or PyTorch").click()
        page.locator("#framework").get_by_text("pytorch", exact=True).click()
        page.get_by_role("button", name="Export this step and training run as a script").click()
        # The code view draws only the lines in sight (its docstring's first lines name
        # GradScaler); the whole script is read from the file link beside it.
        page.wait_for_function(
            "() => (document.querySelector('#export-script .cm-content')?.innerText ?? '')"
            ".includes('torch.amp.GradScaler')",
            timeout=120_000,
        )
        link = page.locator("#export-file a[href]").first
        link.wait_for(timeout=60_000)
        script = page.request.get(urljoin(app_url, link.get_attribute("href"))).text()
        assert 'COMPUTE_DTYPE = "float16"' in script and "LOSS_SCALE = 2.0**17" in script
        assert "torch.amp.GradScaler(" in script and "growth_interval=PERIOD" in script
        page.wait_for_function(
            "() => document.querySelector('#export-pytorch')?.innerText.includes('torch.float16')",
            timeout=60_000,
        )
        note = page.locator("#export-pytorch").inner_text()
        assert "dtype=torch.float16" in note and "Not bit for bit" in note
        assert "Your S = 2^17 is above it" in note  # float16's largest is 65504
        # At S = 2^17 the page's float16 step overflows (the scale does not fit float16).
        assert "is nan: its scaled gradients overflowed" in note
        page.locator("#export-pytorch").scroll_into_view_if_needed()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "export_panel.png"))
    finally:
        page.close()


STATUS = "document.querySelector('#export-status')"


def _script_says(page, app_url: str, text: str) -> None:
    """Wait until the exported file (the code view draws only the lines in sight) holds
    ``text``."""
    for _ in range(120):
        link = page.locator("#export-file a[href]").first
        if (
            link.count()
            and text in page.request.get(urljoin(app_url, link.get_attribute("href"))).text()
        ):
            return
        page.wait_for_timeout(1000)
    raise AssertionError(f"the exported script never held {text!r}")


def test_the_note_and_script_are_marked_stale_when_dtype_and_lr_change(browser, app_url):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(app_url, timeout=120_000)
        page.wait_for_selector("#headline #mixed-new-loss", timeout=120_000)
        page.get_by_text("The code: rerun this step and run in JAX or PyTorch").click()
        export = page.get_by_role("button", name="Export this step and training run as a script")
        export.click()
        _script_says(page, app_url, 'COMPUTE_DTYPE = "bfloat16"')
        page.wait_for_function(
            "() => document.querySelector('#export-pytorch')?.innerText.includes(\"the page's\")",
            timeout=120_000,
        )
        assert not page.locator("#export-status").is_visible()  # made for the controls

        first = headline(page)
        page.locator("#compute_dtype").get_by_role("radio", name="float16", exact=True).check()
        second = wait_for_new_headline(page, first, 120_000)
        lr = page.locator("#lr input")
        lr.fill("0.05")
        lr.press("Enter")
        wait_for_new_headline(page, second, 120_000)
        page.wait_for_function(
            f"() => ({STATUS}?.innerText ?? '').includes('learning rate = 0.05')", timeout=60_000
        )
        banner = page.locator("#export-status").inner_text()
        # Both results name what they were made with and what the controls say now.
        for made in ("the PyTorch note", "the script"):
            held = "learning rate = 0.1, compute dtype = bfloat16"
            assert f"{made} below was made with {held}" in banner
        assert "The controls now say learning rate = 0.05, compute dtype = float16" in banner
        opacity = page.evaluate(
            "() => getComputedStyle(document.querySelector('#export-script')).opacity"
        )
        assert float(opacity) < 1, opacity  # dimmed under the banner

        export.click()
        _script_says(page, app_url, 'COMPUTE_DTYPE = "float16"')
        # Both made again for the controls: the banner is gone (Gradio drops a hidden one).
        page.wait_for_function(
            f"() => !{STATUS} || {STATUS}.offsetParent === null", timeout=120_000
        )
        page.wait_for_function(
            "() => document.querySelector('#export-pytorch')?.innerText.includes('float16')",
            timeout=60_000,
        )
        assert "bfloat16" not in page.locator("#export-pytorch").inner_text()
    finally:
        page.close()
