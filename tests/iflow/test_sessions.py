"""Sessions on disk: what an agent writes is what a resumed agent continues from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iflow.sessions import SessionError, SessionStore
from iflow.testing import ScriptedOpenAIServer, call, say
from tests.iflow.agent_harness import make_agent


def test_a_resumed_agent_continues_the_same_history(git_repo: Path, iflow_home: Path) -> None:
    store = SessionStore()
    session = store.create(str(git_repo), "scripted-model")
    with ScriptedOpenAIServer(
        [call("read_file", file_path="calc.py"), say("It subtracts."), say("Yes.")]
    ) as server:
        agent, _ = make_agent(server, git_repo)
        agent.session = session
        agent.run("what does add do?")
        loaded = store.load(session.id)
        assert loaded.messages == agent.messages
        resumed, _ = make_agent(server, git_repo)
        resumed.messages = list(loaded.messages)
        resumed.session = loaded
        resumed.run("sure?")
        sent = server.requests[2]["messages"]
    assert sent[: len(agent.messages)] == agent.messages
    assert sent[-1]["content"] == "sure?"
    assert store.load(session.id).messages == resumed.messages
    assert (iflow_home / "sessions" / f"{session.id}.jsonl").is_file()


def test_compression_is_persisted_as_the_new_history(git_repo: Path) -> None:
    (git_repo / "one.txt").write_text("first file line\n" * 400)
    (git_repo / "two.txt").write_text("second file line\n" * 400)
    script = [
        call("read_file", file_path="one.txt"),
        call("read_file", file_path="two.txt"),
        say("## Summary\nRead one.txt."),
        say("continuing"),
    ]
    store = SessionStore()
    session = store.create(str(git_repo), "scripted-model")
    with ScriptedOpenAIServer(script) as server:
        agent, _ = make_agent(server, git_repo, context={"context_window": 4000, "keep_recent_messages": 2})
        agent.session = session
        agent.run("read")
    records = [json.loads(line) for line in session.path.read_text().splitlines()]
    assert any(record["type"] == "history" for record in records)
    assert store.load(session.id).messages == agent.messages


def test_latest_and_listing_are_per_directory(tmp_path: Path) -> None:
    store = SessionStore()
    first = store.create(str(tmp_path / "a"), "m")
    second = store.create(str(tmp_path / "a"), "m")
    store.create(str(tmp_path / "b"), "m")
    assert [info.id for info in store.list(str(tmp_path / "a"))] == [second.id, first.id]
    assert store.latest(str(tmp_path / "a")).id == second.id
    with pytest.raises(SessionError, match="no earlier session"):
        store.latest(str(tmp_path / "c"))
    with pytest.raises(SessionError, match=r"no session 'missing'.*recent sessions"):
        store.load("missing")
