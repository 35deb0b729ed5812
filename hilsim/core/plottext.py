"""Figures whose texts are shown as given, never parsed as mathtext.

Names from the user's files reach titles, legends and labels: workload, bundle, device,
plan and kernel names. Matplotlib reads a text holding two ``$`` as mathtext, so a name
like ``run$1$`` turns italic and ``a$\\frac$b`` fails the whole figure (after the results
were written, with no plot). :class:`plain_text` turns that off (``text.parse_math``) for
every text created while it is active, those of tick labels and legends included; used as
a context manager or as a decorator on the function that builds and saves a figure. Within
it matplotlib's ``UserWarning`` messages about the figure's own layout (an axis without a positive
value to log-scale, a tight layout that does not fit) stay off the user's stderr: a
successful command prints no warning lines that are not hilsim's.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any


class plain_text(contextlib.ContextDecorator):  # noqa: N801 - used like contextlib's helpers
    """Within the block (or the decorated call), matplotlib texts are not mathtext.

    matplotlib is imported on entry (lazily: a module that only defines figures does
    not pay for it at import).
    """

    def __init__(self) -> None:
        self._active: list[Any] = []  # (a decorator's instance may be entered again)

    def __enter__(self) -> plain_text:
        import matplotlib  # lazy: a heavy plotting dependency

        caught = warnings.catch_warnings()
        caught.__enter__()
        warnings.filterwarnings("ignore", category=UserWarning, module="matplotlib")
        context = matplotlib.rc_context({"text.parse_math": False})
        context.__enter__()
        self._active.append((context, caught))
        return self

    def __exit__(self, *exc: object) -> None:
        context, caught = self._active.pop()
        context.__exit__(*exc)
        caught.__exit__(*exc)
