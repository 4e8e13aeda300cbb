"""Context handling cost per turn, and tokens saved by each compression tier, on a generated long session.

The session is generated (seeded, so every run sees the same one) to look like a coding agent's: reading
files (often the same ones again), searching, running commands (some failing), editing and writing files,
updating its todo list, with the user stepping in now and then.

Per-turn cost: the agent's loop is replayed up to 50, 200 and 1,000 messages; each of the timed turns appends
one assistant message and its tool results and calls `iflow.context.prepare`. Ours carries `ContextState`
from turn to turn; the baseline is the same code without incremental state (every message recounted, every
turn), which is what a stateless implementation does. Both run twice: with a window so large that only
accounting and reminders run, and with a window so tight ("tight") that the light pass runs on (nearly)
every turn: usage stays above 60% even after it. The table shows how many messages were sent on average
("sent", fewer than replayed once the light pass dropped some) and on how many timed turns it ran.
Counters: the chars/4 estimate, and the SmolLM2 tokenizer (from the builtin model folder, roll.models).

Tokens saved: each tier applied once to the whole session, and the whole session replayed through a 32k
window with both tiers active. The replay has no model, so the summary is a fixed stand-in text of about 600
tokens (the length a real structured summary has); the summary tier's savings assume that length.

    python benchmarks/iflow_context.py [--turns 20] [--no-tokenizer]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from iflow.context import (
    CharEstimateCounter,
    TokenCounter,
    TokenizerCounter,
    apply_summary,
    build_summary_request,
    count_tokens,
    light_pass,
    prepare,
)
from iflow.context.compress import threshold_tokens
from iflow.types import ContextConfig, ContextState, Message

SIZES = (50, 200, 1000)
SESSION_MESSAGES = 1100
STAND_IN_SUMMARY = "\n".join(
    f"## {section}\n"
    + " ".join(f"fact {i} about {section.lower()} with a path src/module_{i}.py" for i in range(9))
    for section in (
        "Goal",
        "Constraints and preferences",
        "Key knowledge",
        "Files",
        "Done",
        "Current state",
        "Next steps",
    )
)


def code_file(rng: random.Random, name: str) -> str:
    lines = [f'"""Module {name}."""', "", "import os", "from pathlib import Path", ""]
    for f in range(rng.randint(6, 22)):
        lines += [
            f"def handle_{name}_{f}(path: Path, limit: int = {rng.randint(1, 99)}) -> list[str]:",
            f'    """Read {name} records from path, at most limit of them."""',
            "    records = []",
            "    for line in path.read_text().splitlines()[:limit]:",
            f"        if line.startswith('{rng.choice(['#', '//', '--', ';'])}'):",
            "            continue",
            f"        records.append(line.strip().lower() + '{f}')",
            "    return records",
            "",
        ]
    return "\n".join(lines)


def generate_session(seed: int = 0, messages: int = SESSION_MESSAGES) -> list[Message]:
    """A coding session of at least `messages` messages (system prompt and first user message included)."""
    rng = random.Random(seed)
    files = {f"src/module_{i}.py": code_file(rng, f"m{i}") for i in range(14)}
    history: list[Message] = [
        {"role": "system", "content": "You are iFlow, a coding agent. " * 40},
        {"role": "user", "content": "The importer drops records with comments; fix it and add tests."},
    ]
    recent: list[str] = []
    turn = 0
    while len(history) < messages:
        turn += 1
        calls: list[tuple[str, dict, str]] = []
        for _ in range(1 if rng.random() < 0.8 else rng.randint(2, 3)):
            kind = rng.random()
            path = rng.choice(recent[-3:]) if recent and rng.random() < 0.5 else rng.choice(sorted(files))
            if kind < 0.32:
                calls.append(("read_file", {"file_path": path}, files[path]))
                recent.append(path)
            elif kind < 0.42:
                word = rng.choice(["records", "limit", "startswith", "Path"])
                hits = [
                    f"{p}:{n}: {line}"
                    for p, text in files.items()
                    for n, line in enumerate(text.splitlines())
                    if word in line
                ][: rng.randint(5, 40)]
                calls.append(("search_file_content", {"pattern": word}, "\n".join(hits)))
            elif kind < 0.62:
                failed = rng.random() < 0.2
                output = "\n".join(
                    f"tests/test_m{i}.py::test_{i} {'FAILED' if failed and i == 3 else 'PASSED'}"
                    for i in range(rng.randint(5, 30))
                )
                calls.append(
                    (
                        "run_shell_command",
                        {"command": "python -m pytest -q tests"},
                        f"{output}\nExit code: {1 if failed else 0}",
                    )
                )
            elif kind < 0.77:
                old = rng.choice(files[path].splitlines()[5:]) or "    return records"
                new = old + "  # checked"
                files[path] = files[path].replace(old, new, 1)
                ok = rng.random() < 0.85
                calls.append(
                    (
                        "replace",
                        {"file_path": path, "old_string": old, "new_string": new},
                        "Replaced 1 occurrence" if ok else "Error: old_string matched 3 times",
                    )
                )
            elif kind < 0.87:
                files[path] = code_file(rng, path.split("_")[-1][:-3])
                calls.append(
                    (
                        "write_file",
                        {"file_path": path, "content": files[path]},
                        f"Wrote {len(files[path])} bytes to {path}",
                    )
                )
            elif kind < 0.93:
                calls.append(("glob", {"pattern": "src/**/*.py"}, "\n".join(sorted(files))))
            else:
                todos = [
                    {
                        "id": str(i),
                        "content": f"step {i} of the fix",
                        "status": rng.choice(["pending", "in_progress", "completed"]),
                    }
                    for i in range(rng.randint(2, 6))
                ]
                calls.append(("todo_write", {"todos": todos}, "todo list saved"))
        ids = [f"call_{turn}_{i}" for i in range(len(calls))]
        history.append(
            {
                "role": "assistant",
                "content": f"Step {turn}: next I will look at {calls[0][1].get('file_path', 'the tests')}.",
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                    for i, (n, a, _) in zip(ids, calls, strict=True)
                ],
            }
        )
        history += [
            {"role": "tool", "tool_call_id": i, "content": out}
            for i, (_, _, out) in zip(ids, calls, strict=True)
        ]
        if turn % 45 == 0:
            history.append({"role": "user", "content": "Also keep the public API unchanged, please."})
    return history


def turn_boundaries(session: list[Message]) -> list[int]:
    """Indices after which the agent would call the model (after each turn's tool results)."""
    return [
        i + 1
        for i in range(1, len(session))
        if session[i]["role"] != "assistant"
        and (i + 1 == len(session) or session[i + 1]["role"] == "assistant")
    ]


@dataclass
class Timing:
    ms: float  # median per turn
    history: float  # mean messages sent per turn (fewer than replayed once compression has run)
    light_runs: int  # timed turns on which the light pass ran


def time_turns(
    session: list[Message],
    size: int,
    turns: int,
    config: ContextConfig,
    counter: TokenCounter,
    incremental: bool,
) -> Timing:
    """`prepare` over `turns` turns ending near `size` replayed messages, as the agent loop calls it.

    The history carried from turn to turn is what `prepare` returned plus the new turn's messages.
    """
    ends = [b for b in turn_boundaries(session) if b <= size][-turns - 1 :]
    warm = prepare(session[: ends[0]], ContextState(), config, counter=counter)
    history, state = warm.messages, warm.state
    light_at = threshold_tokens(config.light_threshold, config.context_window)
    samples, lengths, light_runs = [], [], 0
    for previous, end in itertools.pairwise(ends):
        history = [*history, *session[previous:end]]
        start = time.perf_counter()
        prepared = prepare(history, state if incremental else ContextState(), config, counter=counter)
        samples.append(time.perf_counter() - start)
        history, state = prepared.messages, prepared.state
        lengths.append(len(history))
        light_runs += prepared.compression.tokens_before >= light_at
    return Timing(statistics.median(samples) * 1000, statistics.mean(lengths), light_runs)


def replay(session: list[Message], config: ContextConfig, counter: TokenCounter) -> dict[str, int]:
    """The session through an agent loop with both tiers on: tokens saved by each, tokens sent in total."""
    history: list[Message] = []
    state = ContextState()
    saved = {"light": 0, "summary": 0, "light_passes": 0, "summaries": 0, "sent": 0}
    boundaries = turn_boundaries(session)
    previous = 0
    for end in boundaries:
        history += session[previous:end]
        previous = end
        prepared = prepare(history, state, config, counter=counter)
        history, state = prepared.messages, prepared.state
        if prepared.compression.tier == "light":
            saved["light"] += prepared.compression.tokens_before - prepared.compression.tokens_after
            saved["light_passes"] += 1
        if prepared.summary_request is not None:
            history, report = apply_summary(prepared.summary_request, STAND_IN_SUMMARY, config, counter)
            saved["summary"] += report.tokens_before - report.tokens_after
            saved["summaries"] += 1
            state = ContextState()
        saved["sent"] += sum(count_tokens(history, counter, state)[0])
    uncompressed = sum(sum(count_tokens(session[:end], counter)[0]) for end in boundaries)
    saved["sent_without_compression"] = uncompressed
    return saved


def run(turns: int, use_tokenizer: bool) -> dict:
    session = generate_session()
    counters: dict[str, Callable[[], TokenCounter]] = {"chars/4": CharEstimateCounter}
    if use_tokenizer:
        from transformers import AutoTokenizer

        from roll.models.builtin import smollm2_folder

        try:
            tokenizer = AutoTokenizer.from_pretrained(smollm2_folder())
        except (ImportError, OSError, RuntimeError) as error:
            print(f"SmolLM2 tokenizer unavailable ({error}); timing the chars/4 counter only")
        else:
            counters["smollm2-tokenizer"] = lambda: TokenizerCounter(tokenizer, "smollm2")
    results: dict = {"session_messages": len(session), "per_turn_ms": {}, "tiers": {}}
    print(f"session: {len(session)} messages, {turns} timed turns per size")
    print(
        f"{'counter':<18}{'window':<7}{'replayed':>9}{'sent':>6}{'light':>7}{'ours ms':>9}{'baseline ms':>13}"
        f"{'ratio':>9}"
    )
    for counter_name, make_counter in counters.items():
        for size in SIZES:
            tokens = sum(count_tokens(session[:size], make_counter())[0])
            light_tokens = sum(
                count_tokens(light_pass(session[:size], ContextConfig())[0], make_counter())[0]
            )
            # "tight": even after the light pass the history fills ~70% of the window, so it runs every turn
            windows = {"large": tokens * 10, "tight": int(light_tokens / 0.7)}
            for window_name, window in windows.items():
                config = ContextConfig(context_window=window)
                ours = time_turns(session, size, turns, config, make_counter(), incremental=True)
                base = time_turns(session, size, turns, config, make_counter(), incremental=False)
                ratio = base.ms / ours.ms
                results["per_turn_ms"][f"{counter_name}/{window_name}/{size}"] = {
                    "ours": round(ours.ms, 3),
                    "baseline": round(base.ms, 3),
                    "ratio": round(ratio, 2),
                    "messages_sent": round(ours.history),
                    "light_pass_turns": ours.light_runs,
                }
                print(
                    f"{counter_name:<18}{window_name:<7}{size:>9}{ours.history:>6.0f}{ours.light_runs:>7}"
                    f"{ours.ms:>9.2f}{base.ms:>13.2f}{ratio:>8.1f}x"
                )

    counter = CharEstimateCounter()
    config = ContextConfig(context_window=32_000)
    total = sum(count_tokens(session, counter)[0])
    lighter, dropped, elided = light_pass(session, config)
    after_light = sum(count_tokens(lighter, counter)[0])
    request = build_summary_request(lighter, config, counter)
    assert request is not None
    summarized, _ = apply_summary(request, STAND_IN_SUMMARY, config, counter)
    after_summary = sum(count_tokens(summarized, counter)[0])
    results["tiers"] = {
        "tokens": total,
        "after_light": after_light,
        "light_saved": total - after_light,
        "light_dropped_calls": dropped,
        "light_elided_writes": elided,
        "after_summary": after_summary,
        "summary_saved": after_light - after_summary,
        "replay_32k": replay(session, config, counter),
    }
    tiers = results["tiers"]
    print(f"\nwhole session ({len(session)} messages, chars/4): {total} tokens")
    print(
        f"  light pass:   -> {after_light} (saved {total - after_light}, {1 - after_light / total:.1%};"
        f" {dropped} repeated reads dropped, {elided} write arguments reduced)"
    )
    print(f"  full summary: -> {after_summary} (saved a further {after_light - after_summary})")
    r = tiers["replay_32k"]
    print(
        f"  replay in a 32k window: {r['light_passes']} light passes saved {r['light']} tokens, "
        f"{r['summaries']} summaries saved {r['summary']}; tokens sent over all turns {r['sent']} vs "
        f"{r['sent_without_compression']} uncompressed ({r['sent_without_compression'] / r['sent']:.1f}x)"
    )
    print("\ngoal < 5 ms per turn at 200 messages (worst window; a real tokenizer's time includes counting")
    print("each turn's new messages once, which every implementation must do):")
    for counter_name in counters:
        worst = max(results["per_turn_ms"][f"{counter_name}/{w}/200"]["ours"] for w in ("large", "tight"))
        print(f"  {counter_name:<18}{worst:.2f} ms ({'met' if worst < 5 else 'NOT met'})")
        results.setdefault("worst_ms_at_200", {})[counter_name] = round(worst, 3)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20, help="timed turns per history size")
    parser.add_argument("--no-tokenizer", action="store_true", help="only the chars/4 estimate")
    args = parser.parse_args()
    print(json.dumps(run(args.turns, not args.no_tokenizer)))


if __name__ == "__main__":
    main()
