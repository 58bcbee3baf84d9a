"""The export on the page, in Chromium: picking PyTorch and exporting shows the PyTorch script of
the page's settings, and the PyTorch note names the settings' dtype, scale and what differs.
Screenshot: tests/artifacts/export_panel.png."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urljoin

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
