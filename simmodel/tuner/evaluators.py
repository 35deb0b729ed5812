"""What the on-simulator search runs on a candidate card: the suite's microbenchmarks
over the GPGPU-Sim device, and the runner that simulates a round's programs in parallel.

Accel-Sim (Khairy et al., ISCA 2020), Section II-C: each tuned option follows from one
targeted microbenchmark. An :class:`Evaluator` is one of the suite's family functions
(:mod:`hilsim.microbench`) run on
:class:`~hilsim.simmodel.gpgpusim.simdevice.GpgpusimDevice`, with the programs it
compiles and the slice of the card it runs on; a knob names its evaluator
(:class:`~hilsim.simmodel.tuner.rule.Knob`).
"""

from __future__ import annotations

import math
import resource
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from hilsim.microbench import bandwidth, compute, latency, launch, unit_ops
from hilsim.microbench.device import Device
from hilsim.simmodel.gpgpusim import simhost
from hilsim.simmodel.gpgpusim.cards import CardConfig
from hilsim.simmodel.gpgpusim.run import simulations_interruptible
from hilsim.simmodel.gpgpusim.simdevice import GpgpusimDevice
from hilsim.simmodel.tuner.memslice import MemorySlice

from hilsim.core.errors import HilsimError
from hilsim.core.measurement import Measurement

#: the memory side of a one-channel run (linear partition indexing: one channel has no
#: hash to spread over)
ONE_CHANNEL = {"-gpgpu_n_mem": "1", "-gpgpu_memory_partition_indexing": "0"}


@dataclass(frozen=True)
class Evaluator:
    """One of the suite's measurements as the search runs it on a candidate."""

    run: Callable[[Device], list[Measurement]]
    #: the programs (source modules) it compiles
    programs: tuple[str, ...]
    #: its kernels run on a memory slice (the slice's channels and SMs matter:
    #: :class:`~hilsim.simmodel.tuner.memslice.MemorySlice`)
    memory_slice: bool = False
    #: its timed loops touch no global memory (register chains, shared memory, an empty
    #: kernel's launch): it runs on one memory channel, which gives the same values as
    #: the candidate's every channel (measured on a 256-channel SM86 candidate for
    #: SM90_H100: every value equal, the same simulated cycles for all but the two
    #: shared-memory programs' untimed uploads) at a fraction of the simulator's time
    #: (each cycle steps every channel and L2 bank: 31 s -> 2 s wall for an FFMA rate)
    one_channel: bool = False

    def __call__(self, device: Device) -> list[Measurement]:
        return self.run(device)


def _compute(unit: str, what: str) -> Evaluator:
    fn = compute.latency if what == "lat" else compute.throughput
    return Evaluator(lambda d: [fn(d, unit)], ("compute.arith",), one_channel=True)


#: evaluator name -> how the search runs it
EVALUATORS: dict[str, Evaluator] = {
    "chase": Evaluator(latency.chase_latencies, ("latency.chase",)),
    "shared": Evaluator(lambda d: [latency.shared_latency(d)], ("latency.shared_chase",),
                        one_channel=True),
    "launch": Evaluator(launch.launch_latency, ("latency.chase",), one_channel=True),
    **{f"{what}.{u}": _compute(u, what) for what in ("lat", "tput")
       for u in ("fp32", "fp64", "int32")},
    "shared_bw": Evaluator(lambda d: [bandwidth.onchip(d, "shared")], ("bandwidth.onchip",),
                           one_channel=True),
    "l2_bw": Evaluator(bandwidth.l2, ("bandwidth.grid",), memory_slice=True),
    "dram_bw": Evaluator(lambda d: [bandwidth.dram_read_slice(d)], ("bandwidth.grid",),
                         memory_slice=True),
    # the suite's unit probes, every one in one program (as the suite runs them on a
    # simulated card)
    "units": Evaluator(lambda d: unit_ops.simulated(d), ("compute.ops",)),
}
#: evaluators whose timed loops touch no global memory (:attr:`Evaluator.one_channel`)
ONE_CHANNEL_EVALUATORS = tuple(name for name, ev in EVALUATORS.items() if ev.one_channel)


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (the simulator processes)."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    me = resource.getrusage(resource.RUSAGE_SELF)
    return kids.ru_utime + kids.ru_stime + me.ru_utime + me.ru_stime


class CandidateRunner:
    """Runs evaluators on candidate cards in parallel and counts what ran."""

    def __init__(self, build: Any, workers: int, memory_slice: MemorySlice) -> None:
        self.build = build
        self.workers = workers
        #: the channels and SMs the memory-slice evaluators run on
        self.memory_slice = memory_slice
        self.runs: list[dict[str, Any]] = []
        self.compiled: set[tuple[str, str]] = set()

    def _precompile(self, evaluators: list[str], card: CardConfig) -> None:
        arch = simhost.card_arch(card)
        for ev in evaluators:
            for module in EVALUATORS[ev].programs:
                if (module, arch) not in self.compiled:  # once, before any thread runs it
                    simhost.compiled_program(module, arch)
                    self.compiled.add((module, arch))

    def evaluate_many(
        self, jobs: Sequence[tuple[list[str], CardConfig]]
    ) -> list[dict[str, float]]:
        """Every (evaluators, card) job of a round in one pool: ``workers`` simulator
        processes at a time over all the jobs' programs."""
        if len(jobs) == 1:
            return [self.evaluate(*jobs[0])]
        for evs, card in jobs:
            self._precompile(evs, card)
        pairs = [(i, ev, card) for i, (evs, card) in enumerate(jobs) for ev in evs]
        results: list[dict[str, float]] = [{} for _ in jobs]
        with ThreadPoolExecutor(max_workers=self.workers) as pool, simulations_interruptible():
            for i, values in pool.map(lambda p: (p[0], self.evaluate([p[1]], p[2])), pairs):
                results[i].update(values)
        return results

    def evaluate(self, evaluators: list[str], card: CardConfig) -> dict[str, float]:
        """The valid measurements of ``evaluators`` on ``card``, by name."""
        self._precompile(evaluators, card)

        def one(ev: str) -> tuple[str, list[Measurement], list[dict[str, Any]]]:
            spec = EVALUATORS[ev]
            sms, chans = ((self.memory_slice.sms, self.memory_slice.channels)
                          if spec.memory_slice else (2, 1))
            one = dict(ONE_CHANNEL) if spec.one_channel else {}
            device = GpgpusimDevice(card, build=self.build, throughput_sms=sms,
                                    memory_slice_channels=chans, overrides=one)
            try:
                out = spec(device)
            except HilsimError as exc:
                raise HilsimError(f"tune --on-simulator: {ev} on the candidate: {exc}") from None
            for r in device.runs:
                r["evaluator"] = ev
            return ev, out, device.runs

        values: dict[str, float] = {}
        with (ThreadPoolExecutor(max_workers=max(1, min(self.workers, len(evaluators)))) as pool,
              simulations_interruptible()):
            for _ev, out, runs in pool.map(one, evaluators):
                self.runs.extend(runs)
                for m in out:
                    if m.valid and m.value is not None and math.isfinite(float(m.value)):
                        values[m.name] = float(m.value)
        return values
