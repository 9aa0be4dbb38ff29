"""The HTML report in headless Chromium: renders, logs no console error (a script
the Content-Security-Policy refused would log one), the hostile names planted in
the trace execute nothing, hovering a mark shows its name and value, and the
timeline zooms and pans."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.actions.wheel_input import ScrollOrigin

from taxbreak.report.html import render_html

from . import browser
from .fake import XSS_KERNEL, XSS_OP, make_analysis
from .traces import write_planted

pytestmark = pytest.mark.browser

# Runs before any page script: a hostile name that executed would set this flag.
TRAP = "window.__fired = []; for (const f of ['alert','confirm','prompt']) " \
       "{ window[f] = (m) => { window.__fired.push(f + ':' + m); }; }"


@pytest.fixture(scope="module")
def driver():
    why = browser.missing()
    if why:
        pytest.fail(f"browser test needs headless Chromium: {why}")
    with browser.chromium() as d:
        d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": TRAP})
        yield d


def _report_from_run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    write_planted(run / "trace.json.gz", xss=True)
    (run / "manifest.json").write_text(json.dumps({"model": "gpt2", "batch_size": 1, "seq_len": 128,
                                                   "new_tokens": 1, "gpu": "NVIDIA H100", "cpu": XSS_OP}))
    out = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["report", str(run), "-o", str(out), "--floor-us", "4.5"])
    assert result.exit_code == 0, result.output
    return out


def _load(driver, page: Path, shot: Path) -> list[dict]:
    driver.get_log("browser")  # drop anything logged before this page
    driver.get(page.resolve().as_uri())
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(int(height) + 40, 8000))
    driver.save_screenshot(str(shot))
    keep = os.environ.get("TAXBREAK_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / shot.name).write_bytes(shot.read_bytes())
    return driver.get_log("browser")


def _assert_inert(driver) -> None:
    assert driver.execute_script("return window.__fired") == []
    assert driver.execute_script("return document.querySelectorAll('img, iframe, object').length") == 0
    assert driver.execute_script("return document.querySelectorAll('script').length") == 1  # the page's own


@pytest.mark.parametrize("source", ["planted-run", "hand-built"])
def test_report_renders_without_errors_and_names_stay_text(driver, tmp_path, source):
    if source == "planted-run":
        page = _report_from_run_dir(tmp_path)
    else:
        page = tmp_path / "fake.html"
        page.write_text(render_html(make_analysis(), title=XSS_KERNEL))
    shot = tmp_path / f"report-{source}.png"
    logs = _load(driver, page, shot)
    assert [e for e in logs if e["level"] in ("SEVERE", "WARNING")] == []
    _assert_inert(driver)
    text = driver.find_element("tag name", "body").text
    assert XSS_KERNEL in text  # shown as text, verbatim
    assert "onerror" in text
    assert driver.execute_script("return document.querySelectorAll('svg').length") >= 4
    assert shot.stat().st_size > 20_000  # a real rendering, not a blank page
    assert driver.execute_script("return document.body.scrollHeight") > 1500


def test_injected_markup_would_be_caught(driver, tmp_path):
    """The trap works: a page that does run a hostile name is detected."""
    page = tmp_path / "bad.html"
    page.write_text(f"<html><body>{XSS_KERNEL}</body></html>")
    _load(driver, page, tmp_path / "bad.png")
    assert driver.execute_script("return window.__fired") == ["alert:1"]


def _tip_after_hover(driver, element) -> str:
    ActionChains(driver).move_to_element(element).perform()
    return driver.execute_script("const t = document.getElementById('tip'); return t.hidden ? '' : t.textContent")


def test_hover_shows_name_and_value_of_every_kind_of_mark(driver, tmp_path):
    page = _report_from_run_dir(tmp_path)
    assert [e for e in _load(driver, page, tmp_path / "hover.png") if e["level"] in ("SEVERE", "WARNING")] == []
    # every mark's title became its hover text (none left for the browser's own tooltip to double)
    assert driver.execute_script("return document.querySelectorAll('svg.chart title').length") == 0
    assert driver.execute_script("return document.querySelectorAll('svg.chart [data-tip]').length") > 20
    bar = driver.find_element("css selector", "#components rect[data-key='launch_floor_us']")
    assert _tip_after_hover(driver, bar) == "decode (= all) · launch floor (ΔKT = N·T_sys): 13.50 µs"
    kernel = next(r for r in driver.find_elements("css selector", "#timeline rect.ev")
                  if (r.get_attribute("data-tip") or "").startswith("<script>"))
    assert _tip_after_hover(driver, kernel) == "<script>alert(1)</script> · 5.00 µs"  # text, not markup
    assert _tip_after_hover(driver, driver.find_element("tag name", "h1")) == ""  # off the marks: hidden
    _assert_inert(driver)


def test_timeline_zooms_on_the_wheel_pans_on_drag_and_resets(driver, tmp_path):
    page = _report_from_run_dir(tmp_path)
    _load(driver, page, tmp_path / "zoom.png")
    svg = driver.find_element("css selector", "svg.timeline")
    span = float(svg.get_attribute("data-span-us"))
    view = lambda: [float(v) for v in svg.get_attribute("data-view").split()]  # noqa: E731
    ticks = lambda: [t.text for t in svg.find_elements("css selector", ".tl-axis text")]  # noqa: E731
    assert view() == [0.0, span]
    before = ticks()
    plot = driver.find_element("css selector", "#timeline rect.idle")
    ActionChains(driver).scroll_from_origin(ScrollOrigin.from_element(plot), 0, -400).perform()
    driver.execute_script("return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    lo, hi = view()
    assert 0 <= lo < hi <= span and hi - lo < span / 2  # zoomed in around the pointer
    assert ticks() != before
    ActionChains(driver).click_and_hold(plot).move_by_offset(-60, 0).release().perform()
    driver.execute_script("return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    lo2, hi2 = view()
    assert hi2 - lo2 == pytest.approx(hi - lo, rel=1e-3) and lo2 > lo  # dragged left: later times
    ActionChains(driver).double_click(plot).perform()
    driver.execute_script("return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    assert view() == [0.0, span] and ticks() == before
    logs = driver.get_log("browser")
    assert [e for e in logs if e["level"] in ("SEVERE", "WARNING")] == []
