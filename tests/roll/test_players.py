"""Scripted players: they win the real GEM env, and their SFT conversations tokenize to exactly the contexts
the GEM env manager feeds the policy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from roll.cli import app
from roll.engine.types import GenerateResult, SamplingParams
from roll.rollout.config import GEMEnvConfig, SamplingConfig
from roll.rollout.episode import EpisodeTask
from roll.rollout.gem_env import GEMEnvManager
from roll.rollout.players.generate import generate_sft_data, play_episode
from roll.rollout.players.guess_the_number import BinarySearchPlayer, PlayerError
from roll.rollout.players.registry import player_for
from roll.sft.data import SFTExample, to_trajectory
from roll.testing import scripted_result

if TYPE_CHECKING:
    from roll.models import LoadedModel

EASY = GEMEnvConfig(
    env_id="game:GuessTheNumber-v0-easy",
    system_prompt="Guess the number; answer with \\boxed{N}.",
    max_turns=4,
    format_pattern=r"\\boxed\{\d+\}",
)


@pytest.mark.parametrize(
    ("env_id", "max_turns"), [("game:GuessTheNumber-v0-easy", 4), ("game:GuessTheNumber-v0-hard", 7)]
)
def test_binary_search_wins_every_episode_of_the_real_env(env_id: str, max_turns: int) -> None:
    config = GEMEnvConfig(env_id=env_id, max_turns=max_turns)
    episodes = [play_episode(config, seed) for seed in range(60)]
    assert all(e.success for e in episodes)
    assert all(len(e.rewards) <= max_turns and e.rewards[-1] == 1.0 for e in episodes)
    assert len({e.messages[-1]["content"] for e in episodes}) > 5  # different targets, different last guesses


def test_played_conversation_follows_the_env_manager_layout() -> None:
    episode = play_episode(EASY, seed=3)
    roles = [m["role"] for m in episode.messages]
    assert roles[:2] == ["system", "user"] and roles[-1] == "assistant"
    assert roles[2:] == ["assistant", "user"] * ((len(roles) - 3) // 2) + ["assistant"]
    assert episode.messages[0]["content"] == EASY.system_prompt
    assert "between 1 and 10" in episode.messages[1]["content"]
    assert episode.messages[2]["content"] == "1 to 10: \\boxed{5}"


def test_binary_search_narrows_the_range_from_hints() -> None:
    player = BinarySearchPlayer()
    assert player.reset("guess the number between 1 and 50 (inclusive)") == "1 to 50: \\boxed{25}"
    assert player.act("At turn 1, you guessed 25, and the target number is higher than 25.") == (
        "26 to 50: \\boxed{38}"
    )
    assert player.act("At turn 2, you guessed 38, and the target number is lower than 38.") == (
        "26 to 37: \\boxed{31}"
    )


def test_unreadable_observations_and_unknown_envs_are_clear_errors() -> None:
    player = BinarySearchPlayer()
    with pytest.raises(PlayerError, match="between A and B"):
        player.reset("Welcome!")
    player.reset("between 1 and 10")
    with pytest.raises(PlayerError, match="hint"):
        player.act("At turn 1, you guessed 20, which is outside the range specified.")
    with pytest.raises(KeyError, match="players exist for: game:GuessTheNumber"):
        player_for("game:Sudoku-v0-easy")


class ReplayPolicy:
    """Test double of an LLM: answers with the given assistant texts, in order, as the engine would."""

    def __init__(self, tiny_moe: LoadedModel, answers: list[str]) -> None:
        self.tokenizer = tiny_moe.tokenizer
        self.answers = list(answers)

    async def __call__(self, prompt_ids: list[int], params: SamplingParams) -> GenerateResult:
        text = self.answers.pop(0)
        end_of_turn = self.tokenizer.convert_tokens_to_ids("<|im_end|>")  # what a chat model ends a turn with
        assert end_of_turn in params.stop_token_ids
        return scripted_result(
            self.tokenizer, text, end_of_turn, prompt_ids, logprob=0.0, request_id="replay"
        )


@pytest.mark.parametrize("seed", [0, 7, 1_000_003])
async def test_sft_tokens_equal_the_env_managers_rollout_tokens(tiny_moe: LoadedModel, seed: int) -> None:
    episode = play_episode(EASY, seed)
    sft = to_trajectory(SFTExample(messages=episode.messages), tiny_moe.tokenizer)
    answers = [m["content"] for m in episode.messages if m["role"] == "assistant"]
    manager = GEMEnvManager(EASY, tiny_moe.tokenizer)
    rollout = await manager.play(EpisodeTask("g", seed), ReplayPolicy(tiny_moe, answers), SamplingConfig())
    assert rollout.metadata["success"] and rollout.metadata["format_errors"] == 0
    assert len(sft.chunks) == len(rollout.chunks) == len(answers)
    for learned, played in zip(sft.chunks, rollout.chunks, strict=True):
        assert learned.context_ids == played.context_ids
        assert learned.output_ids == played.output_ids


def test_generate_writes_winning_conversations(tmp_path: Path) -> None:
    out = tmp_path / "played.jsonl"
    played = generate_sft_data(EASY, episodes=12, out=out, seed_offset=500)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == len(played) == 12
    assert [line["seed"] for line in lines] == list(range(500, 512))
    assert all(line["success"] and line["env_id"] == EASY.env_id for line in lines)


def test_cli_generates_from_a_train_config(tmp_path: Path) -> None:
    out = tmp_path / "data.jsonl"
    result = CliRunner().invoke(
        app,
        ["players", "generate", "configs/gem_guess_the_number.yaml", "--episodes", "5", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    assert "The scripted player won 5/5" in result.output
    first = json.loads(out.read_text().splitlines()[0])
    assert first["messages"][0] == {"role": "system", "content": _ipa_system_prompt()}


def test_cli_names_the_envs_that_have_players(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["players", "generate", "game:Sudoku-v0-easy", "--out", str(tmp_path / "x.jsonl")]
    )
    assert result.exit_code == 2
    assert "no scripted player plays" in result.output


def _ipa_system_prompt() -> str:
    from roll.config import load_config
    from roll.pipeline.config import TrainConfig

    prompt = load_config(TrainConfig, "configs/gem_guess_the_number.yaml").env.system_prompt
    assert prompt
    return prompt


@pytest.mark.parametrize(
    "train_config", ["configs/gem_guess_the_number.yaml", "configs/gem_guess_the_number_grpo.yaml"]
)
def test_shipped_player_data_matches_the_train_configs_env(tiny_moe: LoadedModel, train_config: str) -> None:
    """The warm-start data must be what the player plays in that config's env (same system prompt), with
    every action ending within the rollout's max_new_tokens; regenerate it when the env section changes:
    roll players generate configs/gem_guess_the_number.yaml --episodes 64 \
        --out configs/data/guess_the_number_player.jsonl"""
    from roll.config import load_config
    from roll.pipeline.config import TrainConfig
    from roll.sft.config import SFTConfig

    config = load_config(TrainConfig, train_config)
    assert config.warm_start is not None
    sft = load_config(SFTConfig, config.warm_start.sft_config, config.warm_start.overrides)
    lines = [json.loads(line) for line in sft.data.path.read_text().splitlines()]
    for line in lines[:10]:
        assert line["env_id"] == config.env.env_id
        assert line["messages"] == play_episode(config.env, line["seed"]).messages
    for trajectory in (to_trajectory(SFTExample(**line), tiny_moe.tokenizer) for line in lines):
        assert all(len(c.output_ids) <= config.rollout.sampling.max_new_tokens for c in trajectory.chunks)


async def test_eval_plays_every_seed_on_the_real_engine() -> None:
    from roll.rollout.players.eval import evaluate_model

    result = await evaluate_model(
        "builtin:tiny-qwen3-moe", EASY, SamplingConfig(temperature=0.0, max_new_tokens=8), seeds=[0, 1, 2]
    )
    assert result.episodes == 3 and [t.metadata["seed"] for t in result.trajectories] == [0, 1, 2]
    assert result.turns == sum(len(t.chunks) for t in result.trajectories) >= 3
    assert result.wins == sum(t.metadata["success"] for t in result.trajectories)
    assert 0 <= result.format_errors <= result.turns
    assert all(len(c.output_ids) <= 8 for t in result.trajectories for c in t.chunks)


def test_cli_eval_reports_an_unknown_model() -> None:
    result = CliRunner().invoke(
        app, ["players", "eval", "configs/gem_guess_the_number.yaml", "--model", "no/such/folder"]
    )
    assert result.exit_code == 2
    assert "Unknown model" in result.output
