"""Self-Guide for a model that writes free text: the path a chat model takes, on TRL.

The constrained bridge (trl_selfguide.py) runs the toy as selfguide.py builds it: one word
per slot, fixed slot positions, log-probs over seven words. A chat model has none of that.
Here the agent is any causal LM with its own tokenizer and chat template, and each step is
a turn of a chat:

    user       at:3,5 goal:7,1 walls:NW cue:warmer          (the environment's turn)
    assistant  Assessment: positive, that got me closer     (the model's turn: free text,
               Move: east                                     sampled over the whole vocabulary)

- The guide z_t is read from the assessment (`read_guide`): the first of positive / neutral /
  negative in it; text without one is unreadable and counts as neutral (selfguide's r_t 0).
- A reply without a readable move (no `Move: north|east|south|west`) is a bump: the agent
  stays where it is and the step counts (toy_env's `step(None)`). Both are counted.
- Spans are found by parsing the reply's text and mapping the characters back to the tokens
  the model wrote (`char_offsets`), whatever the tokenizer: the reply up to its assessment's
  end gets the guide's advantage, the rest (the move, the format, the end of turn) the
  action's, so step credit, --guide-advantage env and the KL work as in the bridge.
- Loss mask (`env_mask`): 1 on every token the model wrote, its end-of-turn included; 0 on
  the environment's turns and the chat template's headers around them.
- Turns are generated with transformers' `generate` (top_k 0, top_p 1: the whole
  vocabulary) inside TRL's `rollout_func`; TRL scores them with its own per-token log-probs.

With no --model, the model is a tiny GPT-2 (two layers) cloned here (Stage 0, as
selfguide.py's) on the demonstrator's episodes in this chat format, its judgements written
as short phrases, with a subword (BPE) tokenizer trained on them by the `tokenizers`
library, all built in code: first on single turns (what a chat model brings from
pretraining: reading one observation), then on whole chats. examples/README.md has what it
learns and what training it here gives, with its times on two CPU cores (the cloning is
cached; training takes about ten times the constrained bridge's):

    pip install -r requirements.txt trl==1.16.0
    python examples/trl_freetext.py                    # the full method, free text (CPU)
    python examples/trl_freetext.py --variant grpo --seed 1
    python examples/trl_freetext.py --show 1           # then a held-out episode's chat
    accelerate launch --multi_gpu --num_processes 2 examples/trl_freetext.py
    python examples/trl_freetext.py --help             # selfguide.py's settings and these

A chat model of your own (a GPU; nothing is downloaded here, so this was never run here):

    accelerate launch --multi_gpu --num_processes 8 examples/trl_freetext.py \\
        --model Qwen/Qwen3-1.7B --bf16 --reply-tokens 64 --kl-guide 0.04

On P processes every process plays the iteration's whole batch from the same seed and
trains on its rows, as the constrained bridge does (the same experiment as on one).
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import random
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))         # trl_selfguide.py
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # selfguide.py, toy_env.py

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

import selfguide as sg  # noqa: E402
import toy_env  # noqa: E402
import science_world  # noqa: E402
import smollm2  # noqa: E402
import textworld  # noqa: E402
import trl_selfguide as bridge  # noqa: E402
from toy_env import ACTIONS, GUIDES  # noqa: E402

setting = sg.setting


MAZES = {"held-out": sg.EVAL_SEED_BASE,  # selfguide's held-out tasks, never trained on
         "tuning": 2 * 10**9,  # mazes no run trains or reports on: to choose settings on
         "training": None}  # --train-tasks, the training tasks a loop's check trains on


def maze_seeds(mazes: str, count: int) -> list:
    """The task seeds of the first `count` mazes of a held-out or tuning set (MAZES' key)."""
    return [MAZES[mazes] + i for i in range(count)]


def evaluated_seeds(cfg: sg.Config, ft, count: int | None = None) -> list:
    """The task seeds --mazes names: the first `count` (default --eval-tasks) of the held-out
    or the tuning set, or the --train-tasks (--mazes training)."""
    count = cfg.eval_tasks if count is None else count
    return ft.fixed_tasks[:count] if ft.mazes == "training" else maze_seeds(ft.mazes, count)


def task_seeds(cfg: sg.Config, ft) -> list:
    """The training tasks, one a group, in order: selfguide's draw (the bridge's task_seeds),
    or with --train-tasks a draw among those tasks alone."""
    if not ft.fixed_tasks:
        return bridge.task_seeds(cfg)
    tasks = random.Random(cfg.seed)
    return [tasks.choice(ft.fixed_tasks) for _ in range(cfg.iterations * cfg.tasks_per_iter)]


# --- The worlds (examples/textworld.py's protocol): the maze, ScienceWorld, --world's names ---

SYSTEM = ("You walk a maze to its goal. Each turn shows your cell, the goal's cell and the "
          "walls around you.")
ASK_GUIDED = (" Reply with two lines: Assessment: how your last move went, positive, neutral "
              "or negative, and why; then Move: north, east, south or west.")
ASK_UNGUIDED = " Reply with one line: Move: north, east, south or west."
PHRASES = {  # the demonstrator's judgements as short phrases; the guide word is what is read
    "positive": ["positive, that got me closer", "positive, closer to the goal",
                 "a positive step, good progress"],
    "neutral": ["neutral, no progress", "neutral, nothing changed", "neutral, I stayed put"],
    "negative": ["negative, that took me farther", "negative, farther from the goal",
                 "a negative step, wrong way"]}
# a fair reader's move (textworld.LABEL), its word also on the line after its label ("Move:\nsouth")
MOVE = re.compile(r"(?i)" + textworld.LABEL.format("move") + r"(?:\n[ \t]*)?\**(?P<move>[a-z]+)")


class Maze:
    """selfguide's gridworld as a text world (textworld.TextWorld): the reply's move is one
    of four words, anything else a bump; a step's truth is whether it shortened the path;
    with --example a move into a wall is said so in the next turn."""
    label = "Move"
    reply = textworld.assessment_pattern(label)
    task_sets = {"held-out": "held-out mazes", "tuning": "tuning mazes",
                 "training": "training mazes"}
    phrases = PHRASES

    @staticmethod
    def prior_key(ft) -> list:
        return []  # the maze's priors were keyed before worlds

    @staticmethod
    def system_prompt(guided: bool) -> str:
        return SYSTEM + (ASK_GUIDED if guided else ASK_UNGUIDED)

    @staticmethod
    def read_action(text: str):
        move = MOVE.search(text)
        word = move.group("move").lower() if move else None
        return move.span("move") if move else None, word if word in ACTIONS else None

    @classmethod
    def batch(cls, cfg: sg.Config, ft: FreeText, count: int) -> list:
        return [cls(cfg, ft.example) for _ in range(count)]

    @staticmethod
    def side_by_side(function, items) -> list:
        return [function(item) for item in items]

    @staticmethod
    def prior_demonstrations(cfg: sg.Config, ft: FreeText, probe: int = 0) -> list:
        return demonstrations(cfg, cfg.prior_episodes, probe) if probe else demonstrations(cfg)

    def __init__(self, cfg: sg.Config, example: bool):
        self.env, self.example = cfg.make_env(), example

    def reset(self, seed: int) -> tuple[str, dict]:
        observation, info = self.env.reset(seed=seed)
        return observation, {"optimal": info["optimal_steps"], "task": self.env.maze,
                             "cell": self.cell(info)}

    def step(self, action: str | None) -> tuple[str, float, bool, dict]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        return (wall_note(observation, action, info["bumped"], self.example), reward,
                terminated or truncated,
                {"truth": GUIDES.index(toy_env.true_polarity(info["progress"])),
                 "valid": action is not None, "cell": self.cell(info)})

    @staticmethod
    def cell(info: dict) -> int:
        row, column = info["position"]
        return row * toy_env.MAX_SIZE + column


WORLDS = {"maze": Maze, "scienceworld": science_world.ScienceWorld}  # --world's names


def reads_one_turn(world, ft) -> bool:
    """Does the player read the system turn and the latest turn alone (a world's optional
    member; without it, the whole chat)?"""
    return hasattr(world, "reads_one_turn") and world.reads_one_turn(ft)
# ScienceWorld's own defaults (--world scienceworld; each can still be given): episodes of the
# gold path's length and a few detours (3-16 actions; a cap of 30 left the prior's dev success
# where it was), every test variation evaluated once at the end, 32 episodes an iteration (a
# simulator each), a wider tiny model and vocabulary for the object names, replies long enough
# for an action such as "move flower pot 3 to red box", the player reading the system turn and
# the latest turn alone (--window), a Llama; 40 iterations at 1e-4, the rate whose dev curve
# fell least (examples/README.md, ScienceWorld: the player and the training settings chosen on
# the dev variations)
WORLD_DEFAULTS = {"scienceworld": dict(
    max_steps=20, eval_tasks=300, eval_batch=32, tasks_per_iter=4, group_size=8,
    iterations=40, eval_every=40, final_evals=1, lr=1e-4, prior_episodes=1200, prior_epochs=10,
    prior_lr=1e-3, turn_updates=0, n_embd=128, vocab=1024, reply_tokens=40, window=4,
    architecture="llama")}


@dataclass
class FreeText:
    """The settings of the free-text path, beside selfguide.py's."""
    world: str = setting("maze", "the text world played (examples/textworld.py): maze, "
                                 "selfguide's gridworld, or scienceworld, the paper's benchmark "
                                 "(its four find-* tasks: examples/science_world.py; other "
                                 "defaults then, listed in WORLD_DEFAULTS)", list(WORLDS))
    env_reward: str = setting("success", "ScienceWorld's R_env: success, 1 for the task done "
                                         "(the paper's R_env; the maze's); score, its final "
                                         "score / 100 (partial credit, -1 for a wrong focus); "
                                         "or clamped, the same with a wrong focus 0, as the mean "
                                         "score counts it", ["success", "score", "clamped"])
    window: int = setting(0, "ScienceWorld: what the player reads; K > 0: the system turn and "
                             "the latest turn alone, which shows the whole task, the last K "
                             "actions, the observation, the room and the inventory; 0: the "
                             "whole chat, each turn the observation, the whole task, the room "
                             "and the inventory (the maze: always 0)")
    corpus: str = setting("detours", "ScienceWorld: the demonstrations the tiny prior is "
                                     "cloned on: detours, the gold paths with and without a "
                                     "detour, or gold, those without one", ["detours", "gold"])
    train_tasks: str = setting("", "train on these training tasks alone, task seeds below "
                                   "10^8, comma-separated ('': a new task for every group, from "
                                   "all of them): the loop's first check, which --mazes "
                                   "training evaluates on them")
    model: str = setting("", "a causal LM with a chat template (a folder, a hub name you have "
                             "downloaded, or smollm2: examples/smollm2.py's); its tokenizer and "
                             "template are used; '' clones the tiny prior here (--architecture)")
    tokenizer: str = setting("bpe", "the tiny prior's tokenizer, built in code: bpe (subword, "
                                    "trained on the demonstrations) or words", ["bpe", "words"])
    architecture: str = setting("gpt2", "the tiny prior: selfguide's GPT-2, or llama (rotary "
                                        "positions) of the same size", ["gpt2", "llama"])
    vocab: int = setting(512, "the BPE tokenizer's vocabulary size")
    reply_tokens: int = setting(24, "most tokens the model may write in one turn")
    turn_updates: int = setting(1000, "the tiny prior's cloning starts with this many updates "
                                      "on single turns (an observation and its reply, no system "
                                      "turn, no history), then --prior-epochs over whole chats: "
                                      "what a chat model brings from pretraining, reading one "
                                      "observation (0: whole chats only)")
    bf16: bool = setting(False, "bf16 mixed precision: float32 weights, bfloat16 matmuls in "
                                "generation and in TRL's passes (a GPU's setting, and a CPU's "
                                "with bf16 instructions)")
    example: bool = setting(False, "the format for a pretrained chat model: each chat opens with "
                                   "the format explained and an example walk (EXPLAINED, "
                                   "EXAMPLE_WALK), a terse reply asked for, and a move into a "
                                   "wall said so in the next turn (WALL_NOTE)")
    train_layers: int = setting(0, "train only the top this many transformer blocks and the "
                                   "final norm (0: every weight); a CPU's recipe")
    freetext_cache: str = setting("runs/priors-freetext", "folder of the cached free-text priors")
    loss: str = setting("bnpo", "TRL's loss_type: bnpo, one mean over the batch's written tokens "
                                "(a guided run's longer replies leave each move less of the "
                                "gradient than an unguided run's), or dr_grpo, each token over "
                                "the same constant, the minibatch's rollouts x --max-steps x "
                                "--reply-tokens (a move weighs the same in every arm)",
                        ["bnpo", "dr_grpo"])
    eval_batch: int = setting(250, "episodes evaluated at once (fewer: less memory; a chat "
                                   "model's evaluation sets a run's peak)")
    mazes: str = setting("held-out", "the mazes evaluated on and --show plays: held-out (the "
                                     "tasks every table reports), or tuning (other mazes, to "
                                     "choose settings on); in ScienceWorld the test and the dev "
                                     "variations", list(MAZES))
    prior_rows: bool = setting(True, "evaluate the prior both ways before training (the "
                                     "ReAct and ReAct w/ SG rows); a harness that has them "
                                     "already turns them off")
    save_every: int = setting(0, "keep a checkpoint every this many iterations in --out "
                                 "(checkpoint-*: the model, the optimizer, the log so far and "
                                 "the rollouts' random streams; the last two kept): the same "
                                 "command run again resumes from the last one to the weights "
                                 "and log of the run never stopped (but its timings and TRL's "
                                 "end-of-training summary), and a run that ends deletes them "
                                 "(0: no checkpoints)")

    def __post_init__(self):
        if self.vocab < 64 or self.reply_tokens < 4 or min(self.turn_updates,
                                                            self.train_layers) < 0:
            raise ValueError("--vocab must be at least 64, --reply-tokens at least 4, "
                             "--turn-updates and --train-layers at least 0")
        if self.eval_batch < 1 or self.save_every < 0 or self.window < 0:
            raise ValueError("--eval-batch must be at least 1, --save-every and --window at "
                             "least 0")
        try:
            tasks = self.fixed_tasks
        except ValueError:
            tasks = [-1]
        if not all(0 <= t < sg.TRAIN_SEED_RANGE for t in tasks):
            raise ValueError(f"--train-tasks takes training task seeds (0 to "
                             f"{sg.TRAIN_SEED_RANGE - 1}), comma-separated")
        if self.mazes == "training" and not tasks:
            raise ValueError("--mazes training evaluates on --train-tasks: name them")

    @property
    def fixed_tasks(self) -> list:
        """--train-tasks as a list of task seeds ([]: none)."""
        return [int(t) for t in self.train_tasks.split(",")] if self.train_tasks else []


# --- The format: one chat turn per step ---

# a minimal chat template for the tiny prior, in transformers' Jinja format (a chat model
# brings its own): role headers and the end of turn are special tokens
SPECIAL_TOKENS = ["<|pad|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
CHAT_TEMPLATE = ("{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}"
                 "<|end|>{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")


EXPLAINED = ("You walk a grid maze to its goal, one cell per move. Each turn shows your cell as "
             "at:row,col, the goal's cell as goal:row,col, and the walls around your cell as "
             "walls: with N, E, S, W for north, east, south, west (none: no wall). North lowers "
             "the row by one, south raises it, west lowers the column, east raises it.")
CUE = (" A cue says how your last move went: warmer, it brought you closer to the goal through "
       "the maze; colder, it led away; same, you bumped into a wall; start, no move yet.")
ASK_TERSE = (" Reply with two short lines: Assessment: positive, neutral or negative, and a "
             "few words why; then Move: north, east, south or west.")
WALL = (" After a move into a wall, the next turn says blocked: and that move; you did not "
        "move.")
# --example's example: a walk in a 4x4 maze (its cells exist in every maze played, 4x4 and up)
# with each judgement and three of the moves, a misstep taken back among them, so that no one
# word or move is there to copy: (observation with the cue, its assessment then; without the
# cue, its assessment; the move)
EXAMPLE_WALK = [
    ("at:1,1 goal:2,3 walls:S cue:start", "no move yet, so neutral", "no move yet, so neutral",
     "west"),
    ("at:1,0 goal:2,3 walls:W cue:colder", "the cue says colder, so negative",
     "farther from the goal, so negative", "east"),
    ("at:1,1 goal:2,3 walls:S cue:warmer", "the cue says warmer, so positive",
     "closer to the goal, so positive", "east"),
    ("at:1,2 goal:2,3 walls:none cue:warmer", "the cue says warmer, so positive",
     "closer to the goal, so positive", "south")]


def wall_note(observation: str, move: str | None, bumped: bool, example: bool) -> str:
    """The environment's turn after a move: the observation, and with --example a note when
    the move ran into a wall (the observation alone differs from the last one only in its
    cue, and a model that repeats its move would see the same pair again and again)."""
    return f"{observation} blocked:{move}" if example and bumped and move else observation


def opening(guided: bool, example: bool = False, cue: bool = True, world=Maze) -> list:
    """The chat before the first observation: the world's system turn (with --example, the
    maze's format explained for a pretrained model), then with --example the example walk's
    exchanges (their replies the move alone without the assessment)."""
    if not example:
        return [{"role": "system", "content": world.system_prompt(guided)}]
    chat = [{"role": "system", "content": EXPLAINED + (CUE if cue else "") + WALL
             + (ASK_TERSE if guided else ASK_UNGUIDED)}]
    for observation, with_cue, without_cue, move in EXAMPLE_WALK:
        judged = with_cue if cue else without_cue
        chat += [{"role": "user", "content": observation if cue else observation.rsplit(" ", 1)[0]},
                 {"role": "assistant", "content": f"Assessment: {judged}\nMove: {move}" if guided
                  else f"Move: {move}"}]
    return chat


def read_guide(text) -> int:
    """The guide written in an assessment, as an index into GUIDES: the first of positive /
    neutral / negative in it (case, commas and full stops ignored; any object read as its
    str); -1 if it holds none (unreadable), which selfguide's step_rewards pays as neutral."""
    for word in str(text).lower().replace(",", " ").replace(".", " ").split():
        if word in GUIDES:
            return GUIDES.index(word)
    return -1


def parse_reply(text: str, world=Maze):
    """(assessment, move, word): the character spans (start, end) of the assessment and of the
    move in a reply, None where missing; the move's word if it is one of ACTIONS, else None
    (in ScienceWorld the action's text as written, None where the reply has none)."""
    reply = world.reply.search(text)
    return (reply.span("assessment") if reply else None, *world.read_action(text))


# --- Tokens: the chat template's turns, and characters back to tokens ---

def build_tokenizer(kind: str, texts, vocab: int = 512):
    """A tokenizer built in code, with the chat template: `bpe` a subword BPE trained on
    `texts` (the tokenizers library; pieces are cut at spaces only, as SentencePiece does),
    `words` one token per word and punctuation mark of `texts`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    if kind == "bpe":
        backend = Tokenizer(models.BPE())
        backend.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="never")
        backend.decoder = decoders.Metaspace(prepend_scheme="never")
        backend.train_from_iterator(texts, trainers.BpeTrainer(
            vocab_size=vocab, special_tokens=SPECIAL_TOKENS, show_progress=False))
    else:
        splitter = pre_tokenizers.Whitespace()  # words and punctuation runs
        words = sorted({w for text in texts for w, _ in splitter.pre_tokenize_str(text)})
        backend = Tokenizer(models.WordLevel(
            {w: i for i, w in enumerate(SPECIAL_TOKENS + ["<|unk|>"] + words)}, "<|unk|>"))
        backend.pre_tokenizer = splitter
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<|pad|>",
                                        eos_token="<|end|>", unk_token="<|unk|>"
                                        if kind == "words" else None,
                                        additional_special_tokens=SPECIAL_TOKENS[1:4])
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def render(tokenizer, messages, generation_prompt=False) -> list:
    return tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt,
                                         tokenize=True, return_dict=False)


def prompt_ids(tokenizer, guided: bool, example: bool = False, cue: bool = True,
               world=Maze) -> list:
    """The episode's prompt: the opening, the same for every task (so no prompt is padded,
    and positions are the same in generation and in TRL's scoring); with --example it ends
    where the example's reply ends, at its end-of-turn token, as the model's replies do."""
    ids = render(tokenizer, opening(guided, example, cue, world))
    return ids[:len(ids) - ids[::-1].index(tokenizer.eos_token_id)] if example else ids


def environment_turn(tokenizer, observation: str, guided: bool, first: bool,
                     example: bool = False, cue: bool = True, world=Maze) -> list:
    """The tokens the template puts between the model's last token (its end of turn) and its
    next reply: the user turn holding the observation, and the assistant's header. Found as
    TRL finds a tool's turn: a conversation rendered with and without it, the shorter cut at
    its last end-of-turn token (templates such as Qwen's put a newline after it)."""
    before = opening(guided, example, cue, world)
    if not first:
        before += [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
    prefix = render(tokenizer, before)
    if not first or example:  # what comes before ends at a reply's end of turn
        prefix = prefix[:len(prefix) - prefix[::-1].index(tokenizer.eos_token_id)]
    full = render(tokenizer, before + [{"role": "user", "content": observation}], True)
    if full[:len(prefix)] != prefix:
        raise SystemExit("error: this chat template does not render a conversation as a "
                         "prefix of its continuation; the environment's turns cannot be cut "
                         "out of it")
    return full[len(prefix):]


def char_offsets(tokenizer, ids) -> list:
    """[(start, end)]: each token's characters in the decoded text of `ids`, read as the length
    of the decoded text of each prefix. This holds for any tokenizer and for token sequences
    the tokenizer would not itself make from the text (sampled ones need not be its own);
    special tokens decode to nothing."""
    ends = [len(tokenizer.decode(ids[:i + 1], skip_special_tokens=True,
                                 clean_up_tokenization_spaces=False)) for i in range(len(ids))]
    return list(zip([0] + ends[:-1], ends))


def token_span(offsets, span):
    """[first, last + 1) of the tokens whose characters overlap the span (start, end), or
    None: a token that straddles the span's edge belongs to it."""
    if span is None:
        return None
    inside = [i for i, (a, b) in enumerate(offsets) if a < span[1] and b > span[0]]
    return (inside[0], inside[-1] + 1) if inside else None


# --- Stage 0 in the chat format: the tiny prior, its tokenizer, its cache ---

def demonstrations(cfg: sg.Config, first: int = 0, count: int | None = None,
                   example: bool = False) -> list:
    """The demonstrator's episodes (selfguide's Stage 0 seeds: --prior-episodes of them, or
    `count` from the `first`-th), each in both formats: [(guided, [(observation, reply),
    ...])], the judgements as phrases drawn per step, the observations as play shows them
    (with --example, a wall's note after a move into it)."""
    env, episodes = cfg.make_env(), []
    phrases = random.Random(f"phrases-{cfg.seed}" + (f"-{first}" if first else ""))
    count = cfg.prior_episodes if count is None else count
    for i in tqdm(range(first, first + count), desc="demonstrations", leave=False):
        steps, infos = toy_env.demonstrate(env, sg.PRIOR_SEED_BASE + cfg.seed * 10**6 + i,
                                           cue_noise=cfg.cue_noise)
        shown = [o if t == 0 else wall_note(o, steps[t - 1][2], infos[t - 1]["bumped"], example)
                 for t, (o, _, _) in enumerate(steps)]
        episodes += [(guided, [(o, textworld.reply_text(g, a, guided, phrases, Maze))
                               for o, (_, g, a) in zip(shown, steps)]) for guided in (True, False)]
    return episodes


def encode_episode(tokenizer, guided: bool, steps, example: bool = False, cue: bool = True,
                   world=Maze):
    """An episode [(observation, reply)] as the stream the rollout writes, from the same opening
    (--example, the cue): (token ids, written), written 1 on the reply tokens and each reply's
    end of turn, 0 on the prompt and the environment's turns."""
    ids = prompt_ids(tokenizer, guided, example, cue, world)
    written = [0] * len(ids)
    for t, (observation, reply) in enumerate(steps):
        turn = cached_turn(tokenizer, observation, guided, t == 0, example, cue, world)
        answer = cached_answer(tokenizer, reply)
        ids, written = ids + turn + answer, written + [0] * len(turn) + [1] * len(answer)
    return ids, written


def encode_turns(tokenizer, guided: bool, steps, world=Maze) -> list:
    """An episode [(observation, reply)] as a player that reads one turn sees it: each step a
    chat of its own, the opening, the turn, the reply: [(token ids, written)] per step."""
    prompt = prompt_ids(tokenizer, guided, world=world)
    sequences = []
    for observation, reply in steps:
        turn = cached_turn(tokenizer, observation, guided, True, world=world)
        answer = cached_answer(tokenizer, reply)
        sequences.append((prompt + turn + answer,
                          [0] * (len(prompt) + len(turn)) + [1] * len(answer)))
    return sequences


def make_model(cfg: sg.Config, ft: FreeText, tokenizer, positions: int):
    """The tiny prior, over this tokenizer's vocabulary: selfguide's GPT-2, or a Llama-style
    model of the same size (rotary positions, RMSNorm, SwiGLU), as chat models are built."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
    if ft.architecture == "llama":
        return LlamaForCausalLM(LlamaConfig(
            vocab_size=len(tokenizer), hidden_size=cfg.n_embd, intermediate_size=4 * cfg.n_embd,
            num_hidden_layers=cfg.n_layer, num_attention_heads=cfg.n_head,
            num_key_value_heads=cfg.n_head, max_position_embeddings=positions,
            tie_word_embeddings=True, use_cache=False, bos_token_id=tokenizer.eos_token_id,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id))
    return GPT2LMHeadModel(GPT2Config(
        vocab_size=len(tokenizer), n_positions=positions, n_embd=cfg.n_embd,
        n_layer=cfg.n_layer, n_head=cfg.n_head, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, activation_function="gelu_pytorch_tanh", use_cache=False,
        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id))


def turn_sequences(tokenizer, episodes, world=Maze) -> list:
    """Every step of the demonstrations as a chat of its own: the environment's turn, then the
    reply, with no system turn and no history before it: [(ids, written)]. (The turn as it
    stands between two replies, already cached by encode_episode: in the tiny prior's
    template, the same tokens as a chat that starts with it.)"""
    sequences = []
    for guided, steps in episodes:
        for observation, reply in steps:
            turn = cached_turn(tokenizer, observation, guided, False, world=world)
            answer = cached_answer(tokenizer, reply)
            sequences.append((turn + answer, [0] * len(turn) + [1] * len(answer)))
    return sequences


def batches(count: int, size: int, generator, lengths=None, groups=None) -> list:
    """A pass's batches of indices into `count` sequences, in a random order; with their
    `lengths`, each batch of sequences of about one length (sorted within windows of eight
    batches, the batches then shuffled): less padding where lengths vary (ScienceWorld's);
    with their `groups` too, each batch of one group (a window cut where its group changes)."""
    order = torch.randperm(count, generator=generator)
    if lengths is None:
        return list(order.split(size))
    group = (lambda i: groups[i]) if groups else (lambda i: 0)
    found = []
    for window in order.split(8 * size):
        ranked = sorted(window.tolist(), key=lambda i: (group(i), lengths[i]))
        for g in dict.fromkeys(map(group, ranked)):
            alike = [i for i in ranked if group(i) == g]
            found += [torch.tensor(alike[k:k + size]) for k in range(0, len(alike), size)]
    return [found[i] for i in torch.randperm(len(found), generator=generator).tolist()]


def clone(model, sequences, cfg: sg.Config, device, updates: int = 0, desc: str = "episodes",
          by_length: bool = False, prompts=None):
    """Behaviour cloning over the whole vocabulary: maximise log pi of the written tokens.
    sequences: [(ids, written)], for --prior-epochs passes, or `updates` updates if given;
    `by_length`: batches of like lengths (`batches`); `prompts`: each sequence starts with one
    of these, never written: a batch holds one, its keys and values computed once (a player
    that reads one turn). Returns the losses."""
    from transformers import DynamicCache
    generator = torch.Generator().manual_seed(cfg.seed)
    updates = updates or cfg.prior_epochs * -(-len(sequences) // cfg.prior_batch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.prior_lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda i: 0.5 * (1 + math.cos(math.pi * i / updates)))
    losses, bar = [], tqdm(total=updates, desc=f"Stage 0 cloning (free text, {desc})", leave=False)
    lengths = [len(ids) for ids, _ in sequences] if by_length else None
    groups = [next(k for k, p in enumerate(prompts) if ids[:len(p)] == p)
              for ids, _ in sequences] if prompts else None
    while len(losses) < updates:
        for batch in batches(len(sequences), cfg.prior_batch, generator, lengths, groups):
            if len(losses) == updates:
                break
            width = max(len(sequences[i][0]) for i in batch)
            ids = torch.tensor([sequences[i][0] + [0] * (width - len(sequences[i][0]))
                                for i in batch], device=device)                 # (B, L)
            written = torch.tensor([sequences[i][1] + [0] * (width - len(sequences[i][1]))
                                    for i in batch], device=device)             # (B, L)
            # the head and the softmax only where a written token is predicted
            shared, cache = len(prompts[groups[batch[0]]]) if prompts else 0, None
            if shared:  # the batch's prompt once
                cache = DynamicCache(config=model.config)
                model.base_model(input_ids=ids[:1, :shared], cache=cache, use_cache=True)
                cache.batch_repeat_interleave(len(batch))
            hidden = model.base_model(input_ids=ids[:, shared:], cache=cache,
                                      use_cache=bool(shared)).last_hidden_state[:, :-1]
            scored = written[:, shared + 1:].bool()                             # (B, L-1)
            logits = model.get_output_embeddings()(hidden[scored])              # (W, V)
            loss = F.cross_entropy(logits, ids[:, shared + 1:][scored])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
            bar.update()
            bar.set_postfix(loss=f"{loss.item():.3f}")
    bar.close()
    return losses


@torch.no_grad()
def decisions_predicted(model, tokenizer, episodes, example: bool = False,
                        cue: bool = True, world=Maze, one_turn: bool = False) -> dict:
    """Teacher-forced on demonstrations (from the opening of --example and the cue; with
    `one_turn`, each step a chat of its own, as a player reading one turn sees it): the share
    of the demonstrator's moves, and of its guide words, that the model's most likely next
    tokens write exactly (every token of the word). Cloning's diagnostic: a prior whose moves
    are at chance (25%) never reaches a goal, and GRPO then has nothing to learn from."""
    right = {"moves": [], "guides": []}
    device = next(model.parameters()).device
    for guided, steps in episodes:
        if one_turn:  # each step a chat of its own
            best, position = [], 0
            for ids, _ in encode_turns(tokenizer, guided, steps, world):
                best += model(torch.tensor([ids], device=device)).logits[0].argmax(-1).tolist()
        else:
            ids, _ = encode_episode(tokenizer, guided, steps, example, cue, world)
            best = model(torch.tensor([ids], device=device)).logits[0].argmax(-1).tolist()  # (L,)
            position = len(prompt_ids(tokenizer, guided, example, cue, world))
        for t, (observation, reply) in enumerate(steps):
            if one_turn:
                position += len(prompt_ids(tokenizer, guided, world=world))
            position += len(cached_turn(tokenizer, observation, guided, t == 0 or one_turn,
                                        example, cue, world))
            answer = cached_answer(tokenizer, reply)
            assessment, move, _ = parse_reply(reply, world)
            offsets = char_offsets(tokenizer, answer)
            word = re.search("|".join(GUIDES), reply[slice(*assessment)]) if assessment else None
            spans = {"moves": token_span(offsets, move), "guides": word and token_span(
                offsets, (assessment[0] + word.start(), assessment[0] + word.end()))}
            for kind, span in spans.items():
                if span:  # token p is predicted at p - 1
                    right[kind].append(all(best[position + k - 1] == answer[k]
                                           for k in range(*span)))
            position += len(answer)
    return {kind: sum(hits) / len(hits) for kind, hits in right.items() if hits}


def prior_folder(cfg: sg.Config, ft: FreeText) -> Path:
    """The cached free-text prior of these settings: selfguide's prior key, the format's and
    the world's."""
    world = WORLDS[ft.world]
    text = json.dumps([sg.prior_key(cfg), ft.architecture, ft.tokenizer, ft.vocab, ft.reply_tokens,
                       ft.turn_updates, world.system_prompt(True), world.phrases]
                      + world.prior_key(ft))
    return Path(ft.freetext_cache) / f"prior-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


PROBE_EPISODES = 10  # demonstrations the prior's decisions are checked on after cloning


def load_or_clone_prior(cfg: sg.Config, ft: FreeText, device) -> Path:
    """The folder of the tiny free-text prior (model and tokenizer, as transformers saves
    them), cloned and published whole if it is not cached."""
    folder = prior_folder(cfg, ft)
    if folder.exists():
        return folder
    start, world = time.perf_counter(), WORLDS[ft.world]
    # the maze's turns are all of about one length: its positions read off 200 demonstrations,
    # its batches drawn at random, as its cached priors were; any other world's by length
    maze, one_turn = world is Maze, reads_one_turn(world, ft)
    episodes = world.prior_demonstrations(cfg, ft)
    texts = [text for guided, steps in episodes
             for text in [world.system_prompt(guided)] + [text for step in steps for text in step]]
    tokenizer = build_tokenizer(ft.tokenizer, texts, ft.vocab)
    turn = max(len(environment_turn(tokenizer, o, True, one_turn, world=world))
               for _, steps in (episodes[:200] if maze else episodes) for o, _ in steps)
    prompt = len(prompt_ids(tokenizer, True, world=world))
    if one_turn:  # each step a chat of its own; room for longer turns than the corpus's
        sequences = [s for guided, steps in episodes
                     for s in encode_turns(tokenizer, guided, steps, world)]
        positions = 2 * (prompt + turn + ft.reply_tokens) + ft.window * ft.reply_tokens
    else:
        sequences = [encode_episode(tokenizer, guided, steps, world=world)
                     for guided, steps in episodes]
        positions = prompt + cfg.max_steps * (turn + 8 + ft.reply_tokens)
    torch.manual_seed(cfg.seed)
    model = make_model(cfg, ft, tokenizer, positions).to(device)
    # one turn alone first: with the system turn and the history in front, a move's query
    # attends over hundreds of tokens from the start and the cloning does not find the
    # observation (the moves stay at chance, measured); on single turns it does
    losses = clone(model, turn_sequences(tokenizer, episodes, world), cfg, device,
                   ft.turn_updates, "single turns", not maze) if ft.turn_updates else []
    prompts = [prompt_ids(tokenizer, guided, world=world) for guided in (True, False)]
    losses += clone(model, sequences, cfg, device, by_length=not maze,
                    prompts=prompts if one_turn else None)
    probe = world.prior_demonstrations(cfg, ft, PROBE_EPISODES)
    unseen = decisions_predicted(model.eval(), tokenizer, probe, world=world, one_turn=one_turn)
    temporary = sg.partial_path(folder)
    model.save_pretrained(temporary)
    tokenizer.save_pretrained(temporary)
    (temporary / "stage0.json").write_text(json.dumps(
        {"updates": len(losses), "final_loss": losses[-1], "predicted": unseen}) + "\n")
    try:
        os.rename(temporary, folder)
    except OSError:  # another process published it first: use that one
        shutil.rmtree(temporary, ignore_errors=True)
    mean = sum(len(ids) for ids, _ in sequences) / len(sequences)
    tqdm.write(f"Stage 0 prior (free text): {len(episodes)} demonstrations in the chat format "
               f"({mean:.0f} tokens a {'turn' if one_turn else 'chat'} on average, "
               f"{len(tokenizer)}-token {ft.tokenizer} vocabulary), cloned in "
               f"{time.perf_counter() - start:.0f} s, {ft.turn_updates} updates on single turns "
               f"and {len(losses) - ft.turn_updates} on "
               f"{'turns with the system turn' if one_turn else 'whole chats'}, "
               f"final loss {losses[-1]:.3f} -> {folder}\n  teacher-forced on "
               f"{PROBE_EPISODES} demonstrations it was not cloned on, in both formats: "
               f"{unseen['moves']:.0%} of the demonstrator's {world.label.lower()}s"
               f"{' (chance: 25%)' if maze else ''}, {unseen['guides']:.0%} of its guide words")
    return folder


def freeze_below(model, layers: int):
    """Train only the top `layers` transformer blocks and the final norm (0: every weight):
    the embeddings, the lower blocks and the head (tied to the embeddings) stay as they are,
    and a backward pass stops at the lowest block trained."""
    if not layers:
        return
    base = model.base_model
    blocks = base.layers if hasattr(base, "layers") else base.h  # Llama-style, GPT-2
    if not layers <= len(blocks):
        raise SystemExit(f"error: --train-layers {layers}: the model has {len(blocks)} blocks")
    model.requires_grad_(False)
    for module in list(blocks[-layers:]) + [base.norm if hasattr(base, "norm") else base.ln_f]:
        module.requires_grad_(True)


def load_model(folder, device):
    """A causal LM (float32 weights: --bf16 is mixed precision) and its tokenizer from a folder,
    or a hub name already downloaded; one line if the tokenizer has no chat template or no
    end-of-turn token, or its template cannot be cut into turns."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if not tokenizer.chat_template or tokenizer.eos_token_id is None:
        raise SystemExit(f"error: {folder} has no chat template or no end-of-turn (eos) token; "
                         f"the free-text path needs a chat model's tokenizer")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    environment_turn(tokenizer, "at:0,0", True, False)  # the template's check, before any work
    model = AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.float32)
    return model.to(device).eval(), tokenizer


# --- The episode: turns generated over the whole vocabulary, read, and played ---

@dataclass
class Transcript:
    """One episode's token stream after the prompt, token by token."""
    tokens: list = dataclasses.field(default_factory=list)   # token ids
    written: list = dataclasses.field(default_factory=list)  # 1 where the model wrote it
    steps: list = dataclasses.field(default_factory=list)    # its step; -1 if the env's
    slots: list = dataclasses.field(default_factory=list)    # sg.SLOT_GUIDE on a reply up to
    # its assessment's end, sg.SLOT_ACTION on the rest of it, sg.SLOT_CONTEXT elsewhere
    spans: list = dataclasses.field(default_factory=list)    # per step (assessment, move):
    # token spans [first, last + 1) in `tokens`, None where not found

    def add(self, tokens, written: int, step: int, slots: list):
        self.tokens += tokens
        self.written += [written] * len(tokens)
        self.steps += [step] * len(tokens)
        self.slots += slots


@dataclass
class Episodes:
    """A batch of N free-text episodes: the token streams TRL trains on, and the steps that
    selfguide's advantages and metrics read. T = --max-steps."""
    prompt: list               # the prompt's token ids (the same for every episode)
    transcripts: list          # N Transcripts: everything after the prompt
    unreadable: torch.Tensor   # (N, T) bool: a guided reply whose assessment reads no guide
    unparseable: torch.Tensor  # (N, T) bool: a reply that names no move (a bump)
    steps: sg.Rollouts         # a guide and an action position per step, the toy's layout:
                               # what iteration_advantages and episode_metrics read
    capped: torch.Tensor       # (N, T) bool: a reply cut at --reply-tokens, before its end
    invalid: torch.Tensor | None = None  # (N, T) bool: an action the world could not take
    scores: torch.Tensor | None = None   # (N,) the final score, where a world keeps one
    # (ScienceWorld's info["score"]; None: the maze)


class Chats:
    """The running episodes' conversations as `generate` continues them, turn after turn: a
    grid of token ids (B, L), its attention mask (B, L), and the KV cache of the grid (all but
    its last column: generate never feeds the last token it samples). Carried across turns, a
    turn costs its own tokens, not the whole conversation again. Each append is left-padded
    to its longest row, and a reply that ends before the longest leaves padding behind it:
    the mask hides these holes, and generate's positions count only the tokens under it, so
    each reply is scored as in one forward over its own unpadded stream (test)."""

    def __init__(self, n: int, pad: int, prompt: list | None = None):
        self.rows, self.pad = list(range(n)), pad  # the episodes in the grid, in order
        self.ids = torch.zeros(n, 0, dtype=torch.long)  # (B, L)
        self.mask = torch.zeros(n, 0, dtype=torch.long)  # (B, L): 1 on the tokens, 0 on holes
        self.cache = None  # made by the first reply, for the model's own layers (as generate's)
        self.shared = 0  # the first columns, the same in every row: their cache made once
        if prompt:  # (a chat of one turn: the prompt, then the turn)
            self.extend(self.rows, [prompt] * n)
            self.shared = len(prompt)

    def extend(self, rows: list, turns: list) -> "Chats":
        """Keep the episodes `rows` (still running, in order), and append each one's new
        tokens (the environment's turn; the prompt too at the start)."""
        if rows != self.rows:
            keep = torch.tensor([self.rows.index(r) for r in rows], device=self.ids.device)
            self.ids, self.mask, self.rows = self.ids[keep], self.mask[keep], list(rows)
            if self.cache is not None:
                self.cache.batch_select_indices(keep)
        width = max(map(len, turns))
        ids = [[self.pad] * (width - len(t)) + t for t in turns]
        mask = [[0] * (width - len(t)) + [1] * len(t) for t in turns]
        self.ids = torch.cat([self.ids, torch.tensor(ids, device=self.ids.device)], 1)
        self.mask = torch.cat([self.mask, torch.tensor(mask, device=self.ids.device)], 1)
        return self


@torch.no_grad()
def generate_replies(model, tokenizer, chats: Chats, ft: FreeText, temperature: float,
                     greedy: bool, seed: int) -> list:
    """Each running episode's next reply, from transformers' generate over the carried
    conversation: sampled over the whole vocabulary (top_k 0, top_p 1), or greedy, up to and
    including the end of turn, or --reply-tokens tokens; appended to `chats`. The draws come
    from `seed` alone, so every process that plays the same batch draws the same replies."""
    from transformers import DynamicCache
    device, eos = next(model.parameters()).device, tokenizer.eos_token_id
    chats.ids, chats.mask = chats.ids.to(device), chats.mask.to(device)
    width = chats.ids.shape[1]
    sampling = {} if greedy else {"temperature": temperature, "top_k": 0, "top_p": 1.0}
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), \
            torch.autocast(device.type, dtype=torch.bfloat16, enabled=ft.bf16):
        if chats.cache is None:
            chats.cache = DynamicCache(config=model.config)
            if chats.shared:  # the prompt's keys and values once, for every row
                model(input_ids=chats.ids[:1, :chats.shared], cache=chats.cache,
                      use_cache=True)
                chats.cache.batch_repeat_interleave(len(chats.ids))
        torch.manual_seed(seed)
        out = model.generate(input_ids=chats.ids, attention_mask=chats.mask, cache=chats.cache,
                             do_sample=not greedy, max_new_tokens=ft.reply_tokens,
                             eos_token_id=eos, pad_token_id=chats.pad, use_cache=True,
                             **sampling)
    replies = [row[:row.index(eos) + 1] if eos in row else row for row in out[:, width:].tolist()]
    written = [[1] * len(r) + [0] * (out.shape[1] - width - len(r)) for r in replies]
    chats.ids = out
    chats.mask = torch.cat([chats.mask, torch.tensor(written, device=device)], 1)
    return replies


def cached_turn(tokenizer, observation: str, guided: bool, first: bool, example: bool = False,
                cue: bool = True, world=Maze) -> list:
    """environment_turn, memoised on the tokenizer itself (mazes repeat their observations;
    a cache keyed by the tokenizer's id could serve a new tokenizer another's turns)."""
    cache = tokenizer.__dict__.setdefault("_environment_turns", {})
    key = (observation, guided, first, example, cue, world)
    if key not in cache:
        cache[key] = environment_turn(tokenizer, observation, guided, first, example, cue, world)
    return cache[key]


def cached_answer(tokenizer, reply: str) -> list:
    """A demonstrated reply's tokens and its end of turn, memoised as cached_turn is (the
    demonstrator writes a few dozen distinct replies)."""
    cache = tokenizer.__dict__.setdefault("_answers", {})
    if reply not in cache:
        cache[reply] = tokenizer.encode(reply, add_special_tokens=False) + [tokenizer.eos_token_id]
    return cache[reply]


def read_reply(tokenizer, reply: list, guided: bool, world=Maze):
    """A reply's tokens -> (text, guide index (unreadable: -1), move or None, tokens of the
    assessment's part (the reply up to the assessment's end), assessment span, move span)."""
    text = tokenizer.decode(reply, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    assessment, move_span, move = parse_reply(text, world)
    offsets = char_offsets(tokenizer, reply)
    judged, moved = token_span(offsets, assessment), token_span(offsets, move_span)
    guide = read_guide(text[slice(*assessment)]) if guided and assessment else -1
    return text, guide, move, judged[1] if guided and judged else 0, judged, moved


def play(model, tokenizer, task_seeds, guided: bool, cfg: sg.Config, ft: FreeText, seed: int,
         greedy: bool = False) -> Episodes:
    """One episode per task seed, all in one batch: per step the environment's turn, then a
    reply generated for every running episode, read, and stepped (ScienceWorld's simulators
    side by side). A player that reads one turn (--window) starts each step's chat anew from
    the prompt: its transcript is each step's turn and reply, one after another."""
    n, horizon, world = len(task_seeds), cfg.max_steps, WORLDS[ft.world]
    one_turn = reads_one_turn(world, ft)
    worlds = world.batch(cfg, ft, n)
    resets = world.side_by_side(lambda pair: pair[0].reset(pair[1]), list(zip(worlds, task_seeds)))
    observations = [observation for observation, _ in resets]
    prompt = prompt_ids(tokenizer, guided, ft.example, cfg.cue, world)
    transcripts = [Transcript() for _ in range(n)]
    guides, truths, cells = (torch.full((n, horizon), -1) for _ in range(3))
    unreadable, unparseable, capped, invalid = (torch.zeros(n, horizon, dtype=torch.bool)
                                                for _ in range(4))
    env_return, steps, truth, scores = [0.0] * n, [0] * n, [-1] * n, [None] * n
    cell = [info.get("cell", -1) for _, info in resets]
    running, chats = list(range(n)), Chats(n, tokenizer.pad_token_id)
    for t in range(horizon):
        turns = []
        for i in running:
            turn = cached_turn(tokenizer, observations[i], guided, t == 0 or one_turn,
                               ft.example, cfg.cue, world)
            if t and capped[i, t - 1] and not one_turn:  # a reply cut at --reply-tokens: its
                turn = [tokenizer.eos_token_id] + turn   # turn closed for it
            transcripts[i].add(turn, 0, -1, [sg.SLOT_CONTEXT] * len(turn))
            turns.append(turn if one_turn else prompt + turn if t == 0 else turn)
            truths[i, t], cells[i, t] = truth[i], cell[i]
        if one_turn:  # a chat of its own each step: the prompt, then the turn
            chats = Chats(len(running), tokenizer.pad_token_id, prompt)
            chats.extend(chats.rows, turns)
        else:
            chats.extend(running, turns)
        answers = generate_replies(model, tokenizer, chats, ft, cfg.temperature, greedy,
                                   seed * 1000 + t)
        actions = []
        for i, reply in zip(running, answers):
            _, guide, action, judged_end, judged, acted = read_reply(tokenizer, reply, guided,
                                                                     world)
            start = len(transcripts[i].tokens)
            transcripts[i].spans.append(tuple(None if s is None else (s[0] + start, s[1] + start)
                                              for s in (judged, acted)))
            transcripts[i].add(reply, 1, t, [sg.SLOT_GUIDE if k < judged_end else sg.SLOT_ACTION
                                             for k in range(len(reply))])
            if guided:  # unreadable counts as neutral (the paper's rule)
                guides[i, t] = guide if guide >= 0 else GUIDES.index("neutral")
                unreadable[i, t] = guide < 0
            unparseable[i, t] = action is None
            capped[i, t] = tokenizer.eos_token_id not in reply
            actions.append(action)
        results = world.side_by_side(lambda pair: worlds[pair[0]].step(pair[1]),
                                     list(zip(running, actions)))
        for i, (observation, reward, done, info) in zip(list(running), results):
            observations[i], truth[i], cell[i] = observation, info["truth"], info.get("cell", -1)
            invalid[i, t], scores[i] = not info["valid"], info.get("score")
            env_return[i], steps[i] = env_return[i] + reward, t + 1
            if done:
                running = [j for j in running if j != i]
        if not running:
            break
    taken = torch.tensor(steps)
    layout = torch.arange(2 * horizon) < 2 * taken[:, None]                    # (N, 2T)
    kind = torch.tensor([sg.SLOT_GUIDE if guided else sg.SLOT_CONTEXT, sg.SLOT_ACTION])
    slots = torch.where(layout, kind.repeat(horizon), sg.SLOT_CONTEXT)        # (N, 2T)
    optimal = torch.tensor([info["optimal"] for _, info in resets])
    return Episodes(prompt, transcripts, unreadable, unparseable, sg.Rollouts(
        torch.zeros_like(slots), slots, torch.zeros(slots.shape), guides, truths, cells,
        torch.tensor(env_return), taken, optimal),
        capped, invalid, None if None in scores else torch.tensor(scores))


def spread_advantages(episodes: Episodes, advantages: torch.Tensor, rows) -> list:
    """Per-step advantages onto the tokens the model wrote: advantages (N, 2T) as
    iteration_advantages gives them for the toy's layout (step t: the guide at 2t, the
    action at 2t + 1) -> for each of `rows`, a list over its completion: the step's guide
    advantage on the assessment's part of the reply, its action advantage on the rest, 0 on
    the environment's tokens."""
    out = []
    for row in rows:
        values, transcript = advantages[row].tolist(), episodes.transcripts[row]
        out.append([0.0 if slot == sg.SLOT_CONTEXT else
                    values[2 * step + (slot == sg.SLOT_ACTION)]
                    for step, slot in zip(transcript.steps, transcript.slots)])
    return out


def shares(episodes: Episodes) -> dict:
    """How often the reading failed: unreadable assessments among the guided replies, replies
    without a move among all, and replies cut at --reply-tokens among all. In ScienceWorld
    also: success, the task done (whatever R_env pays), the share of replies whose action the
    simulator took (valid_actions), the mean final score (an episode ended by a wrong focus,
    -100, counts 0) and the share so ended (failed);
    the maze's loop and path-length figures do not apply there (None)."""
    replied = episodes.steps.guides >= 0
    taken = torch.arange(episodes.unparseable.shape[1]) < episodes.steps.steps[:, None]
    figures = {"unreadable": episodes.unreadable[replied].float().mean().item()
               if replied.any() else None,
               "unparseable": episodes.unparseable[taken].float().mean().item(),
               "capped": episodes.capped[taken].float().mean().item()}
    if episodes.scores is None:
        return figures
    return {**figures, "success": (episodes.scores >= 100).float().mean().item(),
            "valid_actions": 1 - episodes.invalid[taken].float().mean().item(),
            "score": episodes.scores.clamp(min=0).float().mean().item(),
            "failed": (episodes.scores < 0).float().mean().item(),
            "steps_over_optimal": None, "looping_episodes": None, "revisits": None}


def concat_episodes(parts) -> Episodes:
    """Batches of episodes played from the same prompt, as one."""
    joined = lambda name: (None if getattr(parts[0], name) is None  # noqa: E731
                           else torch.cat([getattr(p, name) for p in parts]))
    return Episodes(parts[0].prompt, [t for p in parts for t in p.transcripts],
                    joined("unreadable"), joined("unparseable"),
                    sg.concat_rollouts([p.steps for p in parts]), joined("capped"),
                    joined("invalid"), joined("scores"))


def evaluate(model, tokenizer, cfg: sg.Config, ft: FreeText, guided: bool) -> dict:
    """Greedy replies on the --mazes, --eval-batch at once: selfguide's metrics, and the
    reading's failures."""
    seeds, size = evaluated_seeds(cfg, ft), ft.eval_batch
    parts = [play(model, tokenizer, seeds[i:i + size], guided, cfg, ft, 0, greedy=True)
             for i in range(0, len(seeds), size)]
    batch = concat_episodes(parts)
    return {**sg.episode_metrics(batch.steps), **shares(batch)}


def describe(metrics: dict) -> str:
    """selfguide's line, and how often the reading failed (in ScienceWorld, the score and the
    share of valid actions)."""
    unreadable = metrics.get("unreadable")
    world = "" if "score" not in metrics else (f"  score {metrics['score']:.1f}  valid "
                                               f"{metrics['valid_actions']:.3f}")
    return (sg.format_metrics(metrics) + world + ("" if unreadable is None else
                                                  f"  unreadable {unreadable:.3f}") +
            f"  no move {metrics['unparseable']:.3f}  cut {metrics['capped']:.3f}")


# --- TRL: the rollout, the advantages, the trainer ---

def make_rollout_func(cfg: sg.Config, ft: FreeText, tokenizer):
    """TRL's rollout_func: each prompt is a task seed. Every process gathers the iteration's
    prompts, plays the whole batch from the same seed, and returns its rows (its share of
    each minibatch, as the constrained bridge cuts them). Prompt = the system turn;
    completion = the turns after it; env_mask = 1 on what the model wrote."""
    sampler = torch.Generator().manual_seed(cfg.seed)
    shuffler = torch.Generator().manual_seed(cfg.seed)
    one_turn = reads_one_turn(WORLDS[ft.world], ft)

    def rollout_func(prompts, trainer):
        from accelerate.utils import gather_object
        everyone = [int(p) for p in gather_object(list(prompts))]
        model = trainer.accelerator.unwrap_model(trainer.model)
        seed = int(torch.randint(2**31, (1,), generator=sampler))
        model.eval()  # (the tiny prior has no dropout; a chat model's config may)
        start = time.perf_counter()
        batch = play(model, tokenizer, everyone, cfg.guided, cfg, ft, seed)
        trainer.cost["generation"] += time.perf_counter() - start
        model.train()
        rank, processes = trainer.accelerator.process_index, trainer.accelerator.num_processes
        order = torch.randperm(len(everyone), generator=shuffler).view(cfg.minibatches, -1)
        share = order.shape[1] // processes
        trainer.rows = order[:, rank * share:(rank + 1) * share].flatten().tolist()
        trainer.episodes = batch
        if one_turn:  # what scores this batch's rows as their turns were sampled, TRL's width
            written = [batch.transcripts[r].written for r in trainer.rows]
            width = max(map(len, written))
            trainer.written = torch.tensor([w + [0] * (width - len(w)) for w in written],
                                           device=trainer.accelerator.device)    # (n, C)
        rewards = sg.step_rewards(batch.steps.guides)                               # (N, T)
        guide_return = rewards.sum(1) / batch.steps.steps
        return {"prompt_ids": [batch.prompt for _ in trainer.rows],
                "completion_ids": [batch.transcripts[r].tokens for r in trainer.rows],
                "logprobs": None,  # TRL scores the completions itself, with the same model
                "env_mask": [batch.transcripts[r].written for r in trainer.rows],
                "success": [batch.steps.env_return[r].item() for r in trainer.rows],
                "guide_return": [guide_return[r].item() for r in trainer.rows]}
    rollout_func.streams = (sampler, shuffler)  # what a checkpoint keeps of the rollout
    return rollout_func


def head_logprobs(accelerator, model, hidden, temperature: float = 1.0) -> torch.Tensor:
    """log-softmax of the model's head over last hidden states (K, H) -> (K, V), float32: the
    head applied only where a loss reads it, under the trainer's mixed precision as the
    model's own forward applies it (outside that forward, accelerate's autocast is not on)."""
    head = accelerator.unwrap_model(model).get_output_embeddings()
    with accelerator.autocast():
        logits = head(hidden)
    return torch.log_softmax(logits.float() / temperature, -1)


PIECES_AT_ONCE = 16  # one-turn pieces per forward, of similar lengths (padding: turn_logprobs)


def turn_logprobs(accelerator, model, input_ids, written, temperature: float = 1.0,
                  entropy: bool = False, at_once: int = PIECES_AT_ONCE):
    """Per-token log-probs (B, C) of a completion whose turns were each sampled in a chat of
    its own (a player that reads one turn): input_ids (B, P + C), the prompt the same in
    every row; written (B, C), 1 on the replies. Each reply is scored with the prompt and the
    turn before it alone, as play sampled it: each turn and its reply is a piece, and the
    pieces, sorted by length, go `at_once` to a forward (through `model`: on P processes the
    DDP wrapper, whose backward all-reduces) after the prompt's keys and values (made again
    for each group: the prompt is short), so a piece is padded to its neighbours' length, not
    the longest piece's (ScienceWorld's pieces run from a few dozen tokens to a few hundred:
    one forward of a batch's pieces would be about 60% padding); the head only at the written
    tokens; 0 elsewhere. With `entropy`, also the sampling distribution's entropy there
    (B, C), else None."""
    from transformers import DynamicCache
    prompt, unwrapped = input_ids.shape[1] - written.shape[1], accelerator.unwrap_model(model)
    pieces = []  # (row, its first column, its end) of each turn and its reply
    for row, marks in enumerate(written.tolist()):
        start = 0
        for k in range(1, len(marks) + 1):  # a piece ends where a reply does
            if k == len(marks) or (marks[k - 1] and not marks[k]):
                if any(marks[start:k]):
                    pieces.append((row, start, k))
                start = k
    pieces.sort(key=lambda piece: piece[2] - piece[1])  # stable: the same batch, the same order
    logps = torch.zeros(written.shape, device=input_ids.device)
    entropies = torch.zeros(written.shape, device=input_ids.device) if entropy else None
    for first in range(0, len(pieces), at_once):
        group = pieces[first:first + at_once]
        width = max(end - start for _, start, end in group)
        ids = torch.zeros(len(group), width, dtype=torch.long, device=input_ids.device)
        mask = torch.zeros(len(group), prompt + width, dtype=torch.long, device=input_ids.device)
        scored = torch.zeros_like(ids, dtype=torch.bool)                        # (S, W)
        for k, (row, start, end) in enumerate(group):  # right-padded after the prompt
            ids[k, :end - start] = input_ids[row, prompt + start:prompt + end]
            mask[k, :prompt + end - start] = 1
            scored[k, :end - start] = written[row, start:end].bool()
        cache = DynamicCache(config=unwrapped.config)
        unwrapped(input_ids=input_ids[:1, :prompt], cache=cache, use_cache=True)
        cache.batch_repeat_interleave(len(group))
        hidden = model(input_ids=ids, attention_mask=mask, cache=cache, logits_to_keep=1,
                       output_hidden_states=True, use_cache=True).hidden_states[-1]  # (S, W, H)
        piece, column = scored.nonzero(as_tuple=True)  # a reply's token never starts its piece
        logp = head_logprobs(accelerator, model, hidden[piece, column - 1], temperature)  # (K, V)
        chosen = logp.gather(-1, ids[piece, column][:, None]).squeeze(-1)       # (K,)
        starts = torch.tensor([start for _, start, _ in group], device=ids.device)
        rows = torch.tensor([row for row, _, _ in group], device=ids.device)
        at = (rows[piece], starts[piece] + column)
        logps = logps.index_put(at, chosen)
        if entropy:
            entropies = entropies.index_put(at, -(logp.exp() * logp).sum(-1))
    return logps, entropies


def trl_head_compact(device: torch.device) -> bool:
    """Does TRL's fused head project only the scored positions here? On Triton's devices
    (CUDA or XPU with triton installed: trl/trainer/utils.py's `compact`); elsewhere, a CPU
    included, it projects every position of the batch."""
    from transformers.utils import is_triton_available
    return device.type in ("cuda", "xpu") and is_triton_available()


def written_head(trainer, rows: int, width: int) -> bool:
    """Does the loss apply the head itself, at the written tokens only? Where TRL's fused head
    would project every completion position (most of a training pass on a CPU), and only
    inside the loss (the minibatch's written mask set, for this batch)."""
    return (not trl_head_compact(trainer.accelerator.device) and trainer.written is not None
            and trainer.written.shape == (rows, width))


def make_trainer_class():
    class FreeTextGRPOTrainer(bridge.trainer_base_class()):
        """GRPOTrainer with selfguide's per-token advantages over free-text replies, the
        per-token log-probs over the whole vocabulary computed only at the tokens the model
        wrote, and each iteration's cost in its record."""
        cost = None  # seconds of this iteration: generation, scoring, update
        written = None  # (B, C) the loss mask of the minibatch being trained on, or with
        # one_turn of the rollout's rows being scored
        one_turn = False  # does the player read one turn (--window): set by main
        in_loss = False  # is the loss scoring a minibatch (else TRL, the whole batch)
        resumable = None  # what a checkpoint adds to TRL's: the prior's rows, the settings

        def _save_checkpoint(self, model, trial):
            """TRL's checkpoint (model, optimizer, scheduler, RNG, trainer state) and what a
            run resumed from it needs besides: the log so far and the rollout's random streams
            (the episodes of the iterations after it are the ones the run would have played).
            Written first: TRL writes trainer_state.json last, so a checkpoint that has it is
            whole (resume_point). None at the last step, where the run's own files follow. On
            P processes the main process writes it: they resume from one shared --out."""
            if self.state.global_step >= self.state.max_steps:
                return
            folder = (Path(self._get_output_dir(trial=trial))
                      / f"checkpoint-{self.state.global_step}")
            if self.args.should_save:
                folder.mkdir(parents=True, exist_ok=True)
                streams = [g.get_state().tolist() for g in self.rollout_func.streams]
                sg.write_atomic(folder / RESUME_FILE, json.dumps(
                    {**self.resumable, "records": self.records, "streams": streams}))
            super()._save_checkpoint(model, trial)

        def steps(self) -> sg.Rollouts:
            return self.episodes.steps

        def training_step(self, *args, **kwargs):
            """One optimizer step; its seconds less the generation's and the scoring's are the
            update's. The iteration's record gets its costs and the process's peak memory."""
            start = time.perf_counter()
            if self.cost is None or self.state.global_step % self.updates_per_iteration == 0:
                self.cost = {"generation": 0.0, "scoring": 0.0, "update": 0.0}
            before = self.cost["generation"] + self.cost["scoring"]
            loss = super().training_step(*args, **kwargs)
            self.cost["update"] += time.perf_counter() - start - (
                self.cost["generation"] + self.cost["scoring"] - before)
            self.records[-1].update({f"{k}_seconds": v for k, v in self.cost.items()},
                                    **peak_memory_gib(self.accelerator.device))
            return loss

        def _generate_and_score_completions(self, inputs):
            start, generation = time.perf_counter(), self.cost["generation"]
            output = super()._generate_and_score_completions(inputs)
            self.cost["scoring"] += (time.perf_counter() - start
                                     - (self.cost["generation"] - generation))
            return output

        def _compute_loss(self, model, inputs):
            self.written = inputs["completion_mask"] * inputs["tool_mask"]  # (B, C)
            self.in_loss = True
            try:
                if self.beta != 0.0 and inputs["ref_per_token_logps"].isnan().any():
                    # once a minibatch: TRL hands each pass the same minibatch, kept in it
                    inputs["ref_per_token_logps"] = self.reference_logprobs(inputs)
                return super()._compute_loss(model, inputs)
            finally:
                self.written, self.in_loss = None, False

        def reference_logprobs(self, inputs) -> torch.Tensor:
            """The reference's log-probs (B, C) of a minibatch, scored as the loss scores the
            policy's: the same rows, padding and path. Scored outside the loss, where TRL asks
            for them, they would differ from the policy's in the last bits (a one-turn batch's
            pieces grouped over the whole batch: up to 4e-6 on a ScienceWorld batch; on a CPU,
            TRL's full head). At the first step, the policy still the reference, the KL's
            gradient would be that rounding alone (a norm of about 4e-7), and on a minibatch
            with nothing to teach (every advantage 0) AdamW, which divides a step by the
            gradient's own scale, would make it a step of about the learning rate in each
            weight. Scored here, the two agree to the last bit on a CPU, and that gradient
            is 0."""
            ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)     # (B, P + C)
            mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1)
            with torch.no_grad():
                return self._get_per_token_logps_and_entropies(
                    self.ref_model, ids, mask, inputs["completion_ids"].shape[1])[0]

        def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask,
                                               logits_to_keep, batch_size=None,
                                               compute_entropy=False, **kwargs):
            """TRL's log-probs of the completion's tokens (B, C) at --temperature, and their
            entropies, on a CPU with the head (49k words wide for SmolLM2) applied only where
            the loss reads them, the tokens the model wrote (written_head). Elsewhere TRL's
            own: its scoring of a batch outside the loss, and on an accelerator, where its
            fused head already projects only the scored positions, in tiles. A player that
            reads one turn: always turn_logprobs, each reply under the turn it was sampled
            from (a batch whose written tokens are not known is refused: TRL's own forward
            would read the whole completion as one chat). The reference outside the loss:
            NaN, never read (the loss scores it itself: reference_logprobs)."""
            if not self.in_loss and model is self.ref_model:
                return torch.full((len(input_ids), logits_to_keep), float("nan"),
                                  device=input_ids.device), None, None
            if self.one_turn:
                if self.written is None or self.written.shape != (len(input_ids),
                                                                  logits_to_keep):
                    raise RuntimeError("a batch of one-turn replies whose written tokens are "
                                       "not known: it cannot be scored as it was sampled")
                logps, entropies = turn_logprobs(self.accelerator, model, input_ids,
                                                 self.written, self.temperature, compute_entropy)
                return logps, entropies, None
            if not written_head(self, len(input_ids), logits_to_keep):
                return super()._get_per_token_logps_and_entropies(
                    model, input_ids, attention_mask, logits_to_keep, batch_size,
                    compute_entropy, **kwargs)
            # through `model` itself (on P processes the DDP wrapper, whose backward
            # all-reduces), the head at the last position only; its last hidden state is normed
            hidden = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=1,
                           output_hidden_states=True, use_cache=False).hidden_states[-1]
            hidden = hidden[:, -logits_to_keep - 1:-1]       # (B, C, H): position p predicts p+1
            row, column = self.written.bool().nonzero(as_tuple=True)
            logp = head_logprobs(self.accelerator, model, hidden[row, column], self.temperature)
            target = input_ids[:, -logits_to_keep:][row, column]
            scored = torch.zeros(self.written.shape, device=input_ids.device)
            logps = scored.index_put((row, column), logp.gather(-1, target[:, None]).squeeze(-1))
            entropies = None
            if compute_entropy:
                entropies = scored.index_put((row, column), -(logp.exp() * logp).sum(-1))
            return logps, entropies, None

        def token_advantages(self, advantages, width: int) -> torch.Tensor:
            rows = spread_advantages(self.episodes, advantages, self.rows)
            return torch.tensor([r + [0.0] * (width - len(r)) for r in rows],
                                device=self.accelerator.device)

        def episode_extras(self) -> dict:
            return shares(self.episodes)

    return FreeTextGRPOTrainer


def peak_memory_gib(device: torch.device) -> dict:
    """The most memory this process has held so far, in GiB: its peak resident set, and on a
    GPU the most its caching allocator has reserved there (what another run beside it cannot
    have; the CUDA context's few hundred MB are not in it)."""
    import resource
    peaks = {"peak_memory_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}  # KiB
    if device.type == "cuda":
        peaks["peak_gpu_memory_gib"] = torch.cuda.max_memory_reserved(device) / 2**30
    return peaks


# --- Checkpoints: a run stopped midway resumes where its last checkpoint left it ---

RESUME_FILE = "selfguide_resume.json"
HOW_RUN = ("show", "save_every", "out")  # may differ on resuming; any other setting may move
# the numbers (threads: the order of a CPU's sums; eval_batch: padding under bf16; device)


def resume_point(out: Path, settings: dict):
    """The last whole checkpoint in --out (its folder, and its state), or None; one clear line
    if it is another run's (settings other than how it runs differ)."""
    whole = [c for c in out.glob("checkpoint-*") if (c / RESUME_FILE).exists()
             and (c / "trainer_state.json").exists() and c.name.split("-")[-1].isdigit()]
    if not whole:
        return None, None
    last = max(whole, key=lambda c: int(c.name.split("-")[-1]))
    state = json.loads((last / RESUME_FILE).read_text())
    differ = sorted(k for k in settings.keys() | state["settings"].keys()
                    if k not in HOW_RUN and settings.get(k) != state["settings"].get(k))
    if differ:
        raise SystemExit(f"error: {last} is a checkpoint of another run (it differs in "
                         f"{', '.join('--' + k.replace('_', '-') for k in differ)}): give "
                         f"another --out, or delete {out}/checkpoint-* to start this one over")
    return last, state


def grpo_config(cfg: sg.Config, ft: FreeText, out: Path, device, positions: int):
    """The bridge's GRPOConfig, with the free-text precision and --loss. max_completion_length,
    which only TRL's own generation and its dr_grpo loss read: under bnpo the model's position
    count; under dr_grpo the most tokens an episode's replies can hold, --max-steps x
    --reply-tokens, the constant each written token's loss is divided by (with the batch's
    rollouts), whatever its reply's length."""
    longest = cfg.max_steps * ft.reply_tokens if ft.loss == "dr_grpo" else positions
    updates = cfg.minibatches * cfg.update_epochs  # optimizer steps an iteration
    saving = dict(save_strategy="steps", save_steps=ft.save_every * updates,
                  save_total_limit=2) if ft.save_every else {}  # two: one is whole, if a save breaks
    return bridge.grpo_config(cfg, out, device, max_completion_length=longest, bf16=ft.bf16,
                              loss_type=ft.loss, **saving)


# --- The command line, and one run ---

SHORT_NAMES = {"smollm2": (smollm2.FOLDER, f"{smollm2.INSTALL} && python examples/smollm2.py")}


def parse_config(argv=None, own=None, description: str = __doc__.split("\n\n")[0]):
    """selfguide.py's settings (those TRL cannot run refused as the bridge refuses them) and
    FreeText's, and a harness's own (the dataclass `own`, made third when given); one line for
    a bad one."""
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    sg.add_settings(parser, sg.Config)
    sg.add_settings(parser, FreeText)
    if own:
        sg.add_settings(parser, own)
    # two layers: a step's tokens are not at fixed offsets in a chat (replies vary in length),
    # and one GPT-2 layer cannot find the last observation's cell (its cloning loss stalls).
    # Temperature 0.5, 100 iterations: chosen on seed 0 (at temperature 1 the tiny prior's
    # sampled replies reach almost no goal, and GRPO's groups hold no success to learn from)
    parser.set_defaults(n_layer=2, temperature=0.5, iterations=100)
    chosen, _ = parser.parse_known_args(argv)
    parser.set_defaults(**WORLD_DEFAULTS.get(chosen.world, {}))  # before any value is read
    args = sg.parse_settings(parser, argv)  # with --paper-faithful's defaults
    names = {f.name for f in dataclasses.fields(FreeText)}
    harness = {f.name for f in dataclasses.fields(own)} if own else set()
    try:
        ft = FreeText(**{k: v for k, v in args.items() if k in names})
        cfg = sg.Config(**{k: v for k, v in args.items() if k not in names | harness})
        mine = own(**{k: v for k, v in args.items() if k in harness}) if own else None
    except ValueError as error:
        parser.error(str(error))
    given = argv if argv is not None else sys.argv[1:]
    if any(a.startswith("--guide-temperature") for a in given) and \
            cfg.guide_temperature != cfg.temperature:
        parser.error("TRL scores every token at one temperature: a free-text reply is sampled "
                     "at --temperature, its assessment too (no --guide-temperature)")
    try:
        cfg = bridge.check_config(cfg)
    except SystemExit as refusal:
        parser.error(str(refusal).removeprefix("error: "))
    if ft.world == "maze" and (ft.window or ft.corpus != "detours"):
        parser.error("--window and --corpus are ScienceWorld's (a maze's turn shows all the "
                     "player needs, and its demonstrator takes no detours)")
    if ft.world != "maze" and ft.example:
        parser.error("--example is the maze's format (its example walk); another world's system "
                     "turn says its own (ScienceWorld's lists example actions)")
    if not ft.model and not hasattr(WORLDS[ft.world], "prior_demonstrations"):
        parser.error(f"--world {ft.world} has no demonstrator to clone the tiny prior from: "
                     f"give a chat model (--model)")
    if ft.world == "scienceworld" and cfg.eval_tasks > science_world.VARIATIONS["test"]:
        parser.error(f"--eval-tasks: ScienceWorld's find-* tasks have "
                     f"{science_world.VARIATIONS['test']} test (and dev) variations")
    cfg = dataclasses.replace(cfg, guide_temperature=cfg.temperature)
    return (cfg, ft, mine) if own else (cfg, ft)


def model_folder(name: str) -> str:
    """--model's folder: a short name's (a model made here by a command of examples/), in one
    clear line if that command has not run yet; any other name as given."""
    if name not in SHORT_NAMES:
        return name
    folder, command = SHORT_NAMES[name]
    if not (Path(folder) / "config.json").exists():
        raise SystemExit(f"error: --model {name} reads {folder}, which is not there yet: "
                         f"{command}")
    return folder


def report(trainer, cfg: sg.Config, ft: FreeText, tokenizer, out: Path, before: list,
           minutes: float) -> list:
    """The main process's files (model and tokenizer, log.jsonl, summary.md) and table; the
    run's checkpoints, once its model is saved, are deleted."""
    trainer.records[-1].update(peak_memory_gib(trainer.accelerator.device))  # evaluations in
    trainer.model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    sg.write_atomic(out / "log.jsonl", "".join(json.dumps(r) + "\n" for r in trainer.records))
    sg.write_atomic(out / "selfguide_config.json", json.dumps(
        {**dataclasses.asdict(cfg), **dataclasses.asdict(ft)}, indent=2))
    rows = before + [
        (f"trained on TRL, free text ({cfg.variant}), final policy", trainer.records[-1]["eval"]),
        (f"trained on TRL, free text ({cfg.variant}), mean of the last {cfg.final_evals} "
         f"evaluations", sg.final_metrics(trainer.records, cfg.final_evals))]
    table = sg.summary_table(rows)
    failures = "\n".join(f"{name}: unreadable assessments {sg.metric_text(m.get('unreadable'), 3)}, "
                         f"replies without a move {m['unparseable']:.3f}" for name, m in rows)
    sg.write_atomic(out / "summary.md", f"{table}\n\n{failures}\n")
    for checkpoint in out.glob("checkpoint-*"):
        shutil.rmtree(checkpoint)
    processes = trainer.accelerator.num_processes
    on = f" on {processes} processes, whose weights agree" if processes > 1 else ""
    print(f"\n{table}\n\n{failures}\n\ngreedy, {cfg.eval_tasks} {tasks_played(ft)}; TRL "
          f"{bridge.TRL_VERSION}{on}, {minutes:.1f} min of training; model, tokenizer, config "
          f"and log.jsonl in {out}")
    if cfg.show:
        print("\n" + show_episodes(trainer.model, tokenizer, cfg, ft))
    return rows


def tasks_played(ft: FreeText) -> str:
    """What --mazes names in this world: the held-out or tuning mazes, or ScienceWorld's test
    or dev variations."""
    return WORLDS[ft.world].task_sets[ft.mazes]


def show_episodes(model, tokenizer, cfg: sg.Config, ft: FreeText) -> str:
    """The first --show episodes of the --mazes, greedy, as the model saw and wrote them."""
    batch = play(model, tokenizer, evaluated_seeds(cfg, ft, cfg.show),
                 cfg.guided, cfg, ft, 0, greedy=True)
    chats = []
    for i, transcript in enumerate(batch.transcripts):
        text = tokenizer.decode(batch.prompt + transcript.tokens, skip_special_tokens=False)
        outcome = "reached the goal" if batch.steps.env_return[i] > 0 else "did not reach the goal"
        if batch.scores is not None:
            outcome = f"score {batch.scores[i].item()}"
        chats.append(f"{tasks_played(ft)} {i}: {outcome} in {batch.steps.steps[i].item()} "
                     f"turns\n{text}")
    return "\n\n".join(chats)


def main(argv=None):
    bridge.check_trl()
    cfg, ft = parse_config(argv)
    if ft.world == "scienceworld":
        science_world.check_installed()
    sg.check_transformers(sg.transformers.__version__)
    state, device = bridge.start_processes(cfg)
    out = Path(cfg.out or f"runs/freetext-{cfg.variant}-seed{cfg.seed}")
    sg.checked_folder(ft.freetext_cache, "--freetext-cache")
    sg.checked_folder(out, "--out")
    from datasets import Dataset
    sg.seed_everything(cfg.seed)
    folder = model_folder(ft.model)
    if not folder:
        with state.main_process_first():  # the main process clones the prior, the others load it
            folder = str(load_or_clone_prior(cfg, ft, device))
    model, tokenizer = load_model(folder, device)  # TRL's reference: this path
    freeze_below(model, ft.train_layers)
    positions = model.config.max_position_embeddings  # the longest completion it can hold
    settings = {**dataclasses.asdict(cfg), **dataclasses.asdict(ft)}
    checkpoint, resumed = resume_point(out, settings) if ft.save_every else (None, None)
    before = [tuple(row) for row in resumed["before"]] if resumed else []
    if checkpoint and state.is_main_process:
        tqdm.write(f"resuming from {checkpoint} (iteration {len(resumed['records'])} of "
                   f"{cfg.iterations}); delete {out}/checkpoint-* to start over")
    if state.is_main_process and not resumed and ft.prior_rows:
        before = [("prior, no guide (ReAct)", evaluate(model, tokenizer, cfg, ft, False)),
                  ("prior, guide (ReAct w/ SG)", evaluate(model, tokenizer, cfg, ft, True))]
        for name, metrics in before:
            tqdm.write(f"{name}: {describe(metrics)}")

    def make_trainer():
        trainer = make_trainer_class()(
            model=model, processing_class=tokenizer,
            reward_funcs=[bridge.success_reward, bridge.guide_reward],
            args=grpo_config(cfg, ft, out, device, positions),
            train_dataset=Dataset.from_dict({"prompt": [str(s) for s in task_seeds(cfg, ft)]}),
            rollout_func=make_rollout_func(cfg, ft, tokenizer), selfguide_config=cfg)
        trainer.one_turn = reads_one_turn(WORLDS[ft.world], ft)
        evaluation = (lambda m: evaluate(m, tokenizer, cfg, ft, cfg.guided))
        for callback in bridge.selfguide_callbacks(trainer, cfg, evaluation, describe,
                                                   "free text", ft.mazes if ft.world == "maze"
                                                   else tasks_played(ft)):
            trainer.add_callback(callback)
        trainer.resumable = {"settings": settings, "before": before}
        if resumed:  # the log so far, and the rollout's streams where the checkpoint left them
            trainer.records = resumed["records"]
            for stream, kept in zip(trainer.rollout_func.streams, resumed["streams"]):
                stream.set_state(torch.tensor(kept, dtype=torch.uint8))
        return trainer

    def save(trained):
        trained.save_pretrained(out)
        tokenizer.save_pretrained(out)
        print(f"\nstopped by Ctrl-C; the model trained so far is saved in {out}")
    return bridge.train_and_report(
        make_trainer, state,
        lambda trainer, minutes: report(trainer, cfg, ft, tokenizer, out, before, minutes), save,
        resume=str(checkpoint) if checkpoint else None)


if __name__ == "__main__":
    main()
