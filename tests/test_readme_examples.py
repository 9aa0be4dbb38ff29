"""The sample outputs and example numbers of README.md and docs/*.md are what
scripts/readme_examples.py generates from the current code: a block that drifts fails here."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from conftest import CORPUS_MISSING, corpus_present

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("readme_examples", ROOT / "scripts" / "readme_examples.py")
examples = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(examples)

BLOCKS = examples.all_blocks()  # name -> (file, body) over README.md and docs/*.md
SLOW = {"profile-cpu",  # runs the tiny model under the profiler (~15 s on two cores)
        "warmup-corpus"}  # analyses every trace of the corpus (~30 s)


def _case(name: str, needs_corpus: bool):
    marks = [pytest.mark.slow] if name in SLOW else []
    if needs_corpus:
        marks += [pytest.mark.corpus, pytest.mark.skipif(not corpus_present(), reason=CORPUS_MISSING)]
    return pytest.param(name, id=name, marks=marks)


def test_every_generator_has_its_block_and_every_block_its_generator():
    assert set(BLOCKS) == set(examples.EXAMPLES)
    assert {path.name for path, _ in BLOCKS.values()} >= {"README.md", "report.md", "method.md"}


@pytest.mark.parametrize("name", [_case(n, corpus) for n, (corpus, _) in examples.EXAMPLES.items()])
def test_block_is_what_the_script_generates(name):
    path, body = BLOCKS[name]
    generated = examples.generate([name])[name]
    assert body == generated, f"{path.name} block {name!r} is stale: run python3 scripts/readme_examples.py"


def test_a_drifted_number_is_found_and_named(tmp_path, monkeypatch):
    """--check reads every file: one changed digit in a docs block makes it exit 1 naming the block."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (tmp_path / "README.md").write_text("<!-- example:notebook -->\nok\n<!-- /example -->\n", encoding="utf-8")
    (docs / "method.md").write_text("x\n<!-- example:launch-residual -->\nHDBI 0.879\n<!-- /example -->\n",
                                    encoding="utf-8")
    monkeypatch.setattr(examples, "ROOT", tmp_path)
    monkeypatch.setattr(examples, "README", tmp_path / "README.md")
    monkeypatch.setattr(examples, "generate", lambda names=None: {"notebook": "ok\n", "launch-residual": "HDBI 0.856\n"})
    assert examples.main(["--check"]) == 1
    assert "0.879" in (docs / "method.md").read_text(encoding="utf-8")  # --check writes nothing
    assert examples.main([]) == 0 and "HDBI 0.856" in (docs / "method.md").read_text(encoding="utf-8")
    assert examples.main(["--check"]) == 0


def test_a_block_name_used_twice_is_an_error(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("<!-- example:notebook -->\na\n<!-- /example -->\n", encoding="utf-8")
    (tmp_path / "docs" / "x.md").write_text("<!-- example:notebook -->\nb\n<!-- /example -->\n", encoding="utf-8")
    monkeypatch.setattr(examples, "ROOT", tmp_path)
    monkeypatch.setattr(examples, "README", tmp_path / "README.md")
    with pytest.raises(SystemExit, match="is in README.md and x.md"):
        examples.all_blocks()


def test_rewrite_replaces_only_the_named_blocks():
    text = "a\n<!-- example:notebook -->\nold\n<!-- /example -->\nb\n<!-- example:profile-cpu -->\nkeep\n<!-- /example -->\n"
    new = examples.rewrite(text, {"notebook": "new\n"})
    assert new == text.replace("old\n", "new\n")
    assert examples.blocks(new) == {"notebook": "new\n", "profile-cpu": "keep\n"}
    with pytest.raises(SystemExit, match="no generator makes"):
        examples.rewrite("<!-- example:nope -->\nx\n<!-- /example -->\n", {})


def test_sections_picks_titled_parts_in_order():
    text = "Per phase\n| a |\nQueue wait x\nGPU idle by cause\n| b |\nWhat to do\n  • c\n"
    assert examples.sections(text, ("Per phase", "What to do"), examples.REPORT_TITLES) == \
        "Per phase\n| a |\n...\nWhat to do\n  • c"
    with pytest.raises(SystemExit, match="no section"):
        examples.sections(text, ("Diagnostics",), examples.REPORT_TITLES)


def test_readme_names_no_retired_diagnostic_codes():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "event.unknown_category" not in text and "n/m" not in text
