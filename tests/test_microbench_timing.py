"""Event windows hold only back-to-back kernel launches: the fills that reset state stay
outside the timed window, and enough launches share one window to time it."""

from __future__ import annotations

import types

import pytest
from hilsim.microbench.cupy_device import CupyDevice


class _Events:
    """CuPy stand-in: events and launches append to one log; 0.5 ms per launch."""

    def __init__(self) -> None:
        self.log: list[str] = []
        outer = self

        class Event:
            def record(self) -> None:
                outer.log.append("event")
                self.t = outer.log.count("launch") * 0.5

            def synchronize(self) -> None:
                pass

        self.cp = types.SimpleNamespace(cuda=types.SimpleNamespace(
            Event=Event, get_elapsed_time=lambda a, b: b.t - a.t))


def test_fills_stay_outside_and_enough_launches_share_a_window() -> None:
    ev = _Events()
    ctx = CupyDevice(cp=ev.cp, device=0, facts={})
    ms, k = ctx.time_batch_ms(lambda: ev.log.append("launch"), lambda: ev.log.append("fill"))
    assert ms == pytest.approx(0.5) and k == 20  # 20 x 0.5 ms >= 10 ms
    # the last window: events around k launches only, the fill before it
    last = ev.log[-(k + 2):]
    assert last == ["event"] + ["launch"] * k + ["event"]
    assert ev.log[-(k + 3)] == "fill"
    windows = "".join("E" if e == "event" else e[0] for e in ev.log)
    assert all("f" not in inside for inside in windows.split("E")[1::2])


def test_at_least_four_launches_per_window() -> None:
    ev = _Events()
    ctx = CupyDevice(cp=ev.cp, device=0, facts={})
    _, k = ctx.time_batch_ms(lambda: ev.log.append("launch"), min_ms=0.1)
    assert k == 4
