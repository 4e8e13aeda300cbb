"""`roll sft`: conversations to chunks with the real SmolLM2 chat template, and a short run end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from roll.sft.data import SFTDataError, SFTExample, read_examples, to_trajectory
from roll.trainer.packing import pack_trajectories

SAMPLE = Path(__file__).resolve().parents[2] / "configs" / "data" / "sft_sample.jsonl"
BASH = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from roll.models import resolve_model_path

    return AutoTokenizer.from_pretrained(resolve_model_path("builtin:smollm2-135m-instruct"))


def test_assistant_turns_become_flagged_chunks_in_one_sequence(tokenizer) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    example = SFTExample(
        messages=[
            {"role": "user", "content": "List files"},
            {"role": "assistant", "content": "", "tool_calls": [call], "error": True},
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
            {"role": "assistant", "content": "One file: a.txt.", "relevant": False},
        ],
        tools=[BASH],
    )
    trajectory = to_trajectory(example, tokenizer)
    first, second = trajectory.chunks
    assert tokenizer.decode(first.output_ids) == (
        '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call><|im_end|>'
    )
    assert tokenizer.decode(second.output_ids) == "One file: a.txt.<|im_end|>"
    assert (first.error, first.relevant, second.error, second.relevant) == (True, True, False, False)
    assert "<tool_response>\na.txt\n</tool_response>" in tokenizer.decode(second.context_ids)
    assert pack_trajectories([trajectory]).seq_lens.numel() == 1  # the observation extends the sequence


def test_sample_data_has_errors_and_irrelevant_turns(tokenizer) -> None:
    examples = read_examples(SAMPLE)
    chunks = [c for e in examples for c in to_trajectory(e, tokenizer).chunks]
    assert any(c.error for c in chunks) and any(not c.relevant for c in chunks)


def test_bad_lines_name_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}] * 2}) + "\n{oops\n")
    with pytest.raises(SFTDataError, match=r"bad\.jsonl:1: the conversation has no assistant message"):
        read_examples(path)
    path.write_text("{oops\n")
    with pytest.raises(SFTDataError, match=r"bad\.jsonl:1: expected a JSON object"):
        read_examples(path)


@pytest.mark.slow
def test_sft_command_trains_checkpoints_and_resumes(tmp_path: Path) -> None:
    import typer

    from roll.sft.cli import sft

    app = typer.Typer()
    app.command()(sft)
    config = Path(__file__).resolve().parents[2] / "configs" / "sft.yaml"
    common = [
        f"data.path={SAMPLE}",
        "trainer.model=builtin:tiny-qwen3-moe",
        "batch_size=5",
        "save_every=1",
        "trainer.schedule.total_steps=3",
        f"output_dir={tmp_path}",
    ]
    runner = CliRunner()
    first = runner.invoke(app, [str(config), *common, "max_steps=1", "export_model=false"])
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, [str(config), *common, "max_steps=2"])
    assert second.exit_code == 0, second.output
    assert "Resumed from" in second.output

    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]
    assert all(r["loss"] > 0 and 0 <= r["masked_fraction/mean"] < 1 for r in records)
    assert (tmp_path / "checkpoints" / "latest").read_text() == "step_000002"
    assert list((tmp_path / "tensorboard").iterdir())
    assert (tmp_path / "model" / "config.json").is_file()


def test_bad_override_exits_with_the_key_named(tmp_path: Path) -> None:
    import typer

    from roll.sft.cli import sft

    app = typer.Typer()
    app.command()(sft)
    config = Path(__file__).resolve().parents[2] / "configs" / "sft.yaml"
    result = CliRunner().invoke(app, [str(config), "loss.type=grpo"])
    assert result.exit_code == 2
    assert "loss.type" in result.output and "'sft'" in result.output
