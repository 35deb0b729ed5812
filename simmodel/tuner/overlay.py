"""The timing config the tuner starts from: a preset overlaid by facts and measurements.

Accel-Sim paper, Section II-C: the tuner's inputs are the device query and the
microbenchmarks' numbers. Each overlay replaces a :class:`TimingConfig` value and
records where the new value comes from (``device-query``, ``measured``, ``derived``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hilsim.simmodel.accelsim import UbenchOutput
from hilsim.simmodel.cache_option import cache_geometry
from hilsim.simmodel.config import Source, Sourced, TimingConfig, unit_for, vtype_for
from hilsim.simmodel.tuner.checks import launch_latency_plausible
from hilsim.simmodel.tuner.inputs import compute_capability, describe_measurement

from hilsim.core import measurement_names as mn
from hilsim.core.errors import HilsimError
from hilsim.core.measurement import Measurement

#: measurement name -> the timing field it sets
MEASURED_FIELDS: dict[str, str] = {
    mn.L1_HIT_LATENCY: "l1.hit_latency_cycles",
    mn.L2_HIT_LATENCY: "l2.hit_latency_cycles",
    mn.DRAM_LATENCY: "dram.latency_cycles",
    mn.SHARED_LATENCY: "shared.latency_cycles",
    mn.ATOMIC_LATENCY: "core.atomic_latency_cycles",
    mn.L1_LINE_BYTES: "l1.line_bytes",
    mn.L1_SECTOR_BYTES: "l1.sector_bytes",
    mn.L2_LINE_BYTES: "l2.line_bytes",
    mn.L2_SECTOR_BYTES: "l2.sector_bytes",
    mn.DRAM_READ_BANDWIDTH: "dram.bandwidth_gbs",
    mn.L2_BANDWIDTH: "l2.bandwidth",
    mn.L1_BANDWIDTH: "l1.bandwidth",
    mn.SHARED_BANDWIDTH: "shared.bandwidth",
    mn.SM_CLOCK_MHZ: "core.core_clock_mhz",
    mn.FP32_THROUGHPUT: "units.fp32.throughput",
    mn.FP32_LATENCY: "units.fp32.latency_cycles",
    mn.FP16_THROUGHPUT: "units.fp16.throughput",
    mn.FP16_LATENCY: "units.fp16.latency_cycles",
    mn.FP64_THROUGHPUT: "units.fp64.throughput",
    mn.FP64_LATENCY: "units.fp64.latency_cycles",
    mn.INT32_THROUGHPUT: "units.int32.throughput",
    mn.INT32_LATENCY: "units.int32.latency_cycles",
    mn.SFU_THROUGHPUT: "units.sfu.throughput",
    mn.SFU_LATENCY: "units.sfu.latency_cycles",
    mn.TENSOR_THROUGHPUT: "units.tensor.throughput",
    mn.TENSOR_LATENCY: "units.tensor.latency_cycles",
}

# Accel-Sim deviceQuery label -> device-fact key (hilsim.core.measurement_names)
_DEVICE_QUERY_LABELS = (
    ("Multiprocessors Count", "sm_count"),
    ("Maximum number of threads per multiprocessor", "max_threads_per_sm"),
    ("Registers per multiprocessor", "registers_per_sm"),
    ("Shared memory per multiprocessor", "shared_mem_per_sm"),
    ("Warp size", "warp_size"),
    ("Shared memory per block", "shared_mem_per_block"),
    ("Registers per block", "registers_per_block"),
    ("GPU Max Clock rate", "clock_rate_mhz"),
    ("Memory Clock rate", "memory_clock_mhz"),
    ("Memory Bus Width", "memory_bus_width_bits"),
    ("CUDA version number", "compute_capability"),
)


def _coerce(dotted: str, value: Any) -> Any:
    vtype = vtype_for(dotted)
    if vtype is int:
        return int(round(float(value)))
    if vtype is float:
        return float(value)
    return str(value)


def put(
    cfg: TimingConfig, dotted: str, value: Any, unit: str | None, kind: str, detail: str
) -> TimingConfig:
    """``cfg`` with ``dotted`` set to ``value`` (coerced to the field's type) from ``kind``.

    ``unit`` None means the field's declared unit.
    """
    u = unit if unit is not None else unit_for(dotted)
    return cfg.set(dotted, Sourced(_coerce(dotted, value), u, Source(kind, detail)))


def apply_device_facts(cfg: TimingConfig, facts: dict[str, Any], where: str) -> TimingConfig:
    """Overlay device-query facts (cudaDeviceProp or hilsim names)."""
    for fact in mn.DEVICE_FACTS:
        dotted, scale = fact.field, fact.scale
        for key in fact.keys:
            if key in facts and facts[key] not in (None, ""):
                raw = facts[key]
                try:
                    value = raw if dotted == "dram.type" else float(raw) * scale
                except (TypeError, ValueError):
                    raise HilsimError(f"{where}: {key}: {raw!r} is not a number") from None
                cfg = put(cfg, dotted, value, None, "device-query", f"{where} {key}")
                break
    cc = compute_capability(facts)
    if cc is not None:
        cfg = put(cfg, "compute_capability", cc, "", "device-query", f"{where} compute capability")
    return cfg


def apply_measurements(
    cfg: TimingConfig, rows: Sequence[Measurement], where: str = ""
) -> TimingConfig:
    """Overlay microbench.json measurements; ``where`` (the file name) starts each detail."""
    by_name = {r.name: r for r in rows}
    for r in rows:
        dotted = MEASURED_FIELDS.get(r.name)
        if dotted is not None:
            cfg = put(
                cfg,
                dotted,
                r.value,
                r.unit if dotted.startswith(("units.", "l1.bandwidth", "l2.bandwidth")) else None,
                "measured",
                describe_measurement(r, where),
            )
    if mn.DRAM_READ_BANDWIDTH not in by_name and mn.DRAM_COPY_BANDWIDTH in by_name:
        r = by_name[mn.DRAM_COPY_BANDWIDTH]
        cfg = put(
            cfg, "dram.bandwidth_gbs", r.value, None, "measured", describe_measurement(r, where)
        )
    if mn.LAUNCH_LATENCY_US in by_name:
        clock = cfg.get("core.core_clock_mhz")
        r = by_name[mn.LAUNCH_LATENCY_US]
        if (
            clock is not None
            and r.value is not None
            and launch_latency_plausible(r.value * float(clock.value))
        ):
            cfg = put(
                cfg,
                "core.launch_latency_cycles",
                r.value * float(clock.value),
                None,
                "derived",
                f"{describe_measurement(r, where)} x core clock {clock.value:g} MHz",
            )
    return cfg


def apply_ubench_output(cfg: TimingConfig, out: UbenchOutput) -> TimingConfig:
    """Overlay what Accel-Sim's printed output measured or queried."""
    src = Path(out.path).name

    def m(key: str, dotted: str, unit: str | None = None, kind: str = "measured") -> None:
        nonlocal cfg
        v = out.values.get(key)
        if v is not None:
            cfg = put(
                cfg, dotted, v.value, unit, kind, f"{src} line {v.line} ({v.benchmark}): {v.text}"
            )

    dev = out.devices[0] if out.devices else {}
    facts = {key: dev[label].split()[0] for label, key in _DEVICE_QUERY_LABELS if label in dev}
    cfg = apply_device_facts(cfg, facts, f"{src} deviceQuery (device 0)")
    m("core_clock_mhz", "core.core_clock_mhz", kind="preset")
    m("dram_type", "dram.type", kind="device-query")
    m("dram_channels", "dram.channels", kind="derived")
    m("l2_banks", "l2.banks", kind="derived")
    m("l1_hit_latency", "l1.hit_latency_cycles")
    m("l2_hit_latency", "l2.hit_latency_cycles")
    m("dram_latency", "dram.latency_cycles")
    m("shared_latency", "shared.latency_cycles")
    m("atomic_latency", "core.atomic_latency_cycles")
    m("launch_latency_cycles", "core.launch_latency_cycles")
    m("dram_bandwidth_gbs", "dram.bandwidth_gbs")
    m("l2_bandwidth", "l2.bandwidth", "bytes/clk")
    m("l1_bandwidth", "l1.bandwidth", "bytes/clk/SM")
    m("shared_bandwidth", "shared.bandwidth")
    for unit in ("fp32", "fp64", "fp16", "int32"):
        m(f"{unit}_throughput", f"units.{unit}.throughput", "flop/clk/SM")
        m(f"{unit}_latency", f"units.{unit}.latency_cycles")
    m("sfu_throughput", "units.sfu.throughput", "ops/clk/SM")
    m("sfu_latency", "units.sfu.latency_cycles")
    m("tensor_throughput", "units.tensor.throughput", "FMA/clk/SM")
    m("tensor_latency", "units.tensor.latency_cycles")
    # deviceQuery prints the L2 size rounded to MB; the exact size follows from the
    # printed -gpgpu_cache:dl2 geometry x banks.
    dl2 = out.options.get("-gpgpu_cache:dl2")
    banks = cfg.get("l2.banks")
    if dl2 is not None and banks is not None:
        sets, line, assoc = cache_geometry(dl2.value)
        cfg = put(
            cfg,
            "l2.capacity_bytes",
            sets * line * assoc * int(banks.value),
            None,
            "derived",
            f"{src} line {dl2.line}: -gpgpu_cache:dl2 {sets}x{line}x{assoc}"
            f" per bank x {int(banks.value)} banks",
        )
    return cfg
