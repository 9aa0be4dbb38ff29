"""The JUnit writer: well-formed for any limit name or detail, counts and ``time`` attributes."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from hypothesis import given, settings
from hypothesis import strategies as st

from taxbreak.report.check import CheckResult, Outcome
from taxbreak.report.check_render import render_junit
from taxbreak.report.sanitize import xml_text

HOSTILE = 'a"b\'c<d>&e]]>f\x00g\x1bh\x7fi\ud800j\ufffek\u202el\nm'


def outcomes(name: str = "hdbi", detail: str = "") -> list[Outcome]:
    return [Outcome("limit", "all", name, ">= 0.5", 0.4, "fail", detail),
            Outcome("limit", "decode", "kernels", "<= 10", None, "not_measured", "not measured in this run"),
            Outcome("limit", "prefill", "hdbi", ">= 0.1", 0.2, "pass"),
            Outcome("regression", "all", "orchestration_us", "worse by <= 5 %", None, "skipped", detail)]


def test_counts_and_times_on_suite_and_cases():
    root = ET.fromstring(render_junit(CheckResult(outcomes()), time_s=1.23456))
    suite = root.find("testsuite")
    for element in (root, suite):
        assert (element.get("tests"), element.get("failures"), element.get("errors"), element.get("skipped")) == \
            ("4", "1", "1", "1")
        assert element.get("time") == "1.235"
    cases = suite.findall("testcase")
    assert [c.get("time") for c in cases] == ["0.000"] * 4
    assert [c[0].tag if len(c) else None for c in cases] == ["failure", "error", None, "skipped"]
    assert cases[0].get("name") == "all.hdbi >= 0.5" and cases[0].get("classname") == "taxbreak.limit.all"
    assert cases[0][0].get("type") == "fail" and cases[0][0].text.startswith("all.hdbi: expected >= 0.5, actual 0.4")


def test_time_defaults_to_zero():
    assert ET.fromstring(render_junit(CheckResult(outcomes()))).get("time") == "0.000"


def test_hostile_names_stay_well_formed_with_controls_shown_as_escapes():
    xml = render_junit(CheckResult(outcomes(HOSTILE, HOSTILE)), suite_name=HOSTILE)
    root = ET.fromstring(xml)
    # controls, a lone surrogate and the bidi override are shown as escapes (report/sanitize.py), U+FFFE
    # (no XML 1.0 form at all) is removed; the newline is text XML holds
    kept = "a\"b'c<d>&e]]>f\\x00g\\x1bh\\x7fi\\ud800jk\\u202el\nm"
    assert xml_text(HOSTILE) == kept
    assert root.get("name") == kept
    case = root.find("testsuite").find("testcase")
    assert case.get("name") == f"all.{kept} >= 0.5"
    assert case[0].text.endswith(kept)


@settings(max_examples=60, deadline=None)
@given(st.text(), st.text())
def test_any_text_parses_back(name, detail):
    root = ET.fromstring(render_junit(CheckResult(outcomes(name, detail)), suite_name=name))
    assert root.find("testsuite").find("testcase").get("name") == f"all.{xml_text(name)} >= 0.5"
    assert root.get("name") == xml_text(name)
