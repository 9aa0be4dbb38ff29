"""README.md's sample outputs are what scripts/readme_examples.py generates from the current code."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from conftest import CORPUS_MISSING, corpus_present

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("readme_examples", ROOT / "scripts" / "readme_examples.py")
examples = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(examples)

README_BLOCKS = examples.blocks((ROOT / "README.md").read_text(encoding="utf-8"))
SLOW = {"profile-cpu"}  # runs the tiny model under the profiler (~15 s on two cores)


def _case(name: str, needs_corpus: bool):
    marks = [pytest.mark.slow] if name in SLOW else []
    if needs_corpus:
        marks += [pytest.mark.corpus, pytest.mark.skipif(not corpus_present(), reason=CORPUS_MISSING)]
    return pytest.param(name, id=name, marks=marks)


def test_every_generator_has_its_block_and_every_block_its_generator():
    assert set(README_BLOCKS) == set(examples.EXAMPLES)


@pytest.mark.parametrize("name", [_case(n, corpus) for n, (corpus, _) in examples.EXAMPLES.items()])
def test_readme_block_is_what_the_script_generates(name):
    generated = examples.generate([name])[name]
    assert README_BLOCKS[name] == generated, f"README block {name!r} is stale: run python3 scripts/readme_examples.py"


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
