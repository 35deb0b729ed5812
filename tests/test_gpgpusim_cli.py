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
