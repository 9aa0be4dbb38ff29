"""Names from a trace cannot act on the terminal: control characters, escape
sequences (OSC 52 clipboard, titles, screen clears, hyperlinks), bidi overrides
and rich markup print as visible, inert text in analyze, info, diff, error and
skipped lines."""
from __future__ import annotations

import io
import json
import re

from click.testing import CliRunner
from hypothesis import assume, given
from hypothesis import strategies as st
from rich.console import Console

from taxbreak.cli.main import main
from taxbreak.report.console_text import markup_text
from taxbreak.trace.text import is_safe, json_bytes_for_terminal, json_for_terminal, safe_text

from .traces import LIBRARY, NATIVE_1, write_planted

OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"
TITLE = "\x1b]0;owned\x1b\\"
CLEAR = "\x1b[2J\x1b[H"
LINK = "\x1b]8;;https://example.com\x1b\\click\x1b]8;;\x1b\\"
C1_CSI = "\x9b31m"
BIDI = "\u202egpj.exe\u202c\u2066x\u2069"
HOSTILE = f"evil{OSC52}{TITLE}{CLEAR}{LINK}{C1_CSI}\x7f{BIDI}[bold red]X[/bold red]"
# what must never reach a terminal: C0 (but newline/tab as layout), DEL, C1, bidi formatting
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def test_safe_text_escapes_every_class():
    assert safe_text("a\x1bb") == "a\\x1bb"
    assert safe_text("\x00\x07\x08\t\n\r\x7f\x80\x9b\x9f") == "\\x00\\x07\\x08\\x09\\x0a\\x0d\\x7f\\x80\\x9b\\x9f"
    assert safe_text("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069") == \
        "\\u202a\\u202b\\u202c\\u202d\\u202e\\u2066\\u2067\\u2068\\u2069"
    assert safe_text("\u200e\u200f\u061c\u2028\u2029") == "\\u200e\\u200f\\u061c\\u2028\\u2029"
    assert safe_text("\udcff") == "\\udcff"
    assert safe_text("aten::mm · µs — 日本 ∞ é") == "aten::mm · µs — 日本 ∞ é"
    assert safe_text(3) == "3"


def test_markup_is_escaped():
    assert markup_text("[bold]x[/bold]") == "\\[bold]x\\[/bold]"
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(markup_text("[link=https://x]a\x1b[1m[/link] [bold]b"))
    assert out.getvalue() == "[link=https://x]a\\x1b[1m[/link] [bold]b\n"


@given(st.text())
def test_safe_text_leaves_nothing_a_terminal_acts_on(text):
    out = safe_text(text)
    assert not FORBIDDEN.search(out.replace("\n", "").replace("\t", "")) and "\n" not in out and "\t" not in out
    assert is_safe(out)
    out.encode("utf-8")  # no lone surrogate left: printable in any UTF-8 terminal


@given(st.text())
def test_safe_text_changes_only_what_it_must(text):
    if not FORBIDDEN.search(text) and not re.search("[\n\t\u2028\u2029\ud800-\udfff]", text):
        assert safe_text(text) == text


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=20))
def test_json_for_terminal_keeps_the_same_values(value):
    text = json.dumps(value, indent=1, ensure_ascii=False)
    out = json_for_terminal(text)
    assert json.loads(out) == value
    assert not FORBIDDEN.search(out)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=20))
def test_json_bytes_for_terminal_is_the_text_version_as_utf8(value):
    text = json.dumps(value, indent=1, ensure_ascii=False)
    assume(not re.search("[\ud800-\udfff]", text))  # lone surrogates: not UTF-8 an encoder writes
    data = text.encode()
    assert json_bytes_for_terminal(data) == json_for_terminal(text).encode()


def test_ascii_json_bytes_are_passed_through_uncopied():
    data = b'{"name": "aten::mm"}'
    assert json_bytes_for_terminal(data) is data
    assert json_bytes_for_terminal(b'{"name": "a\x7fb"}') == b'{"name": "a\\u007fb"}'


def _hostile_trace(path):
    doc = json.loads(write_planted(path).read_text())
    for event in doc["traceEvents"]:
        if event.get("name") == "aten::addmm":
            event["name"] = "aten::" + HOSTILE
        elif event.get("name") in (NATIVE_1, LIBRARY):
            event["name"] = event["name"] + HOSTILE
    path.write_text(json.dumps(doc))
    return path


def _assert_inert(text: str) -> None:
    assert not FORBIDDEN.search(text), repr(FORBIDDEN.search(text))


def test_analyze_prints_hostile_names_inert(tmp_path):
    trace = _hostile_trace(tmp_path / "hostile.json")
    result = CliRunner(env={"COLUMNS": "600"}).invoke(main, ["analyze", str(trace), "--floor-us", "4.5"], catch_exceptions=False)
    assert result.exit_code == 0
    _assert_inert(result.output)
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in result.output and "\\u202e" in result.output
    assert "[bold red]X[/bold red]" in result.output  # markup printed literally, not applied


def test_analyze_json_keeps_names_exact_and_inert(tmp_path):
    trace = _hostile_trace(tmp_path / "hostile.json")
    result = CliRunner(env={"COLUMNS": "600"}).invoke(main, ["analyze", str(trace), "--json", "--floor-us", "4.5"])
    assert result.exit_code == 0
    _assert_inert(result.stdout)
    assert json.loads(result.stdout)["all"]["kernels"] == 3


def test_info_prints_hostile_names_inert(tmp_path):
    doc = json.loads(_hostile_trace(tmp_path / "hostile.json").read_text())
    doc["deviceProperties"][0]["name"] = "H100" + HOSTILE
    trace = tmp_path / "info.json"
    trace.write_text(json.dumps(doc))
    result = CliRunner(env={"COLUMNS": "600"}).invoke(main, ["info", str(trace)])
    assert result.exit_code == 0
    _assert_inert(result.output)
    assert "[bold red]X[/bold red]" in result.output


def test_diff_prints_hostile_names_inert(tmp_path):
    base = write_planted(tmp_path / "base.json")
    new = _hostile_trace(tmp_path / "new.json")
    result = CliRunner(env={"COLUMNS": "600"}).invoke(main, ["diff", str(base), str(new), "--floor-us", "4.5"])
    assert result.exit_code == 0, result.output
    _assert_inert(result.output)
    assert "\\x1b" in result.output


def test_error_line_of_a_hostile_path_is_inert(tmp_path):
    result = CliRunner(env={"COLUMNS": "600"}).invoke(main, ["info", str(tmp_path / f"missing{OSC52}{BIDI}.json")])
    assert result.exit_code == 1
    _assert_inert(result.output)
    assert result.stderr.startswith("error[input.not_found]: ") and "\\x1b]52" in result.stderr


def test_skipped_line_of_a_hostile_file_name_is_inert(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    write_planted(folder / "good.json")
    (folder / f"bad{CLEAR}{BIDI}.json").write_text('{"traceEvents": [')
    result = CliRunner(env={"COLUMNS": "600"}).invoke(main, ["analyze", str(folder), "--on-error", "skip", "--floor-us", "4.5",
                                       "--workers", "1"])
    _assert_inert(result.output)
    assert "skipped" in result.stderr and "\\x1b[2J" in result.stderr
