"""The ``hilsim.compare/1`` document: the comparison table plus what identifies the input,
its trace warnings and the budget the baselines had (what ``hilsim compare`` prints and
writes as ``compare.json``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from hilsim.analyzer.compare.columns import bundle_columns_reader
from hilsim.analyzer.compare.run import compare_methods
from hilsim.analyzer.tracecheck import bundle_warnings, method_warnings

from hilsim.core.bundle import Bundle, hilsim_version

#: the ``schema`` of the comparison document (``compare.json``)
COMPARE_SCHEMA = "hilsim.compare/1"


def workload_name(bundle: Bundle, path: str | Path | None = None) -> str:
    """The workload's name for titles: the manifest's ``workload.name``, else the profiled
    file's name without its suffixes, else the folder or file given."""
    workload = (bundle.manifest or {}).get("workload") or {}
    if workload.get("name"):
        return str(workload["name"])
    files = ((bundle.manifest or {}).get("source") or {}).get("files") or []
    first = Path(files[0]).name if files else (Path(path).name if path else "workload")
    return first.split(".")[0] or first


def input_identity(path: str | Path) -> dict[str, Any]:
    """What identifies the input: sha256 of a profile file, or for a bundle folder the
    sha256 over its manifest's file digests (content only, not the import time)."""
    source = Path(path)
    if source.is_dir():
        manifest = json.loads((source / "manifest.json").read_text())
        files = {k: v.get("sha256") for k, v in sorted((manifest.get("files") or {}).items())}
        digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
        return {"path": str(source), "kind": "bundle", "sha256": digest, "files": files}
    digest = hashlib.sha256()
    with open(source, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {"path": str(source), "kind": "file", "sha256": digest.hexdigest()}


def compare_profile(
    bundle: Bundle,
    path: str | Path | None = None,
    names: list[str] | None = None,
    seeds: int = 10,
    holdout: Bundle | None = None,
    holdout_path: str | Path | None = None,
    params: dict[str, dict[str, Any]] | None = None,
    workers: int | None = None,
    progress: Any = None,
    budget_of: str | None = "stem",
    budget: str = "time",
) -> dict[str, Any]:
    """The ``hilsim.compare/1`` document of
    :func:`~hilsim.analyzer.compare.run.compare_methods` on ``bundle`` (read from
    ``path``; scored on ``holdout``, read from ``holdout_path``, when given).

    Besides the table it holds what identifies the inputs (:func:`input_identity` of the
    files, the launch sequence's digest), the workload and device names, and the trace's
    warnings once (``input_warnings``); STEM's row also carries how much time its CLT rule
    leaves unchecked.
    """
    result = compare_methods(
        bundle, names, seeds, holdout, params, workers, progress, budget_of, budget,
        columns_of=bundle_columns_reader(bundle, path),
    )
    input_warnings = bundle_warnings(bundle) + method_warnings(bundle.launches, "any method")
    for summary in result["methods"]:
        if summary["name"] == "stem":
            summary["warnings"] = method_warnings(bundle.launches, "stem") + summary["warnings"]
    source = input_identity(path) if path is not None else {}
    return {
        "schema": COMPARE_SCHEMA,
        "hilsim_version": hilsim_version(),
        "workload": workload_name(bundle, path),
        "device": (bundle.manifest.get("device") or {}).get("name"),
        "n_launches": bundle.n_launches,
        "input": source | {"sequence_digest": bundle.sequence_digest()},
        "holdout_input": input_identity(holdout_path) if holdout_path is not None else None,
        "profile": str(path) if path is not None else None,
        "holdout_profile": str(holdout_path) if holdout_path is not None else None,
        "input_warnings": input_warnings,
    } | result


def comparison_title(document: dict[str, Any]) -> str:
    """The Pareto plot's title for a :func:`compare_profile` document: workload, device,
    launch count and the holdout run the plans were scored on."""
    device = document.get("device")
    title = (
        f"{document['workload']}"
        + (f" on {device}" if device else "")
        + f": {document['n_launches']:,} launches"
    )
    holdout = document.get("holdout_profile")
    return title + (f", scored on {Path(holdout).name}" if holdout else "")
