"""Compression tiers and `prepare`, with token counts worked out by hand.

Counting rule (CharEstimateCounter, 4 chars per token, rounded up): a message costs 4 + ceil(content/4),
plus ceil(name/4) + ceil(arguments/4) per tool call.
"""

import copy
import json

import pytest

from iflow.context import (
    CharEstimateCounter,
    apply_summary,
    build_summary_request,
    count_tokens,
    light_pass,
    prepare,
)
from iflow.context.compress import threshold_tokens
from iflow.types import ContextConfig, ContextState, Message

COUNTER = CharEstimateCounter()
READ_A = '{"file_path": "a.py"}'  # 21 chars -> 6 tokens


def call(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def assistant_calls(*calls: dict, content: str | None = None) -> Message:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def tool(call_id: str, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def session(pad_chars: int) -> list[Message]:
    """378 tokens plus a final user message of 4 + ceil(pad_chars / 4) tokens."""
    write_args = json.dumps({"file_path": "a.py", "content": "W" * 364})  # 400 chars -> 100 tokens
    return [
        {"role": "system", "content": "S" * 36},  # 4 + 9 = 13
        {"role": "user", "content": "U" * 40},  # 4 + 10 = 14
        assistant_calls(call("c1", "read_file", READ_A)),  # 4 + 3 + 6 = 13
        tool("c1", "R" * 400),  # 4 + 100 = 104
        assistant_calls(call("c2", "read_file", READ_A)),  # 13
        tool("c2", "R" * 400),  # 104
        assistant_calls(call("c3", "write_file", write_args)),  # 4 + 3 + 100 = 107
        tool("c3", "ok"),  # 4 + 1 = 5
        {"role": "assistant", "content": "done"},  # 4 + 1 = 5
        {"role": "user", "content": "P" * pad_chars},
    ]


def config(window: int = 1000, **overrides: object) -> ContextConfig:
    return ContextConfig(**{"context_window": window, "keep_recent_messages": 2, **overrides})


def test_token_counts_follow_the_rule():
    counts, _ = count_tokens(session(872), COUNTER)
    assert counts == [13, 14, 13, 104, 13, 104, 107, 5, 5, 222]
    assert sum(counts) == 600


def test_threshold_tokens_is_exact():
    assert threshold_tokens(0.6, 1000) == 600
    assert threshold_tokens(0.6, 1001) == 601
    assert threshold_tokens(0.8, 1000) == 800
    assert threshold_tokens(0.7, 10) == 7


def test_light_pass_triggers_exactly_at_sixty_percent():
    at = prepare(session(872), config=config(1000), counter=COUNTER)
    assert at.compression.tier == "light"
    # dropped: c1 call (13) and its result (104); write_file arguments 100 tokens -> 6 tokens
    assert (at.compression.tokens_before, at.compression.tokens_after) == (600, 600 - 117 - 94)
    assert (at.compression.dropped_tool_calls, at.compression.elided_write_arguments) == (1, 1)
    assert at.tokens == 389
    assert at.summary_request is None

    below = prepare(session(872), config=config(1001), counter=COUNTER)  # threshold 601
    assert below.compression.tier == "none"
    assert below.tokens == 600
    assert below.messages == session(872)


def test_light_pass_keeps_the_latest_read_and_reduces_writes_to_the_path():
    result, dropped, elided = light_pass(session(0), config())
    ids = [m.get("tool_call_id") or [c["id"] for c in m.get("tool_calls", [])] for m in result]
    assert ids == [[], [], ["c2"], "c2", ["c3"], "c3", [], []]
    assert result[4]["tool_calls"][0]["function"]["arguments"] == READ_A
    assert (dropped, elided) == (1, 1)
    again, dropped_again, elided_again = light_pass(result, config())
    assert again == result and (dropped_again, elided_again) == (0, 0)


def test_light_pass_leaves_recent_messages_alone():
    history = session(0)[:-2]  # ends with: write_file call, its result
    result, dropped, elided = light_pass(history, config(keep_recent_messages=1))
    # the protected range starts at the write call (moved back from its result), so the write stays whole
    assert result[-2] == history[-2]
    assert (dropped, elided) == (1, 0)


def test_light_pass_keeps_assistant_text_when_all_its_calls_go():
    history = [
        {"role": "user", "content": "go"},
        assistant_calls(call("c1", "glob", '{"pattern": "*"}'), content="looking"),
        tool("c1", "a.py"),
        assistant_calls(call("c2", "glob", '{"pattern":"*"}')),  # same call, other spacing
        tool("c2", "a.py"),
        {"role": "assistant", "content": "ok"},
    ]
    result, dropped, _ = light_pass(history, ContextConfig(keep_recent_messages=1))
    assert dropped == 1
    assert result[1] == {"role": "assistant", "content": "looking"}
    assert [m["role"] for m in result] == ["user", "assistant", "assistant", "tool", "assistant"]


def test_summary_requested_exactly_at_eighty_percent_after_the_light_pass():
    # before the light pass: 378 + 4 + 629 = 1011; after it: 1011 - 211 = 800
    at = prepare(session(2516), config=config(1000), counter=COUNTER)
    assert (at.compression.tokens_before, at.tokens) == (1011, 800)
    assert at.summary_request is not None
    below = prepare(session(2512), config=config(1000), counter=COUNTER)
    assert below.tokens == 799
    assert below.summary_request is None


def test_summary_request_splits_head_summarized_recent():
    prepared = prepare(session(2516), config=config(1000), counter=COUNTER)
    request = prepared.summary_request
    assert request is not None
    assert request.head == (prepared.messages[0],)
    # recent budget 0.3 * 1000 = 300: [done (5), pad (633)] is over it, so only the last message stays
    assert request.recent == (prepared.messages[-1],)
    assert request.summarized == tuple(prepared.messages[1:-1])
    assert request.touched_files == ("a.py",)
    assert request.messages[0]["role"] == "system"
    assert "## Next steps" in request.messages[0]["content"]
    assert "-> call write_file" in request.messages[1]["content"]


def test_summary_never_splits_a_call_from_its_results():
    history = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "thinking"},
        assistant_calls(call("a", "read_file", READ_A), call("b", "read_file", '{"file_path": "b.py"}')),
        tool("a", "x"),
        tool("b", "y"),
    ]
    cfg = ContextConfig(keep_recent_messages=2)
    request = build_summary_request(history, cfg, COUNTER)
    assert request is not None
    assert request.recent == tuple(history[3:])  # moved back from tool "a" to the call
    assert request.summarized == tuple(history[1:3])
    assert build_summary_request(history, ContextConfig(keep_recent_messages=5), COUNTER) is None


def test_apply_summary_builds_the_new_history_within_the_file_budget():
    history = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        assistant_calls(call("a", "read_file", '{"file_path": "old.py"}')),
        tool("a", "x"),
        assistant_calls(call("b", "write_file", '{"file_path": "new.py", "content": "y"}')),
        tool("b", "ok"),
        {"role": "assistant", "content": "next"},
        {"role": "user", "content": "more"},
    ]
    cfg = ContextConfig(context_window=1000, keep_recent_messages=2, touched_files_token_ratio=0.03)
    request = build_summary_request(history, cfg, COUNTER)
    assert request is not None and request.touched_files == ("new.py", "old.py")
    # budget 30 tokens: "--- new.py ---\n" + 60 chars = 75 chars -> 19 tokens fits, old.py's 80 chars do not
    files = {"new.py": "n" * 60, "old.py": "o" * 80}
    messages, report = apply_summary(request, "## Goal\nfix it", cfg, COUNTER, file_contents=files)
    assert messages[0] == history[0]
    assert messages[-2:] == history[-2:]
    text = messages[1]["content"]
    assert "<summary>\n## Goal\nfix it\n</summary>" in text
    assert "--- new.py ---\n" + "n" * 60 in text
    assert "o" * 80 not in text
    assert "Other files you worked on (read them again before editing): old.py" in text
    assert report.tier == "summary" and report.summarized_messages == 5
    assert report.tokens_after == sum(count_tokens(messages, COUNTER)[0])


def test_apply_summary_refuses_an_empty_summary():
    request = build_summary_request(session(0), config(), COUNTER)
    assert request is not None
    with pytest.raises(ValueError, match="summary reply is empty"):
        apply_summary(request, "  \n", config(), COUNTER)


def test_force_summary_below_the_thresholds():
    prepared = prepare(session(0), config=config(100_000), counter=COUNTER, force_summary=True)
    assert prepared.compression.tier == "none"
    assert prepared.summary_request is not None


def test_prepare_is_deterministic_and_does_not_modify_its_input():
    history = session(2516)
    original = copy.deepcopy(history)
    first = prepare(history, config=config(), counter=COUNTER)
    second = prepare(copy.deepcopy(history), config=config(), counter=COUNTER)
    assert history == original
    assert first.messages == second.messages
    assert first.compression == second.compression
    assert first.summary_request == second.summary_request


def test_carried_state_gives_the_same_result_as_a_fresh_one():
    history = session(872)
    state = ContextState()
    for end in range(2, len(history) + 1):
        carried = prepare(history[:end], state, config(), counter=COUNTER)
        fresh = prepare(history[:end], ContextState(), config(), counter=COUNTER)
        assert carried.messages == fresh.messages
        assert carried.tokens == fresh.tokens
        state = carried.state


def test_state_reuses_counts_and_stays_bounded():
    calls: list[str] = []

    class Recording(CharEstimateCounter):
        def count(self, text: str) -> int:
            calls.append(text)
            return super().count(text)

    counter = Recording()
    history = session(10)
    _, state = count_tokens(history, counter)
    first = len(calls)
    _, state = count_tokens(copy.deepcopy(history), counter, state)  # equal content, new objects
    assert len(calls) == first
    for i in range(200):
        _, state = count_tokens([{"role": "user", "content": f"m{i}"}], counter, state)
    assert len(state.counts_by_content) <= 2 + 64


def test_tokenizer_counter_counts_real_tokens():
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    from iflow.context import TokenizerCounter

    words = Tokenizer(WordLevel({"[UNK]": 0, "read": 1, "the": 2, "file": 3}, unk_token="[UNK]"))
    words.pre_tokenizer = Whitespace()
    counter = TokenizerCounter(PreTrainedTokenizerFast(tokenizer_object=words), name="words")
    assert counter.count("read the file now") == 4
    assert counter.count("") == 0
    counts, state = count_tokens([{"role": "user", "content": "read the file"}], counter)
    assert counts == [4 + 3] and state.counter_name == "words"
    # a state made with another counter is not reused
    other, _ = count_tokens([{"role": "user", "content": "read the file"}], COUNTER, state)
    assert other == [4 + 4]


def test_a_lone_summary_is_not_summarized_again():
    history = session(0)
    request = build_summary_request(history, config(), COUNTER)
    assert request is not None
    summarized, _ = apply_summary(request, "## Goal\nx", config(), COUNTER)
    assert [m["role"] for m in summarized] == ["system", "user", "assistant", "user"]
    assert build_summary_request(summarized, config(), COUNTER) is None
    longer = [*summarized, {"role": "assistant", "content": "more"}, {"role": "user", "content": "go"}]
    again = build_summary_request(longer, config(), COUNTER)
    assert again is not None and again.summarized == tuple(summarized[1:])


def test_only_file_tools_make_files_recently_touched():
    history = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        assistant_calls(call("g", "glob", '{"pattern": "*.py", "path": "src"}')),
        tool("g", "src/a.py"),
        assistant_calls(
            call("r", "replace", '{"file_path": "src/a.py", "old_string": "a", "new_string": "b"}')
        ),
        tool("r", "ok"),
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "next"},
    ]
    request = build_summary_request(history, config(), COUNTER)
    assert request is not None and request.touched_files == ("src/a.py",)


DETERMINISM_SCRIPT = """
import json, sys
from iflow.context import CharEstimateCounter, prepare
from iflow.types import ContextConfig
history = json.load(sys.stdin)
p = prepare(history, config=ContextConfig(context_window=1000, keep_recent_messages=2),
            counter=CharEstimateCounter())
print(json.dumps([p.messages, p.tokens, p.compression.tier, p.summary_request.messages]))
"""


def test_same_result_in_processes_with_different_hash_seeds():
    import os
    import subprocess
    import sys

    history = json.dumps(session(2516))
    outputs = {
        subprocess.run(
            [sys.executable, "-c", DETERMINISM_SCRIPT],
            input=history,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1
    [output] = outputs
    assert json.loads(output)[1:3] == [800, "light"]


def test_reserved_tokens_count_against_the_window():
    from iflow.context import tool_schema_tokens

    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    # json.dumps(tools, sort_keys=True) is 75 characters -> 19 tokens
    schema = tool_schema_tokens(tools, COUNTER)
    assert schema == 19
    assert tool_schema_tokens([], COUNTER) == 0
    history = session(792)  # 378 + 4 + 198 = 580 tokens; with 19 reserved 599, one short of 600
    assert (
        prepare(history, config=config(1000), counter=COUNTER, reserved_tokens=schema).compression.tier
        == "none"
    )
    prepared = prepare(history, config=config(1000), counter=COUNTER, reserved_tokens=schema + 1)
    assert prepared.compression.tier == "light"
    assert (prepared.compression.tokens_before, prepared.tokens, prepared.reserved_tokens) == (580, 369, 20)
    assert prepared.usage == (369 + 20) / 1000
    with pytest.raises(ValueError, match="reserved_tokens must be >= 0"):
        prepare(history, config=config(1000), counter=COUNTER, reserved_tokens=-1)
