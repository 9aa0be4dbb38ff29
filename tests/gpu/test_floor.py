"""Null-kernel floor: no-GPU path, driver error mapping, statistics, cache."""
from __future__ import annotations

import ctypes
import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from taxbreak.capture import floor as floor_mod
from taxbreak.capture.floor import (
    CACHE_FIELDS, FloorResult, floor_stats, launch_delays_ns, make_result, measure_floor,
    minimum_per_model, read_cache, require_cuda, write_cache,
)
from taxbreak.capture.ptx import NULL_KERNEL_NAME, NULL_KERNEL_PTX, null_kernel_image
from taxbreak.capture.ptx_launch import CudaDriver, cu_result_name, driver_error, load_libcuda
from taxbreak.cli.main import main
from taxbreak.trace.errors import ERROR_CODES, DeviceUnavailableError, TaxbreakError
from taxbreak.trace.paths import floor_cache_path

from .planted import kernel, launch, tables

NO_GPU = not torch.cuda.is_available()


# --- no GPU -----------------------------------------------------------------

@pytest.mark.skipif(not NO_GPU, reason="checks the no-GPU path")
def test_require_cuda_raises_device_unavailable():
    with pytest.raises(DeviceUnavailableError) as info:
        require_cuda()
    assert info.value.code == "device.unavailable"
    assert info.value.hint


@pytest.mark.skipif(not NO_GPU, reason="checks the no-GPU path")
def test_measure_floor_checks_the_device_before_anything_else(monkeypatch):
    # measure_floor must not touch libcuda or the readers before require_cuda
    monkeypatch.setattr("taxbreak.capture.ptx_launch.load_libcuda", lambda: pytest.fail("libcuda touched"))
    with pytest.raises(TaxbreakError) as info:
        measure_floor(warmup=1, runs=1)
    assert info.value.code == "device.unavailable"


@pytest.mark.skipif(not NO_GPU, reason="checks the no-GPU path")
def test_cli_floor_without_gpu_is_one_line_and_exit_1():
    result = CliRunner().invoke(main, ["floor", "--runs", "10"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines[0] == "error[device.unavailable]: no CUDA device is available"
    assert lines[1].startswith("  hint: ")
    assert "Traceback" not in result.output


def test_cli_floor_usage_error_exits_2():
    result = CliRunner().invoke(main, ["floor", "--runs", "0"])
    assert result.exit_code == 2


def test_error_codes_are_registered():
    assert "device.unavailable" in ERROR_CODES and "device.driver" in ERROR_CODES


# --- PTX and the driver binding ---------------------------------------------

def test_ptx_is_an_old_parameterless_entry():
    assert ".version 7.0" in NULL_KERNEL_PTX and ".target sm_70" in NULL_KERNEL_PTX
    assert f".entry {NULL_KERNEL_NAME}()" in NULL_KERNEL_PTX
    assert null_kernel_image().endswith(b"ret;\n}\n\0")


class FakeLib:
    """Stands in for libcuda: every call returns the code planted for it."""

    def __init__(self, codes=None, names=True):
        self.codes = codes or {}
        self.calls = []
        if not names:
            self.cuGetErrorName = None

    def __getattr__(self, name):
        if not name.startswith("cu"):
            raise AttributeError(name)

        def call(*args):
            self.calls.append(name)
            return self.codes.get(name, 0)

        return call


def test_driver_error_maps_cuda_result_names():
    lib = FakeLib({"cuModuleLoadData": 218})
    lib.__dict__["cuGetErrorName"] = lambda code, ptr: 1  # the driver cannot name it: use the table
    drv = CudaDriver(lib)
    with pytest.raises(DeviceUnavailableError) as info:
        drv.load_null_kernel()
    err = info.value
    assert err.code == "device.driver"
    assert err.message == "cuModuleLoadData failed with CUDA_ERROR_INVALID_PTX"
    assert err.location == "CUresult 218"
    assert "PTX" in err.hint


def test_driver_error_prefers_the_driver_own_name():
    def get_name(code, ptr):
        ctypes.cast(ptr, ctypes.POINTER(ctypes.c_char_p))[0] = b"CUDA_ERROR_FROM_DRIVER"
        return 0

    lib = FakeLib()
    lib.__dict__["cuGetErrorName"] = get_name
    assert cu_result_name(100, lib) == "CUDA_ERROR_FROM_DRIVER"


@pytest.mark.parametrize("code,name", [(100, "CUDA_ERROR_NO_DEVICE"), (222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"),
                                       (12345, "CUresult 12345")])
def test_cu_result_name_table(code, name):
    assert cu_result_name(code) == name
    assert driver_error("cuInit", code).one_line() == f"error[device.driver]: cuInit failed with {name} (CUresult {code})"


def test_launch_sequence_and_first_failure_stops():
    lib = FakeLib({"cuLaunchKernel": 719})
    drv = CudaDriver(lib)
    drv.init()
    func = drv.load_null_kernel()
    with pytest.raises(DeviceUnavailableError, match="CUDA_ERROR_LAUNCH_FAILED"):
        drv.launch_null(func)
    # the failed launch is named by asking the driver (cuGetErrorName), nothing else runs
    assert lib.calls == ["cuInit", "cuModuleLoadData", "cuModuleGetFunction", "cuLaunchKernel", "cuGetErrorName"]


def test_missing_libcuda_is_device_driver(monkeypatch):
    def no_lib(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", no_lib)
    with pytest.raises(DeviceUnavailableError) as info:
        load_libcuda()
    assert info.value.code == "device.driver"
    assert "libcuda" in info.value.message


# --- statistics on a planted trace ------------------------------------------

def planted_floor_tables(delays_ns, other_kernel=True):
    api, dev = [], []
    for i, delay in enumerate(delays_ns):
        start = 1_000_000 + i * 50_000
        api.append(launch(i + 1, start, domain="cuda_driver", name="cuLaunchKernel"))
        dev.append(kernel(i + 1, start + delay, NULL_KERNEL_NAME, dur_ns=1000, block=(1, 1, 1)))
    if other_kernel:  # a kernel of another name (and one without launch) must not count
        api.append(launch(999, 10, name="cudaLaunchKernel"))
        dev.append(kernel(999, 20_000, "other_kernel"))
        dev.append(kernel(1000, 30_000, NULL_KERNEL_NAME))
    return tables(api=api, device=dev)


def test_launch_delays_join_on_process_and_correlation():
    delays = [4400, 4500, 4600, 5000, 4500]
    got = launch_delays_ns(planted_floor_tables(delays))
    assert got.tolist() == delays


def test_floor_stats_exact_values():
    delays = np.array([4000, 4500, 5000, 4500, 6000, 3000])
    stats = floor_stats(delays)
    assert stats["floor_us"] == pytest.approx(4.5)
    assert stats["p50_us"] == pytest.approx(4.5)
    assert stats["min_us"] == pytest.approx(3.0) and stats["max_us"] == pytest.approx(6.0)
    assert stats["std_us"] == pytest.approx(np.std(delays / 1000.0))
    assert stats["p95_us"] == pytest.approx(np.percentile(delays / 1000.0, 95))
    assert stats["samples"] == 6


def test_floor_stats_keeps_the_last_runs_samples():
    stats = floor_stats(np.array([100_000, 4000, 5000]), runs=2)
    assert stats["samples"] == 2 and stats["floor_us"] == pytest.approx(4.5)


def test_floor_stats_without_samples_is_a_typed_error():
    with pytest.raises(DeviceUnavailableError) as info:
        floor_stats(np.array([], dtype=np.int64))
    assert info.value.code == "device.driver"


def test_floor_from_planted_trace_end_to_end():
    rng = np.random.default_rng(7)
    delays = (4500 + rng.normal(0, 150, 200)).astype(np.int64)
    stats = floor_stats(launch_delays_ns(planted_floor_tables(delays)), runs=150)
    assert stats["samples"] == 150
    assert stats["floor_us"] == pytest.approx(delays[-150:].mean() / 1000.0)


# --- cache ------------------------------------------------------------------

def _result(name="NVIDIA H200", version="12090", mean=4.41):
    return make_result(name, version, {"floor_us": mean, "p50_us": 4.4, "p95_us": 4.9, "min_us": 4.1,
                                       "max_us": 6.0, "std_us": 0.2, "samples": 150})


def test_cache_round_trip_has_exactly_the_documented_fields():
    result = _result()
    path = write_cache(result)
    assert path == floor_cache_path("NVIDIA H200", "12090")
    data = json.loads(path.read_text())
    assert tuple(sorted(data)) == tuple(sorted(CACHE_FIELDS))
    assert read_cache("NVIDIA H200", "12090") == result
    assert read_cache("NVIDIA H100", "12090") is None


def test_cache_is_read_by_the_decomposer_as_measured():
    from taxbreak.decompose.floor import resolve_floor

    write_cache(_result(mean=4.41))
    trace = planted_floor_tables([4500, 4600], other_kernel=False)
    trace.meta.extra = {"cuda_driver_version": 12090}  # as Kineto records it
    floor = resolve_floor(trace)
    assert floor.source == "measured" and floor.floor_us == pytest.approx(4.41)


def test_corrupt_cache_entry_is_cache_corrupt():
    path = floor_cache_path("NVIDIA H200", "12090")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"gpu_name": "NVIDIA H200"')
    with pytest.raises(TaxbreakError) as info:
        read_cache("NVIDIA H200", "12090")
    assert info.value.code == "cache.corrupt" and info.value.path == str(path)


def test_minimum_per_model_keeps_the_lowest_mean():
    results = [_result(mean=4.6), _result(mean=4.4), _result(name="NVIDIA H100", mean=4.8)]
    best = {r.gpu_name: r.floor_us for r in minimum_per_model(results)}
    assert best == {"NVIDIA H200": 4.4, "NVIDIA H100": 4.8}


def test_measure_floor_with_a_simulated_device(monkeypatch, tmp_path):
    """The orchestration (per GPU, minimum, cache) with the device parts replaced."""
    delays = {0: [4700, 4800, 4900], 1: [4300, 4400, 4500]}
    monkeypatch.setattr(floor_mod, "require_cuda", lambda: 2)

    def fake_profile(index, warmup, runs, trace_path):
        trace_path.write_text(json.dumps({"index": index}))
        return "NVIDIA H200", "12090"

    monkeypatch.setattr(floor_mod, "profile_null_launches", fake_profile)
    monkeypatch.setattr("taxbreak.readers.load_trace",
                        lambda p, **kw: planted_floor_tables(delays[json.loads(p.read_text())["index"]], False),
                        raising=False)
    results = measure_floor(warmup=0, runs=3, keep_trace=tmp_path)
    assert len(results) == 1 and results[0].floor_us == pytest.approx(4.4)
    assert read_cache("NVIDIA H200", "12090").floor_us == pytest.approx(4.4)
    assert isinstance(results[0], FloorResult)
