"""The GEM env manager: multi-turn episodes with exact token bookkeeping, against a scripted policy (a test
double for the LLM's choices) and against the real torch engine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from roll.engine.types import GenerateResult, SamplingParams
from roll.rollout.config import GEMEnvConfig, SamplingConfig
from roll.rollout.episode import EpisodeTask
from roll.rollout.gem_env import EnvUnavailableError, GEMEnvManager, check_env
from roll.testing import ScriptedBinarySearch, ScriptedConstant
from roll.trainer.packing import pack_trajectories
from roll.types import Trajectory

if TYPE_CHECKING:
    from roll.models import LoadedModel

GAME = GEMEnvConfig(env_id="game:GuessTheNumber-v0-easy", max_turns=6, format_pattern=r"\\boxed\{")


async def test_binary_search_wins_and_every_context_extends_the_previous_one(tiny_moe: LoadedModel) -> None:
    manager = GEMEnvManager(GAME, tiny_moe.tokenizer)
    policy = ScriptedBinarySearch(tiny_moe.tokenizer)
    trajectory = await manager.play(EpisodeTask("g0", seed=5), policy, SamplingConfig())
    meta = trajectory.metadata
    assert meta["success"] and meta["end"] == "terminated" and trajectory.reward == 1.0
    assert meta["format_errors"] == 0 and 1 <= meta["turns"] <= 4
    assert all(
        c.weight_version == 7 and len(c.output_logprobs) == len(c.output_ids) for c in trajectory.chunks
    )
    for before, after in zip(trajectory.chunks, trajectory.chunks[1:], strict=False):
        assert after.context_ids[: len(before.context_ids) + len(before.output_ids)] == (
            before.context_ids + before.output_ids
        )
        observation = tiny_moe.tokenizer.decode(
            after.context_ids[len(before.context_ids) + len(before.output_ids) :]
        )
        assert "target number is" in observation and observation.rstrip().endswith("assistant")
    # one sequence per episode: the trainer runs the whole game in one forward pass
    assert pack_trajectories([trajectory]).seq_lens.numel() == 1


async def test_format_errors_are_recorded_and_rewarded_by_the_env(tiny_moe: LoadedModel) -> None:
    manager = GEMEnvManager(GAME, tiny_moe.tokenizer)
    trajectory = await manager.play(
        EpisodeTask("g0", seed=5), ScriptedBinarySearch(tiny_moe.tokenizer, {0}), SamplingConfig()
    )
    assert trajectory.metadata["format_errors"] == 1
    assert trajectory.reward == pytest.approx(-0.1)  # GEM's format-error reward ends the game
    assert not trajectory.metadata["success"]


async def test_episode_limits_stop_long_games(tiny_moe: LoadedModel) -> None:
    config = GAME.model_copy(update={"env_kwargs": {"max_turns": 50}, "max_turns": 2})
    manager = GEMEnvManager(
        config.model_copy(update={"env_id": "game:GuessTheNumber-v0-hard"}), tiny_moe.tokenizer
    )
    trajectory = await manager.play(
        EpisodeTask("g0", seed=1), ScriptedBinarySearch(tiny_moe.tokenizer), SamplingConfig()
    )
    assert trajectory.metadata["turns"] == 2 and trajectory.metadata["end"] == "max_turns"


async def test_real_engine_episode_records_engine_tokens_and_logprobs(tiny_moe: LoadedModel) -> None:
    from roll.engine.torch_engine import TorchEngine

    engine = TorchEngine(tiny_moe)
    await engine.start()
    try:
        manager = GEMEnvManager(GAME, tiny_moe.tokenizer)
        generated: list[GenerateResult] = []

        async def generate(prompt_ids: list[int], params: SamplingParams) -> GenerateResult:
            from roll.engine.types import GenerateRequest

            result = await engine.generate(
                GenerateRequest(request_id=str(len(generated)), prompt_token_ids=prompt_ids, params=params)
            )
            generated.append(result)
            return result

        sampling = SamplingConfig(max_new_tokens=6, temperature=1.0)
        first = await manager.play(EpisodeTask("g0", seed=3, index=0), generate, sampling)
        again = await manager.play(EpisodeTask("g0", seed=3, index=0), generate, sampling)
        other = await manager.play(EpisodeTask("g0", seed=3, index=1), generate, sampling)
    finally:
        await engine.shutdown()
    chunk = first.chunks[0]
    assert chunk.output_ids == generated[0].completions[0].token_ids
    assert chunk.output_logprobs == generated[0].completions[0].logprobs
    assert chunk.context_ids == generated[0].prompt_token_ids
    # Each chunk says whether the token cap cut it, as the engine's finish reason does.
    finishes = [result.completions[0].finish_reason == "length" for result in generated[: len(first.chunks)]]
    assert [c.truncated for c in first.chunks] == finishes and any(finishes)
    assert [c.output_ids for c in again.chunks] == [c.output_ids for c in first.chunks]  # seeded replay
    assert [c.output_ids for c in other.chunks] != [
        c.output_ids for c in first.chunks
    ]  # group members differ


@pytest.fixture(scope="module")
def rock_admin_url() -> Iterator[str]:
    """A local ROCK fleet (terminal tasks get root sandboxes on any admin)."""
    from rock.fleet import LocalFleet
    from rock.images import ensure_base_images

    ensure_base_images()
    # The fleet builds the suite's task images: their folder is one of its build roots.
    suite = Path(__file__).resolve().parents[2] / "rome" / "tasks"
    with LocalFleet(slots=2, admin_args=["--build-context-root", str(suite)]) as fleet:
        yield fleet.url


@pytest.mark.docker
@pytest.mark.slow
async def test_terminal_task_through_rock_is_played_with_bash_actions(
    tiny_moe: LoadedModel, rock_admin_url: str
) -> None:
    """`terminal:<task dir>` played from the rollout worker in a sandbox of the fleet: the scripted LLM double
    solves a real suite task in bash, then says `finish`; the task's own tests
    grade it. Without the solution the same episode fails."""
    from roll.engine.types import GenerateRequest
    from roll.testing import ScriptedEngine

    task = Path(__file__).resolve().parents[2] / "rome" / "tasks" / "terminal-pro" / "trapezoid-integral"
    solution = (task / "solution" / "solve.sh").read_text()
    env = GEMEnvConfig(
        env_id=f"terminal:{task}", rock_url=rock_admin_url, env_kwargs={"max_steps": 4}, max_turns=4
    )
    manager = GEMEnvManager(env, tiny_moe.tokenizer)

    async def play(replies: list[str]) -> Trajectory:
        engine = ScriptedEngine(tiny_moe.tokenizer, replies)

        async def generate(prompt_ids: list[int], params: SamplingParams) -> GenerateResult:
            request = GenerateRequest(request_id="r", prompt_token_ids=prompt_ids, params=params)
            return await engine.generate(request)

        return await manager.play(EpisodeTask("g0", 0), generate, SamplingConfig(max_new_tokens=512))

    solved = await play([solution, "finish"])
    assert (solved.reward, solved.metadata["success"], solved.metadata["turns"]) == (1.0, True, 2)
    bash_output = tiny_moe.tokenizer.decode(solved.chunks[1].context_ids[-40:])
    assert "Exit code: 0" in bash_output
    unsolved = await play(["ls /app", "finish"])
    assert (unsolved.reward, unsolved.metadata["success"]) == (0.0, False)
    with pytest.raises(ValueError, match=r"set env\.rock_url"):
        GEMEnvConfig(env_id=f"terminal:{task}")


@pytest.mark.parametrize(
    "env_id",
    ["game:Sudoku-v0-easy", "game:Minesweeper-v0-easy", "game:Mastermind-v0-easy", "rg:basic_arithmetic"],
)
async def test_other_gem_envs_give_the_envs_own_rewards(tiny_moe: LoadedModel, env_id: str) -> None:
    import gem

    answer = "\\boxed{12}"
    config = GEMEnvConfig(env_id=env_id, max_turns=3)
    trajectory = await GEMEnvManager(config, tiny_moe.tokenizer).play(
        EpisodeTask("g0", seed=3), ScriptedConstant(tiny_moe.tokenizer, answer), SamplingConfig()
    )
    env = gem.make(env_id)
    env.reset(seed=3)
    rewards = []
    for _ in range(trajectory.metadata["turns"]):
        _, reward, terminated, truncated, _ = env.step(answer)
        rewards.append(reward)
        if terminated or truncated:
            break
    assert len(rewards) == trajectory.metadata["turns"]
    assert trajectory.reward == pytest.approx(sum(rewards))


def test_an_env_that_cannot_run_here_is_refused_before_the_run_starts() -> None:
    check_env(GAME, seed=0)
    with pytest.raises(EnvUnavailableError, match=r"'game:NoSuchGame-v0' cannot be played on this machine"):
        check_env(GEMEnvConfig(env_id="game:NoSuchGame-v0"), seed=0)
