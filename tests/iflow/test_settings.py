"""Settings precedence: defaults < user < project < system < IFLOW_* environment."""

import json
from pathlib import Path

import pytest

from iflow.settings import SettingsError, load_settings, project_root, settings_files


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.fixture()
def layout(tmp_path: Path) -> dict:
    home = tmp_path / "home"
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    cwd = repo / "src" / "pkg"
    cwd.mkdir(parents=True)
    env = {"IFLOW_HOME": str(home), "IFLOW_SYSTEM_SETTINGS": str(tmp_path / "etc" / "settings.json")}
    return {"home": home, "repo": repo, "cwd": cwd, "env": env, "system": tmp_path / "etc" / "settings.json"}


def test_defaults_without_any_file(layout):
    settings = load_settings(layout["cwd"], layout["env"])
    assert settings.base_url is None and settings.approval_mode == "default"
    assert settings.context.light_threshold == 0.6 and settings.hooks == {}


def test_each_layer_overrides_the_one_below(layout):
    write(layout["home"] / "settings.json", {"baseUrl": "http://user", "modelName": "u", "apiKey": "k1"})
    write(layout["repo"] / ".iflow" / "settings.json", {"modelName": "p", "approvalMode": "auto-edit"})
    write(layout["system"], {"approvalMode": "plan"})
    settings = load_settings(layout["cwd"], layout["env"])
    assert (settings.base_url, settings.model_name, settings.api_key) == ("http://user", "p", "k1")
    assert settings.approval_mode == "plan"
    env = {**layout["env"], "IFLOW_modelName": "e", "IFLOW_APPROVAL_MODE": "yolo"}
    settings = load_settings(layout["cwd"], env)
    assert (settings.model_name, settings.approval_mode) == ("e", "yolo")


def test_nearest_project_file_wins_and_stops_at_the_project_root(layout, tmp_path):
    write(tmp_path / ".iflow" / "settings.json", {"modelName": "outside-the-repo"})
    assert load_settings(layout["cwd"], layout["env"]).model_name is None
    write(layout["repo"] / ".iflow" / "settings.json", {"modelName": "root"})
    write(layout["repo"] / "src" / ".iflow" / "settings.json", {"modelName": "src"})
    assert load_settings(layout["cwd"], layout["env"]).model_name == "src"
    assert project_root(layout["cwd"]) == layout["repo"].resolve()
    assert len(settings_files(layout["cwd"], layout["env"])) == 1


def test_context_merges_by_key_and_hooks_add_up(layout):
    hook = {"matcher": "write_file", "hooks": [{"command": "true"}]}
    write(
        layout["home"] / "settings.json",
        {"context": {"contextWindow": 1000}, "hooks": {"PreToolUse": [hook]}},
    )
    write(
        layout["repo"] / ".iflow" / "settings.json",
        {"context": {"lightThreshold": 0.5}, "hooks": {"PreToolUse": [hook], "Stop": [hook]}},
    )
    env = {**layout["env"], "IFLOW_CONTEXT": '{"summaryThreshold": 0.9}'}
    settings = load_settings(layout["cwd"], env)
    assert settings.context.context_window == 1000
    assert (settings.context.light_threshold, settings.context.summary_threshold) == (0.5, 0.9)
    assert len(settings.hooks["PreToolUse"]) == 2 and len(settings.hooks["Stop"]) == 1


def test_unknown_key_names_the_file_and_the_allowed_keys(layout):
    path = write(layout["home"] / "settings.json", {"modelname": "x"})
    with pytest.raises(SettingsError) as error:
        load_settings(layout["cwd"], layout["env"])
    assert str(path) in str(error.value)
    assert "unknown key 'modelname'" in str(error.value)
    assert "modelName" in str(error.value)


def test_unknown_nested_keys_list_their_own_level(layout):
    write(layout["home"] / "settings.json", {"context": {"lightTreshold": 0.5}})
    with pytest.raises(
        SettingsError, match=r"unknown key 'context.lightTreshold' \(context keys: .*lightThreshold"
    ):
        load_settings(layout["cwd"], layout["env"])
    hooks = {"PreToolUse": [{"matcher": "x", "hooks": [{"command": "true", "timeout_s": 5}]}]}
    write(layout["home"] / "settings.json", {"hooks": hooks})
    with pytest.raises(
        SettingsError, match=r"'hooks.PreToolUse.0.hooks.0.timeout_s' \(hook command keys: command"
    ):
        load_settings(layout["cwd"], layout["env"])


def test_bad_values_are_explained(layout):
    write(layout["home"] / "settings.json", {"approvalMode": "sometimes"})
    with pytest.raises(SettingsError, match="approvalMode"):
        load_settings(layout["cwd"], layout["env"])
    write(layout["home"] / "settings.json", {"context": {"lightThreshold": 0.9, "summaryThreshold": 0.8}})
    with pytest.raises(SettingsError, match="must not exceed"):
        load_settings(layout["cwd"], layout["env"])
    (layout["home"] / "settings.json").write_text("{not json")
    with pytest.raises(SettingsError, match="not valid JSON"):
        load_settings(layout["cwd"], layout["env"])
    (layout["home"] / "settings.json").unlink()
    with pytest.raises(SettingsError, match="IFLOW_HOOKS must be JSON"):
        load_settings(layout["cwd"], {**layout["env"], "IFLOW_HOOKS": "PreToolUse"})
