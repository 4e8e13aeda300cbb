"""The GEM env manager: plays any gem-llm env id multi-turn against a policy, one chunk per LLM call.

Observations become user messages of the model's own chat template; the generated text is the action.
Env calls (make, reset, step) block, so they run in worker threads and never stall the event loop that
interleaves the other episodes of this worker. Rewards are the env's: the episode's reward is the sum of
its step rewards.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from roll.engine.types import SamplingParams
from roll.models.chat import chat_stop_token_ids
from roll.rollout.chat_context import ChatContext
from roll.rollout.config import GEMEnvConfig, SamplingConfig
from roll.rollout.episode import EpisodeError, EpisodeTask, Generate
from roll.types import Chunk, Trajectory

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def action_text(completion: str) -> str:
    """What the env gets from a reply: the text after a reasoning block (Qwen3's `<think>...</think>`), as a
    thinking model's reasoning is not part of its move; the chunk keeps every generated token."""
    _, closed, after = completion.rpartition("</think>")
    return after.lstrip() if closed else completion


def _close(env: Any) -> None:
    """Release what an env holds (a ROCK env's sandbox); local GEM envs need nothing."""
    close = getattr(env, "close", None)
    if close is not None:
        close()


class LatencyEnv:
    """A GEM env whose every step first sleeps `latency_s` (a remote env's round trip)."""

    def __init__(self, env: Any, latency_s: float) -> None:
        self.env = env
        self.latency_s = latency_s

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        return self.env.reset(seed=seed)

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        time.sleep(self.latency_s)
        return self.env.step(action)

    def close(self) -> None:
        _close(self.env)


class EnvUnavailableError(RuntimeError):
    """The configured env cannot be made or reset here; the message names the env's own error."""


def make_env(config: GEMEnvConfig) -> Any:
    """A new env for one episode: gem.make in this process, rock.make (a sandbox) with env.rock_url, or a
    terminal task played from here in a sandbox of the ROCK fleet at env.rock_url."""
    if config.env_id.startswith("terminal:"):
        from rome.terminal_tasks.env import TerminalTaskEnv

        maker, make = (
            "TerminalTaskEnv",
            lambda: TerminalTaskEnv(config.env_id, config.rock_url, **config.env_kwargs),
        )
    elif config.rock_url is not None:
        from rock.sdk.envs import make as rock_make

        maker, make = "rock.make", lambda: rock_make(config.env_id, url=config.rock_url, **config.env_kwargs)
    else:
        import gem

        maker, make = "gem.make", lambda: gem.make(config.env_id, **config.env_kwargs)
    try:
        env = make()
    except Exception as error:
        raise EpisodeError(
            f"{maker}({config.env_id!r}) failed: {error}; check env.env_id, env.env_kwargs and env.rock_url"
        ) from error
    return LatencyEnv(env, config.latency_s) if config.latency_s else env


def check_env(config: GEMEnvConfig, seed: int) -> None:
    """Make and reset a local GEM env once, so that an env id that cannot run here (unknown, or missing a
    package or data it downloads) stops the run before any actor starts, instead of every episode failing.
    ROCK envs are not checked here: each makes a sandbox, and the service reports its own errors."""
    if config.rock_url is not None:
        return
    try:
        env = make_env(config)
        try:
            env.reset(seed=seed)
        finally:
            _close(env)
    except Exception as error:
        cause = error.__cause__ or error
        raise EnvUnavailableError(
            f"env {config.env_id!r} cannot be played on this machine: {type(cause).__name__}: {cause}. "
            "Pick another env.env_id, or install what it needs (most of GEM's game: and rg: envs run offline)"
        ) from error


class GEMEnvManager:
    def __init__(
        self, config: GEMEnvConfig, tokenizer: PreTrainedTokenizerBase, generators: Sequence[Generate] = ()
    ) -> None:
        """`generators`: one per engine, for `run_episode` (a rollout worker's); `play` takes its own."""
        self.config = config
        self.tokenizer = tokenizer
        self.generators = list(generators)
        self.stop_token_ids = chat_stop_token_ids(tokenizer)
        self.format_pattern = re.compile(config.format_pattern) if config.format_pattern else None
        # GEM seeds Python's and numpy's global generators in reset(): resets must not interleave.
        self._reset_lock = threading.Lock()

    def _make_and_reset(self, seed: int) -> tuple[Any, str]:
        env = make_env(self.config)
        try:
            if self.config.rock_url is not None:  # a sandbox of its own: nothing global to protect
                observation, _ = env.reset(seed=seed)
            else:
                with self._reset_lock:
                    observation, _ = env.reset(seed=seed)
        except BaseException:
            _close(env)
            raise
        return env, str(observation)

    def _params(self, sampling: SamplingConfig, seed: int, context_len: int) -> SamplingParams:
        room = self.config.max_context_tokens - context_len
        return SamplingParams(
            max_new_tokens=min(sampling.max_new_tokens, room),
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k,
            stop=sampling.stop,
            stop_token_ids=self.stop_token_ids,
            seed=seed,
        )

    async def run_episode(
        self, task: EpisodeTask, engine: int, sampling: SamplingConfig
    ) -> tuple[Trajectory, Trajectory | None]:
        """The env manager protocol (roll.rollout.env_kind): one episode on engine `engine`; a GEM env has
        no imitation fallback."""
        return await self.play(task, self.generators[engine], sampling), None

    async def play(self, task: EpisodeTask, generate: Generate, sampling: SamplingConfig) -> Trajectory:
        """Play one episode to its end or its limits; the trajectory's metadata holds its statistics."""
        started = time.perf_counter()
        env, observation = await asyncio.to_thread(self._make_and_reset, task.seed)
        env_s = time.perf_counter() - started
        try:
            return await self._play(task, generate, sampling, env, observation, started, env_s)
        finally:
            await asyncio.to_thread(_close, env)

    async def _play(
        self,
        task: EpisodeTask,
        generate: Generate,
        sampling: SamplingConfig,
        env: Any,
        observation: str,
        started: float,
        env_s: float,
    ) -> Trajectory:
        cfg = self.config
        messages = [{"role": "system", "content": cfg.system_prompt}] if cfg.system_prompt else []
        context = ChatContext(self.tokenizer, [*messages, {"role": "user", "content": observation}])
        chunks: list[Chunk] = []
        rewards: list[float] = []
        gen_s, format_errors, truncated_outputs, end = 0.0, 0, 0, "max_turns"
        for turn in range(cfg.max_turns):
            if len(context.token_ids) >= cfg.max_context_tokens:
                end = "context"
                break
            tick = time.perf_counter()
            result = await generate(
                context.token_ids, self._params(sampling, task.sampling_seed(turn), len(context.token_ids))
            )
            gen_s += time.perf_counter() - tick
            completion = result.completions[0]
            if not completion.token_ids:
                raise EpisodeError(f"the engine returned no tokens for request {result.request_id}")
            chunks.append(
                Chunk(
                    context_ids=context.token_ids,
                    output_ids=completion.token_ids,
                    output_logprobs=completion.logprobs,
                    weight_version=result.weight_version,
                    truncated=completion.finish_reason == "length",
                )
            )
            truncated_outputs += completion.finish_reason == "length"
            action = action_text(completion.text)
            if self.format_pattern is not None and not self.format_pattern.search(action):
                format_errors += 1
            tick = time.perf_counter()
            observation, reward, terminated, truncated, _ = await asyncio.to_thread(env.step, action)
            env_s += time.perf_counter() - tick
            rewards.append(float(reward))
            if terminated or truncated:
                end = "terminated" if terminated else "truncated"
                break
            context.add_turn(completion.token_ids, completion.text, str(observation))
        if not chunks:
            raise EpisodeError(
                f"the first observation of {cfg.env_id} seed {task.seed} is {len(context.token_ids)} tokens, "
                f"over env.max_context_tokens={cfg.max_context_tokens}: raise the limit"
            )
        return Trajectory(
            chunks=chunks,
            reward=sum(rewards),
            task_id=f"{cfg.env_id}#{task.seed}",
            group_id=task.group_id,
            metadata={
                "seed": task.seed,
                "index": task.index,
                "success": bool(rewards) and rewards[-1] >= cfg.success_reward,
                "turns": len(chunks),
                "end": end,
                "format_errors": format_errors,
                "truncated_outputs": truncated_outputs,
                "output_tokens": sum(len(c.output_ids) for c in chunks),
                "gen_s": gen_s,
                "env_s": env_s,
                "wall_s": time.perf_counter() - started,
                # The episode's chat (for its ATIF transcript): the last reply is not in the context yet.
                "transcript": context.messages
                + (
                    [{"role": "assistant", "content": completion.text}]
                    if end in ("terminated", "truncated")
                    else []
                ),
            },
        )
