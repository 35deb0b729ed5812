"""The GPGPU-Sim build the ``gpgpusim`` tier runs on, or a skip (a failure in CI).

Without the toolchain or a build the tier skips with the reason; with
``HILSIM_REQUIRE_GPGPUSIM=1`` (``.ci/run``) the same reason fails the test instead.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from hilsim.core.errors import HilsimError


def unavailable(reason: str) -> None:
    """Skip with ``reason``, or fail when the tier is required."""
    if os.environ.get("HILSIM_REQUIRE_GPGPUSIM") == "1":
        pytest.fail(f"HILSIM_REQUIRE_GPGPUSIM=1 but {reason}")
    pytest.skip(reason)


def require_sim_build() -> Any:
    """The cached simulator build (``hilsim gpgpusim setup``) with its toolchain present."""
    from hilsim.simmodel.gpgpusim.build import find_build  # noqa: PLC0415
    from hilsim.simmodel.gpgpusim.toolchain import find_toolchain  # noqa: PLC0415

    try:
        find_toolchain(need_build_tools=False)
    except HilsimError as exc:
        unavailable(str(exc))
    build = find_build()
    if build is None:
        unavailable("no GPGPU-Sim build found (run `hilsim gpgpusim setup`)")
    return build


def require_fast_forward_sim_build() -> Any:
    """The cached simulator build, with the fast-forward patch (a skip, or a failure in
    CI, without it)."""
    from hilsim.simmodel.gpgpusim.fastforward import require_fast_forward_build  # noqa: PLC0415

    build = require_sim_build()
    try:
        require_fast_forward_build(build)
    except HilsimError as exc:
        unavailable(str(exc))
    return build
