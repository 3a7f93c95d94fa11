"""A text world: what the free-text path (trl_freetext.py) needs of a game, and nothing more.

The trainer never looks inside a world. It shows the world's text to the model, reads the
model's reply, hands the world the reply's action text, and scores the reply's assessment
against the step's truth. Two worlds implement it here:

- the maze (trl_freetext.py's `Maze`): selfguide's gridworld, its truth the shortest path;
- ScienceWorld (science_world.py's `ScienceWorld`), the paper's own benchmark: its truth the
  sign of the score's change.

A user with ALFWorld or WebShop writes a third class with these methods (its `reset` maps a
task seed to one of its games, its `step` passes the action text to the game as written)
and a `make_world` branch in trl_freetext.py; the rollout, the rewards, the advantages and
TRL's loss stay as they are. The world's side of a turn:

    observation, info = world.reset(seed)        # the first turn's text
    observation, reward, done, info = world.step(action)   # action: the reply's text, or None
    info["truth"]   # index into GUIDES: did the step truly make progress (what z_t judges)
    info["valid"]   # was the action one the world could take (else it changed nothing)
"""
from __future__ import annotations

from typing import Protocol


class TextWorld(Protocol):
    """One episode's world. A task seed picks the task: the free-text path draws training
    seeds in [0, 10^8), demonstrations' from 10^8, held-out ones from 10^9 and tuning ones
    from 2 x 10^9 (selfguide's ranges), and a world keeps its splits apart by them."""

    label: str  # the action's label in a reply: "Move" for the maze, "Action" for ScienceWorld

    def reset(self, seed: int) -> tuple[str, dict]:
        """Start the task of this seed: (the first observation, info). info["optimal"]: the
        steps a shortest (or gold) solution takes; info["task"]: an id of the task played."""

    def step(self, action: str | None) -> tuple[str, float, bool, dict]:
        """Take the reply's action text as written (None: the reply named none, a step that
        changes nothing): (observation, reward, done, info). reward is R_env's share of this
        step (1.0 on success); info["truth"] and info["valid"] as in the module's docstring."""

    def read_action(self, text: str) -> tuple[tuple[int, int] | None, str | None]:
        """The reply's action: the character span of its text, and the text this world takes
        (None where the reply names no action)."""
