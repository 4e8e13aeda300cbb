"""Scripted players' episodes on the real GEM env, as chat conversations in the env manager's message layout.

The layout is the one `GEMEnvManager.play` feeds the policy: the env config's system prompt (if
any), the first observation as a user message, then per turn the action as an assistant message and the
next observation as a user message. The conversation ends with the last action, so SFT learns every
action from exactly the context the policy sees during rollout (tests compare the token ids).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roll.rollout.config import GEMEnvConfig
from roll.rollout.players.registry import player_for

PLAYER_SEED_OFFSET = 1_000_000  # far from eval seeds (0..) and training seeds (10_000..)


@dataclass
class PlayedEpisode:
    seed: int
    messages: list[dict[str, Any]]
    rewards: list[float]
    success: bool

    def to_json(self, env_id: str) -> str:
        return json.dumps(
            {
                "messages": self.messages,
                "env_id": env_id,
                "seed": self.seed,
                "reward": sum(self.rewards),
                "success": self.success,
            }
        )


def play_episode(config: GEMEnvConfig, seed: int) -> PlayedEpisode:
    """One episode of the scripted player for config.env_id, within the env manager's turn limit."""
    import gem

    player = player_for(config.env_id)
    env = gem.make(config.env_id, **config.env_kwargs)
    observation, _ = env.reset(seed=seed)
    messages: list[dict[str, Any]] = (
        [{"role": "system", "content": config.system_prompt}] if (config.system_prompt) else []
    )
    messages.append({"role": "user", "content": str(observation)})
    action = player.reset(str(observation))
    rewards: list[float] = []
    for _ in range(config.max_turns):
        messages.append({"role": "assistant", "content": action})
        observation, reward, terminated, truncated, _ = env.step(action)
        rewards.append(float(reward))
        if terminated or truncated:
            break
        messages.append({"role": "user", "content": str(observation)})
        action = player.act(str(observation))
    success = bool(rewards) and rewards[-1] >= config.success_reward
    return PlayedEpisode(seed=seed, messages=messages, rewards=rewards, success=success)


def generate_sft_data(
    config: GEMEnvConfig, episodes: int, out: Path, seed_offset: int = PLAYER_SEED_OFFSET
) -> list[PlayedEpisode]:
    """Play `episodes` episodes on seeds seed_offset.. and write the winning ones to `out` (JSONL)."""
    played = [play_episode(config, seed) for seed in range(seed_offset, seed_offset + episodes)]
    won = [episode for episode in played if episode.success]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(episode.to_json(config.env_id) + "\n" for episode in won))
    return played
