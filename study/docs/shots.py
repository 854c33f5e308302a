"""The docs' screenshots, taken in headless Chromium (Debian's ``chromium`` and ``chromium-driver``, via Selenium).

    from study.docs.shots import screenshot
    screenshot(Path("runs/demo/report.html"), Path("docs/report.png"))                     # the first screen
    screenshot(Path("runs/demo/browse.html"), Path("docs/browser.png"), fragment=BROWSER_FRAGMENT, keys="j")

The same browser set-up as the report's and the trace browser's real-browser tests (``tests/test_report_first_screen.py``,
``tests/helpers/browser.py``): a 1400x900 viewport at device scale 1, so a screenshot is the first screen a reader
sees. The PNG is written atomically.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

from loadbearing.files import atomic_write_bytes
from study.docs.extract import DocsError

#: the trace browser opened on the perturbed continuations whose error propagated (its permalink grammar)
BROWSER_FRAGMENT = "f=condition:perturbed,label:C"

WIDTH, HEIGHT = 1400, 900


def _binaries() -> tuple[str, str]:
    for b, d in (("/usr/bin/chromium", "/usr/bin/chromedriver"),):
        if Path(b).exists() and Path(d).exists():
            return b, d
    b, d = shutil.which("chromium") or "", shutil.which("chromedriver") or ""
    if not (b and d):
        raise DocsError("chromium and chromedriver are needed for the screenshots: apt-get install -y chromium "
                        "chromium-driver (or pass --no-screenshots)")
    return b, d


def screenshot(html: Path, png: Path, *, fragment: str = "", keys: str = "", settle_s: float = 0.5) -> None:
    """Open ``html`` (a file) at 1400x900, type ``keys`` (the trace browser's ``j`` opens the next sample), and
    save what the first screen shows to ``png``."""
    if not html.is_file():
        raise DocsError(f"{html} is missing: the demo writes it (python -m study --resume DIR rewrites it)")
    binary, drv = _binaries()
    try:  # selenium is a dev dependency (pip install -e '.[dev]'), needed only here and by the browser tests
        from selenium import webdriver  # deferred: selenium is needed only for the screenshots
        from selenium.webdriver.chrome.service import Service  # deferred: selenium is needed only for the screenshots
        from selenium.webdriver.common.action_chains import ActionChains  # deferred: selenium is needed only for the screenshots
    except ImportError:
        raise DocsError("selenium is missing: pip install -e '.[dev]' (or pass --no-screenshots)") from None
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--hide-scrollbars",
              "--force-device-scale-factor=1", "--allow-file-access-from-files"):
        opts.add_argument(a)
    opts.binary_location = binary
    d = webdriver.Chrome(service=Service(drv), options=opts)
    try:
        d.set_window_size(WIDTH, HEIGHT)
        inner = d.execute_script("return [window.innerWidth, window.innerHeight]")
        d.set_window_size(WIDTH + (WIDTH - inner[0]), HEIGHT + (HEIGHT - inner[1]))
        d.get(html.resolve().as_uri() + (f"#{fragment}" if fragment else ""))
        for _ in range(100):
            if d.execute_script("return document.readyState") == "complete":
                break
            time.sleep(0.05)
        time.sleep(settle_s)  # the browser draws its list after load
        if keys:
            ActionChains(d).send_keys(keys).perform()
            time.sleep(settle_s)
        data = d.get_screenshot_as_png()
    finally:
        d.quit()
    atomic_write_bytes(png, data)


__all__ = ["BROWSER_FRAGMENT", "screenshot"]
