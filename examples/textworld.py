"""A text world: what the free-text path (trl_freetext.py) needs of a game, and nothing more.

The trainer never looks inside a world. It shows the world's text to the model, reads the
model's reply, hands the world the reply's action text, and scores the reply's assessment
against the step's truth. Two worlds implement it here:

- the maze (trl_freetext.py's `Maze`): selfguide's gridworld, its truth the shortest path;
- ScienceWorld (science_world.py's `ScienceWorld`), the paper's own benchmark: its truth the
  sign of the score's change.

A user with ALFWorld or WebShop writes one class with the members of `TextWorld` below (its
`reset` maps a task seed to one of its games, its `step` passes the action text to the game
as written; ScienceWorld's is the one to copy) and adds it to trl_freetext.py's registry,
`WORLDS = {..., "alfworld": ALFWorld}`; `--world alfworld` then plays it, and nothing else is
edited: the format, the rollout, the rewards, the advantages and TRL's loss read the world
through these members alone (its own defaults for trl_freetext.py's settings, if it wants
some, go in WORLD_DEFAULTS; a world without a demonstrator leaves out the tiny prior's three
members and plays a chat model of --model's). The world's side of a turn:

    observation, info = world.reset(seed)        # the first turn's text
    observation, reward, done, info = world.step(action)   # action: the reply's text, or None
    info["truth"]   # index into GUIDES: did the step truly make progress (what z_t judges)
    info["valid"]   # was the action one the world could take (else it changed nothing)
    info["score"]   # optional: the task's score so far (ScienceWorld's); the last one is kept

A reply has one format in every world, `Assessment: <judgement>` then `<label>: <action>`
(the assessment only in the guided format): `reply_text` writes it for a demonstrator, and
`assessment_pattern` finds its assessment as a fair reader does.
"""
from __future__ import annotations

import random
import re
from typing import Callable, ClassVar, Protocol

# What a fair reader accepts of a label: any case, markdown bold ("**Move:** south"), and a
# space before its colon (a word-level tokenizer decodes with spaces between)
LABEL = r"\**{}\**[ \t]*:\**[ \t]*"  # "Move:", "**Move:**", "**Move**:", "move :"


def assessment_pattern(label: str) -> re.Pattern:
    """A reply's assessment (group "assessment"): the text after its label up to the end of
    its line, or up to the action's `label` where both are on one line."""
    return re.compile(r"(?i)" + LABEL.format("assessment") + r"(?P<assessment>[^\n]*?)[ \t]*"
                      r"(?:\n|(?=" + LABEL.format(label) + r")|$)")


def reply_text(guide: str, action: str, guided: bool, rng: random.Random, world) -> str:
    """The demonstrator's reply in `world`'s format: its judgement as one of the world's
    phrases for the guide word, then its action."""
    acted = f"{world.label}: {action}"
    return f"Assessment: {rng.choice(world.phrases[guide])}\n{acted}" if guided else acted


class TextWorld(Protocol):
    """One episode's world. A task seed picks the task: the free-text path draws training
    seeds in [0, 10^8), demonstrations' from 10^8, held-out ones from 10^9 and tuning ones
    from 2 x 10^9 (selfguide's ranges), and a world keeps its splits apart by them.

    The class's own members say how a reply in this world reads, how a batch of episodes is
    made and stepped, and what the tiny prior (cloned by trl_freetext.py without --model) is
    cloned from; an instance plays one episode."""

    # a reply
    label: ClassVar[str]  # the action's label: "Move" for the maze, "Action" for ScienceWorld
    reply: ClassVar[re.Pattern]  # finds a reply's assessment: assessment_pattern(label)

    @staticmethod
    def system_prompt(guided: bool) -> str:
        """The system turn: what the agent sees and the reply format, with the assessment
        (guided) or without (one prior acts both ways, the paper's ReAct and ReAct w/ SG)."""

    @staticmethod
    def read_action(text: str) -> tuple[tuple[int, int] | None, str | None]:
        """The reply's action: the character span of its text, and the text this world takes
        (None where the reply names no action)."""

    # a batch of episodes
    task_sets: ClassVar[dict]  # what --mazes' two sets of task seeds are called in a report:
    # {"held-out": "held-out mazes", "tuning": "tuning mazes"} for the maze

    @classmethod
    def batch(cls, cfg, ft, count: int) -> list:
        """`count` worlds, one per episode of a batch, for the run's settings (selfguide's
        Config, trl_freetext.py's FreeText)."""

    @staticmethod
    def side_by_side(function: Callable, items: list) -> list:
        """[function(item) for item in items], each item holding its own world: the maze's
        one after another, ScienceWorld's in threads (each simulator a process of its own)."""

    # the tiny prior (Stage 0)
    phrases: ClassVar[dict]  # the demonstrator's judgements as short phrases, a list for each
    # guide word (the word is what is read)
    @staticmethod
    def prior_key(ft) -> list:
        """What else the prior's cache key holds for these settings (trl_freetext.py's
        FreeText): how the world's demonstrations are drawn and what a turn shows, so a new
        turn format is a new prior; [] for the maze (its key is selfguide's settings alone)."""

    # optional: a world whose player reads the system turn and its latest turn alone
    # (ScienceWorld's --window) defines reads_one_turn(ft) -> bool; trl_freetext.py then samples
    # each reply under its own turn and scores it under the same turn (turn_logprobs)

    @classmethod
    def prior_demonstrations(cls, cfg, ft, probe: int = 0) -> list:
        """The demonstrator's episodes, each in both formats, its replies by reply_text:
        [(guided, [(observation, reply), ...])]; --prior-episodes of them, or with `probe`
        that many others the prior is not cloned on (to check it after cloning)."""

    # one episode
    def reset(self, seed: int) -> tuple[str, dict]:
        """Start the task of this seed: (the first observation, info). info["optimal"]: the
        steps a shortest (or gold) solution takes; info["task"]: an id of the task played."""

    def step(self, action: str | None) -> tuple[str, float, bool, dict]:
        """Take the reply's action text as written (None: the reply named none, a step that
        changes nothing): (observation, reward, done, info). reward is R_env's share of this
        step (1.0 on success); info["truth"], info["valid"] and info["score"] as in the
        module's docstring."""
