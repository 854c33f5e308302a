"""The trace browser in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by
Selenium), for tests/test_browse_chromium.py and tests/test_browse_scale.py."""
from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest


def chromium():
    for b, d in (("/usr/bin/chromium", "/usr/bin/chromedriver"),):
        if Path(b).exists() and Path(d).exists():
            return b, d
    b, d = shutil.which("chromium"), shutil.which("chromedriver")
    if not (b and d):
        pytest.fail("chromium and chromedriver are needed for the browser tests: apt-get update && "
                    "apt-get install -y chromium chromium-driver (make test and .ci/run install them)")
    return b, d


def start_driver():
    """A headless Chromium at 1600x1000 that reads local files and keeps the page's console log."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is missing: pip install -e '.[dev]'")
    binary, drv = chromium()
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1600,1000",
              "--disable-gpu", "--allow-file-access-from-files"):
        opts.add_argument(a)
    opts.binary_location = binary
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(drv), options=opts)


def open_page(driver, path: Path, frag: str = "") -> None:
    driver.get("about:blank")
    driver.get(path.resolve().as_uri() + frag)
    for _ in range(100):
        if driver.execute_script("return document.body && document.body.dataset.ready === '1'"):
            return
        time.sleep(0.05)
    raise AssertionError("the page did not become ready: " + repr(driver.get_log("browser")))


def visible(driver) -> int:
    return int(driver.execute_script("return document.getElementById('count').dataset.visible"))


def browser_errors(driver) -> list:
    return [e for e in driver.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]


def click_facet(driver, facet: str, value: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, f'#facets input[data-facet="{facet}"][data-value="{value}"]').click()
