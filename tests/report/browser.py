"""Headless Chromium driven by selenium with explicit binary and driver paths
(selenium-manager never runs: nothing is downloaded)."""
from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = os.environ.get("TAXBREAK_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("TAXBREAK_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--window-size=1280,2000")


def missing() -> str | None:
    """Why the browser cannot run here, or None."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists():
            return f"{path} not found (install the chromium and chromium-driver packages)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "the selenium package is not installed"
    return None


@contextmanager
def chromium():
    """A selenium Chrome driver on a fresh profile directory, closed afterwards."""
    os.environ["SE_OFFLINE"] = "true"  # belt and braces: selenium-manager may not go online
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="taxbreak-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
