"""The grader's house stays a house of rooms: a thin Course, no room too large to read, no import cycle."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "attention_course"
GRADING = PACKAGE / "grading"
LARGEST_ROOM = 600  # lines; the sandbox-side runner is one program, and exempt


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """{module: the package's modules it imports, at the top or inside a function}. ``from pkg import sub``
    imports the submodule ``sub`` (not the package as a whole)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if f"{node.module}.{alias.name}" in modules:
                        graph[name].add(f"{node.module}.{alias.name}")
                    elif node.module in modules:
                        graph[name].add(node.module)
            elif isinstance(node, ast.Import):
                graph[name].update(alias.name for alias in node.names if alias.name in modules)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_the_package_has_no_import_cycle():
    assert _cycles(_import_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_course_is_a_thin_facade_and_no_grading_room_is_too_large_to_read():
    course = (GRADING / "course.py").read_text(encoding="utf-8").splitlines()
    assert len(course) <= 200, f"course.py has {len(course)} lines: move the work into its room"
    too_large = {path.name: n for path in GRADING.rglob("*.py") if path.name != "runner.py"
                 and (n := len(path.read_text(encoding="utf-8").splitlines())) > LARGEST_ROOM}
    assert too_large == {}, f"modules over {LARGEST_ROOM} lines: {too_large}"
