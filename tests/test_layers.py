"""The layer rule of docs/architecture.md, read from the source (nothing is imported).

core <- formats <- microbench <- simmodel <- analyzer <- agent <- cli: a module imports only
from its own package or one below it (module-level and in-function imports alike), imports no other
module's private name, and no two modules import each other in a cycle.
"""

from __future__ import annotations

import ast
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


@pytest.mark.parametrize("mutant", ["up", "private"])
def test_the_checks_catch_a_broken_module(tmp_path: Path, mutant: str) -> None:
    """A core module importing the analyzer, or a private name of another module, is
    reported (the checks above read the same way)."""
    source = {"up": "from hilsim.analyzer.evaluate import evaluate_plan\n",
              "private": "from hilsim.core.plan import _secret\n"}[mutant]
    path = tmp_path / "bad.py"
    path.write_text(source)
    (target, name, _line), = _imports("hilsim.core.bad", path)
    if mutant == "up":
        assert LAYERS.index(_layer(target)) > LAYERS.index("core")
    else:
        assert name == "_secret" and target == "hilsim.core.plan"
