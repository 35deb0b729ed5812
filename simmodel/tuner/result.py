"""What ``hilsim tune`` produces: the timing config, every emitted option, the files.

Every option carries its source kind (measured | device-query | preset | derived), the
detail, the latency convention and the formula (Accel-Sim paper, Section II-C: the
tuner's options; Section IV: the conventions), in ``gpgpusim.config`` / ``trace.config``
``# source:`` lines and in ``tune-report.json``.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hilsim.simmodel.accelsim import EmitOption, emit_options
from hilsim.simmodel.config import TimingConfig
from hilsim.simmodel.presets import Preset
from hilsim.simmodel.tuner.conventions import PIPELINE_OFFSET_SOURCE, PIPELINE_OFFSETS

from hilsim.core.files import atomic_directory

REPORT_SCHEMA = "hilsim.tune-report/1"


@dataclass
class EmittedOption:
    """One option of an emitted file, with everything the report says about it."""

    file: str
    name: str
    value: str
    kind: str
    source: str
    convention: str
    formula: str = ""
    raw_value: str | None = None
    recomputed: str | None = None
    note: str = ""

    def source_comment(self) -> str:
        """The text of the option's ``# source:`` line."""
        return (
            f"{self.kind}: {self.source} | convention: {self.convention}"
            + (f" | {self.formula}" if self.formula else "")
            + (f" | tuner value {self.raw_value}" if self.raw_value else "")
            + (f" | {self.note}" if self.note else "")
        )


@dataclass
class TuneResult:
    """What :func:`~hilsim.simmodel.tuner.flow.tune` produced."""

    timing: TimingConfig
    preset: Preset
    preset_reason: str
    convention: str
    options: list[EmittedOption] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def gpgpusim_config(self) -> str:
        """``gpgpusim.config`` text with a ``# source:`` comment on every option."""
        return self.config_text("gpgpusim.config")

    def trace_config(self) -> str:
        """``trace.config`` text with a ``# source:`` comment on every option."""
        return self.config_text("trace.config")

    def config_text(self, file: str) -> str:
        """The text of one emitted config file (``gpgpusim.config`` or ``trace.config``)."""
        header = [
            f"hilsim tune: {self.timing.name}, {file}",
            f"preset {self.preset.name} ({self.preset_reason})",
            f"latency convention: {self.convention}",
            "each option: source kind (measured | device-query | preset | derived), "
            "detail, convention",
        ]
        opts = [
            EmitOption(o.name, o.value, o.source_comment()) for o in self.options if o.file == file
        ]
        return emit_options(opts, header)

    def report(self) -> dict[str, Any]:
        """``tune-report.json``: every timing value and option with source and convention."""
        return {
            "schema": REPORT_SCHEMA,
            "device": self.timing.name,
            "preset": self.preset.name,
            "preset_reason": self.preset_reason,
            "convention": self.convention,
            "pipeline_offsets": {"offsets": PIPELINE_OFFSETS, "source": PIPELINE_OFFSET_SOURCE},
            "timing": [
                {
                    "field": k,
                    "value": v.value,
                    "unit": v.unit,
                    "kind": v.source.kind,
                    "detail": v.source.detail,
                    "convention": "hardware",
                }
                for k, v in self.timing.items()
            ],
            "options": [
                {k: v for k, v in vars(o).items() if v not in (None, "")} for o in self.options
            ],
            "notes": self.notes,
        }

    def files(self) -> dict[str, str]:
        """The output folder's files: name -> text."""
        return {
            "timing.json": self.timing.dumps(),
            "gpgpusim.config": self.gpgpusim_config(),
            "trace.config": self.trace_config(),
            "tune-report.json": json.dumps(self.report(), indent=2) + "\n",
        }

    def write(self, folder: str | os.PathLike[str], overwrite: bool = False) -> Path:
        """Write :meth:`files` into ``folder`` atomically (all four or none)."""
        with atomic_directory(folder, overwrite=overwrite) as tmp:
            for name, text in self.files().items():
                (tmp / name).write_text(text, encoding="utf-8")
        return Path(folder)

    def summary(self) -> str:
        """One line: device, preset, options by source kind, convention."""
        counts = Counter(o.kind for o in self.options)
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        return (
            f"{self.timing.name}: preset {self.preset.name} ({self.preset_reason}); "
            f"{len(self.options)} options ({kinds}); convention {self.convention}"
        )
