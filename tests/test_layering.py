"""The package rooms of DESIGN.md, checked on the source tree: what loads without torch, who imports whom."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Everything an agent host, the proxy or a sandbox client loads; none of it may pull in torch.
TORCH_FREE = (
    "rock.proxy",
    "rock.proxy.types",
    "rock.proxy.client",
    "rock.proxy.train",
    "rock.proxy.app",
    "rock.sdk",
    "rock.sdk.sandbox",
    "roll.types",
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
    wherever it stands (functions included)."""
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
    return names


def forbidden_imports(package: str, forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        package_of_file = ".".join(path.relative_to(ROOT).parts[:-1])
        for name in sorted(imported_modules(path.read_text(), package_of_file)):
            if any(name == f or name.startswith(f"{f}.") for f in forbidden):
                found.append(f"{path.relative_to(ROOT)}: {name}")
    return found


def test_imported_modules_sees_every_import_form() -> None:
    source = "\n".join(
        ["import roll.types", "from rome import bench", "from . import hub", "from .. import sdk", "def f():"]
    )
    source += "\n    import iflow\n"
    assert imported_modules(source, "rock.envs") == {
        "roll.types",
        "rome",
        "rome.bench",
        "rock.envs",
        "rock.envs.hub",
        "rock",
        "rock.sdk",
        "iflow",
    }


def test_rock_imports_neither_roll_nor_rome() -> None:
    assert forbidden_imports("rock", ("roll", "rome")) == []


def test_the_task_library_imports_only_rock() -> None:
    assert forbidden_imports("rome/terminal_tasks", ("roll", "iflow")) == []
    bench_internals = [
        line
        for line in forbidden_imports("rome/terminal_tasks", ("rome",))
        if "rome.terminal_tasks" not in line
    ]
    assert bench_internals == []


def test_no_import_cycle_between_engine_and_trainer() -> None:
    """The engines may read the trainer's checkpoint layout; the trainer needs nothing of the engines (the
    weights' wire description is `roll.types.TensorSpec`), so no cycle can form."""
    assert forbidden_imports("roll/trainer", ("roll.engine",)) == []
    engine_to_trainer = forbidden_imports("roll/engine", ("roll.trainer",))
    trainer_to_engine = forbidden_imports("roll/trainer", ("roll.engine",))
    assert not (engine_to_trainer and trainer_to_engine)


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


def test_roll_reaches_rome_only_through_the_task_library() -> None:
    """Training shares the task model, loader and verifier with rome-bench, and nothing else of rome."""
    reaching = [line for line in forbidden_imports("roll", ("rome",)) if ": rome.terminal_tasks" not in line]
    assert reaching == []
