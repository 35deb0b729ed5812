"""Nsight Systems reports (``.nsys-rep``, older ``.qdrep``): export to SQLite, then import.

hilsim reads the SQLite export (:mod:`hilsim.formats.nsys_sqlite`); a report
itself is a binary container only ``nsys export`` reads, so :func:`export_nsys_rep` runs

    nsys export --type sqlite --force-overwrite true --output OUT.sqlite REPORT

(flags as documented for ``nsys export``: ``-t/--type``, ``-o/--output``,
``-f/--force-overwrite``). Without ``nsys`` on ``PATH`` (or ``HILSIM_NSYS``) it says so in
one line instead of guessing at the container.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from hilsim.core.errors import HilsimError

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
EXPORT_TIMEOUT_S = 3600


def find_nsys() -> str | None:
    """Path of the ``nsys`` executable (``$HILSIM_NSYS`` first, then ``PATH``), or None."""
    override = os.environ.get("HILSIM_NSYS")
    if override:
        return override if Path(override).is_file() else shutil.which(override)
    return shutil.which("nsys")


def sqlite_path_for(report: Path, out_dir: Path | None = None) -> Path:
    """Where the export of ``report`` goes: same stem, ``.sqlite``, in ``out_dir`` or beside."""
    stem = report.name
    for suffix in REPORT_SUFFIXES:
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    return (out_dir or report.parent) / f"{stem}.sqlite"


def export_command(nsys: str, report: Path, output: Path) -> list[str]:
    """The ``nsys export`` argument list (no shell)."""
    return [
        nsys, "export", "--type", "sqlite", "--force-overwrite", "true",
        "--output", str(output), str(report),
    ]


def export_nsys_rep(
    path: str | Path, out_dir: str | Path | None = None, nsys: str | None = None
) -> Path:
    """Export an Nsight Systems report to SQLite with ``nsys export``; return the SQLite path.

    Raises :class:`HilsimError` (one line) when the report is missing, ``nsys`` is not
    installed, or the export fails (the tool's last error line is quoted).
    """
    report = Path(path)
    if not report.is_file():
        raise HilsimError(f"{report}: no such file")
    tool = nsys or find_nsys()
    if tool is None:
        raise HilsimError(
            f"{report}: is an Nsight Systems report; exporting it needs 'nsys', which is not "
            "installed here (not on PATH): run 'nsys export --type sqlite "
            f"{report.name}' where Nsight Systems is installed and import the .sqlite file"
        )
    output = sqlite_path_for(report, Path(out_dir) if out_dir is not None else None)
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            export_command(tool, report, output),
            capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HilsimError(f"{report}: nsys export failed to run ({exc})") from exc
    if done.returncode != 0 or not output.is_file():
        lines = [ln.strip() for ln in (done.stderr + "\n" + done.stdout).splitlines() if ln.strip()]
        detail = lines[-1] if lines else f"exit code {done.returncode}, no output file"
        raise HilsimError(
            f"{report}: 'nsys export --type sqlite' failed ({detail[:200]}); export the "
            "report on a machine where nsys export works and import the .sqlite file"
        )
    return output


__all__ = ["REPORT_SUFFIXES", "export_command", "export_nsys_rep", "find_nsys", "sqlite_path_for"]
