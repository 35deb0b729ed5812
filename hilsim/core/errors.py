"""One error type for every user-facing failure.

The CLI prints ``HilsimError`` as one line (``hilsim: error: ...``) and exits with
code 2; anything else is a bug and shows a traceback only with ``--debug``.
"""

from __future__ import annotations


class HilsimError(Exception):
    """A failure caused by the user's input or environment, reported as one line.

    The message must name what failed: the file (and row/column where known), the
    tool that is missing, or the parameter that is wrong.
    """

    exit_code: int = 2

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))
