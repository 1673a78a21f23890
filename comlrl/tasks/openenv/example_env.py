"""A small OpenEnv environment written with openenv-core's own server classes: guess a digit. It is what
configs/openenv_guess.yaml serves (`task.openenv.app: comlrl.tasks.openenv.example_env:app`), what the tests run
against, and a template for your own (docs/openenv.md). Importing it needs the `openenv` extra.

reset(seed) draws the digit from the seed; each step's reply names a digit as `[d]`: reward 1 and done when it
is right, else "higher" / "lower" and reward 0, done after 3 guesses. A reply holding "boom" makes the
environment raise (an episode that fails on the server).
"""

from __future__ import annotations

import random
import re

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class GuessAction(Action):
    message: str = Field(..., description="the guess, as [d]")


class GuessObservation(Observation):
    prompt: str = Field(default="", description="what the player is told")


class GuessEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id="", step_count=0)
        self.target = 0

    def reset(self, seed=None, episode_id=None, **kwargs) -> GuessObservation:
        self.target = random.Random(seed).randint(0, 9)
        self._state = State(episode_id=episode_id or f"seed-{seed}", step_count=0)
        return GuessObservation(prompt="Guess a digit from 0 to 9, written as [d].", done=False, reward=None)

    def step(self, action: GuessAction, timeout_s=None, **kwargs) -> GuessObservation:
        if "boom" in action.message:
            raise RuntimeError("the environment broke on this action")
        self._state.step_count += 1
        m = re.search(r"\[(\d)\]", action.message)
        guess = int(m.group(1)) if m else -1
        right = guess == self.target
        hint = "right" if right else ("higher" if guess < self.target else "lower")
        return GuessObservation(prompt=hint, done=right or self._state.step_count >= 3, reward=1.0 if right else 0.0)

    @property
    def state(self) -> State:
        return self._state


app = create_app(GuessEnvironment, GuessAction, GuessObservation, env_name="guess", max_concurrent_envs=64)
