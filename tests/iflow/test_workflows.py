"""Workflow files: sub-agent definitions and slash commands."""

from pathlib import Path

import pytest

from iflow.workflows import SlashCommand, WorkflowError, load_agents, load_commands, parse_agent


@pytest.fixture()
def tree(tmp_path: Path) -> dict:
    home, repo = tmp_path / "home", tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "pkg").mkdir()
    return {"home": home, "repo": repo, "env": {"IFLOW_HOME": str(home)}}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_agent_definition_from_front_matter(tree):
    path = write(
        tree["repo"] / ".iflow" / "agents" / "reviewer.md",
        "---\nname: code-reviewer\ndescription: Reviews diffs\ntools: read_file, glob\nmodel: small\n"
        "max_turns: 8\n---\nYou review code.\n",
    )
    agent = parse_agent(path)
    assert (agent.name, agent.description, agent.tools) == (
        "code-reviewer",
        "Reviews diffs",
        ("read_file", "glob"),
    )
    assert (agent.model, agent.max_turns, agent.system_prompt, agent.path) == (
        "small",
        8,
        "You review code.",
        path,
    )


def test_agent_defaults_and_override_by_name(tree):
    write(tree["home"] / "agents" / "helper.md", "---\ndescription: global\ntools: [read_file]\n---\nG")
    write(tree["repo"] / ".iflow" / "agents" / "helper.md", "---\ndescription: project\n---\nP")
    write(tree["repo"] / ".iflow" / "agents" / "other.md", "---\ndescription: other\n---\n")
    agents = load_agents(tree["repo"] / "pkg", tree["env"])
    assert sorted(agents) == ["helper", "other"]
    assert (agents["helper"].description, agents["helper"].tools, agents["helper"].model) == (
        "project",
        None,
        None,
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("---\nname: x\n---\nbody", "description: Field required"),
        ("---\ndescription: d\nmax_turns: 0\n---\n", "max_turns: Input should be greater than 0"),
        ("---\ndescription: d\ncolour: red\n---\n", "colour: Extra inputs are not permitted"),
        ("---\ndescription: [unclosed\n---\n", "not valid YAML"),
        ("---\ndescription: d\n", "never closed"),
        ("---\n- a\n---\n", "must be YAML keys"),
    ],
)
def test_bad_agent_files_name_the_file_and_the_problem(tree, text, message):
    path = write(tree["repo"] / ".iflow" / "agents" / "bad.md", text)
    with pytest.raises(WorkflowError) as error:
        parse_agent(path)
    assert str(path) in str(error.value) and message in str(error.value)


def test_commands_are_named_by_path(tree):
    write(
        tree["repo"] / ".iflow" / "commands" / "git" / "commit.md", "---\ndescription: Commit\n---\nCommit $1"
    )
    write(tree["home"] / "commands" / "plain.md", "Explain the code")
    commands = load_commands(tree["repo"], tree["env"])
    assert sorted(commands) == ["git:commit", "plain"]
    assert commands["git:commit"].description == "Commit"
    assert commands["plain"].description == ""


def test_argument_substitution():
    command = SlashCommand(name="fix", template="Fix issue $1 in $2.\nAll: $ARGUMENTS / {{args}} / [$3]")
    assert command.render(' 42 "src/my app.py" ') == (
        'Fix issue 42 in src/my app.py.\nAll: 42 "src/my app.py" / 42 "src/my app.py" / []'
    )
    plain = SlashCommand(name="explain", template="Explain the code.")
    assert plain.render("main.py") == "Explain the code.\n\nmain.py"
    assert plain.render("") == "Explain the code."
