"""Memory files: load order, `@path` imports, cycles, saving."""

from pathlib import Path

import pytest

from iflow.memory import load_memory, memory_paths, save_memory


@pytest.fixture()
def tree(tmp_path: Path) -> dict:
    home = tmp_path / "home"
    repo = tmp_path / "repo"
    cwd = repo / "pkg" / "sub"
    for folder in (home, repo / ".git", cwd):
        folder.mkdir(parents=True)
    return {"home": home, "repo": repo, "cwd": cwd, "env": {"IFLOW_HOME": str(home)}}


def test_load_order_global_then_root_down_to_cwd(tree, tmp_path):
    files = {
        tree["home"] / "AGENTS.md": "global agents",
        tree["home"] / "IFLOW.md": "global iflow",
        tree["repo"] / "IFLOW.md": "root",
        tree["repo"] / "pkg" / "AGENTS.md": "pkg agents",
        tree["repo"] / "pkg" / "IFLOW.md": "pkg iflow",
        tree["cwd"] / "IFLOW.md": "cwd",
        tmp_path / "IFLOW.md": "above the project root: not read",
    }
    for path, text in files.items():
        path.write_text(text)
    memory = load_memory(tree["cwd"], tree["env"])
    assert [f.content for f in memory.files] == [
        "global iflow",
        "global agents",
        "root",
        "pkg iflow",
        "pkg agents",
        "cwd",
    ]
    assert memory.text().startswith(f"--- Context from: {tree['home'] / 'IFLOW.md'} ---\nglobal iflow\n\n")


def test_without_git_only_global_and_cwd(tmp_path):
    home, cwd = tmp_path / "home", tmp_path / "a" / "b"
    cwd.mkdir(parents=True)
    home.mkdir()
    (tmp_path / "a" / "IFLOW.md").write_text("parent")
    (cwd / "AGENTS.md").write_text("here")
    assert memory_paths(cwd, {"IFLOW_HOME": str(home)}) == [cwd / "AGENTS.md"]


def test_imports_expand_relative_to_the_importing_file(tree):
    docs = tree["repo"] / "docs"
    docs.mkdir()
    (docs / "style.md").write_text("use tabs\n@./more/extra.md\n")
    (docs / "more").mkdir()
    (docs / "more" / "extra.md").write_text("no globals")
    (tree["repo"] / "IFLOW.md").write_text(
        "rules:\n@docs/style.md\nmail me@example.com, see @missing.md\n```\n@docs/style.md\n```\n"
    )
    [memory] = load_memory(tree["repo"], tree["env"]).files
    assert memory.content == (
        "rules:\nuse tabs\nno globals\nmail me@example.com, see @missing.md\n```\n@docs/style.md\n```\n"
    )


def test_import_cycles_are_cut(tree):
    (tree["repo"] / "IFLOW.md").write_text("A\n@b.md")
    (tree["repo"] / "b.md").write_text("B\n@IFLOW.md\n@b.md")
    [memory] = load_memory(tree["repo"], tree["env"]).files
    assert memory.content == (
        "A\nB\n<!-- import of IFLOW.md skipped: it would import itself -->\n"
        "<!-- import of b.md skipped: it would import itself -->"
    )


def test_deep_imports_stop(tree):
    for i in range(8):
        (tree["repo"] / f"f{i}.md").write_text(f"{i} @f{i + 1}.md")
    (tree["repo"] / "f8.md").write_text("end")
    (tree["repo"] / "IFLOW.md").write_text("@f0.md")
    [memory] = load_memory(tree["repo"], tree["env"]).files
    assert memory.content == "0 1 2 3 4 <!-- import of f5.md skipped: imports nest deeper than 5 -->"


def test_save_memory_appends_to_the_global_file_section(tree):
    path = save_memory("the tests run with  `make check`\n", tree["env"])
    assert path == tree["home"] / "IFLOW.md"
    assert path.read_text() == "## iFlow Added Memories\n\n- the tests run with `make check`\n"
    path.write_text("# Mine\n\n## iFlow Added Memories\n\n- one\n\n## Later\ntext\n")
    save_memory("- two", tree["env"])
    assert path.read_text() == "# Mine\n\n## iFlow Added Memories\n\n- one\n- two\n\n## Later\ntext\n"
    assert load_memory(tree["cwd"], tree["env"]).files[0].content.count("- two") == 1
    with pytest.raises(ValueError, match="non-empty fact"):
        save_memory("  ", tree["env"])
