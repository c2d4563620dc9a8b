"""The import graph of the source, read with `ast` (nothing is imported): rl/ has no import circle,
the maths packages import no driver, worker or generation (no arrow runs up from them), and
`harness` and `rl` never import each other.

Every `import` statement counts, at module level, under `if TYPE_CHECKING:` or inside a function (a
lazy import is still an arrow: hiding one in a function does not break a circle). An import of a
package's submodule counts as an arrow to that submodule; the parent packages Python runs on the
way are not counted (every submodule would otherwise form a circle with a package that re-exports
it). Imports by string (`importlib.import_module`, the backend registry) are not seen.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules(package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every module of `package` (a package is its __init__)."""
    out = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imported_names(name: str, path: Path) -> list[tuple[str, int]]:
    """(the dotted name each import statement of module `name` reaches, its line): for `from a
    import b`, `a.b` (a submodule or a name in `a`); relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            out += [(f"{base}.{alias.name}" if base else alias.name, node.lineno) for alias in node.names]
    return out


def _import_graph(package: str) -> dict[str, dict[str, int]]:
    """module -> {module of `package` it imports: the line of the first such import}."""
    modules = _modules(package)

    def owner(dotted: str) -> str | None:  # the longest module name `dotted` starts with
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        arrows = graph.setdefault(name, {})
        for dotted, line in _imported_names(name, path):
            target = owner(dotted)
            if target is not None and target != name:
                arrows.setdefault(target, line)
    return graph


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str]:
    """One import circle of `graph` as [a, b, ..., a], or [] when there is none."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" once fully explored
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = "done"
        path.pop()
        return []

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return []


def _describe(graph: dict[str, dict[str, int]], cycle: list[str]) -> str:
    return "\n".join(f"  {a} imports {b} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:]))


def test_rl_has_no_import_circle() -> None:
    graph = _import_graph("rl")
    assert len(graph) > 50  # the walk found the engine's modules
    cycle = find_cycle(graph)
    assert cycle == [], "import circle in rl/:\n" + _describe(graph, cycle)


def test_find_cycle_sees_a_lazy_circle(tmp_path: Path) -> None:
    """The check itself: a circle closed by an import inside a function is found."""
    graph = {"rl.a": {"rl.b": 3}, "rl.b": {"rl.c": 5}, "rl.c": {"rl.a": 9}, "rl.d": {"rl.a": 1}}
    assert find_cycle(graph) == ["rl.a", "rl.b", "rl.c", "rl.a"]
    assert find_cycle({"rl.a": {"rl.b": 3}, "rl.b": {}}) == []
    (tmp_path / "m.py").write_text("import os\n\ndef f():\n    from . import sibling\n    import rl.config\n")
    assert _imported_names("rl.pkg.m", tmp_path / "m.py") == [("os", 1), ("rl.pkg.sibling", 4), ("rl.config", 5)]


# The maths packages and what they may not import: the loops (rl/loops/) sequence generation, the
# data plane, the workers and the maths; the maths knows none of them, so it runs and tests alone.
MATHS = ("rl.algorithms", "rl.distill")
ABOVE_MATHS = ("rl.loops", "rl.generation", "rl.workers", "rl.cluster", "rl.run")


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def upward_arrows(graph: dict[str, dict[str, int]]) -> list[str]:
    """Every arrow from a maths module to a module above the maths, as "a imports b (line n)"."""
    return [f"{a} imports {b} (line {line})" for a, arrows in sorted(graph.items()) if _within(a, MATHS)
            for b, line in sorted(arrows.items()) if _within(b, ABOVE_MATHS)]


def test_the_maths_imports_no_loop_worker_or_generation() -> None:
    graph = _import_graph("rl")
    assert any(_within(m, MATHS) for m in graph) and any(m.startswith("rl.loops.") for m in graph)
    assert upward_arrows(graph) == []


def test_upward_arrows_sees_one() -> None:
    """The check itself: an arrow from the maths up to generation or a loop is named."""
    graph = {"rl.algorithms.loss": {"rl.data.errors": 28}, "rl.algorithms.x": {"rl.generation": 24},
             "rl.distill.y": {"rl.loops.grpo": 21}, "rl.loops.grpo": {"rl.generation": 24},
             "rl.algorithmsx": {"rl.workers": 1}}
    assert upward_arrows(graph) == ["rl.algorithms.x imports rl.generation (line 24)",
                                    "rl.distill.y imports rl.loops.grpo (line 21)"]


def _top_level_imports(package: str) -> dict[str, list[str]]:
    """module of `package` -> the top-level packages it imports (relative imports resolved)."""
    out = {}
    for name, path in _modules(package).items():
        out[name] = sorted({dotted.split(".")[0] for dotted, _ in _imported_names(name, path)})
    return out


def test_rl_never_imports_harness() -> None:
    offenders = {name: tops for name, tops in _top_level_imports("rl").items() if "harness" in tops}
    assert offenders == {}


def test_harness_never_imports_rl() -> None:
    """The harness reads the engine through the run dir and the checked-in schema only."""
    offenders = {name: tops for name, tops in _top_level_imports("harness").items() if "rl" in tops}
    assert offenders == {}
