"""One integer option against one measured quantity: a monotone secant search.

The simulator-in-the-loop tuner (:mod:`hilsim.simmodel.tuner.search`) sets every option
it measures by simulating candidates: the simulated quantity ``m(x)`` of an option value
``x`` is monotone increasing in ``x`` (a latency option and the load-to-use cycles the
chase sees; an initiation interval and the cycles per instruction a throughput kernel
sees), so a secant step per round (Press et al., *Numerical Recipes*, 3rd ed., Section
9.2: secant and false position) reaches the integer whose simulation is nearest the
target in a few rounds. What the search reports:

* ``settled``: the nearest integer is known: a simulated value equals the target within
  ``tolerance``, or two adjacent integers bracket it (the nearer one is taken; the
  simulated latencies are staircases where clock domains meet, so a value half a slope
  from the target does not prove its neighbour farther);
* ``unreachable``: the target lies beyond what the simulator produces at a bound (its
  pipeline floor below ``lo``): the bound is the closest value and the report says so,
  never a silent clamp.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class IntSearch:
    """State of one option's search (``history``: option value -> simulated quantity)."""

    target: float
    first_guess: int
    lo: int = 1
    hi: int = 1 << 20
    #: d quantity / d option before two points are known (1 for a cycles-per-cycle option)
    slope_prior: float = 1.0
    #: a simulated value within this of the target settles the search
    tolerance: float = 1e-9
    #: allowed values (e.g. powers of two); None: every integer in [lo, hi]
    domain: tuple[int, ...] | None = None
    #: the quantity is proportional to the option (bandwidth x channels): one simulated
    #: point gives the slope
    proportional: bool = False
    history: dict[int, float] = field(default_factory=dict)

    def record(self, x: int, measured: float) -> None:
        """The simulated quantity at option value ``x`` (the latest run wins)."""
        self.history[int(x)] = float(measured)

    # --- what is known -------------------------------------------------------------
    def best(self) -> int | None:
        """The simulated value nearest the target (ties: the smaller option)."""
        if not self.history:
            return None
        return min(self.history, key=lambda x: (abs(self.history[x] - self.target), x))

    def _values(self) -> list[int]:
        if self.domain is not None:
            return [v for v in self.domain if self.lo <= v <= self.hi]
        return []

    def _neighbour(self, x: int, up: bool) -> int | None:
        """The next allowed value above (below) ``x``, or None past the bound."""
        if self.domain is not None:
            vals = self._values()
            cands = [v for v in vals if (v > x if up else v < x)]
            if not cands:
                return None
            return min(cands) if up else max(cands)
        nxt = x + 1 if up else x - 1
        return nxt if self.lo <= nxt <= self.hi else None

    def _snap(self, x: float) -> int:
        """The allowed value nearest ``x``, inside the bounds."""
        if self.domain is not None:
            vals = self._values()
            return min(vals, key=lambda v: (abs(v - x), v))
        return int(min(self.hi, max(self.lo, math.floor(x + 0.5))))

    def _bracket(self) -> tuple[int | None, int | None]:
        """(largest option simulated at or below the target, smallest at or above)."""
        below = [x for x, m in self.history.items() if m <= self.target]
        above = [x for x, m in self.history.items() if m >= self.target]
        return (max(below) if below else None), (min(above) if above else None)

    def _untested_between(self, lo: int, hi: int) -> list[int]:
        """Allowed values strictly between ``lo`` and ``hi`` not simulated yet."""
        vals = self._values() if self.domain is not None else range(lo + 1, hi)
        return [v for v in vals if lo < v < hi and v not in self.history]

    @property
    def settled(self) -> bool:
        """The nearest integer to the target is known (or a bound is the closest)."""
        b = self.best()
        if b is None:
            return False
        if abs(self.history[b] - self.target) <= self.tolerance:
            return True
        if self.proportional and abs(self.history[b] - self.target) <= 0.5 * self.slope():
            return True  # a neighbour is one slope away: farther
        lo, hi = self._bracket()
        if lo is not None and hi is not None:
            # nothing untested between the two sides (or a non-monotone pair: take the best)
            return lo >= hi or not self._untested_between(lo, hi)
        if lo is None:  # every simulated value lies above the target
            return self._neighbour(min(self.history), up=False) is None
        return self._neighbour(max(self.history), up=True) is None

    @property
    def unreachable(self) -> str:
        """Why the target cannot be reached (empty when it can)."""
        b = self.best()
        if b is None or abs(self.history[b] - self.target) <= self.tolerance:
            return ""
        lo, hi = self._bracket()
        if lo is None and self._neighbour(min(self.history), up=False) is None:
            side = "below the simulator's floor"
        elif hi is None and self._neighbour(max(self.history), up=True) is None:
            side = "above the simulator's ceiling"
        else:
            return ""
        mb = self.history[b]
        return (
            f"target {self.target:.4g} is {side}: {mb:.4g} at the bound {b} "
            "(the closest value, kept)"
        )

    def step_change(self, x: int, up: bool) -> float:
        """What one allowed step from ``x`` (up or down) changes the quantity by where the
        simulator behaves as expected: the prior slope (``proportional``: the simulated
        quantity over the option at ``x``), never a simulated secant, so a step the
        simulator jumps across (a non-monotone rate) is not counted; 0 past a bound."""
        nxt = self._neighbour(x, up)
        if nxt is None:
            return 0.0
        slope = self.slope_prior
        if self.proportional and x and x in self.history:
            slope = self.history[x] / x
        return abs(nxt - x) * abs(slope)

    # --- the next candidate ----------------------------------------------------------
    def _secant(self) -> float | None:
        pts = sorted(self.history.items(), key=lambda kv: abs(kv[1] - self.target))
        for i in range(len(pts)):
            for j in range(i + 1, len(pts)):
                (x1, m1), (x2, m2) = pts[i], pts[j]
                if x1 != x2 and m1 != m2 and (m2 - m1) / (x2 - x1) > 0:
                    return (m2 - m1) / (x2 - x1)
        return None

    def slope(self) -> float:
        """d quantity / d option from the two simulated points nearest the target (one
        point when the quantity is proportional to the option)."""
        secant = self._secant()
        if secant is None and self.proportional and self.history:
            x, m = next(iter(self.history.items()))
            if x and m > 0:
                return m / x
        return secant or self.slope_prior

    def propose(self) -> int:
        """The option value to simulate next (the best one once settled)."""
        b = self.best()
        if b is None:
            return self._snap(self.first_guess)
        if self.settled:
            return b
        mb = self.history[b]
        guess = b + (self.target - mb) / self.slope()
        lo, hi = self._bracket()
        if lo is not None and hi is not None:
            between = self._untested_between(lo, hi)
            return min(between, key=lambda v: (abs(v - guess), v))
        x = self._snap(guess)
        if x not in self.history and (lo is None or x > lo) and (hi is None or x < hi):
            return x
        # the secant lands on a simulated point: one step past the side reached so far
        edge = max(self.history) if hi is None else min(self.history)
        nxt = self._neighbour(edge, up=hi is None)
        return b if nxt is None else nxt
