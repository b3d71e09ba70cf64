"""The floors are one-way, and every module stands on one (the contract in setup.cfg)."""

from __future__ import annotations

import configparser
import subprocess
import sys
from pathlib import Path

import grimp
from checkout import ROOT

# Not floors: the package's own front door, folders that only group floors, and tooling.
OUTSIDE_FLOORS = {
    "twinlog",
    "twinlog.engine",
    "twinlog.rpc",
    "twinlog.connectors",
    "twinlog.rpc.codegen",  # `make proto`: regenerates rpc/generated, never imported at run time
    "twinlog.setup",  # the build's script (setup.py), left out of the wheel
}


def _floors() -> list[str]:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = config["importlinter:contract:floors"]["layers"].split("\n")
    return [name.strip() for line in lines for name in line.split("|") if name.strip()]


def test_the_import_contract_holds() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout and result.stdout.count("KEPT") >= 4


def test_every_module_stands_on_a_floor() -> None:
    floors = _floors()
    assert len(floors) >= 12
    graph = grimp.build_graph("twinlog", cache_dir=None)
    installed = [
        module
        for module in graph.modules
        if module.startswith("twinlog") and not module.startswith("twinlog.bench")
    ]
    homeless = sorted(
        module
        for module in installed
        if module not in OUTSIDE_FLOORS
        and not any(module == floor or module.startswith(floor + ".") for floor in floors)
    )
    assert not homeless, (
        f"put these in a floor folder, or name the new floor in setup.cfg: {homeless}"
    )
    assert len(installed) > 100


def test_an_embedded_broker_loads_no_network_code() -> None:
    code = (
        "import sys, twinlog, twinlog.engine.broker\n"
        "loaded = sorted(name for name in ('grpc', 'google.protobuf', 'pyspark', 'kazoo')"
        " if name in sys.modules)\n"
        "print(loaded)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout


def test_the_tests_mirror_the_floors() -> None:
    """Each test folder (but system/ and support/) is named after the floor it tests."""
    tests = ROOT / "tests"
    floors = set(_floors())
    folders = {
        path.parent.relative_to(tests)
        for path in tests.rglob("test_*.py")
        if path.parent != tests and path.relative_to(tests).parts[0] not in {"system", "support"}
    }
    assert len(folders) >= 10
    unknown = sorted(
        str(folder) for folder in folders if "twinlog." + ".".join(folder.parts) not in floors
    )
    assert not unknown, f"test folders that name no floor: {unknown}"
    without_conftest = sorted(str(f) for f in folders if not (tests / f / "conftest.py").is_file())
    assert not without_conftest, f"give these test folders a conftest.py: {without_conftest}"


def test_setup_cfg_installs_every_package_folder() -> None:
    """A new package folder that setup.cfg does not list would be missing from the wheel."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    listed = {name.strip() for name in config["options"]["packages"].split() if name.strip()}
    installed_roots = ("engine", "journal", "copier", "rpc", "connectors")
    folders = {
        "twinlog." + ".".join(init.parent.relative_to(ROOT).parts)
        for root in installed_roots
        for init in (ROOT / root).rglob("__init__.py")
    }
    assert folders | {"twinlog"} == listed


def test_import_twinlog_gives_every_error_class_and_the_everyday_names() -> None:
    import twinlog
    from twinlog.engine.base import errors

    broker_errors = [
        cls.__name__
        for cls in errors.all_error_classes()
        if cls.__module__ == errors.__name__ and cls.__name__ != "TwinlogError"
    ]
    missing = [name for name in [*broker_errors, "TwinlogError"] if name not in twinlog.__all__]
    assert not missing, f"add to twinlog/__init__.py: {missing}"
    for name in ("Broker", "Producer", "Consumer", "Admin", "TopicPartition", "__version__"):
        assert name in twinlog.__all__ and getattr(twinlog, name) is not None


def _readme_floor_rows() -> list[list[str]]:
    """The floor column of the README's floor table, a list of names per row, top first."""
    text = (ROOT / "README.md").read_text()
    table = text[text.index("| floor | folder | holds |") :].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines()[2:] if line.startswith("| `")]
    return [[name.strip().strip("`") for name in row.split("|")[1].split(",")] for row in rows]


def test_the_readme_floor_table_is_the_import_contract() -> None:
    """One list of the floors: the README's table, row for row the contract's layers."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    layers = [
        sorted(name.strip() for name in line.split("|") if name.strip())
        for line in config["importlinter:contract:floors"]["layers"].split("\n")
        if line.strip()
    ]
    assert [sorted(row) for row in _readme_floor_rows()] == layers, (
        "the README's floor table (Layout) and setup.cfg's layers disagree: change both"
    )


PROCESS_MODULES = {"subprocess", "multiprocessing", "pty"}


def _starts_processes(path: Path) -> list[str]:
    """The process-starting modules ``path`` imports, and calls of os.fork/os.exec*/os.spawn*."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in PROCESS_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in PROCESS_MODULES:
                found.append(node.module)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "os" and node.attr.startswith(
                ("fork", "exec", "spawn", "posix_spawn")
            ):
                found.append(f"os.{node.attr}")
    return found


def test_nothing_below_rpc_starts_a_process() -> None:
    """engine/, journal/ and copier/ run embedded: starting a JVM or a broker is rpc/cli's."""
    offenders = {
        str(path.relative_to(ROOT)): found
        for root in ("engine", "journal", "copier")
        for path in sorted((ROOT / root).rglob("*.py"))
        if (found := _starts_processes(path))
    }
    assert not offenders, f"these start processes; move that to rpc/cli: {offenders}"
    assert _starts_processes(ROOT / "rpc" / "cli" / "local_zookeeper.py")  # the check sees one
