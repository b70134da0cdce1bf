"""Build hook for the optional C accelerator (``sparkafka._accel``, sources in ``src/sparkafka/_c/``); everything
else is in pyproject.toml.

The extension is ``optional``: without a working C compiler the install still succeeds and sparkafka
runs its pure-Python code (set ``SPARKAFKA_NO_ACCEL=1`` to force that path when it is built). With
``SPARKAFKA_REQUIRE_ACCEL=1`` (the Makefile sets it, so ``make install`` and CI do) it is required: a C
file that does not compile fails the install instead of leaving no accelerator, or an old one, behind.
"""

import os

from setuptools import Extension, setup

REQUIRED = os.environ.get("SPARKAFKA_REQUIRE_ACCEL", "") not in ("", "0")

setup(
    ext_modules=[
        Extension(
            "sparkafka._accel",
            sources=["src/sparkafka/_c/_accel.c", "src/sparkafka/_c/_append.c", "src/sparkafka/_c/_send_lane.c",
                     "src/sparkafka/_c/_sender_io.c", "src/sparkafka/_c/_send_turns.c", "src/sparkafka/_c/_batch.c",
                     "src/sparkafka/_c/_produce_response.c"],
            depends=["src/sparkafka/_c/_accel_common.h", "src/sparkafka/_c/_append.h",
                     "src/sparkafka/_c/_sender_io.h"],
            optional=not REQUIRED,
            extra_compile_args=["-O2"],
        )
    ]
)
