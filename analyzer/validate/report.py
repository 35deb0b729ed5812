"""A validation run as its two files: the numbers as ``OUT.json`` (``hilsim.validation/1``)
and the page with its figures as ``OUT.html``."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hilsim.analyzer.validate.numbers import SimResults, validate_plans
from hilsim.analyzer.validate.page import render_html
from hilsim.analyzer.validate.plots import report_images

from hilsim.core.bundle import Bundle
from hilsim.core.files import write_text_atomic
from hilsim.core.jsonfile import write_json
from hilsim.core.plan import Plan


def validate(
    bundle: Bundle,
    plans: list[tuple[str, Plan]],
    sim_for: Callable[[Plan], SimResults],
    clock_mhz: float,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Numbers (JSON dict, :func:`hilsim.analyzer.validate.numbers.validate_plans`) and
    images (:func:`hilsim.analyzer.validate.plots.report_images`) for every plan."""
    validation = validate_plans(bundle, plans, sim_for, clock_mhz)
    return validation.report, report_images(bundle, validation)


def write_report(
    report: dict[str, Any], images: dict[str, Any], out: str | os.PathLike[str]
) -> tuple[Path, Path]:
    """Write ``OUT.html`` and ``OUT.json`` (atomically); ``out`` may end in .html."""
    base = Path(out)
    if base.suffix in (".html", ".json"):
        base = base.with_suffix("")
    html_path = write_text_atomic(base.with_suffix(".html"), render_html(report, images))
    json_path = write_json(base.with_suffix(".json"), report)
    return html_path, json_path
