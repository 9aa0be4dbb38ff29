"""A minimal ctypes binding of the CUDA driver API, enough to launch the null kernel.

Only the calls the floor needs: ``cuInit``, ``cuDeviceGetCount``,
``cuDeviceGet``, ``cuDeviceGetName``, ``cuDriverGetVersion``,
``cuDevicePrimaryCtxRetain``, ``cuCtxSetCurrent``, ``cuModuleLoadData``,
``cuModuleGetFunction``, ``cuLaunchKernel``, ``cuCtxSynchronize``. The
primary context is used (not ``cuCtxCreate``) so that the launches land in the
same context PyTorch and its profiler (CUPTI) already use.

Every non-zero ``CUresult`` raises ``device.driver`` naming the call and the
``CUresult`` (``CUDA_ERROR_INVALID_PTX``); a missing ``libcuda`` raises
``device.driver`` too. The library handle is injectable so the error mapping
is tested without a GPU.
"""
from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass
from typing import Any

from ..trace.errors import DeviceUnavailableError
from .ptx import NULL_KERNEL_NAME, null_kernel_image

# The CUresult values a floor run can plausibly meet (cuda.h). cuGetErrorName
# is asked first; this table covers drivers where that call itself fails.
CU_RESULT_NAMES: dict[int, str] = {
    0: "CUDA_SUCCESS",
    1: "CUDA_ERROR_INVALID_VALUE",
    2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED",
    4: "CUDA_ERROR_DEINITIALIZED",
    34: "CUDA_ERROR_STUB_LIBRARY",
    46: "CUDA_ERROR_DEVICE_UNAVAILABLE",
    100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE",
    200: "CUDA_ERROR_INVALID_IMAGE",
    201: "CUDA_ERROR_INVALID_CONTEXT",
    209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
    218: "CUDA_ERROR_INVALID_PTX",
    221: "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
    222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    400: "CUDA_ERROR_INVALID_HANDLE",
    500: "CUDA_ERROR_NOT_FOUND",
    700: "CUDA_ERROR_ILLEGAL_ADDRESS",
    701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
    702: "CUDA_ERROR_LAUNCH_TIMEOUT",
    719: "CUDA_ERROR_LAUNCH_FAILED",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    999: "CUDA_ERROR_UNKNOWN",
}

_HINTS: dict[str, str] = {
    "CUDA_ERROR_NO_DEVICE": "the driver sees no GPU: check CUDA_VISIBLE_DEVICES and nvidia-smi",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": "the driver is older than CUDA 11.0 and cannot JIT PTX ISA 7.0: update it",
    "CUDA_ERROR_INVALID_PTX": "the driver rejected the embedded PTX: report the driver version",
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": "the kernel module and libcuda versions differ: reload the driver",
}


def cu_result_name(code: int, lib: Any = None) -> str:
    """The ``CUDA_ERROR_*`` name of a ``CUresult``, asking the driver first."""
    if lib is not None and hasattr(lib, "cuGetErrorName"):
        name_ptr = ctypes.c_char_p()
        try:
            if lib.cuGetErrorName(int(code), ctypes.byref(name_ptr)) == 0 and name_ptr.value:
                return name_ptr.value.decode("ascii", "replace")
        except (TypeError, ctypes.ArgumentError):
            pass
    return CU_RESULT_NAMES.get(int(code), f"CUresult {int(code)}")


def driver_error(call: str, code: int, lib: Any = None) -> DeviceUnavailableError:
    """The typed ``device.driver`` error for a failed driver call."""
    name = cu_result_name(code, lib)
    return DeviceUnavailableError(
        code="device.driver",
        message=f"{call} failed with {name}",
        location=f"CUresult {int(code)}",
        hint=_HINTS.get(name, "check the driver with nvidia-smi; rerun with --debug"),
    )


def load_libcuda() -> Any:
    """``ctypes.CDLL`` of the driver library, or ``device.driver`` when absent."""
    candidates = ["libcuda.so.1", "libcuda.so", ctypes.util.find_library("cuda") or ""]
    errors = []
    for name in filter(None, candidates):
        try:
            return ctypes.CDLL(name)
        except OSError as err:
            errors.append(str(err))
    raise DeviceUnavailableError(
        code="device.driver",
        message="the CUDA driver library libcuda cannot be loaded",
        location="; ".join(errors)[:200] or None,
        hint="install the NVIDIA driver (libcuda.so.1 must be on the loader path)",
    )


@dataclass
class CudaDriver:
    """Thin checked wrappers over the driver calls the floor uses."""

    lib: Any

    def _call(self, name: str, *args) -> None:
        code = getattr(self.lib, name)(*args)
        if code != 0:
            raise driver_error(name, code, self.lib)

    def init(self) -> None:
        self._call("cuInit", 0)

    def device_count(self) -> int:
        count = ctypes.c_int(0)
        self._call("cuDeviceGetCount", ctypes.byref(count))
        return count.value

    def device(self, ordinal: int) -> int:
        handle = ctypes.c_int(0)
        self._call("cuDeviceGet", ctypes.byref(handle), int(ordinal))
        return handle.value

    def device_name(self, device: int) -> str:
        buf = ctypes.create_string_buffer(256)
        self._call("cuDeviceGetName", buf, 256, int(device))
        return buf.value.decode("utf-8", "replace")

    def driver_version(self) -> int:
        """CUDA driver API version as an int (12040 = 12.4), as Kineto records it."""
        version = ctypes.c_int(0)
        self._call("cuDriverGetVersion", ctypes.byref(version))
        return version.value

    def use_primary_context(self, device: int) -> ctypes.c_void_p:
        ctx = ctypes.c_void_p()
        self._call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), int(device))
        self._call("cuCtxSetCurrent", ctx)
        return ctx

    def load_null_kernel(self) -> ctypes.c_void_p:
        """Load the embedded PTX and return the ``CUfunction`` of the null kernel."""
        module = ctypes.c_void_p()
        self._call("cuModuleLoadData", ctypes.byref(module), ctypes.c_char_p(null_kernel_image()))
        func = ctypes.c_void_p()
        self._call("cuModuleGetFunction", ctypes.byref(func), module, NULL_KERNEL_NAME.encode("ascii"))
        return func

    def launch_null(self, func: ctypes.c_void_p) -> None:
        """``cuLaunchKernel(f, 1,1,1, 1,1,1, 0 smem, stream 0, no params, no extra)``."""
        self._call("cuLaunchKernel", func, 1, 1, 1, 1, 1, 1, 0, None, None, None)

    def synchronize(self) -> None:
        self._call("cuCtxSynchronize")
