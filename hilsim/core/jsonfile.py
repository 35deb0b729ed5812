"""Reading JSON files with one-line errors (missing file, bad JSON, wrong schema)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hilsim.core.errors import HilsimError


def read_json(path: str | os.PathLike[str], schema: str | None = None) -> Any:
    """Parse ``path`` as JSON; with ``schema``, require an object whose ``schema`` equals it.

    Every failure is a :class:`HilsimError` naming the file.
    """
    source = Path(path)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HilsimError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise HilsimError(f"{source}: is a folder, expected a JSON file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise HilsimError(f"{source}: not valid JSON ({exc})") from None
    except RecursionError:
        raise HilsimError(f"{source}: not valid JSON (nested too deeply)") from None
    except OSError as exc:
        raise HilsimError(f"{source}: cannot read ({exc.strerror or exc})") from None
    if schema is not None and (not isinstance(data, dict) or data.get("schema") != schema):
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise HilsimError(f"{source}: schema is {got!r}, expected {schema!r}")
    return data
