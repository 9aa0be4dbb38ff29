"""Capture fallbacks for a machine without the ``nvtx`` package or isal (the GPU
image has neither): the ranges keep their names, the manifest says what was used."""
from __future__ import annotations

import contextlib

import pytest

from taxbreak.capture import manifest, markers


class _RecordingRange:
    """Stands in for ``torch.cuda.nvtx.range``: remembers each range's name and nesting."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def __call__(self, name: str):
        @contextlib.contextmanager
        def _range():
            self.events.append(f"push {name}")
            yield
            self.events.append(f"pop {name}")

        return _range()


def _no_nvtx_package(name: str):
    raise ImportError(f"No module named {name!r}")


def test_nvtx_package_is_preferred():
    class FakeNvtx:
        annotate = object()

    backend, factory = markers.pick_nvtx(import_module=lambda name: FakeNvtx, torch_range=lambda: None)
    assert (backend, factory) == ("nvtx", FakeNvtx.annotate)


def test_without_nvtx_package_ranges_go_through_torch_with_the_same_names(monkeypatch):
    recorder = _RecordingRange()
    backend, factory = markers.pick_nvtx(import_module=_no_nvtx_package, torch_range=lambda: recorder)
    assert backend == "torch.cuda.nvtx"
    monkeypatch.setattr(markers, "_nvtx_range", factory)
    with markers.run(index=7):
        with markers.step("prefill", index=0) as prefill_name:
            pass
        with markers.step("decode", index=1):
            pass
    assert prefill_name == "taxbreak/prefill/0"
    assert recorder.events == ["push taxbreak/run/7", "push taxbreak/prefill/0", "pop taxbreak/prefill/0",
                               "push taxbreak/decode/1", "pop taxbreak/decode/1", "pop taxbreak/run/7"]


def test_without_any_nvtx_the_ranges_are_still_record_function_ranges(monkeypatch):
    # record_function is replaced rather than run under a profiler: starting Kineto here
    # would fix its log level for every later test in this process
    backend, factory = markers.pick_nvtx(import_module=_no_nvtx_package, torch_range=lambda: None)
    assert backend == "none"
    recorder = _RecordingRange()
    monkeypatch.setattr(markers, "_nvtx_range", factory)
    monkeypatch.setattr(markers, "record_function", recorder)
    with markers.step("decode", index=5) as name:
        pass
    assert name == "taxbreak/decode/5"
    assert recorder.events == ["push taxbreak/decode/5", "pop taxbreak/decode/5"]


def test_torch_range_is_none_on_a_cpu_build():
    torch = pytest.importorskip("torch")
    if torch.version.cuda is not None:
        pytest.skip("this torch is a CUDA build: it carries NVTX")
    assert markers._torch_nvtx_range() is None


def test_manifest_records_the_libraries_in_use(monkeypatch):
    from taxbreak.readers import kineto_stream

    libs = manifest.capture_libraries()
    assert libs["nvtx"] == markers.NVTX_BACKEND
    assert libs["inflate"] == ("isal" if kineto_stream.inflate_lib.__name__.startswith("isal") else "zlib")

    import zlib

    monkeypatch.setattr(kineto_stream, "inflate_lib", zlib)
    monkeypatch.setattr(markers, "NVTX_BACKEND", "torch.cuda.nvtx")
    assert manifest.capture_libraries() == {"nvtx": "torch.cuda.nvtx", "inflate": "zlib"}


def test_every_manifest_kind_carries_the_libraries():
    from taxbreak.capture.hostinfo import host_info

    assert manifest.host_fields(host_info())["libraries"] == manifest.capture_libraries()
