"""The optional compiled Kineto scanner (docs/performance.md).

The metadata lives in pyproject.toml; this file only declares the C extension.
It is optional: without a compiler the install still succeeds and the reader
uses its pure-Python path (the same tables, slower).
"""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "taxbreak.readers._kineto_scan",
            ["taxbreak/readers/_kineto_scan.c"],
            extra_compile_args=["-O2", "-std=c11"],
            optional=True,
        )
    ]
)
