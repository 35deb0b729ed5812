"""The command line end to end: quickstart, import/plan/evaluate, one-line errors."""

import json
import shutil
from pathlib import Path

import click
import pytest
from hilsim.analyzer.examples import EXAMPLES

from hilsim.cli.main import main

DATA = Path(__file__).parent / "data"


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.slow
def test_quickstart_writes_plans_and_result(tmp_path, capsys) -> None:
    code, out, err = run(capsys, "quickstart", "-o", str(tmp_path / "qs"), "--seeds", "3")
    assert code == 0, err
    result = json.loads((tmp_path / "qs" / "result.json").read_text())
    names = [e["example"] for e in result["examples"]]
    assert names == [e.name for e in EXAMPLES]
    casio = result["examples"][0]
    assert casio["n_launches"] == 85217
    assert casio["methods"]["stem"]["mean_error"] < 0.02
    assert (tmp_path / "qs" / "casio-durations" / "plan-stem.json").is_file()
    assert "stem" in out and "speedup" in out
    # durations only: PKA is skipped with the reason; the A100 nsys export has launch
    # configurations, so PKA runs there on launch__grid_size and says what is missing
    assert "no metrics" in casio["skipped"]["pka"]
    nerf = result["examples"][1]
    assert nerf["n_launches"] == 1106
    assert set(nerf["methods"]) == {"stem", "pka", "random", "first-n"}
    assert any("11 of the 12" in note for note in nerf["methods"]["pka"]["notes"])
    assert (tmp_path / "qs" / "casio-nerf-a100" / "plan-pka.json").is_file()
    assert "pka (1/12 metrics)" in out


@pytest.mark.slow
def test_import_plan_evaluate_roundtrip(tmp_path, capsys) -> None:
    csv = DATA / "casio" / "casio-kernel-durations.csv"
    bundle = tmp_path / "casio.bundle"
    assert run(capsys, "import", str(csv), "-o", str(bundle))[0] == 0
    plan = tmp_path / "stem.json"
    code, out, _ = run(
        capsys,
        "plan",
        str(bundle),
        "-m",
        "stem",
        "-p",
        "epsilon=0.05",
        "-p",
        "seed=4",
        "-o",
        str(plan),
    )
    assert code == 0 and "launches to simulate" in out
    data = json.loads(plan.read_text())
    assert data["schema"] == "hilsim.plan/1" and data["params"]["seed"] == 4
    assert all("name" in s for s in data["samples"])
    result = tmp_path / "r.json"
    code, out, _ = run(capsys, "evaluate", str(bundle), "--plan", str(plan), "-o", str(result))
    assert code == 0
    score = json.loads(result.read_text())["score"]
    assert score["error"] < 0.02 and score["interval_ns"] is not None
    code, _, _ = run(
        capsys,
        "evaluate",
        str(bundle),
        "-m",
        "random",
        "--seeds",
        "2",
        "-p",
        "fraction=0.01",
        "-o",
        str(result),
    )
    assert code == 0
    assert json.loads(result.read_text())["summary"]["seeds"] == [0, 1]


def _one_line_error(err: str, *fragments: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("hilsim: error: ")
    for fragment in fragments:
        assert fragment in lines[0]
    assert "Traceback" not in err


def test_bad_inputs_exit_2_with_one_line(tmp_path, capsys) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    code, _, err = run(capsys, "import", str(empty), "-o", str(tmp_path / "b"))
    assert code == 2
    _one_line_error(err, "empty.csv")
    assert not (tmp_path / "b").exists()

    truncated = tmp_path / "trunc.sqlite"
    truncated.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    code, _, err = run(capsys, "import", str(truncated), "-o", str(tmp_path / "b"))
    assert code == 2
    _one_line_error(err, "trunc.sqlite")
    assert not (tmp_path / "b").exists()

    other_tool = tmp_path / "accelwattch.csv"
    other_tool.write_text("Benchmark,Kernel,L1_RH\nb+tree,findK,1.0\n")
    code, _, err = run(
        capsys,
        "import",
        str(other_tool),
        "--format",
        "nsys-gpu-trace-csv",
        "-o",
        str(tmp_path / "b"),
    )
    assert code == 2
    _one_line_error(err, "accelwattch.csv")

    code, _, err = run(
        capsys, "plan", str(tmp_path / "missing"), "-m", "stem", "-o", str(tmp_path / "p.json")
    )
    assert code == 2
    _one_line_error(err, "missing")
    code, _, err = run(
        capsys,
        "plan",
        str(DATA / "casio" / "casio-kernel-durations.csv"),
        "-m",
        "nope",
        "-o",
        str(tmp_path / "p.json"),
    )
    assert code == 2
    _one_line_error(err, "unknown method 'nope'")
    assert not (tmp_path / "p.json").exists()


def test_tampered_bundle_is_refused_and_kept(tmp_path, capsys) -> None:
    csv = DATA / "casio" / "casio-kernel-durations.csv"
    bundle = tmp_path / "b"
    assert run(capsys, "import", str(csv), "-o", str(bundle))[0] == 0
    with open(bundle / "launches.parquet", "r+b") as handle:
        handle.seek(100)
        handle.write(b"\x00\x01\x02")
    code, _, err = run(capsys, "plan", str(bundle), "-m", "stem", "-o", str(tmp_path / "p.json"))
    assert code == 2
    _one_line_error(err, "launches.parquet", "sha256")
    # importing again over it without --force keeps what is there
    code, _, err = run(capsys, "import", str(csv), "-o", str(bundle))
    assert code == 2 and "already exists" in err
    assert (bundle / "manifest.json").is_file()


def test_debug_shows_traceback(tmp_path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    from hilsim.core.errors import HilsimError

    with pytest.raises(HilsimError):
        main(["--debug", "import", str(empty), "-o", str(tmp_path / "b")])


def test_help_of_every_command(capsys) -> None:
    from hilsim.cli.main import LAZY_COMMANDS, load_command

    commands: list[list[str]] = [[]]
    for name in LAZY_COMMANDS:
        commands.append([name])
        group = load_command(name)
        if isinstance(group, click.Group):
            commands.extend([name, sub] for sub in group.commands)
    assert ["agent", "microbench"] in commands and ["gpgpusim", "closed-loop"] in commands
    for command in commands:
        code = main([*command, "--help"])
        out = capsys.readouterr().out
        assert code == 0 and "Usage:" in out, command


def test_no_command_module_imports_another() -> None:
    """One command layer: a command module imports the library, never another command
    module (main.py loads them by name; options.py holds shared option parsing)."""
    import ast

    import hilsim.cli

    folder = Path(hilsim.cli.__file__).parent
    commands = {f"hilsim.cli.{path.stem}" for path in folder.glob("*.py")} - {
        "hilsim.cli.__init__", "hilsim.cli.main", "hilsim.cli.options"}
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = {node.module or ""} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                names = {a.name for a in node.names}
            else:
                continue
            assert not names & commands, f"{path.name} imports {sorted(names & commands)}"


@pytest.mark.slow
def test_installed_console_script(tmp_path) -> None:
    """The `hilsim` entry point exists after `pip install` (CI installs the package)."""
    script = shutil.which("hilsim")
    if script is None:
        pytest.skip("hilsim console script not on PATH (package not installed)")
    import subprocess

    proc = subprocess.run([script, "methods"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and "stem" in proc.stdout and "pka" in proc.stdout


def test_lazy_commands_short_help_matches_their_docstrings() -> None:
    """`hilsim --help` lists lazily imported commands from stored short helps: they must
    say what the commands' own docstrings say."""
    import inspect

    from hilsim.cli.main import LAZY_COMMANDS, load_command

    for name, (_, _, short) in LAZY_COMMANDS.items():
        command = load_command(name)
        first = inspect.cleandoc(command.help or "").split("\n\n")[0].replace("\n", " ")
        assert first == short, name


def test_help_and_version_import_no_pandas() -> None:
    """Start-up: --help and --version import neither pandas nor the command modules."""
    import subprocess
    import sys

    code = (
        "import sys; from hilsim.cli.main import main; "
        "rc = main(['--help']); rc |= main(['--version']); "
        "heavy = [m for m in ('pandas', 'pyarrow', 'numpy', 'rich', 'sklearn', 'scipy', "
        "'hilsim.analyzer.facade', 'hilsim.cli.dse', 'hilsim.cli.agent', 'hilsim.cli.plan', "
        "'hilsim.cli.import_', 'hilsim.cli.compare') if m in sys.modules]; "
        "print('HEAVY', heavy); sys.exit(rc)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stdout
    assert "validate" in done.stdout and "hilsim " in done.stdout


@pytest.mark.slow
def test_plan_imports_only_the_named_method(tmp_path: Path) -> None:
    """`hilsim plan -m stem` imports stem, not scikit-learn or scipy (methods load by name)."""
    import subprocess
    import sys

    from hilsim.analyzer.examples import EXAMPLES

    example = next(e for e in EXAMPLES if e.profile.endswith(".csv"))
    code = (
        "import sys; from hilsim.cli.main import main; "
        f"rc = main(['plan', {str(example.path(example.profile))!r}, '-m', 'stem', "
        f"'-o', {str(tmp_path / 'p.json')!r}]); "
        "heavy = [m for m in ('sklearn', 'scipy', 'matplotlib', 'hilsim.analyzer.methods.pka') "
        "if m in sys.modules]; print('HEAVY', heavy); sys.exit(rc)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("param", "needle"),
    [("epsilon=abc", "bad parameter value"), ("bogus=1", "unknown parameter(s) bogus")],
)
def test_bad_method_parameter_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], param: str, needle: str
) -> None:
    from hilsim.analyzer.examples import EXAMPLES

    from hilsim.cli.main import main

    example = next(e for e in EXAMPLES if e.profile.endswith(".csv"))
    rc = main(["plan", str(example.path(example.profile)), "-m", "stem", "-p", param,
               "-o", str(tmp_path / "p.json")])
    err = capsys.readouterr().err
    assert rc == 2
    assert needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "p.json").exists()
