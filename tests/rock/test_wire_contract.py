"""One wire contract per hop: the admin↔worker models live in rock.worker.contract, the worker↔rocklet ones in
rock.rocklet.types, a command's result (carried by every hop) in rock.observation, and neither the worker nor
the rocklet nor the SDK imports the admin."""

from __future__ import annotations

import ast
from pathlib import Path

from pydantic import BaseModel

import rock.rocklet.types as rocklet_types
import rock.sdk.types as sdk_types
from rock.observation import Observation

ROCK = Path(__file__).resolve().parents[2] / "rock"


def imported_modules(package: Path) -> set[str]:
    found: set[str] = set()
    for source in package.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
    return found


def test_the_worker_rocklet_and_sdk_never_import_the_admin():
    for package in ("worker", "rocklet", "sdk"):
        admin = {m for m in imported_modules(ROCK / package) if m.startswith("rock.admin")}
        assert admin == set(), f"rock.{package} imports {admin}"


def models(module: object) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == module.__name__
    }


def test_rocklet_and_sdk_models_share_no_names():
    assert models(rocklet_types) & models(sdk_types) == set()
    assert sdk_types.Observation is Observation
    assert "Observation" not in vars(rocklet_types)


def test_both_ends_of_the_admin_worker_hop_use_the_contract_module():
    for end in ("admin/service.py", "admin/app.py", "worker/app.py", "worker/service.py"):
        tree = ast.parse((ROCK / end).read_text())
        sources = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "rock.worker.contract" in sources, end
        dict_replies = [
            n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "get" and _on_reply(n)
        ]
        assert dict_replies == [], end


def _on_reply(node: ast.Attribute) -> bool:
    return isinstance(node.value, ast.Name) and node.value.id in {"reply", "response"}
