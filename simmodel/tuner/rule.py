"""One option rule: how a simulator option follows from timing values (the table's row type).

Accel-Sim paper, Section II-C: every ``-option`` the tuner emits is a formula over the
device query and the microbenchmarks' numbers. A rule states that formula as data: the
option, the timing fields it reads, the value, the formula text every emitted option
carries in its ``# source:`` line, and the Accel-Sim function it follows.
:mod:`hilsim.simmodel.tuner.rules` holds the table; :mod:`hilsim.simmodel.tuner.engine`
evaluates it.

A rule may also carry how the on-simulator tuner sets the option (``hilsim tune
--on-simulator``, :mod:`hilsim.simmodel.tuner.search`): one :class:`Knob` per option
entry the search moves, the microbenchmark that measures it and the quantity compared.
The analytic tuner reads the formula; the search reads the knobs; both read one row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from hilsim.simmodel.config import TimingConfig
from hilsim.simmodel.presets import Preset
from hilsim.simmodel.tuner.dram import DRAM_MODELS, DramModel
from hilsim.simmodel.tuner.dram import dram_model as model_of_memory_type
from hilsim.simmodel.tuner.geometry import L2Geometry, l2_geometry, round_up_pow2

from hilsim.core.errors import HilsimError


class LatencyKind(StrEnum):
    """What the ``--convention`` does to a rule's value (``docs/tuner.md``, Conventions)."""

    #: the tuner's value in every convention
    NONE = "none"
    #: one of the four fixed latencies: the value is the tuner quantity (e.g. L2 hit - L1
    #: hit); ``accelsim-tuner`` floors it, ``simulator-corrected`` subtracts the pipeline
    #: offset, ``gpgpusim`` inverts the simulator's measured map over all four at once
    FIXED = "fixed latency"
    #: the kernel launch latency in cycles: floored, or the simulator's launch map
    LAUNCH = "launch latency"


@dataclass(frozen=True)
class OptionValue:
    """A rule's value with what its ``# source:`` line says beyond the rule's own text."""

    value: Any
    #: replaces the rule's formula text (a formula that depends on the inputs)
    formula: str | None = None
    note: str = ""
    convention: str = "accelsim-tuner"
    #: the ``accelsim-tuner`` value when a convention changed it
    raw_value: str | None = None
    #: replaces the rule's inputs (a value solved together with other options)
    inputs: tuple[str, ...] | None = None


@dataclass(frozen=True)
class RuleInputs:
    """What a rule's functions see: the timing config and the named terms Accel-Sim uses.

    ``rule_inputs[field]`` is the raw value of a timing field (``"core.sm_count"``);
    the properties are the intermediate quantities of Accel-Sim's tuner functions
    (schedulers ``S``, the DRAM model, channels, the L2 bank geometry), computed from the
    fields on use.
    """

    timing: TimingConfig
    #: the preset the timing started from (None: values read from measurements alone, as
    #: the on-simulator search evaluates a rule; no rule that reads the preset is searched)
    preset: Preset | None
    convention: str = "accelsim-tuner"
    #: ``l1_for_l2`` / ``l2_for_dram``: the L1 (L2) latency measured in the same run as
    #: the L2 (DRAM) latency, which Accel-Sim's l2_lat (mem_lat) subtracts
    pairs: Mapping[str, float] = field(default_factory=dict)

    def has(self, dotted: str) -> bool:
        """Whether the timing field is set."""
        return self.timing.get(dotted) is not None

    def __getitem__(self, dotted: str) -> Any:
        value = self.timing.get(dotted)
        if value is None:
            raise KeyError(dotted)
        return value.value

    def int_of(self, dotted: str) -> int:
        """The timing field as an int."""
        return int(self[dotted])

    def float_of(self, dotted: str) -> float:
        """The timing field as a float."""
        return float(self[dotted])

    def source_kind(self, dotted: str) -> str:
        """The timing field's source kind (measured, device-query, preset, derived)."""
        value = self.timing.get(dotted)
        if value is None:
            raise KeyError(dotted)
        return value.source.kind

    # --- named terms ---------------------------------------------------------------

    @property
    def cc_major(self) -> str:
        """The compute capability's major version, as written."""
        return str(self["compute_capability"]).split(".")[0]

    @property
    def cc_minor(self) -> str:
        """The compute capability's minor version, as written."""
        return str(self["compute_capability"]).split(".")[1]

    @property
    def major(self) -> int:
        """The compute capability's major version."""
        return int(self.cc_major)

    @property
    def schedulers(self) -> int:
        """``S``: warp schedulers per SM (Accel-Sim ``WARP_SCHEDS_PER_SM``)."""
        return self.int_of("core.schedulers_per_sm")

    @property
    def warps_per_sm(self) -> int:
        """Warps per SM: threads per SM / warp size."""
        return self.int_of("core.max_threads_per_sm") // self.int_of("core.warp_size")

    @property
    def dram_model(self) -> str:
        """The Accel-Sim DRAM model name of the memory type (HBM, GDDR5, GDDR5X, GDDR6)."""
        return model_of_memory_type(str(self["dram.type"]))

    @property
    def dram(self) -> DramModel:
        """The Accel-Sim DRAM model: channel bits, burst length, command ratio."""
        return DRAM_MODELS[self.dram_model]

    @property
    def channels(self) -> int:
        """Memory channels: bus width / channel width (must divide)."""
        bus, cw = self.int_of("dram.bus_width_bits"), self.dram.channel_bits
        if bus % cw:
            raise HilsimError(
                f"memory bus {self['dram.bus_width_bits']} bit is not a multiple of the "
                f"{self.dram_model} channel width {cw}"
            )
        return bus // cw

    @property
    def l2_banks(self) -> int:
        """L2 banks: two per memory channel (Accel-Sim ``l2_config``)."""
        return self.channels * 2

    @property
    def l2_geometry(self) -> L2Geometry:
        """One L2 bank's sets, ways and set index (:func:`l2_geometry`)."""
        return l2_geometry(self.int_of("l2.capacity_bytes"), self.l2_banks)

    def unit_initiation(self, unit: str, fma: bool) -> int:
        """Initiation interval of a unit: floor(32 / (round_up_pow2(ops) / S)), at least 1.

        ``ops`` is the measured throughput per SM and clock, halved for a unit whose
        throughput counts an FMA as two flops (Accel-Sim ``config_fpu`` and friends).
        """
        tput = self.float_of(f"units.{unit}.throughput")
        per_sm = round_up_pow2(tput / 2 if fma else tput)
        return max(1, math.floor(32 / (per_sm / self.schedulers)))


#: a rule's value: a plain value (emitted as ``str(value)``) or an :class:`OptionValue`
ValueFn = Callable[[RuleInputs], Any]


class Slot(StrEnum):
    """Where the on-simulator search writes a knob's value into the candidate card."""

    #: the option's value
    VALUE = "value"
    #: one entry of a ``-ptx_opcode_*`` list (the other entries the base card's)
    LIST_ENTRY = "list entry"
    #: ``-gpgpu_n_mem``: only counts whose L2 banks hold the device's L2 (the domain);
    #: first guess the device's bus width over the base card's channel width; the L2
    #: sets and the partition indexing follow
    CHANNELS = "channels"
    #: the L2 clock of ``-gpgpu_clock_domains`` (the interconnect's at the base card's
    #: ratio to it): searched over ratios to the core clock, first guess the base card's
    L2_CLOCK = "L2 clock"


@dataclass(frozen=True)
class SearchContext:
    """The candidate's structure a knob's quantity needs (from the base card and facts)."""

    core_mhz: float
    #: execution units per SM by unit list (``sp``, ``dp``, ``int``, ``sfu``)
    units: Mapping[str, int]


#: a knob's quantity: measurement values (by name) -> the number the search compares
Quantity = Callable[[Mapping[str, float], SearchContext], float]


@dataclass(frozen=True)
class Knob:
    """How the on-simulator search sets one option (or one entry of a list option).

    Accel-Sim (Khairy et al., ISCA 2020), Section II-C: each tuned option follows from one
    targeted microbenchmark. The search runs the same microbenchmark (``evaluator``, a
    name of :data:`hilsim.simmodel.tuner.evaluators.EVALUATORS`) on the simulated
    candidate and moves the value until the simulated ``quantity`` meets the measured
    one: a function increasing in the value, of the measurements ``inputs``.

    Left empty, ``inputs`` and ``quantity`` are the rule's own: its timing fields as
    measurement names and its value over them (the first guess is then the rule's value,
    floored, as the analytic tuner's ``accelsim-tuner`` convention floors it). A knob that
    gives its own says why at its definition. ``option`` is the rule's (filled when the
    table is read, :mod:`hilsim.simmodel.tuner.knobs`).

    The fields after ``slot`` are the search's rules for this knob: the values the
    simulator accepts (``lo``, ``hi``, ``domain``), how the search steps
    (``slope_prior``, ``proportional``: the quantity is proportional to the value, one
    point gives the slope; ``slope_from_first_point``: the first simulated point's
    quantity / value replaces the prior), when it is settled (``tolerance_rel``), its
    order (``depends_on``: knobs whose change makes its earlier points stale;
    ``waits_for``: knobs settled before it moves from its first guess; ``interval_of``:
    the latency knob of the same list entry, which bounds this initiation interval since
    an interval above its latency crashes GPGPU-Sim), and what the report says when the
    base card's value is kept (``target_range`` with ``out_of_range``, ``missing_note``,
    ``insensitive_note``: templates filled by the search).
    """

    key: str
    evaluator: str
    what: str
    inputs: tuple[str, ...] = ()
    quantity: Quantity | None = None
    #: the list entry (``-ptx_opcode_*``: ADD, MAX, MUL, MAD, DIV, SHFL), None: the value
    entry: int | None = None
    slot: Slot = Slot.VALUE
    option: str = ""
    lo: int = 1
    hi: int = 1 << 20
    domain: tuple[int, ...] | None = None
    slope_prior: float = 1.0
    proportional: bool = False
    slope_from_first_point: bool = False
    #: a simulated quantity within this fraction of the target settles the search
    #: (0: only an exact match or a bracket of adjacent values)
    tolerance_rel: float = 0.0
    depends_on: tuple[str, ...] = ()
    waits_for: tuple[str, ...] = ()
    interval_of: str | None = None
    #: a target outside this range keeps the base card's value (``out_of_range``, filled
    #: with ``target`` and ``range``, says why)
    target_range: tuple[float, float] | None = None
    out_of_range: str = ""
    #: the report's note for a measurement the file lacks (empty: none)
    missing_note: str = ""
    #: two simulated values 10 % apart giving under 1 % difference keep the base card's
    #: value (filled with ``lo``, ``lo_q``, ``hi``, ``hi_q``, ``target``); empty: no check
    insensitive_note: str = ""

    def target(self, measured: Mapping[str, float], ctx: SearchContext) -> float:
        """The quantity of the measurements."""
        if self.quantity is None:
            raise HilsimError(f"knob {self.key}: its quantity is the rule's (read the table "
                              "through hilsim.simmodel.tuner.knobs)")
        return self.quantity(measured, ctx)

    def first_guess(self, measured: Mapping[str, float], ctx: SearchContext) -> int:
        """The value from the measurement alone (Accel-Sim's tuner's): the quantity,
        floored (the nearest allowed value for a ``domain``)."""
        q = self.target(measured, ctx)
        if self.domain:
            return min(self.domain, key=lambda v: (abs(v - q), v))
        return max(self.lo, int(q))


@dataclass(frozen=True)
class OptionRule:
    """How one simulator option follows from timing values.

    The rule applies when every field of ``inputs`` and ``requires`` is set and ``when``
    (if given) holds. ``inputs`` are the fields the option is reported as coming from
    (its source kind and detail, and whether it changed from the preset); ``requires``
    are fields it needs without being reported from them. ``formula`` is the text of
    the ``# source:`` line, or a function of the inputs giving it; ``doc`` is the
    formula as ``docs/tuner.md`` shows it (needed where ``formula`` is a function).
    ``accelsim`` names the Accel-Sim function (or hilsim) the rule follows; ``latency``
    says what the latency conventions do to the value; ``search`` how the on-simulator
    tuner sets it (:class:`Knob`).
    """

    option: str
    inputs: tuple[str, ...]
    value: ValueFn
    formula: str | Callable[[RuleInputs], str]
    accelsim: str
    requires: tuple[str, ...] = ()
    when: Callable[[RuleInputs], bool] | None = None
    latency: LatencyKind = LatencyKind.NONE
    doc: str = ""
    #: how the on-simulator search sets the option (one knob per entry it moves; empty:
    #: the search leaves the option to the device facts or the base card)
    search: tuple[Knob, ...] = ()

    def formula_text(self, t: RuleInputs) -> str:
        """The formula text for these inputs."""
        return self.formula if isinstance(self.formula, str) else self.formula(t)

    def applies(self, t: RuleInputs) -> bool:
        """Whether the rule gives a value for these inputs."""
        if not all(t.has(f) for f in (*self.inputs, *self.requires)):
            return False
        return self.when is None or bool(self.when(t))
