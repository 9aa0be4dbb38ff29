"""CPU model and single-thread max clock, each from its source."""
from __future__ import annotations

from taxbreak.capture.hostinfo import cpu_max_mhz, cpu_model, host_info

CPUINFO = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Gold 6538Y+\ncpu MHz\t\t: 2200.000\n"
LSCPU = "Architecture: x86_64\nCPU max MHz:                     4000.0000\nCPU min MHz: 800.0000\n"


def test_sysfs_max_freq_wins():
    assert cpu_max_mhz(cpufreq_khz="3800000\n", lscpu_text=LSCPU, cpuinfo_text=CPUINFO) == (
        3800.0, "sysfs:cpuinfo_max_freq")


def test_lscpu_then_proc_cpuinfo():
    assert cpu_max_mhz(cpufreq_khz="", lscpu_text=LSCPU, cpuinfo_text=CPUINFO) == (4000.0, "lscpu:CPU max MHz")
    mhz, source = cpu_max_mhz(cpufreq_khz="", lscpu_text="", cpuinfo_text=CPUINFO)
    assert mhz == 2200.0 and "current clock" in source


def test_no_source_is_unavailable_not_zero():
    assert cpu_max_mhz(cpufreq_khz="", lscpu_text="", cpuinfo_text="") == (None, "unavailable")


def test_cpu_model_from_cpuinfo():
    assert cpu_model(CPUINFO) == "Intel(R) Xeon(R) Gold 6538Y+"


def test_host_info_without_gpu_says_why():
    info = host_info()
    assert info["torch"] and info["cpu_count"] >= 1
    assert info["gpu_name"] is None and info["reason"] == "no CUDA device"


def test_free_memory_on_cpu_is_read_from_meminfo():
    from taxbreak.capture.hostinfo import free_memory_bytes

    free = free_memory_bytes("cpu")
    assert free is None or free > 0
