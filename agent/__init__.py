"""hilsim agent: device probe, profiler backends, NVTX helpers (GPU imports are lazy).

``from agent import annotate`` gives the NVTX decorator / context manager
(:func:`hilsim.agent.nvtx.annotate`), a no-op with a warning when ``nvtx`` is not installed.
"""

from hilsim.agent.nvtx import annotate

__all__ = ["annotate"]
