"""Worker count from CPUs and memory; decompressed size from the gzip trailer."""
from __future__ import annotations

import gzip

from taxbreak.scale import workers
from taxbreak.scale.discover import uncompressed_bytes


def test_uncompressed_size_comes_from_the_gzip_trailer(tmp_path):
    raw = b'{"traceEvents": [' + b'{"ph": "X"},' * 5000 + b"{}]}"
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(raw))
    plain = tmp_path / "t.json"
    plain.write_bytes(raw)
    assert uncompressed_bytes(gz) == len(raw)
    assert uncompressed_bytes(plain) == len(raw)
    fake_gz = tmp_path / "not.json.gz"
    fake_gz.write_bytes(b"plain text, not gzip at all")
    assert uncompressed_bytes(fake_gz) == fake_gz.stat().st_size


def test_worker_count_is_bounded_by_memory_cpus_and_files(tmp_path, monkeypatch):
    paths = []
    for i in range(6):
        p = tmp_path / f"r{i}.json"
        p.write_bytes(b" " * 1000)
        paths.append(p)
    monkeypatch.setattr(workers, "usable_cpus", lambda: 4)
    peak = workers.estimate_peak_bytes(paths[0])
    assert peak == workers.BASE_RSS_BYTES + int(workers.RSS_PER_JSON_BYTE * 1000)
    plenty = int(100 * peak / workers.MEMORY_HEADROOM)
    assert workers.plan_workers(paths, available_bytes=plenty) == 4  # CPUs
    assert workers.plan_workers(paths[:2], available_bytes=plenty) == 2  # files
    two_fit = int(2.5 * peak / workers.MEMORY_HEADROOM)
    assert workers.plan_workers(paths, available_bytes=two_fit) == 2  # memory
    assert workers.plan_workers(paths, available_bytes=0) == 1  # never fewer than one
    assert workers.plan_workers(paths, workers=16) == 6  # explicit, capped by files


def test_available_memory_is_positive():
    assert workers.available_memory_bytes() > 0
    assert workers.usable_cpus() >= 1
