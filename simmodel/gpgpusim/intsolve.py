"""One integer option against one measured quantity: a monotone secant search.

The simulator-in-the-loop tuner (:mod:`hilsim.simmodel.gpgpusim.onsim`) sets every option
it measures by simulating candidates: the simulated quantity ``m(x)`` of an option value
``x`` is monotone increasing in ``x`` (a latency option and the load-to-use cycles the
chase sees; an initiation interval and the cycles per instruction a throughput kernel
sees), so a secant step per round (Press et al., *Numerical Recipes*, 3rd ed., Section
9.2: secant and false position) reaches the integer whose simulation is nearest the
target in a few rounds. What the search reports:

* ``settled``: the nearest integer is known: a simulated value equals the target within
  ``tolerance``, or two adjacent integers bracket it (the nearer one is taken);
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

    @property
    def settled(self) -> bool:
        """The nearest integer to the target is known (or a bound is the closest)."""
        b = self.best()
        if b is None:
            return False
        mb = self.history[b]
        if abs(mb - self.target) <= self.tolerance:
            return True
        up = mb < self.target  # the target lies at larger option values
        nxt = self._neighbour(b, up)
        if nxt is None:
            return True  # a bound: unreachable
        if nxt in self.history:
            return (self.history[nxt] - self.target) * (mb - self.target) <= 0
        # within half a step of the measured slope: the neighbour can only be farther
        step = abs(nxt - b) * self.slope()
        known = self.measured_slope or self.proportional
        return known and abs(mb - self.target) <= 0.5 * step

    @property
    def unreachable(self) -> str:
        """Why the target cannot be reached (empty when it can)."""
        b = self.best()
        if b is None:
            return ""
        mb = self.history[b]
        if abs(mb - self.target) <= self.tolerance:
            return ""
        up = mb < self.target
        if self._neighbour(b, up) is not None:
            return ""
        side = "above the simulator's ceiling" if up else "below the simulator's floor"
        return (
            f"target {self.target:.4g} is {side}: {mb:.4g} at the bound {b} "
            "(the closest value, kept)"
        )

    # --- the next candidate ----------------------------------------------------------
    def _secant(self) -> float | None:
        pts = sorted(self.history.items(), key=lambda kv: abs(kv[1] - self.target))
        for i in range(len(pts)):
            for j in range(i + 1, len(pts)):
                (x1, m1), (x2, m2) = pts[i], pts[j]
                if x1 != x2 and m1 != m2 and (m2 - m1) / (x2 - x1) > 0:
                    return (m2 - m1) / (x2 - x1)
        return None

    @property
    def measured_slope(self) -> bool:
        """Whether two simulated points give the slope (else the prior is used)."""
        return self._secant() is not None

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
        x = self._snap(b + (self.target - mb) / self.slope())
        if x in self.history:  # the secant lands on a known point: step toward the target
            nxt = self._neighbour(b, mb < self.target)
            return b if nxt is None else nxt
        return x
