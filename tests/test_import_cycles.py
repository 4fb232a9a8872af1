"""No import circles among the project's own modules.

The graph is read from the source with :mod:`ast`: every ``import`` and ``from ... import`` at any depth (module
level, inside functions, under ``if TYPE_CHECKING``), so a circle hidden in a function or a type-only import still
fails here. ``from package import name`` is an edge to ``package.name`` when that is a module, else to ``package``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tasks", "rewards", "agentgym_envs", "trainers", "benchmarks")


def module_files() -> dict[str, Path]:
    """Module name -> source file, for every module of :data:`PACKAGES`."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: Mapping[str, Path]) -> set[str]:
    """The project modules one import statement of ``module`` names."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names} & set(known)
    base = node.module or ""
    if node.level:
        parent = module.split(".") if is_package else module.split(".")[:-1]
        parent = parent[:len(parent) - node.level + 1]
        base = ".".join([*parent, *([node.module] if node.module else [])])
    names = {f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names}
    return names & set(known)


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports anywhere in its source (itself excluded)."""
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                edges |= _targets(node, name, is_package, modules)
        graph[name] = edges - {name}
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            successor = next(successors, None)
            if successor is not None:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                elif successor in on_stack:
                    low[node] = min(low[node], index[successor])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_circle_and_only_that() -> None:
    # a -> b -> c -> a is one circle; d only points into it
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]


def test_the_graph_has_module_level_function_level_and_type_only_edges() -> None:
    # guards the check below against passing vacuously
    graph = import_graph(module_files())
    assert "tasks.splits" in graph["agentgym_envs.core"] or "tasks" in graph["agentgym_envs.core"]
    assert "agentgym_envs.sandbox.data_image" in graph["agentgym_envs.data_analysis.env"]  # inside a method
    assert "agentgym_envs.sandbox.docker" in graph["agentgym_envs.sandboxed"]  # under TYPE_CHECKING


def test_no_import_circles() -> None:
    graph = import_graph(module_files())
    found = cycles(graph)
    details = [f"{component}: " + "; ".join(f"{member} -> {sorted(graph[member] & set(component))}"
                                            for member in component) for component in found]
    assert not found, "import circles:\n" + "\n".join(details)
