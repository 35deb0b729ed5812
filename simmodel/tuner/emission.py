"""Which value each emitted option gets: printed by Accel-Sim, derived, or the preset's.

Accel-Sim paper, Section II-C: existing Accel-Sim users get Accel-Sim's result, so an
option its microbenchmarks printed wins; an option whose inputs changed from the preset
is recomputed by the rules (:mod:`hilsim.simmodel.tuner.rules`); any other keeps the
preset's shipped, hand-correlated value.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hilsim.simmodel.accelsim import PrintedOption, UbenchOutput
from hilsim.simmodel.cache_option import normalize_cache_string
from hilsim.simmodel.config import TimingConfig
from hilsim.simmodel.presets import Preset, PresetOption
from hilsim.simmodel.tuner.conventions import PIPELINE_OFFSET_SOURCE, PIPELINE_OFFSETS
from hilsim.simmodel.tuner.engine import Derived
from hilsim.simmodel.tuner.result import EmittedOption

SOURCE_PRIORITY = ("measured", "device-query", "derived")


def option_file(name: str) -> str:
    """The file an option the preset does not list goes to."""
    if name.startswith(("-trace_", "-specialized_unit")):
        return "trace.config"
    return "gpgpusim.config"


def kind_of(cfg: TimingConfig, inputs: list[str]) -> tuple[str, str]:
    """(kind, detail) for an option from its inputs: measured > device-query > preset."""
    vals = [(i, cfg.get(i)) for i in inputs]
    kinds = {v.source.kind for _, v in vals if v is not None}
    kind = next((k for k in SOURCE_PRIORITY if k in kinds), "preset")
    if len(vals) > 1 and kind == "preset":
        kind = "derived"  # computed from several preset values
    detail = "; ".join(
        (f"{i}={v.value:g}" if isinstance(v.value, float) else f"{i}={v.value}") + f" [{v.source}]"
        for i, v in vals
        if v is not None
    )
    return kind, detail


@dataclass(frozen=True)
class OptionChooser:
    """Chooses each emitted option's value for one tuned device."""

    cfg: TimingConfig
    preset: Preset
    convention: str
    ubench: UbenchOutput | None = None

    def choose(
        self,
        file: str,
        name: str,
        shipped: PresetOption | None,
        derived: Derived | None,
        printed: PrintedOption | None,
    ) -> EmittedOption:
        """The emitted value of one option: printed > derived (inputs changed) > preset."""
        if printed is not None:
            return self._printed(file, name, derived, printed)
        cfg, d = self.cfg, derived
        if d is not None:
            kind, detail = kind_of(cfg, d.inputs)
            changed = any(cfg.get(i) != self.preset.timing.get(i) for i in d.inputs)
            if changed or self.preset.options_from_timing or shipped is None:
                return EmittedOption(
                    file,
                    name,
                    d.value,
                    kind,
                    detail,
                    d.convention,
                    d.formula,
                    d.raw_value,
                    None,
                    d.note,
                )
        assert shipped is not None
        return EmittedOption(
            file,
            name,
            shipped.value,
            "preset",
            shipped.source,
            "preset (shipped, hand-correlated)",
            recomputed=d.value if d is not None else None,
        )

    def _printed(
        self, file: str, name: str, d: Derived | None, printed: PrintedOption
    ) -> EmittedOption:
        value = printed.value
        if name.startswith("-gpgpu_cache:"):
            value = normalize_cache_string(value)
        src = (
            f"{Path(self.ubench.path).name if self.ubench else ''} line {printed.line} "
            f"({printed.benchmark}) //Accel_Sim config"
        )
        kind = kind_of(self.cfg, d.inputs)[0] if d is not None else "measured"
        if kind in ("preset", "derived"):
            kind = "measured"
        recomputed = d.value if d is not None else None
        opt = EmittedOption(file, name, value, kind, src, "accelsim-tuner", recomputed=recomputed)
        cc = self.cfg.get("compute_capability")
        offsets = PIPELINE_OFFSETS.get(str(cc.value) if cc else "", {})
        if self.convention == "simulator-corrected" and name in offsets and value.isdigit():
            opt.raw_value = value
            opt.value = str(max(1, int(value) - offsets[name]))
            opt.convention = "simulator-corrected"
            opt.note = f"pipeline offset {offsets[name]}: {PIPELINE_OFFSET_SOURCE}"
        if d is not None and d.note and name == "-gpgpu_cache:dl2":
            opt.note = d.note
        return opt
