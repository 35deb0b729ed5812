"""``hilsim dse`` checked against re-simulation: the same variation on both sides.

A hardware variation (``l2_size=x2``, ``sm_count=x0.5``, ...) is applied to the model's
config with :func:`hilsim.simmodel.dse.vary` and to the GPGPU-Sim card with
:func:`sim_options` (the option that holds the same quantity); the launches are
re-simulated under each, and :func:`pairs` compares, per launch and variation, the
simulated speedup with the model's prediction from the *baseline* counters (what a
user has: counters measured on today's GPU, a config of tomorrow's). Speedups are
old time / new time (time = cycles / core clock), as in :mod:`hilsim.simmodel.dse`.

This is the check STEM (Table 4) and PKA (Fig. 10) make of their sampled estimates
against a simulator, made here of the analytical model itself.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hilsim.simmodel import correlation as corr
from hilsim.simmodel.dse import vary
from hilsim.simmodel.model import predict_cycles
from hilsim.simmodel.tuner.calibration import LATENCY_OPTIONS, calibration_for_card

from hilsim.core.errors import HilsimError

#: the checked variations (dse syntax); :func:`sim_options` gives each one's GPGPU-Sim form
SIM_VARIATIONS: tuple[str, ...] = (
    "l2_size=x2",
    "sm_count=x0.5",
    "dram_clock=x2",
    "l1_latency=x1.5",
    "sm_clock=x1.2",
    "shared_latency=x2",
)
#: a simulated change smaller than this (relative) counts as "no change"
NO_CHANGE = 0.01


def _factor(spec: str) -> tuple[str, float]:
    name, _, raw = spec.partition("=")
    if raw[:1] not in ("x", "X"):
        raise HilsimError(f"dse check: {spec!r}: only NAME=xFACTOR variations are simulated")
    return name.strip(), float(raw[1:])


def sim_options(spec: str, options: dict[str, str]) -> dict[str, str]:
    """The GPGPU-Sim option overrides that make variation ``spec`` of a card.

    ``options``: the card's effective options (``CardConfig.options()``, the reduced SM
    count included). ``l2_size``: sets of ``-gpgpu_cache:dl2`` (per bank) x F, or its
    ways where that would exceed 64 sets (the simulator's IPOLY hash);
    ``sm_count``: ``-gpgpu_n_clusters`` x F; ``dram_clock``: the DRAM clock of
    ``-gpgpu_clock_domains`` x F (bandwidth x F; the DRAM timing is in DRAM cycles, so
    that part of the latency shrinks too, as :func:`hilsim.simmodel.dse.vary` models);
    ``l1_latency``: ``-gpgpu_l1_latency`` x F; ``shared_latency``: ``-gpgpu_smem_latency``
    x F; ``sm_clock``: the core, interconnect and L2 clocks x F (the model's L2 bandwidth
    and latency are per core cycle), DRAM clock kept.
    """
    name, f = _factor(spec)
    domains = [float(x) for x in options["-gpgpu_clock_domains"].split(":")]
    if name == "l2_size":
        parts = options["-gpgpu_cache:dl2"].split(",")
        head = parts[0].split(":")
        sets = int(round(int(head[1]) * f))
        if sets <= 64:
            head[1] = str(sets)
        else:
            # GPGPU-Sim's IPOLY set hash takes at most 64 sets per bank: more ways instead
            head[3] = str(int(round(int(head[3]) * f)))
        return {"-gpgpu_cache:dl2": ",".join([":".join(head), *parts[1:]])}
    if name == "sm_count":
        return {"-gpgpu_n_clusters": str(max(1, round(int(options["-gpgpu_n_clusters"]) * f)))}
    if name == "dram_clock":
        domains[3] *= f
    elif name == "sm_clock":
        domains[:3] = [d * f for d in domains[:3]]
    elif name == "l1_latency":
        return {"-gpgpu_l1_latency": str(int(round(int(options["-gpgpu_l1_latency"]) * f)))}
    elif name == "shared_latency":
        return {"-gpgpu_smem_latency": str(int(round(int(options["-gpgpu_smem_latency"]) * f)))}
    else:
        raise HilsimError(f"dse check: no GPGPU-Sim form of {spec!r}")
    return {"-gpgpu_clock_domains": ":".join(f"{d:g}" for d in domains)}


#: latency variations: the model gets the latency a pointer chase measures on the varied
#: card (the option is one stage of the measured latency, not all of it)
_LATENCY_FIELDS = {"l1_latency": ("-gpgpu_l1_latency", "l1.hit_latency_cycles"),
                   "shared_latency": ("-gpgpu_smem_latency", "shared.latency_cycles")}


def model_spec(spec: str, card: str) -> list[str]:
    """The ``hilsim dse --vary`` specs the model gets for simulated variation ``spec``.

    ``dram_clock=xF``: also the DRAM latency the simulator's DRAM-clocked timings give
    at F x the clock (they are the offset of the card's measured latency map). A
    latency option scaled by F: the model is given the L1, L2,
    DRAM and shared latencies the card's latency microbenchmarks measure with the scaled
    option (:func:`hilsim.simmodel.correlation.card_latencies`; an option can move more
    than one measured latency), e.g. ``l1_latency=x1.5`` on SM7_QV100
    (``-gpgpu_l1_latency`` 20 -> 30) gives ``l1_latency=34.27`` (measured 24.42) and the
    L2 / DRAM latencies that option moves.
    """
    name, f = _factor(spec)
    base = corr.card_latencies(card)
    if name == "dram_clock" and base:
        # the simulator's DRAM timings are DRAM-clock cycles: the part of the measured
        # DRAM - L2 latency that -dram_latency does not explain (the map's offset) is
        # that time, and shrinks with a faster DRAM clock
        cal = calibration_for_card(card)
        dram = base["dram.latency_cycles"] - float(cal.offset[2]) * (1 - 1 / f)
        return [spec, f"dram_latency={dram:.2f}"]
    if name not in _LATENCY_FIELDS or not base:
        return [spec]

    option = _LATENCY_FIELDS[name][0]
    values = calibration_for_card(card).card_values  # base is not empty: there is a map
    varied = {o: str(values[o]) for o in LATENCY_OPTIONS}
    varied[option] = str(int(round(float(values[option]) * f)))
    new = corr.card_latencies(card, varied)
    names = {"l1.hit_latency_cycles": "l1_latency", "l2.hit_latency_cycles": "l2_latency",
             "dram.latency_cycles": "dram_latency", "shared.latency_cycles": "shared_latency"}
    return [f"{names[k]}={v:.2f}" for k, v in new.items() if abs(v - base[k]) > 1e-9]




def _direction(s: np.ndarray, tol: float) -> np.ndarray:
    return np.where(np.abs(s - 1) < tol, 0, np.sign(s - 1)).astype(int)


def pairs(baseline: pd.DataFrame, cycles: pd.DataFrame, card: str) -> pd.DataFrame:
    """One row per (launch, variation): simulated and predicted speedup.

    ``baseline``: the correlation-set columns of the launches on the unvaried card
    (counters, launch configuration, ``cycles``, ``sm_count``); ``cycles``: long table
    ``variation, program, launch_id, cycles, core_clock_mhz`` of the re-simulations
    (``baseline`` among the variations). Returns ``variation, program, launch_id,
    kernel, sim_speedup, model_speedup``.
    """
    key = ["program", "launch_id"]
    base = baseline.reset_index(drop=True)
    cfg = corr.card_timing(card, int(base["sm_count"].iat[0]), 0.0)
    x = corr.model_input_from_sim(base)
    t0_model = predict_cycles(cfg, x)[0] / cfg.get("core.core_clock_mhz").value
    sim0 = cycles[cycles["variation"] == "baseline"].set_index(key)
    out = []
    for spec in [v for v in cycles["variation"].unique() if v != "baseline"]:
        vcfg = cfg
        for one in model_spec(spec, card):
            vcfg = vary(vcfg, one)
        t1_model = predict_cycles(vcfg, x, reference=cfg)[0] / vcfg.get(
            "core.core_clock_mhz").value
        sim1 = cycles[cycles["variation"] == spec].set_index(key)
        idx = pd.MultiIndex.from_frame(base[key])
        t0 = (sim0["cycles"] / sim0["core_clock_mhz"]).reindex(idx).to_numpy(float)
        t1 = (sim1["cycles"] / sim1["core_clock_mhz"]).reindex(idx).to_numpy(float)
        out.append(pd.DataFrame({
            "variation": spec, "program": base["program"], "launch_id": base["launch_id"],
            "kernel": base["kernel"], "sim_t0": t0, "sim_t1": t1,
            "model_t0": t0_model, "model_t1": t1_model,
        }))
    if not out:
        raise HilsimError("dse check: no variation besides the baseline was simulated")
    df = pd.concat(out, ignore_index=True).dropna(subset=["sim_t0", "sim_t1"])
    df["sim_speedup"] = df["sim_t0"] / df["sim_t1"]
    df["model_speedup"] = df["model_t0"] / df["model_t1"]
    return df


def kernel_pairs(launch_pairs: pd.DataFrame) -> pd.DataFrame:
    """Per (kernel, variation): speedup of the kernel's total time over its launches."""
    g = launch_pairs.groupby(["variation", "program", "kernel"], sort=True)[
        ["sim_t0", "sim_t1", "model_t0", "model_t1"]].sum().reset_index()
    g["sim_speedup"] = g["sim_t0"] / g["sim_t1"]
    g["model_speedup"] = g["model_t0"] / g["model_t1"]
    return g


def direction_right(sim: np.ndarray, model: np.ndarray, tol: float = NO_CHANGE) -> np.ndarray:
    """Whether the model gets the direction of the change right, per pair.

    Where the simulator shows a change of at least ``tol`` the model's speedup must be on
    the same side of 1; where it shows none (``|s - 1| < tol``) the model must predict
    none either.
    """
    s, m = np.asarray(sim, float), np.asarray(model, float)
    ds = _direction(s, tol)
    return np.where(ds == 0, np.abs(m - 1) < tol, np.sign(m - 1) == ds)


def summary(p: pd.DataFrame, tol: float = NO_CHANGE) -> dict[str, float]:
    """Direction-right share, speedup MAE (|model - sim| / sim) and pair count."""
    right = direction_right(p["sim_speedup"], p["model_speedup"], tol)
    err = np.abs(p["model_speedup"] - p["sim_speedup"]) / p["sim_speedup"]
    return {"pairs": len(p), "direction_right": float(np.mean(right)),
            "speedup_mae": float(np.mean(err)), "speedup_max_err": float(np.max(err))}


__all__ = ["NO_CHANGE", "SIM_VARIATIONS", "direction_right", "kernel_pairs", "model_spec",
           "pairs",
           "sim_options", "summary"]
