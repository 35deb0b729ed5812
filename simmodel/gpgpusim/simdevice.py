"""The GPGPU-Sim device: a card simulated by GPGPU-Sim as a
:class:`~hilsim.microbench.device.Device`, so every microbenchmark family runs on it
unchanged (Accel-Sim, Khairy et al., ISCA 2020, Section II-C: the suite that feeds the
tuner, here run on a card whose configuration is known, to check the tuner).

What differs from a GPU is a property of this device:

* **Deterministic and slow** (:attr:`GpgpusimDevice.simulated`): a repeated run gives the
  same cycles, so a measurement is one run (``samples`` one value, ``spread`` 0), and the
  families run short (~10^4 simulated cycles per CPU second with one SM).
* **A reduced card per run** (:class:`~hilsim.microbench.device.Setup`): single-thread
  chases on one SM (``-gpgpu_n_clusters 1``: the same cycles, ~4x faster), kernel launch
  latency 0 but where launches are measured, ``-gpgpu_perf_sim_memcpy 0`` so uploads leave
  L2 cold; per-SM rates on :attr:`GpgpusimDevice.throughput_sms` SMs (2); L2 and DRAM
  bandwidth on :attr:`GpgpusimDevice.memory_slice_channels` memory channels (one unless
  the tuner sizes the slice; ``-gpgpu_n_mem``, linear partition indexing because IPOLY
  needs 16/32/64 L2 banks), whose bandwidth per channel the families scale by
  :attr:`GpgpusimDevice.memory_scale`, the card's channel count (GPGPU-Sim's channels and
  their L2 banks are independent and addresses interleave over them).
* **Kernel text shims** (:mod:`hilsim.simmodel.gpgpusim.simhost`): ``%clock`` for
  ``clock64()``, a ``__shfl_xor_sync`` without the ``d|p`` destination and without
  ``bfi.b64``, ``red`` run as ``atom`` with a sink (:meth:`GpgpusimDevice.executed_as`);
  ``%smid`` is the shader core id by the build's patch
  (``simmodel/gpgpusim/patches/0001-smid-register.patch``).
* **What it cannot do** (:data:`UNSUPPORTED`): ``%globaltimer``, ``mma``, a TLB, chases of
  10^5+ dependent loads; families record those measurements as skipped with the reason.
* **Device facts from the config** (:func:`card_device_facts`), in the keys the GPU suite
  writes, the config named by the build key and a relative name (no machine paths);
  every simulator run is logged in :attr:`GpgpusimDevice.runs`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
from hilsim.microbench.device import GLOBALTIMER, LONG_CHASES, MMA, RED, TLB, Setup
from hilsim.microbench.program import Program
from hilsim.simmodel.gpgpusim import simhost
from hilsim.simmodel.gpgpusim.cards import dram_memory, peak_dram_gbs

from hilsim.core.measurement import Stability

#: what GPGPU-Sim cannot run, and why (skip reasons in the measurements)
UNSUPPORTED: Mapping[str, str] = MappingProxyType(
    {
        GLOBALTIMER: "GPGPU-Sim has no %globaltimer; the SM clock is the card config's "
        "-gpgpu_clock_domains (device facts max_sm_clock_mhz)",
        MMA: "GPGPU-Sim's PTX lexer knows wmma.* only, not mma: the suite's mma.sync is a "
        "syntax error that aborts the simulator",
        TLB: "GPGPU-Sim models no TLB",
        LONG_CHASES: "a 2 MiB sequential stride sweep is ~10^6 dependent loads on the simulator",
        RED: "GPGPU-Sim does not implement red: the kernel text runs atom with a sink for it",
    }
)
BACKEND = {"backend": "gpgpusim"}
#: what kernel clock reads are on this device
KERNEL_CLOCK = {**BACKEND, "clock": "%clock (simulated core cycles)"}
#: the option that leaves L2 cold after the uploads (the ``cold`` note of measurements)
COLD_L2 = "-gpgpu_perf_sim_memcpy 0"
#: what :attr:`GpgpusimDevice.memory_scale` counts
MEMORY_SCALE = "memory channels (-gpgpu_n_mem)"
#: options of every one-SM run (the latency setups)
ONE_SM = {
    "-gpgpu_n_clusters": "1",
    "-gpgpu_perf_sim_memcpy": "0",
    "-gpgpu_kernel_launch_latency": "0",
}


def portable_config_name(path: str | os.PathLike[str], build: Any = None) -> tuple[str, str]:
    """(name, where) of a card's config file without the machine's paths: relative to the
    build's ``configs/tested-cfgs`` for a shipped card (where: ``build <key>``), relative
    to the current folder for a file inside it, else its folder and file name (where:
    ``user file``)."""
    p = Path(path).resolve()
    if build is not None:
        with contextlib.suppress(ValueError):
            return str(p.relative_to(Path(build.configs_dir).resolve())), f"build {build.key}"
    with contextlib.suppress(ValueError):
        return str(p.relative_to(Path.cwd().resolve())), "user file"
    return str(Path(p.parent.name) / p.name), "user file"


def card_device_facts(card: Any, build: Any = None) -> dict[str, Any]:
    """Device facts of a simulated card, from its config, in the GPU suite's key names.

    The keys are those :func:`hilsim.microbench.gpu.device_facts` writes (and the tuner
    reads): ``sm_count``, ``max_sm_clock_mhz``, ``max_mem_clock_mhz``,
    ``l2_cache_bytes``, ``shared_mem_per_sm_bytes``, ``memory_bus_width_bits``, ...
    The config is named without machine paths (:func:`portable_config_name`) and by the
    sha256 of its text.
    """
    f = card.facts()
    config, config_source = portable_config_name(card.path, build)
    opts = card.options()
    major = int(float(opts.get("-gpgpu_compute_capability_major", "7")))
    minor = int(float(opts.get("-gpgpu_compute_capability_minor", "0")))
    threads = int(opts.get("-gpgpu_shader_core_pipeline", "2048:32").split(":")[0])
    warp = int(opts.get("-gpgpu_shader_core_pipeline", "2048:32").split(":")[1])
    mem_clock, bus_bits = dram_memory(opts)
    facts: dict[str, Any] = {
        "name": f"GPGPU-Sim {card.name}",
        "backend": "gpgpusim",
        "card": card.name,
        "config": config,
        "config_source": config_source,
        "config_sha256": hashlib.sha256(card.text.encode()).hexdigest(),
        "compute_capability": f"{major}.{minor}",
        "cc_major": major,
        "cc_minor": minor,
        "sm_count": f["sm_count"],
        "max_sm_clock_mhz": f["core_clock_mhz"],
        "max_mem_clock_mhz": mem_clock,
        "memory_bus_width_bits": bus_bits,
        "peak_dram_gbs": peak_dram_gbs(mem_clock, bus_bits),
        "l2_cache_bytes": f["l2_bytes"],
        "l1_cache_bytes": f["l1_bytes"],
        "shared_mem_per_sm_bytes": f.get("shmem_bytes"),
        "shared_mem_per_block_bytes": int(float(opts.get("-gpgpu_shmem_per_block", "49152"))),
        "max_threads_per_sm": threads,
        "warp_size": warp,
        "regs_per_sm": int(float(opts.get("-gpgpu_shader_registers", "65536"))),
        "memory_type": memory_type(opts),
    }
    if "unified_l1d_kib" in f:
        facts["unified_l1_shared_bytes"] = f["unified_l1d_kib"] * 1024
    return {k: v for k, v in facts.items() if v is not None}


def memory_type(opts: Mapping[str, str]) -> str:
    """DRAM type of a config, by Accel-Sim's mem_config models (inverted): HBM has the
    dual bus interface, GDDR6 a 16-beat burst on 2-byte channels, GDDR5 an 8-beat one."""
    if opts.get("-dram_dual_bus_interface", "0").split()[0] == "1":
        return "HBM"
    burst = int(float(opts.get("-gpgpu_dram_burst_length", "8").split()[0]))
    return "GDDR6" if burst >= 16 else "GDDR5"


@dataclass
class GpgpusimDevice:
    """A simulated card as a :class:`~hilsim.microbench.device.Device`.

    ``overrides`` are card options applied on top of every run's setup options (the
    latency calibration's points); ``runs`` logs every simulated program (benchmark,
    options, launches, simulated cycles, wall seconds) and ``on_run`` sees each entry.
    """

    card: Any
    facts: dict[str, Any] = field(default_factory=dict)
    build: Any = None
    seed: int = 0
    throughput_sms: int = 2
    #: memory channels of :attr:`~hilsim.microbench.device.Setup.MEMORY_SLICE` runs
    memory_slice_channels: int = 1
    overrides: dict[str, str] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)
    on_run: Callable[[dict[str, Any]], None] | None = None
    simulated: bool = field(default=True, init=False)
    unsupported: Mapping[str, str] = field(default_factory=lambda: UNSUPPORTED, init=False)
    backend_params: dict[str, Any] = field(default_factory=lambda: dict(BACKEND), init=False)
    kernel_clock_params: dict[str, Any] = field(
        default_factory=lambda: dict(KERNEL_CLOCK), init=False
    )
    cold_l2_note: str = field(default=COLD_L2, init=False)
    memory_scale_note: str = field(default=MEMORY_SCALE, init=False)

    def __post_init__(self) -> None:
        if not self.facts and self.card is not None:
            self.facts = card_device_facts(self.card, self.build)

    @property
    def sm_count(self) -> int:
        """SMs of the card."""
        return int(self.facts["sm_count"])

    @property
    def _cores_per_cluster(self) -> int:
        return int(float(self.card.option("-gpgpu_n_cores_per_cluster", "1")))

    @property
    def active_sms(self) -> int:
        """SMs of the throughput slice: :attr:`throughput_sms` in whole clusters."""
        per_cluster = self._cores_per_cluster
        return max(1, self.throughput_sms // per_cluster) * per_cluster

    @property
    def threads_per_sm(self) -> int:
        """Resident threads per SM (the config's ``-gpgpu_shader_core_pipeline``)."""
        return int(self.facts.get("max_threads_per_sm") or 2048)

    @property
    def cc(self) -> tuple[int, int]:
        """Compute capability (major, minor) of the config."""
        return int(self.facts.get("cc_major", 0)), int(self.facts.get("cc_minor", 0))

    @property
    def memory_scale(self) -> int:
        """The card's memory channels (``-gpgpu_n_mem``): what a memory slice's L2 and DRAM
        bandwidth per channel is scaled by."""
        return int(float(self.card.option("-gpgpu_n_mem", "8")))

    def supports(self, feature: str) -> bool:
        """Whether GPGPU-Sim can run ``feature`` (:data:`UNSUPPORTED`)."""
        return feature not in self.unsupported

    def rng(self, salt: int) -> np.random.Generator:
        """A deterministic generator per benchmark (as on a GPU)."""
        return np.random.default_rng([self.seed, salt])

    def sm_clock_mhz(self) -> tuple[float | None, str]:
        """The config's core clock: the SM clock of every conversion."""
        return float(self.facts["max_sm_clock_mhz"]), "card config -gpgpu_clock_domains"

    def use_measured_clock(self, mhz: float) -> None:
        """Nothing to measure: the clock is the configuration's."""

    def sample(
        self, fn: Callable[[], float], max_reps: int, rel_spread_bound: float, min_reps: int
    ) -> Stability:
        """One run: the simulator is deterministic."""
        value = float(fn())
        return Stability([value], value, 0.0, True)

    def free_bytes(self) -> int:
        """No device memory limit the suite's sizes approach (the simulator allocates on
        the host)."""
        return 1 << 40

    def prefer_max_l1(self, module: str, kernel: str) -> int | None:
        """The carveout is the config's ``-gpgpu_shmem_option``: nothing to ask for."""
        return None

    def executed_as(self, instruction: str) -> str:
        """``red.X`` runs as ``atom.X _`` (:func:`.simhost.sim_kernel_text`)."""
        if instruction.startswith("red."):
            return f"{instruction} (simulated as atom.{instruction[4:]} _: simhost)"
        return instruction

    def slice_params(self) -> dict[str, Any]:
        """What a throughput measurement ran on: the simulated SMs of the card's."""
        return {
            **self.kernel_clock_params,
            "sms_simulated": self.active_sms,
            "sm_count": self.facts.get("sm_count"),
        }

    def setup_options(self, setup: Setup) -> dict[str, str]:
        """Simulator options of a setup (before :attr:`overrides`)."""
        if setup is Setup.ONE_SM:
            return dict(ONE_SM)
        if setup is Setup.ONE_SM_CACHED_UPLOADS:
            return {k: v for k, v in ONE_SM.items() if k != "-gpgpu_perf_sim_memcpy"}
        if setup is Setup.ONE_SM_ONE_CHANNEL:
            return {**ONE_SM, "-gpgpu_n_mem": "1", "-gpgpu_memory_partition_indexing": "0"}
        if setup is Setup.LAUNCH:
            return {"-gpgpu_n_clusters": "1"}
        opts = {
            "-gpgpu_n_clusters": str(max(1, self.throughput_sms // self._cores_per_cluster)),
            "-gpgpu_kernel_launch_latency": "0",
            "-gpgpu_perf_sim_memcpy": "0",
        }
        if setup is Setup.MEMORY_SLICE:
            opts["-gpgpu_n_mem"] = str(self.memory_slice_channels)
            opts["-gpgpu_memory_partition_indexing"] = "0"
        return opts

    def run(
        self, bench: str, program: Program, setup: Setup, *, timed: bool = True
    ) -> simhost.PlanResult:
        """Simulate ``program`` (one host process) on the setup's reduced card; log the
        run's wall time and simulated cycles."""
        options = {**self.setup_options(setup), **self.overrides}
        result = simhost.run_plan(program, self.card, options=options, build=self.build)
        entry = {
            "benchmark": bench,
            "module": program.module,
            "options": dict(options),
            "launches": len(program.launches),
            "sim_cycles": result.total_cycles,
            "wall_s": round(result.wall_s, 3),
        }
        self.runs.append(entry)
        if self.on_run is not None:
            self.on_run(entry)
        return result
