"""hilsim: hardware-in-the-loop sampling for GPU simulation.

One distribution, one import name. The repository keeps the design card's folders
(``agent/``, ``analyzer/``, ``simmodel/``, ``microbench/``); setuptools' ``package-dir``
mapping installs them as ``hilsim.agent``, ``hilsim.analyzer``, ``hilsim.simmodel`` and
``hilsim.microbench``. Nothing is imported here, so ``import hilsim`` and
``hilsim --version`` stay fast and need no GPU.
"""

from typing import Any

__all__ = ["__version__"]


def __getattr__(name: str) -> Any:
    """``hilsim.__version__`` read from the installed metadata on first use (importing
    ``importlib.metadata`` costs ~50 ms that ``hilsim --help`` does not need)."""
    if name != "__version__":
        raise AttributeError(f"module 'hilsim' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        value = version("hilsim")
    except PackageNotFoundError:  # running from a source tree that was never installed
        value = "0+unknown"
    globals()["__version__"] = value
    return value
