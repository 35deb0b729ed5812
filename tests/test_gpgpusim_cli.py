"""`hilsim gpgpusim ...` without a simulator build: one-line errors, info, script path."""

from __future__ import annotations

import json
from pathlib import Path

from hilsim.cli.main import main


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_without_a_build_run_and_cards_fail_in_one_line(tmp_path: Path, capsys,
                                                        monkeypatch) -> None:
    monkeypatch.delenv("HILSIM_GPGPUSIM_HOME", raising=False)
    monkeypatch.setenv("HILSIM_GPGPUSIM_CACHE", str(tmp_path / "empty"))
    code, out, err = run(capsys, "gpgpusim", "run", "--card", "SM7_QV100", "--", "/bin/true")
    assert code == 2 and out == ""
    assert err.strip() == (
        "hilsim: error: no GPGPU-Sim build found: run `hilsim gpgpusim setup` "
        "(or set HILSIM_GPGPUSIM_HOME to a built source tree)"
    )
    code, _, err = run(capsys, "gpgpusim", "cards")
    assert code == 2 and err.count("\n") == 1 and "hilsim gpgpusim setup" in err
    code, out, _ = run(capsys, "gpgpusim", "info", "--json")
    info = json.loads(out)
    assert code == 0 and info["build"] is None and info["cache"] == str(tmp_path / "empty")
    assert Path(info["toolchain_script"]).name == "install_toolchain_debian.sh"


def test_bad_override_and_setup_input(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("HILSIM_GPGPUSIM_CACHE", str(tmp_path / "c"))
    code, _, err = run(capsys, "gpgpusim", "run", "--card", "SM7_QV100", "-O", "-oops",
                       "--", "/bin/true")
    assert code == 2 and "expected -option=value" in err and err.count("\n") == 1
    code, _, err = run(capsys, "gpgpusim", "setup", "--source", str(tmp_path / "nope.tar.gz"))
    assert code == 2 and err.count("\n") <= 2  # a toolchain line may precede it
    assert "nope.tar.gz: no such file" in err or "gpgpusim toolchain: missing" in err


def test_toolchain_script_path(capsys) -> None:
    code, out, _ = run(capsys, "gpgpusim", "toolchain-script")
    script = Path(out.strip())
    assert code == 0 and script.is_file()
    assert "nvidia-cuda-toolkit" in script.read_text()


DATA = Path(__file__).parent / "data"


def test_closed_loop_tables_and_exit_code(capsys) -> None:
    """`hilsim gpgpusim closed-loop` on the committed suite outputs (no simulator)."""
    config = DATA / "accelsim" / "SM7_QV100.gpgpusim.config"
    bench = DATA / "microbench" / "gpgpusim" / "SM7_QV100.microbench.json"
    code, out, err = run(capsys, "gpgpusim", "closed-loop", str(config), str(bench))
    assert code == 0 and err == ""
    assert out.startswith("\n### SM7_QV100.gpgpusim.config vs `hilsim tune --convention "
                          "gpgpusim SM7_QV100.microbench.json`\n\n| quantity | configured |")
    assert "| NO |" not in out
    other = DATA / "microbench" / "gpgpusim" / "SM86_RTX3070.microbench.json"
    code, out, _ = run(capsys, "gpgpusim", "closed-loop", str(config), str(other))
    assert code == 1 and "| NO |" in out
    code, _, err = run(capsys, "gpgpusim", "closed-loop", str(config))
    assert code == 2 and err == "hilsim: error: closed-loop: expected CONFIG MICROBENCH pairs\n"


class _Card:
    name = "fake"

    def __init__(self, major: str) -> None:
        self.major = major

    def option(self, name: str) -> str:
        return self.major if name.endswith("major") else "0"


def test_calibrate_merges_by_compute_capability(tmp_path: Path, capsys, monkeypatch) -> None:
    from hilsim.simmodel.tuner import calibrate, calibration

    cards = {"A": _Card("8"), "B": _Card("7")}
    monkeypatch.setattr(calibrate, "find_build", lambda: None)
    monkeypatch.setattr(calibrate, "card_config", lambda name, build: cards[name])
    monkeypatch.setattr(calibrate, "calibrate", lambda name: {"card": name})
    monkeypatch.setattr(calibrate, "calibrate_units", lambda name: {"units": name})
    target = tmp_path / "cal.json"
    for card in ("A", "B"):
        code, out, _ = run(capsys, "gpgpusim", "calibrate", card, "-o", str(target))
        assert code == 0 and out == f"{card} (cc {cards[card].major}.0): wrote {target}\n"
    data = json.loads(target.read_text())
    assert data["schema"] == calibration.SCHEMA
    assert list(data["calibrations"]) == ["7.0", "8.0"]
    assert data["calibrations"]["8.0"] == {"card": "A"}

    written: list[Path] = []
    monkeypatch.setattr(calibrate, "write_text_atomic",
                        lambda path, text: written.append(Path(path)) or Path(path))
    for units, name in ((False, calibration.FILE), (True, calibration.UNIT_FILE)):
        assert calibrate.write_calibration("A", units=units)[0] == "8.0"
        shipped = Path(calibration.__file__).with_name(name)
        assert written[-1] == shipped and shipped.is_file()
