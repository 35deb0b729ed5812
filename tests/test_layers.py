"""The layer rule of docs/architecture.md, read from the source (nothing is imported).

core <- formats <- microbench <- simmodel <- analyzer <- agent <- cli: a module imports only
from its own package or one below it (module-level and in-function imports alike), imports
no other module's private name, and no two modules import each other in a cycle. One level
down: the simulator (``simmodel.gpgpusim``) never imports the tuner (``simmodel.tuner``),
and the contracts (``hilsim.core``) hold no simulator option: the simulator turns a
contract into its own options.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("core", "formats", "microbench", "simmodel", "analyzer", "agent", "cli")
FOLDERS = {"core": ROOT / "hilsim" / "core", "formats": ROOT / "hilsim" / "formats",
           "cli": ROOT / "hilsim" / "cli",
           "microbench": ROOT / "microbench", "simmodel": ROOT / "simmodel",
           "analyzer": ROOT / "analyzer", "agent": ROOT / "agent"}


def _modules() -> dict[str, Path]:
    out = {"hilsim": ROOT / "hilsim" / "__init__.py"}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(("hilsim", package, *parts))] = path
    return out


MODULES = _modules()


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def _imports(module: str, path: Path) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every import in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in MODULES:  # `from pkg import module`
                    out.append((full, None, node.lineno))
                else:
                    out.append((base, alias.name, node.lineno))
    return [x for x in out if x[0] == "hilsim" or x[0].startswith("hilsim.")]


EDGES = {m: _imports(m, p) for m, p in MODULES.items()}

#: (sub-package, sub-package it never imports)
NEVER = (("hilsim.simmodel.gpgpusim", "hilsim.simmodel.tuner"),)
#: a string that is a GPGPU-Sim / Accel-Sim option (or starts with one: ``"-opt value"``)
SIM_OPTION = re.compile(r"^\s*-(gpgpu|dram|ptx|trace)_\w")


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _never_crossed(module: str, target: str) -> bool:
    """Whether ``module`` importing ``target`` breaks a :data:`NEVER` rule."""
    return any(_inside(module, a) and _inside(target, b) for a, b in NEVER)


def _option_strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string constant outside docstrings that is a simulator option."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) \
                and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant):
            docstrings.add(id(body[0].value))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings and SIM_OPTION.match(node.value)]


def test_every_import_goes_down_the_layers() -> None:
    bad = []
    for module, imports in EDGES.items():
        mine = _layer(module)
        if mine is None:
            continue
        for target, _name, line in imports:
            theirs = _layer(target)
            if theirs is not None and LAYERS.index(theirs) > LAYERS.index(mine):
                bad.append(f"{MODULES[module].relative_to(ROOT)}:{line} imports {target}")
    assert bad == []


def test_no_private_name_crosses_a_module() -> None:
    bad = [
        f"{MODULES[module].relative_to(ROOT)}:{line} imports {target}.{name}"
        for module, imports in EDGES.items()
        for target, name, line in imports
        if name and name.startswith("_") and not name.startswith("__") and target != module
    ]
    assert bad == []


def test_no_module_cycle() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for module, imports in EDGES.items():
        for target, _name, _line in imports:
            if target in MODULES and target != module and not module.startswith(target + "."):
                graph[module].add(target)
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for node in sorted(MODULES):
        if node not in state:
            visit(node, [node])
    # a package __init__ that re-exports its own submodules is not a cycle of jobs
    real = [c for c in cycles if not all(b.startswith(a + ".") or a.startswith(b + ".")
                                         for a, b in zip(c, c[1:], strict=False))]
    assert real == []


def test_the_simulator_never_imports_the_tuner() -> None:
    bad = [
        f"{MODULES[module].relative_to(ROOT)}:{line} imports {target}"
        for module, imports in EDGES.items()
        for target, _name, line in imports
        if _never_crossed(module, target)
    ]
    assert bad == []


def test_the_contracts_name_no_simulator_option() -> None:
    """``hilsim/core`` holds no GPGPU-Sim option as a value (docstrings may name one)."""
    bad = [
        f"{path.relative_to(ROOT)}:{line} {text!r}"
        for module, path in MODULES.items() if _layer(module) == "core"
        for line, text in _option_strings(path)
    ]
    assert bad == []


@pytest.mark.parametrize("mutant", ["up", "private", "tuner", "option"])
def test_the_checks_catch_a_broken_module(tmp_path: Path, mutant: str) -> None:
    """A core module importing the analyzer, or a private name of another module, a
    simulator module importing the tuner, and a core module holding a simulator option
    are reported (the checks above read the same way); an option named in a docstring
    is not."""
    source = {"up": "from hilsim.analyzer.evaluate import evaluate_plan\n",
              "private": "from hilsim.core.plan import _secret\n",
              "tuner": "from hilsim.simmodel.tuner.search import tune_on_simulator\n",
              "option": '"""Warm-up: ``-gpgpu_perf_sim_memcpy 1`` fills the L2."""\n\n'
                        'def fill():\n    """-gpgpu_perf_sim_memcpy, said."""\n'
                        '    return {"-gpgpu_perf_sim_memcpy": "1"}\n'}[mutant]
    path = tmp_path / "bad.py"
    path.write_text(source)
    if mutant == "option":
        assert _option_strings(path) == [(5, "-gpgpu_perf_sim_memcpy")]
        return
    module = "hilsim.simmodel.gpgpusim.bad" if mutant == "tuner" else "hilsim.core.bad"
    (target, name, _line), = _imports(module, path)
    if mutant == "up":
        assert LAYERS.index(_layer(target)) > LAYERS.index("core")
    elif mutant == "tuner":
        assert _never_crossed(module, target) and not _never_crossed("hilsim.simmodel.tuner.x",
                                                                       "hilsim.simmodel.gpgpusim")
    else:
        assert name == "_secret" and target == "hilsim.core.plan"


#: a GPGPU-Sim / Accel-Sim option as written on a command line or in a config
SIMULATOR_OPTION = re.compile(r"-(gpgpu|dram|ptx)_\w")


def _docstrings(tree: ast.AST) -> set[int]:
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def simulator_options(path: Path) -> list[str]:
    """``file:line: text`` of every string in the file, docstrings aside, that names a
    simulator option."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    docs = _docstrings(tree)
    return [
        f"{path.name}:{node.lineno}: {node.value.strip()[:60]}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and id(node) not in docs and SIMULATOR_OPTION.search(node.value)
    ]


def test_the_microbenchmarks_name_no_simulator_option() -> None:
    """The families run on any device: what a device needs of its simulator (the option
    that leaves L2 cold, the one that counts its memory channels) is the device's to say
    (``simmodel/gpgpusim/simdevice.py``), not written by a family into its params."""
    bad = [hit for path in sorted(FOLDERS["microbench"].rglob("*.py"))
           for hit in simulator_options(path)]
    assert bad == []


def test_the_option_check_catches_an_option_in_params(tmp_path: Path) -> None:
    path = tmp_path / "family.py"
    path.write_text('"""Docstrings may cite -gpgpu_perf_sim_memcpy."""\n\n'
                    'def f(n):\n    """And -dram_latency here."""\n'
                    '    return {"cold": "-gpgpu_perf_sim_memcpy 0",\n'
                    '            "n": f"x {n} (-ptx_opcode)"}\n')
    assert simulator_options(path) == [
        "family.py:5: -gpgpu_perf_sim_memcpy 0", "family.py:6: (-ptx_opcode)"]


#: the module table's first column -> the folder whose modules its row must name
TABLE_ROWS = {"hilsim/core/": "core", "hilsim/formats/": "formats", "microbench/": "microbench",
              "simmodel/": "simmodel", "analyzer/": "analyzer", "agent/": "agent",
              "hilsim/cli/": "cli"}


def _module_table(text: str) -> dict[str, str]:
    """``docs/architecture.md``'s module table: package cell -> the row's modules cell."""
    rows = {}
    for line in text.splitlines():
        match = re.match(r"\| `([^`]+/)` \| (.*)\|[^|]*\|\s*$", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def _unnamed_modules(rows: dict[str, str]) -> list[str]:
    """Modules (and sub-packages) of each layer folder that its table row does not name."""
    missing = []
    for cell, package in TABLE_ROWS.items():
        text = rows.get(cell)
        if text is None:
            missing.append(f"no row for {cell}")
            continue
        folder = FOLDERS[package]
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder)
            names = [f"{part}/" for part in rel.parts[:-1]]
            if path.name != "__init__.py":
                # a module is named as `x.py`, or as `x` / `x.Name` (families, classes)
                stem = path.stem
                if not re.search(rf"`{re.escape(stem)}(\.py|\.[A-Za-z_]\w*)?`", text):
                    names.append(path.name)
            missing += [f"{cell}{rel}: {n}" for n in names if n.endswith(".py") or n not in text]
    return missing


def test_every_module_is_in_the_architecture_table() -> None:
    """Each module of each layer is named in its row of ``docs/architecture.md``'s table."""
    rows = _module_table((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    assert _unnamed_modules(rows) == []


def test_the_table_check_catches_an_unnamed_module() -> None:
    """A row that drops one module (``warmstate.py``) or a sub-package (``tuner/``) is
    reported."""
    rows = _module_table((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    assert any("warmstate.py" in m for m in _unnamed_modules(
        {**rows, "analyzer/": rows["analyzer/"].replace("`warmstate.py`", "")}))
    assert any(m.endswith(": tuner/") for m in _unnamed_modules(
        {**rows, "simmodel/": rows["simmodel/"].replace("tuner/", "tuning/")}))
    assert any("no row" in m for m in _unnamed_modules(
        {k: v for k, v in rows.items() if k != "agent/"}))
