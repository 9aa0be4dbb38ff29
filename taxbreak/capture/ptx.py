"""The embedded PTX of the null kernel used to measure the launch floor T_sys.

An empty ``.entry`` with no parameters, launched ``<<<1,1>>>``: the device does
no work, so kernel start − launch-call start is the launch path alone
(TaxBreak §IV, the null-kernel system floor). PTX ISA 7.0 / ``sm_70`` is old
enough that every driver since CUDA 11.0 JIT-compiles it for any newer GPU
(PTX is forward compatible), so no compiler is needed at run time.
"""
from __future__ import annotations

NULL_KERNEL_NAME = "null_kernel"

NULL_KERNEL_PTX = """\
.version 7.0
.target sm_70
.address_size 64

.visible .entry null_kernel()
{
    ret;
}
"""


def null_kernel_image() -> bytes:
    """The PTX as the NUL-terminated bytes ``cuModuleLoadData`` expects."""
    return NULL_KERNEL_PTX.encode("ascii") + b"\0"
