"""The package rooms of DESIGN.md, checked on the source tree: what loads without torch, who may import whom
(the whole "may import" table), and that no two sub-packages import each other, directly or round a loop.

An import is any `import` or `from ... import` in a module, wherever it stands (module level, inside a
function, under `if TYPE_CHECKING:`), an `importlib.import_module("literal")`, and an entry point of
pyproject.toml: the module that loads an entry-point group (names it) imports what the group's entries point
to."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rock", "iflow", "roll", "rome")
TASK_LIBRARY = "rome.terminal_tasks"

# Everything an agent host, the proxy or a sandbox client loads; none of it may pull in torch.
TORCH_FREE = (
    "rock.proxy",
    "rock.proxy.types",
    "rock.proxy.client",
    "rock.proxy.train",
    "rock.proxy.app",
    "rock.sdk",
    "rock.sdk.sandbox",
    "rock.sdk.envs",
    "rock.sdk.images",
    "rock.sdk.private_fleet",
    "rock.sdk.runtime",
    "rock.sdk.host_python",
    "rock.sdk.tables",
    "rock.observation",
    "roll.types",
    "rome.terminal_tasks.rock_sandbox",
)


def test_proxy_sdk_and_training_types_load_without_torch() -> None:
    code = (
        f"import importlib, sys\nfor m in {TORCH_FREE!r}: importlib.import_module(m)\n"
        "loaded = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "assert not loaded, loaded[:5]\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def imported_modules(source: str, package: str) -> set[str]:
    """Every module an `import` or `from ... import` in a module of `package` names (relative ones resolved),
    wherever it stands (functions and `if TYPE_CHECKING:` included), and the literal argument of every
    `importlib.import_module(...)`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and _calls_import_module(node.func) and _literal(node.args):
            names.add(node.args[0].value)  # type: ignore[attr-defined]
    return names


def _literal(args: list[ast.expr]) -> bool:
    return bool(args) and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str)


def _calls_import_module(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id == "import_module"
    )


def entry_point_groups() -> dict[str, set[str]]:
    """Entry-point group -> the modules its entries (pyproject.toml) point to."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {
        group: {target.split(":")[0].strip() for target in entries.values()}
        for group, entries in project.get("entry-points", {}).items()
    }


def loaded_groups(source: str, groups: set[str]) -> set[str]:
    """The entry-point groups a module names as a string: it loads them (`entry_points(group=...)`)."""
    return {
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in groups
    }


def source_files() -> Iterator[tuple[str, Path]]:
    """(module name, file) of every module of the four packages."""
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


@cache
def import_graph() -> dict[str, frozenset[str]]:
    """Module -> the modules of the four packages it imports (entry points included)."""
    groups = entry_point_groups()
    graph: dict[str, frozenset[str]] = {}
    for module, path in source_files():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        source = path.read_text()
        names = imported_modules(source, package)
        for group in loaded_groups(source, set(groups)):
            names |= groups[group]
        graph[module] = frozenset(n for n in names if n.split(".")[0] in PACKAGES)
    return graph


def within(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(f"{p}.") for p in prefixes)


def may_import(module: str, name: str) -> bool:
    """DESIGN.md's "may import" table, for an import of `name` in `module` (each package imports itself)."""
    here, there = module.split(".")[0], name.split(".")[0]
    if within(module, TASK_LIBRARY):
        return within(name, TASK_LIBRARY, "rock.sdk")
    if here == there:
        return True
    if here == "rock":
        return within(module, "rock.proxy") and within(name, "iflow.context")
    if here == "iflow":
        return within(module, "iflow.executors") and within(name, "rock.sdk")
    if here == "roll":
        return within(name, "rock.sdk", "rock.proxy", "iflow", TASK_LIBRARY)
    return here == "rome"  # rome's apps (bench, data, cli) may import everything


# Imports that break the table today, each with what fixing it takes; the test below fails when one of them is
# gone (delete it here) or another appears.
NOT_YET: dict[str, str] = {}


def violations() -> set[str]:
    """`module -> name` for each import the table refuses (`from a.b import c` is reported as `a.b` alone)."""
    found = set()
    for module, names in import_graph().items():
        refused = {name for name in names if not may_import(module, name)}
        found |= {f"{module} -> {n}" for n in refused if n.rpartition(".")[0] not in refused}
    return found


def test_every_import_is_allowed_by_the_may_import_table() -> None:
    assert sorted(violations() - set(NOT_YET)) == []


def test_the_known_exceptions_are_still_there() -> None:
    assert sorted(set(NOT_YET) - violations()) == []


def test_the_table_reads_as_design_md_says() -> None:
    allowed = [
        ("rock.proxy.episodes", "iflow.context.ContextConfig"),
        ("iflow.executors.rock", "rock.sdk.Sandbox"),
        ("rome.terminal_tasks.env", "rock.sdk"),
        ("roll.rollout.gem_env", "rock.sdk.envs"),
        ("roll.rollout.worker", "rock.proxy.client"),
        ("roll.rollout.terminal.episode", "iflow.agent.build"),
        ("roll.rollout.terminal.episode", "rome.terminal_tasks.rock_sandbox"),
        ("rome.data.recipe", "roll.rollout.terminal.config"),
        ("rome.bench.runner", "rock.fleet"),
    ]
    refused = [
        ("rock.admin.app", "iflow.context"),
        ("rock.proxy.episodes", "iflow.types"),
        ("rock.envs.hub", "roll.types"),
        ("rock.sdk.sandbox", "rome.bench"),
        ("iflow.agent.build", "rock.sdk"),
        ("iflow.executors.rock", "rock"),
        ("iflow.executors.rock", "rock.fleet"),
        ("iflow.tools.shell", "roll"),
        ("rome.terminal_tasks.rock_sandbox", "rock.images.build"),
        ("rome.terminal_tasks.task", "rome.bench.runner"),
        ("rome.terminal_tasks.task", "iflow"),
        ("roll.rollout.terminal.run", "rock.fleet"),
        ("roll.rollout.gem_env", "rock.envs"),
        ("roll.rollout.terminal.data_stage", "rome.data.recipe"),
    ]
    assert [pair for pair in allowed if not may_import(*pair)] == []
    assert [pair for pair in refused if may_import(*pair)] == []


def sub_package(name: str) -> str:
    """The room of a module: its package's sub-package or top-level module (`roll.algo`, `rock.sdk`,
    `roll.types`); a package's own `__init__` is its package."""
    return ".".join(name.split(".")[:2])


def package_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected sets of rooms (Tarjan) with more than one room, each sorted."""
    edges: dict[str, set[str]] = {}
    for module, names in graph.items():
        for name in names:
            if "." in name and sub_package(name) != sub_package(module):
                edges.setdefault(sub_package(module), set()).add(sub_package(name))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(room: str) -> None:
        index[room] = low[room] = len(index)
        stack.append(room)
        for other in sorted(edges.get(room, ())):
            if other not in index:
                visit(other)
                low[room] = min(low[room], low[other])
            elif other in stack:
                low[room] = min(low[room], index[other])
        if low[room] == index[room]:
            members = []
            while True:
                member = stack.pop()
                members.append(member)
                if member == room:
                    break
            if len(members) > 1:
                cycles.append(sorted(members))

    for room in sorted(edges):
        if room not in index:
            visit(room)
    return sorted(cycles)


def cycle_edges(cycle: list[str]) -> list[str]:
    """Where the rooms of a cycle import each other, for the failure message."""
    rooms = set(cycle)
    return sorted(
        f"{module} -> {name}"
        for module, names in import_graph().items()
        for name in names
        if {sub_package(module), sub_package(name)} <= rooms and sub_package(name) != sub_package(module)
    )


# Cycles that remain today, with what breaking them takes; the test fails when one is gone (delete it here).
CYCLES_NOT_YET: list[list[str]] = []


def test_no_sub_package_imports_itself_round_a_loop() -> None:
    found = package_cycles(import_graph())
    unexpected = [cycle for cycle in found if cycle not in CYCLES_NOT_YET]
    assert unexpected == [], [cycle_edges(cycle)[:20] for cycle in unexpected]
    assert [cycle for cycle in CYCLES_NOT_YET if cycle not in found] == []


def test_the_cycle_finder_sees_loops_of_two_and_more_rooms() -> None:
    graph = {
        "roll.rollout.stage": {"rome.data.recipe"},  # an entry point's edge
        "rome.data.recipe": {"roll.rollout.config", "rome.bench.runner"},
        "roll.algo.losses": {"roll.types"},
        "rock.sdk.types": {"rock.observation"},
        "rock.a.x": {"rock.b.y"},
        "rock.b.y": {"rock.c"},
        "rock.c": {"rock.a"},
    }
    assert package_cycles(graph) == [["rock.a", "rock.b", "rock.c"], ["roll.rollout", "rome.data"]]


def test_imported_modules_sees_every_import_form() -> None:
    source = "\n".join(
        [
            "import roll.types",
            "from rome import bench",
            "from . import hub",
            "from .. import sdk",
            "from typing import TYPE_CHECKING",
            "if TYPE_CHECKING:",
            "    from rock.proxy import types",
            "def f():",
            "    import iflow",
            "    importlib.import_module('roll.engine')",
        ]
    )
    assert imported_modules(source, "rock.envs") == {
        "roll.types",
        "rome",
        "rome.bench",
        "rock.envs",
        "rock.envs.hub",
        "rock",
        "rock.sdk",
        "typing",
        "typing.TYPE_CHECKING",
        "rock.proxy",
        "rock.proxy.types",
        "iflow",
        "roll.engine",
    }


def test_entry_points_count_as_imports_of_the_module_that_loads_them() -> None:
    assert loaded_groups("entry_points(group='roll.plugins')", {"roll.plugins", "other"}) == {"roll.plugins"}
    for group, targets in entry_point_groups().items():
        loaders = [m for m, p in source_files() if group in loaded_groups(p.read_text(), {group})]
        assert loaders, f"no module loads the entry-point group {group!r}"
        assert all(targets <= import_graph()[m] for m in loaders)


def test_tests_import_their_helpers_as_a_package() -> None:
    """A helper module under tests/ is imported as `tests.<package>.<module>`, not by bare name through the
    folder pytest happens to put on sys.path. Worker scripts (run by path, `__main__`) are exempt."""
    tests = ROOT / "tests"
    local_names = {path.stem for path in tests.rglob("*.py")}
    bare = []
    for path in sorted(tests.rglob("*.py")):
        source = path.read_text()
        if 'if __name__ == "__main__"' in source:
            continue
        package = ".".join(path.relative_to(ROOT).parts[:-1])
        bare += [
            f"{path.relative_to(ROOT)}: {n}" for n in imported_modules(source, package) if n in local_names
        ]
    assert bare == []
    folders = [tests, *(p.parent for p in tests.rglob("test_*.py"))]
    assert sorted({str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").is_file()}) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_is_scanned(package: str) -> None:
    assert any(module.split(".")[0] == package for module in import_graph())
