"""hilsim.agent.launch.run_recorded: the recorder is finished however the workload ends."""

import contextlib

import pytest
from hilsim.agent.launch import run_recorded


@pytest.mark.parametrize(
    ("body", "complete", "reason"),
    [
        ("x = 1\n", True, None),
        ("import sys\nsys.exit(0)\n", True, None),
        ("import sys\nsys.exit(3)\n", False, "workload exited with code 3"),
        ("raise ValueError('boom')\n", False, "workload raised ValueError: boom"),
    ],
)
def test_finish_reports_how_the_workload_ended(tmp_path, monkeypatch, body, complete, reason):
    script = tmp_path / "w.py"
    script.write_text(body)
    monkeypatch.setattr("sys.argv", ["x"])
    calls = []
    with contextlib.suppress(SystemExit, ValueError):
        run_recorded([str(script)], [], "test", lambda c, r: calls.append((c, r)))
    assert calls == [(complete, reason)]
