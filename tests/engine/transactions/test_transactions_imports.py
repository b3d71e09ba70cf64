"""The transaction coordinator's parts know nothing of its request API.

Each module of ``twinlog.engine.transactions`` has one job (the import contract's
acyclic-siblings rule already refuses a ring). Replay, completion and the in-memory
records are read and loaded apart from the request API that uses them.
"""

from __future__ import annotations

import ast
from pathlib import Path

from checkout import ROOT

PACKAGE = "twinlog.engine.transactions"
FOLDER = ROOT / "engine" / "transactions"


def floor_imports(path: Path) -> set[str]:
    """Modules of the transactions floor that ``path`` imports (by module name, without the package)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            if name.startswith(PACKAGE + "."):
                found.add(name.removeprefix(PACKAGE + ".").split(".")[0])
    return found


def import_graph() -> dict[str, set[str]]:
    return {
        path.stem: floor_imports(path)
        for path in sorted(FOLDER.glob("*.py"))
        if path.stem != "__init__"
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle in ``graph`` as the list of its modules (first repeated at the end), or None."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for imported in sorted(graph.get(module, set())):
            cycle = visit(imported, [*path, module])
            if cycle is not None:
                return cycle
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = visit(module, [])
        if cycle is not None:
            return cycle
    return None


def test_find_cycle_finds_a_ring() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_transactions_floor_has_no_import_cycle() -> None:
    graph = import_graph()
    assert {"coordinator", "coordinator_replay", "coordinator_completion"} <= graph.keys()
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph) or [])}"


def test_the_coordinators_parts_do_not_import_its_request_api() -> None:
    graph = import_graph()
    for part in ("coordinator_replay", "coordinator_completion", "transaction_metadata"):
        assert "coordinator" not in graph[part], f"{part} imports the coordinator"
    assert "coordinator_replay" not in graph["coordinator_completion"]
    assert "coordinator_completion" not in graph["coordinator_replay"]
