"""hilsim: hardware-in-the-loop sampling for GPU simulation.

One distribution, one import name. The repository keeps the design card's folders
(``agent/``, ``analyzer/``, ``simmodel/``, ``microbench/``); setuptools' ``package-dir``
mapping installs them as ``hilsim.agent``, ``hilsim.analyzer``, ``hilsim.simmodel`` and
``hilsim.microbench``. This folder holds the bottom layer (``hilsim.core``) and the
command layer (``hilsim.cli``). Nothing is imported here, so ``import hilsim`` and
``hilsim --version`` stay fast and need no GPU.

Run from a checkout's root, this folder is found before any installed hilsim; its
subpackage path then also covers the root, so ``hilsim.analyzer`` is the checkout's
``analyzer/`` (the same code ``pip install .`` installed from it) instead of missing.
"""

import os as _os
from typing import Any

__all__ = ["__version__"]

_ROOT = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(_ROOT, "pyproject.toml")) and _os.path.isfile(
    _os.path.join(_ROOT, "analyzer", "__init__.py")
):
    __path__.append(_ROOT)  # noqa: F821 - a package's __path__


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
