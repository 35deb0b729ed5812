"""`hilsim tune --on-simulator` on cards it never saw, on SM90_H100 and on the real H100:
what it recovers, how many simulator runs and CPU minutes it takes (prints the figures;
not a test; docs/tuner.md's tables come from here).

    python benchmarks/tune_on_simulator.py [--cases held-out,drawn,h100,silicon,remeasure]
        [--seeds 3] [--workers 2] [--out DIR] [--base CARD (h100 only)]
        [--structures SM7_QV100[:SEED],... (remeasure only)]

* held-out: GPGPU-Sim's SM7_GV100, SM7_TITANV, SM75_RTX2060_S, measured by the suite
  with its unit probes (tests/data/microbench/tuner/heldout/), tuned with every knob,
  compared with the card's own config (read here, never by the tuner): four latencies
  within 2 cycles or 3 %, MAD initiation intervals exact, and every latency-list entry
  re-simulated with a one-warp probe on the true and the tuned card;
* drawn: cards drawn from seeds 0..N-1 on the QV100 and RTX 2060 structures (other
  latencies, core and DRAM clocks, SM counts, initiation intervals with 3 and 6),
  measured here with the latency/initiation kernels, tuned, compared (spread over seeds);
* h100: the suite's output on SM90_H100 (tests/data/microbench/tuner/heldout/),
  tuned from its own base (the base is the card: only the measured options are evidence)
  and from SM86_RTX3070 (another generation's structure);
* silicon: tests/data/silicon/H100/microbench.json (+ probe.json), base SM90_H100:
  measured vs simulated per target, the unreachable ones named;
* remeasure: judged as a user would: a card drawn on each of ``--structures`` (GPGPU-Sim
  cards, bases or not: the tuner chooses its base from the drawn card's facts) is
  measured with every kernel the tuner reads (latencies, unit probes, MAD rates, shared,
  L2 and DRAM bandwidth), tuned with every knob and the whole-card streaming check, and
  the tuned card is measured again with the same kernels: each measurement on the tuned
  card against the one it was tuned from (cycles within 2 or 3 %, rates and bandwidths
  within 3 %), the off-target flags and the whole card's streaming rate.

Every case: simulator runs, rounds, CPU minutes (the simulator processes' and this
process's), wall seconds. Results also go to OUT/results.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from hilsim.simmodel.gpgpusim.build import find_build
from hilsim.simmodel.gpgpusim.cards import card_config
from hilsim.simmodel.tuner import read_device_facts
from hilsim.simmodel.tuner import report as tunereport
from hilsim.simmodel.tuner.heldout import (
    HELD_OUT,
    LATENCY_EVALUATORS,
    draw_card,
    measure,
    probe_check,
    recovery,
    within,
)
from hilsim.simmodel.tuner.search import LoopResult, tune_on_simulator

from hilsim.core.measurement import read_microbench_json

ROOT = Path(__file__).resolve().parent.parent
HELD = ROOT / "tests" / "data" / "microbench" / "gpgpusim" / "heldout"
SILICON = ROOT / "tests" / "data" / "silicon" / "H100"


def cost(result: LoopResult) -> dict[str, Any]:
    """Runs, rounds, CPU minutes and wall seconds of one tune."""
    return {
        "runs": len(result.runs),
        "rounds": len(result.rounds),
        "cpu_min": round(result.cpu_s / 60, 2),
        "wall_s": round(result.wall_s),
        "base": result.base.name,
    }


def targets(result: LoopResult) -> list[dict[str, Any]]:
    """Measured vs simulated per target (tune-report.json's rows)."""
    return tunereport.report(result)["targets"]


def tuned_card(result: LoopResult, folder: Path):  # noqa: ANN201 - a CardConfig
    """The tuned card written and read back as a card."""
    return card_config(tunereport.write(result, folder, overwrite=True))


def print_rows(title: str, rows: list[Any]) -> None:
    print(f"\n#### {title}\n")
    print("| option | entry | true | tuned | rule | ok |\n|---|---|---:|---:|---|---|")
    for r in rows:
        print(f"| `{r.option}` | {r.entry} | {r.true:g} | {r.tuned:g} | {r.rule} | "
              f"{'yes' if r.ok else 'NO'} |")


def print_targets(title: str, result: LoopResult) -> None:
    print(f"\n#### {title}: measured vs simulated at the tuned card\n")
    print("| option | value (base) | measured | simulated | note |\n|---|---:|---:|---:|---|")
    for t in targets(result):
        where = t["option"] + (f"[{t['entry']}]" if t["entry"] is not None else "")
        sim = "-" if t["simulated"] is None else f"{t['simulated']:.4g}"
        note = t["unreachable"] or ("base kept: " + t["note"] if t["kept_base"] else "")
        print(f"| `{where}` | {t['value']} ({t['base_value']}) | {t['measured']:.4g} | "
              f"{sim} | {note} |")
    for name, why in sorted(result.skipped.items()):
        print(f"| `{name}` | - | - | - | not used: {why} |")


def held_out(build: Any, workers: int, out: Path) -> dict[str, Any]:
    res = {}
    for name in HELD_OUT:
        result = tune_on_simulator(HELD / f"{name}.microbench.json", build=build,
                                   workers=workers, say=print)
        true = card_config(name, build)
        tuned = tuned_card(result, out / f"tuned-{name}")
        rows = recovery(true, tuned)
        probes = probe_check(true, tuned, build)
        print_rows(f"{name} (base {result.base.name})", rows)
        print_rows(f"{name}: every latency-list entry, one-warp probe (cycles)", probes)
        print_targets(name, result)
        print(f"\n{name}: {cost(result)}")
        res[name] = {"cost": cost(result), "recovery": [r.__dict__ for r in rows],
                     "probes": [r.__dict__ for r in probes], "targets": targets(result)}
    return res


def drawn(build: Any, workers: int, seeds: int, out: Path) -> dict[str, Any]:
    res: dict[str, Any] = {}
    for base in ("SM7_QV100", "SM75_RTX2060"):
        for seed in range(seeds):
            tag = f"{base}-seed{seed}"
            card = draw_card(seed, card_config(base, build), out / f"drawn-{tag}")
            true = card_config(card.folder)
            measured = measure(true, build, out / f"{tag}.microbench.json",
                               (*LATENCY_EVALUATORS, "shared_bw", "dram_bw"))
            result = tune_on_simulator(measured, build=build, workers=workers, say=print)
            tuned = tuned_card(result, out / f"tuned-{tag}")
            rows = recovery(true, tuned)
            print_rows(f"drawn {tag}: {card.drawn}", rows)
            print(f"\n{tag}: {cost(result)}")
            res[tag] = {"drawn": card.drawn, "cost": cost(result),
                        "recovery": [r.__dict__ for r in rows]}
    return res


def h100(build: Any, workers: int, out: Path,
         bases: tuple[str | None, ...] = (None, "SM86_RTX3070")) -> dict[str, Any]:
    res = {}
    true = card_config("SM90_H100", build)
    for base in bases:
        result = tune_on_simulator(HELD / "SM90_H100.microbench.json", base=base, build=build,
                                   workers=workers, say=print)
        tuned = tuned_card(result, out / f"tuned-h100-{base or 'own'}")
        rows = recovery(true, tuned)
        label = f"SM90_H100 from base {result.base.name}"
        print_rows(label, rows)
        print_targets(label, result)
        print(f"\n{label}: {cost(result)}")
        res[result.base.name] = {"cost": cost(result), "recovery": [r.__dict__ for r in rows],
                                 "targets": targets(result)}
    return res


def silicon(build: Any, workers: int, out: Path) -> dict[str, Any]:
    facts = read_device_facts(SILICON / "probe.json")
    result = tune_on_simulator(SILICON / "microbench.json", build=build, workers=workers,
                               say=print, device_facts=facts)
    tunereport.write(result, out / "tuned-h100-silicon", overwrite=True)
    print_targets("H100 silicon (tests/data/silicon/H100)", result)
    print(f"\nsilicon H100: {cost(result)}")
    return {"cost": cost(result), "targets": targets(result), "skipped": result.skipped}


#: the kernels the remeasure case measures a card with (every evaluator a knob reads)
REMEASURE_EVALUATORS = (*LATENCY_EVALUATORS, "shared_bw", "l2_bw", "dram_bw", "units")


def _agree(name: str, unit: str, true: float, tuned: float) -> bool:
    """Cycles within 2 or 3 %; rates and bandwidths within 3 %."""
    if unit == "cycles":
        return within(true, tuned)
    return abs(tuned - true) <= 0.03 * abs(true)


def remeasure(build: Any, workers: int, seeds: int, structures: list[str],
              out: Path) -> dict[str, Any]:
    res: dict[str, Any] = {}
    for spec in structures:
        structure, _, only_seed = spec.partition(":")
        for seed in ([int(only_seed)] if only_seed else range(seeds)):
            tag = f"{structure}-seed{seed}"
            card = draw_card(seed, card_config(structure, build), out / f"drawn-{tag}")
            true = card_config(card.folder)
            measured = measure(true, build, out / f"{tag}.microbench.json",
                               REMEASURE_EVALUATORS)
            result = tune_on_simulator(measured, build=build, workers=workers, say=print,
                                       card_check=True)
            tuned = tuned_card(result, out / f"tuned-{tag}")
            again = measure(tuned, build, out / f"{tag}.tuned.microbench.json",
                            REMEASURE_EVALUATORS)
            before = {m.name: m for m in read_microbench_json(measured)[0]}
            rows = []
            for m in read_microbench_json(again)[0]:
                b = before.get(m.name)
                if b is None or not (b.valid and m.valid) or b.value is None or m.value is None:
                    continue
                rows.append({"name": m.name, "unit": m.unit, "true": float(b.value),
                             "tuned": float(m.value),
                             "relative": float(m.value) / float(b.value) - 1.0,
                             "ok": _agree(m.name, m.unit, float(b.value), float(m.value))})
            doc = tunereport.report(result)
            print(f"\n#### remeasured {tag} (base {result.base.name}): {card.drawn}\n")
            print("| measurement | unit | drawn card | tuned card | diff | ok |\n"
                  "|---|---|---:|---:|---:|---|")
            for r in rows:
                print(f"| {r['name']} | {r['unit']} | {r['true']:.4g} | {r['tuned']:.4g} | "
                      f"{100 * r['relative']:+.2f}% | {'yes' if r['ok'] else 'NO'} |")
            wc = doc["whole_card_streaming"]
            if wc:
                print(f"\n{tag}: {wc['line']}")
            print(f"\n{tag}: {sum(r['ok'] for r in rows)}/{len(rows)} within; off target: "
                  f"{[o['knob'] for o in doc['off_target']]}; {cost(result)}")
            res[tag] = {"drawn": card.drawn, "base": result.base.name, "cost": cost(result),
                        "rows": rows, "off_target": doc["off_target"],
                        "unreachable": [t["knob"] for t in doc["targets"] if t["unreachable"]],
                        "whole_card_streaming": wc,
                        "register_file_ports": doc["register_file_ports"]}
    return res


def remeasure_summary(res: dict[str, Any]) -> None:
    """One row per drawn card: measurements within, the ones off, flags, cost."""
    print("\n| drawn card | base | within (cycles 2 / 3 %, rates 3 %) | off | flagged | "
          "whole-card streaming vs slice | runs | CPU-min |")
    print("|---|---|---|---|---|---|---:|---:|")
    for tag, v in res.items():
        rows = v["rows"]
        off = "; ".join(f"{r['name']} {100 * r['relative']:+.1f}%" for r in rows if not r["ok"])
        wc = v.get("whole_card_streaming")
        stream = "-" if not wc else f"{100 * (wc['ratio'] - 1):+.1f}%"
        flags = [o["knob"] for o in v["off_target"]] + [f"{k} (unreachable)"
                                                       for k in v["unreachable"]]
        print(f"| {tag} | {v['base']} | {sum(r['ok'] for r in rows)}/{len(rows)} | "
              f"{off or '-'} | {', '.join(flags) or '-'} | {stream} | {v['cost']['runs']} | "
              f"{v['cost']['cpu_min']} |")


def summary(results: dict[str, Any]) -> None:
    """One row per tuned card: recovered latencies and intervals, probed list entries,
    runs, rounds, CPU minutes."""
    print("\n| card | base | 4 latencies (2 cyc / 3 %) | MAD intervals (exact) | list entries "
          "(probe, 2 cyc / 3 %) | runs | rounds | CPU-min | wall s |")
    print("|---|---|---|---|---|---:|---:|---:|---:|")
    for case in ("held-out", "drawn", "h100"):
        for name, v in results.get(case, {}).items():
            rec = v.get("recovery", [])
            lat = [r for r in rec if r["rule"] != "exact"]
            ini = [r for r in rec if r["rule"] == "exact"]
            bad_i = ", ".join(f"{r['option'].split('_')[-1]} {r['tuned']:g} (true {r['true']:g})"
                              for r in ini if not r["ok"])
            probes = v.get("probes")
            pr = "-" if probes is None else (
                f"{sum(r['ok'] for r in probes)}/{len(probes)}"
                + "".join(f"; {r['option'].split('_')[-1]} {r['entry']} {r['tuned']:.4g} "
                          f"(true {r['true']:.4g})" for r in probes if not r["ok"]))
            c = v["cost"]
            print(f"| {name} | {c['base']} | {sum(r['ok'] for r in lat)}/{len(lat)} | "
                  f"{sum(r['ok'] for r in ini)}/{len(ini)}{'; ' + bad_i if bad_i else ''} | "
                  f"{pr} | {c['runs']} | {c['rounds']} | {c['cpu_min']} | {c['wall_s']} |")
    if "silicon" in results:
        c = results["silicon"]["cost"]
        print(f"| H100 silicon | {c['base']} | (targets table) | | | {c['runs']} | "
              f"{c['rounds']} | {c['cpu_min']} | {c['wall_s']} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--summarize", type=Path, nargs="*", default=None,
                    help="print the summary table of earlier results.json files and stop")
    ap.add_argument("--cases", default="held-out,drawn,h100,silicon")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--structures", default="SM7_QV100,SM75_RTX2060,SM7_TITANV,SM75_RTX2060_S",
                    help="remeasure case: the GPGPU-Sim cards whose structure the drawn cards "
                    "take (CARD:SEED: that seed only, else seeds 0..--seeds-1)")
    ap.add_argument("--base", default=None,
                    help="h100 case: tune from this base card only (default: its own and "
                    "SM86_RTX3070)")
    args = ap.parse_args()
    if args.summarize is not None:
        merged: dict[str, Any] = {}
        for path in args.summarize:
            for case, v in json.loads(path.read_text()).items():
                if case in ("silicon",):
                    merged[case] = v
                else:
                    merged.setdefault(case, {}).update(v)
        summary(merged)
        if "remeasure" in merged:
            remeasure_summary(merged["remeasure"])
        return
    build = find_build()
    if build is None:
        raise SystemExit("no GPGPU-Sim build: run `hilsim gpgpusim setup`")
    out = args.out or Path(tempfile.mkdtemp(prefix="tune-on-sim-"))
    out.mkdir(parents=True, exist_ok=True)
    cases = args.cases.split(",")
    results: dict[str, Any] = {}
    if "held-out" in cases:
        results["held-out"] = held_out(build, args.workers, out)
    if "drawn" in cases:
        results["drawn"] = d = drawn(build, args.workers, args.seeds, out)
        cpu = [v["cost"]["cpu_min"] for v in d.values()]
        ok = [all(r["ok"] for r in v["recovery"]) for v in d.values()]
        print(f"\ndrawn cards: {sum(ok)}/{len(ok)} recovered; CPU-min median "
              f"{statistics.median(cpu):.2f}, max {max(cpu):.2f}")
    if "h100" in cases:
        bases = (None, "SM86_RTX3070") if args.base is None else (args.base,)
        results["h100"] = h100(build, args.workers, out, bases)
    if "silicon" in cases:
        results["silicon"] = silicon(build, args.workers, out)
    if "remeasure" in cases:
        results["remeasure"] = remeasure(build, args.workers, args.seeds,
                                         args.structures.split(","), out)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    summary(results)
    if "remeasure" in results:
        remeasure_summary(results["remeasure"])
    print(f"\nresults: {out / 'results.json'}")


if __name__ == "__main__":
    main()
