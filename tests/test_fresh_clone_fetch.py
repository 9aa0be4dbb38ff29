"""scripts/fetch-test-traces.sh, offline: a file:// mirror laid out like
raw.githubusercontent.com (<owner>/<repo>/<commit>/<path>) stands in for GitHub."""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "fetch-test-traces.sh"
COMMIT = "0" * 40


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _pinned(env=None) -> list[list[str]]:
    out = subprocess.run(["bash", str(SCRIPT), "--list"], capture_output=True, text=True, check=True, env=env)
    return [line.split() for line in out.stdout.splitlines() if line.strip()]


def _fetch(dest: Path, mirror: Path, **extra) -> subprocess.CompletedProcess:
    env = dict(os.environ, TAXBREAK_SHARED_TRACES=str(dest), TAXBREAK_TRACES_BASE_URL=f"file://{mirror}", **extra)
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=120)


def _plant(mirror: Path, repo: str, path: str, data: bytes) -> str:
    target = mirror / repo / COMMIT / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def test_planted_mirror_fetches_verifies_and_keeps(tmp_path):
    mirror, dest = tmp_path / "mirror", tmp_path / "traces"
    good = _plant(mirror, "o/r", "tests/data/good.json.gz", b"good bytes")
    _plant(mirror, "o/r", "tests/data/bad.sqlite", b"tampered")
    _plant(mirror, "o/r", "LICENSE", b"MIT\n")
    listing = tmp_path / "list.txt"
    listing.write_text(f"r o/r {COMMIT} tests/data/good.json.gz {good}\n"
                       f"r o/r {COMMIT} tests/data/bad.sqlite {'a' * 64}\n"
                       f"r o/r {COMMIT} tests/data/absent.json {'b' * 64}\n"
                       f"r o/r {COMMIT} LICENSE -\n")
    first = _fetch(dest, mirror, TAXBREAK_TRACES_LIST=str(listing))
    assert first.returncode == 1
    assert (dest / "r/tests/data/good.json.gz").read_bytes() == b"good bytes"
    assert (dest / "r/LICENSE.upstream").read_bytes() == b"MIT\n"
    assert not (dest / "r/tests/data/bad.sqlite").exists() and not list(dest.rglob("*.part"))
    assert f"MISMATCH  r/tests/data/bad.sqlite: sha256 {hashlib.sha256(b'tampered').hexdigest()}" in first.stderr
    assert "FAILED    r/tests/data/absent.json" in first.stderr
    assert "error: 2 file(s) not fetched or not verified" in first.stderr

    shutil.rmtree(mirror)  # a second run finds the verified files in place and fetches nothing
    listing.write_text(f"r o/r {COMMIT} tests/data/good.json.gz {good}\nr o/r {COMMIT} LICENSE -\n")
    second = _fetch(dest, mirror, TAXBREAK_TRACES_LIST=str(listing))
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[:2] == ["present   r/tests/data/good.json.gz", "present   r/LICENSE.upstream"]


def test_a_file_changed_after_fetching_is_fetched_again(tmp_path):
    mirror, dest = tmp_path / "mirror", tmp_path / "traces"
    sha = _plant(mirror, "o/r", "t.json", b"{}")
    listing = tmp_path / "list.txt"
    listing.write_text(f"r o/r {COMMIT} t.json {sha}\n")
    (dest / "r").mkdir(parents=True)
    (dest / "r/t.json").write_bytes(b"stale")
    run = _fetch(dest, mirror, TAXBREAK_TRACES_LIST=str(listing))
    assert run.returncode == 0 and "fetched   r/t.json" in run.stdout
    assert (dest / "r/t.json").read_bytes() == b"{}"


def _manifest_checksums(manifest: Path) -> dict[str, tuple[str, str]]:
    """MANIFEST.md's checksum table: copy path -> (orig_sha256, sha256 of the copy)."""
    rows = re.findall(r"^\| `([^`]+)` \| \d+ \| `([0-9a-f]{64})` \| `([0-9a-f]{64})` \|$",
                      manifest.read_text(), flags=re.M)
    return {path: (orig, copy) for path, orig, copy in rows}


def test_pinned_list_is_the_corpus_manifest(shared_traces):
    checksums = _manifest_checksums(shared_traces / "MANIFEST.md")
    pinned = {f"{folder}/{path}": sha for folder, _, _, path, sha in _pinned() if path != "LICENSE"}
    assert len(checksums) == 21 and pinned == {path: orig for path, (orig, _) in checksums.items()}


def test_mirror_of_the_corpus_verifies_all_but_the_redacted_copies(shared_traces, tmp_path):
    """Laid out from the corpus copy, the unredacted files verify against their
    upstream checksums; the four redacted SQLite copies must be refused."""
    mirror, dest = tmp_path / "mirror", tmp_path / "traces"
    for folder, repo, commit, path, _ in _pinned():
        source = shared_traces / folder / ("LICENSE.upstream" if path == "LICENSE" else path)
        (mirror / repo / commit / path).parent.mkdir(parents=True, exist_ok=True)
        (mirror / repo / commit / path).symlink_to(source)
    run = _fetch(dest, mirror)
    assert run.returncode == 1
    refused = sorted(re.findall(r"^MISMATCH  (\S+):", run.stderr, flags=re.M))
    redacted = sorted(p for p, (orig, copy) in _manifest_checksums(shared_traces / "MANIFEST.md").items()
                      if orig != copy)
    assert refused == redacted and len(redacted) == 4
    fetched = [line.split()[1] for line in run.stdout.splitlines() if line.startswith("fetched")]
    assert len(fetched) == 20  # 17 traces + 3 licences
    for rel in fetched:
        if not rel.endswith("LICENSE.upstream"):
            assert _sha(dest / rel) == _sha(shared_traces / rel)


def test_docs_list_every_pinned_file_with_its_checksum():
    text = (REPO_ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    for folder, repo, commit, path, sha in _pinned():
        assert repo in text and commit in text
        if path != "LICENSE":
            assert f"`{path}`" in text and sha in text, path
