"""The native read loop (loadtests/dataplane/_native.c), built with the system's C compiler at install.
Optional: without a compiler the install goes on and the load tests use the Python plane."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "loadtests.dataplane._native",
            ["loadtests/dataplane/_native.c"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"],
            optional=True,
        )
    ]
)
