"""hilsim: hardware-in-the-loop sampling for GPU simulation.

One distribution, one import name. The repository keeps the design card's folders
(``agent/``, ``analyzer/``, ``simmodel/``, ``microbench/``); setuptools' ``package-dir``
mapping installs them as ``hilsim.agent``, ``hilsim.analyzer``, ``hilsim.simmodel`` and
``hilsim.microbench``. Nothing is imported here, so ``import hilsim`` and
``hilsim --version`` stay fast and need no GPU.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hilsim")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
