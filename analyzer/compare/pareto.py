"""The speedup–error Pareto front of a comparison (STEM Fig. 9) and the order of its rows."""

from __future__ import annotations

from typing import Any


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of points not dominated in (higher speedup, lower error)."""
    front = []
    for i, (s_i, e_i) in enumerate(points):
        dominated = any(
            (s_j >= s_i and e_j <= e_i) and (s_j > s_i or e_j < e_i)
            for j, (s_j, e_j) in enumerate(points)
            if j != i
        )
        if not dominated:
            front.append(i)
    return front


def ranked(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``summaries`` best first (rows that reduce the simulation first, by mean error; then
    the "no reduction" rows), each marked ``pareto`` when on the front of the rows that
    reduce the simulation."""
    order = sorted(summaries, key=lambda s: (s["no_reduction"] is not None, s["mean_error"]))
    reduced = [i for i, s in enumerate(order) if s["no_reduction"] is None]
    points = [(order[i]["hmean_speedup"], order[i]["mean_error"]) for i in reduced]
    on_front = {reduced[j] for j in pareto_front(points)}
    for i, summary in enumerate(order):
        summary["pareto"] = i in on_front
    return order
