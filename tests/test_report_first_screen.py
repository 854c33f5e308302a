"""The study report's first screen (``-m integration``): a real small study (scripted behaviour, tiny Llama for
activations and steering) rendered in headless Chromium at 1400x900, the three verdict lines visible without
scrolling (the folding of a long per-layer table is checked on hand-made report objects in tests/test_report.py).

    flock /tmp/cpu.lock .venv/bin/python -m pytest -q -p no:cacheprovider -m integration tests/test_report_first_screen.py
"""
from __future__ import annotations

import functools
import shutil
import time
from pathlib import Path

import pytest


# ------------------------------------------------------------------------------------------ headless Chromium
def _driver(width: int = 1400, height: int = 900):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, drv = "/usr/bin/chromium", "/usr/bin/chromedriver"
    if not (Path(binary).exists() and Path(drv).exists()):
        binary, drv = shutil.which("chromium") or "", shutil.which("chromedriver") or ""
    if not (binary and drv):
        pytest.fail("chromium and chromedriver are needed: apt-get install -y chromium chromium-driver")
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--hide-scrollbars",
              "--force-device-scale-factor=1"):
        opts.add_argument(a)
    opts.binary_location = binary
    d = webdriver.Chrome(service=Service(drv), options=opts)
    d.set_window_size(width, height)
    # the window's outer size includes no chrome in headless mode; make the viewport exactly width x height
    inner = d.execute_script("return [window.innerWidth, window.innerHeight]")
    d.set_window_size(width + (width - inner[0]), height + (height - inner[1]))
    return d


def verdicts_on_first_screen(driver, report: Path) -> list[dict]:
    """Open ``report`` and return each verdict line's text and box; asserts they are in the first screen."""
    driver.get(report.resolve().as_uri())
    for _ in range(100):
        if driver.execute_script("return document.readyState") == "complete":
            break
        time.sleep(0.05)
    vh, vw = driver.execute_script("return [window.innerHeight, window.innerWidth]")
    assert (vw, vh) == (1400, 900)
    lines = driver.execute_script(
        "return [...document.querySelectorAll('section.box li')].map(e => {const r = e.getBoundingClientRect();"
        " return {text: e.innerText, top: r.top, bottom: r.bottom, w: r.width, h: r.height}})")
    assert len(lines) == 3, lines
    for q, ln in zip(("Does the error propagate?", "Does the probe beat the metadata?",
                      "Does steering move the outcome?"), lines):
        assert ln["text"].startswith(q), ln
        assert ln["w"] > 0 and ln["h"] > 0 and 0 <= ln["top"] and ln["bottom"] <= vh, (ln, vh)
    assert driver.execute_script("return window.scrollY") == 0
    return lines


def screenshot_first_screen(report: Path, png: Path) -> None:
    """Save the first screen (1400x900) of ``report`` to ``png`` (how docs/report.png is made)."""
    d = _driver()
    try:
        verdicts_on_first_screen(d, report)
        d.save_screenshot(str(png))
    finally:
        d.quit()


@pytest.fixture
def fake_models(monkeypatch, tiny_lm):
    """Every stage loads the tiny Llama; the behavioural stage generates with the scripted model (as test_study)."""
    from fakes import scripted_generate

    import behavioural.protocol as protocol
    import loadbearing.engine.models as models

    monkeypatch.setattr(models, "load_model", lambda *a, **k: tiny_lm)
    monkeypatch.setattr(protocol, "generate", functools.partial(scripted_generate))
    return tiny_lm


FAST = ["--task", "s2_o5", "--max-examples", "16", "--folds", "2", "--k", "1", "--alphas", "0.5", "--max-cases", "2",
        "--random-seeds", "1", "--max-new-tokens", "16", "--quiet"]


@pytest.mark.integration
def test_small_study_report_first_screen_in_chromium(tmp_path, fake_models):
    from study.driver import main

    out = tmp_path / "study"
    assert main(["--output-dir", str(out), *FAST]) == 0
    html = (out / "report.html").read_text()
    assert html.index('class="box"') < html.index("<nav>")
    d = _driver()
    try:
        lines = verdicts_on_first_screen(d, out / "report.html")
    finally:
        d.quit()
    assert all("questions" in ln["text"] or "not run" in ln["text"] for ln in lines)
