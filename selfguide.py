"""Self-Guide in one file: a language agent that judges its own progress, and learns from it.

Re-implements "Co-Evolution of Policy and Internal Reward for Language Agents" (Self-Guide,
arXiv 2604.03098) with a tiny GPT-2 in a text maze (toy_env.py) that scores every guide. At
each step t the agent writes a one-word self-assessment, the guide z_t (positive / neutral /
negative), then an action a_t conditioned on it. The paper pays the word back as a step reward
r_t = g(z_t) in {+0.1, 0, -0.1}, weighed by a trust schedule lambda(u); the default run divides
it by the episode's length and pays each move the rewards that judge it and later moves.

    python selfguide.py                     # GRPO w/ SG & GR, guarded; Stage 0 prior included
    python selfguide.py --variant grpo      # R_env only; --variant sg: guides, lambda = 0
    python selfguide.py --paper-faithful    # the paper's objective: watch the guide collapse
    python selfguide.py --show 1            # train, then watch a held-out episode step by step
    python selfguide.py --help              # every setting, with its default

The default is GRPO w/ SG & GR with guards and step credit, not the paper's objective
(--paper-faithful is), in a maze whose hot/cold cue the guide reads: a mature judge, in the
pretrained LLM's role. Guides that must learn are experiments/REPORT.md's, sections 8-14.

What the default run trains (a test reads these lines and implements them on its own).
Iteration u of U = 150; rollout i of a group of G = 8 on one task, T_i moves, R_env_i in {0, 1}:

    lambda(u) = 0 for u <= U/2 (the first half is GRPO w/ SG), rising linearly to 1 at 5U/8,
                1 until 7U/8, falling linearly to 0 at U                (the trapezoid)
    r_i,t     = g(z_i,t) / T_i                          (each reward over the episode's length)
    A_env_i   = (R_env_i - mean_G R_env) / (std_G R_env + eps), 0 where the group's are equal
    action a_i,t: A_env_i + lambda(u) (S_i,t - mean_G S_.,t) / (std_G I + eps)
                  S_i,t = r_i,t+1 + r_i,t+2 + ... (0 past the end), I_j = sum_t r_j,t (z_1's
                  too); the second term 0 where the group's I are equal
    guide z_i,t:  A_env_i
    loss, per minibatch (8 optimiser steps an iteration: 2 passes of 4 minibatches): the mean
          over its written tokens w of -min(rho_w A_w, clip(rho_w, 0.8, 1.2) A_w)
          + beta_w (e^x - x - 1), rho_w = pi(w) / pi_old(w), x = log pi_prior(w) - log pi(w),
          each pi at w's sampling temperature (guides 0.1, actions 1); beta 0.1 on guides, 0
          on actions.

So the 0.1 of g cancels in the division by std_G I; and a guide the prior is sure of, sampled
at 0.1, has a gradient of about 0 (departure 7): the guide stays the prior's, and the moves are
what GRPO trains. --paper-faithful trains the paper's objective instead:

    r_i,t = g(z_i,t),  R_i = R_env_i + lambda(u) sum_t r_i,t
    every token of rollout i, guide and action: (R_i - mean_G R) / (std_G R + eps), 0 where
    the group's R are equal; beta 0; guides sampled at temperature 1.

Departures from the paper (README's "Departures" says why; --paper-faithful takes back 2, 5, 7):
1. A Stage 0 prior, cloned from an imperfect demonstrator, stands in for the pretrained LLM.
2. Guards: a KL to the prior on guides (--kl-guide), guides trained by R_env's advantage
   (--guide-advantage env), r_t over the length (--internal-return mean).
3. Constrained decoding: the guide slot samples among the guides, the action slot the moves.
4. The schedule's phases are fractions of training; the group std is the population one.
5. Step-level credit: the action formula above (--credit step).
6. The guide is one word that judges the move just made.
7. Guides are sampled at temperature 0.1 in training (--guide-temperature), and scored there.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import hashlib
import json
import math
import os
import random
import shutil
import signal
import time
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F
import transformers
from tqdm.auto import tqdm

import toy_env
from toy_env import ACTIONS, GUIDES, GridWorld

transformers.utils.logging.disable_progress_bar()  # a tiny model loads at once: no bars


# --- Settings: one dataclass, each field documenting itself; checked before any work ---
def setting(default, help: str, choices=None):  # a Config field that documents itself (--help)
    return dataclasses.field(default=default, metadata={"help": help, "choices": choices})


@dataclasses.dataclass
class Config:
    # the maze (toy_env.GridWorld)
    size: int = setting(12, "maze side length")
    wall_prob: float = setting(0.3, "probability that a cell is a wall")
    min_distance: int = setting(18, "shortest path from start to goal is at least this long")
    max_steps: int = setting(26, "moves before an episode is truncated")
    cue: bool = setting(True, "show a hot/cold cue, so moves can be judged (--no-cue: cannot)")
    # the policy: a tiny GPT-2
    n_layer: int = setting(1, "transformer layers")
    n_embd: int = setting(64, "embedding width")
    n_head: int = setting(4, "attention heads")
    # Stage 0: the prior clones an imperfect demonstrator (departure 1)
    prior_episodes: int = setting(8000, "demonstrator episodes to clone (each guided and not)")
    prior_epochs: int = setting(2, "passes over the demonstrations")
    prior_batch: int = setting(64, "episodes per cloning update")
    prior_lr: float = setting(3e-3, "peak learning rate of cloning (cosine decay)")
    cue_noise: float = setting(toy_env.CUE_NOISE, "share of its moves the demonstrator misjudges")
    # Self-Guide
    variant: str = setting("sg_gr", "grpo: R_env only; sg: guides, lambda 0; sg_gr: and their "
                                    "reward", ["grpo", "sg", "sg_gr"])
    schedule: str = setting("trapezoid", "lambda(u): the paper's trapezoid, or an ablation",
                            ["trapezoid", "immediate", "never", "no_anneal"])
    enter_at: float = setting(0.5, "fraction of training at which lambda starts to rise")
    credit: str = setting("step", "an action's advantage: trajectory, R's (the paper), or "
                                  "step: departure 5", ["trajectory", "step"])
    internal_return: str = setting("mean", "sum: the paper's; mean: a guard", ["sum", "mean"])
    guide_advantage: str = setting("env", "guide tokens' advantage: composite (the paper) or "
                                          "env (a guard)", ["composite", "env"])
    kl_guide: float = setting(0.1, "weight of the KL to the prior on guide tokens (a guard)")
    guide_temperature: float = setting(0.1, "sampling temperature of guides (departure 7)")
    # GRPO
    iterations: int = setting(150, "GRPO iterations")
    tasks_per_iter: int = setting(16, "tasks (groups) per iteration")
    group_size: int = setting(8, "rollouts per task, G")
    lr: float = setting(2e-4, "AdamW learning rate of GRPO")
    update_epochs: int = setting(2, "passes over each iteration's rollouts")
    minibatches: int = setting(4, "minibatches per pass; each after the first lets the clip act")
    clip: float = setting(0.2, "PPO clip range of the importance ratio")
    advantage: str = setting("grpo", "grpo: (R - mean) / std; drgrpo: R - mean", ["grpo", "drgrpo"])
    max_grad_norm: float = setting(1.0, "gradient clipping")
    kl_action: float = setting(0.0, "weight of the KL to the prior on action tokens")
    temperature: float = setting(1.0, "sampling temperature of actions in training")
    # evaluation
    eval_tasks: int = setting(500, "held-out tasks (a seed range never used in training)")
    eval_every: int = setting(10, "iterations between held-out evaluations")
    final_evals: int = setting(3, "the final score is the mean of this many last evaluations")
    # bookkeeping
    prior_cache: str = setting("runs/priors", "folder of the cached priors, keyed by settings")
    seed: int = setting(0, "seeds torch, Python's random, the tasks and the prior")
    device: str = setting("auto", "auto, cpu, cuda or cuda:N")
    threads: int = setting(0, "CPU threads for torch (0: torch's default)")
    out: str = setting("", "run folder (default runs/<variant>-seed<seed>)")
    init_from: str = setting("", "start from this saved policy instead of the prior")
    eval_only: bool = setting(False, "only evaluate --init-from (or the prior), and exit")
    show: int = setting(0, "print this many held-out episodes step by step (greedy)")

    def __post_init__(self):
        check_config(self)  # one clear line for a setting that cannot run, before any work

    @property
    def guided(self) -> bool:  # does the agent write a guide before each action?
        return self.variant != "grpo"

    # The seams: experiments/research.py's Config overrides these five for the report's variants
    # and controls: make_env (the maze, its demonstrator), prior_settings (Stage 0's cache key),
    # cloned_enough (stop cloning now?), pays_internal_reward (is lambda(u) the schedule's?) and
    # advantages (r_t and each token's, given the run's TrainState). Moved out, as the default
    # never runs them: the oracle and random controls (to research.py's internal_rewards) and
    # the reading of a guide from free text (to examples/trl_freetext.py's read_guide).
    @property
    def pays_internal_reward(self) -> bool:  # GRPO w/ SG & GR pays the guide's reward
        return self.variant == "sg_gr"

    def make_env(self) -> GridWorld:
        return GridWorld(self.size, self.wall_prob, self.min_distance, self.max_steps,
                         cue=self.cue)

    def prior_settings(self) -> dict:
        return {name: getattr(self, name) for name in (
            "size wall_prob min_distance max_steps cue cue_noise n_layer n_embd n_head "
            "prior_episodes prior_epochs prior_batch prior_lr seed").split()}

    def cloned_enough(self, policy, updates: int) -> bool:  # no: --prior-epochs decide
        return False

    def advantages(self, batch, trust: float, iteration: int, state) -> tuple:  # (N, L), (N,)
        return iteration_advantages(batch, self, trust)


PAPER_FAITHFUL = {"kl_guide": 0.0, "internal_return": "sum", "guide_advantage": "composite",
                  "credit": "trajectory", "guide_temperature": 1.0}


def flag(name: str) -> str:
    return name.replace("_", "-")  # group_size -> group-size


TRAIN_SEED_RANGE = PRIOR_SEED_BASE = 10**8  # tasks: training [0, 10^8), demonstrations 10^8 on,
EVAL_SEED_BASE = toy_env.HELD_OUT_TASKS     # held-out 10^9 on


def check_config(cfg: Config):  # a ValueError, one clear line, for a setting that cannot run
    for f in dataclasses.fields(cfg):  # nan or inf would train, silently, on garbage
        if f.type == "float" and not math.isfinite(getattr(cfg, f.name)):
            raise ValueError(f"--{flag(f.name)} must be a finite number")
        if f.metadata["choices"] and getattr(cfg, f.name) not in f.metadata["choices"]:
            raise ValueError(f"--{flag(f.name)} is one of {', '.join(f.metadata['choices'])}")
    for name in ["max_steps", "n_layer", "n_embd", "n_head", "prior_episodes", "prior_epochs",
                 "prior_batch", "iterations", "tasks_per_iter", "update_epochs", "minibatches",
                 "eval_tasks", "eval_every", "final_evals"]:
        if getattr(cfg, name) < 1:
            raise ValueError(f"--{flag(name)} must be at least 1")
    first = PRIOR_SEED_BASE + cfg.seed * 10**6  # the demonstrations' first task seed
    for wrong, message in [
            (cfg.group_size < 2, "--group-size must be at least 2: a group of one rollout has no "
                                 "baseline, so every advantage would be zero"),
            (cfg.show < 0, "--show takes a count of episodes (0 or more)"),
            (cfg.n_embd % cfg.n_head != 0, "--n-embd must be divisible by --n-head"),
            (not 0 <= cfg.enter_at <= 1 or not 0 <= cfg.cue_noise <= 1,
             "--enter-at and --cue-noise are in [0, 1]"),
            (min(cfg.temperature, cfg.guide_temperature, cfg.clip, cfg.lr, cfg.prior_lr,
                 cfg.max_grad_norm) <= 0, "--temperature, --guide-temperature, --clip, --lr, "
                                          "--prior-lr and --max-grad-norm must be positive"),
            (min(cfg.kl_guide, cfg.kl_action) < 0, "KL weights must not be negative"),
            (cfg.minibatches > cfg.tasks_per_iter * cfg.group_size,
             "--minibatches cannot exceed the rollouts per iteration"),
            (EVAL_SEED_BASE - cfg.prior_episodes < first < EVAL_SEED_BASE + cfg.eval_tasks,
             f"--seed {cfg.seed} would clone its prior on the held-out mazes: choose another")]:
        if wrong:
            raise ValueError(message)
    cfg.make_env()  # the environment's own checks, with its own messages


# --- Self-Guide: guide-to-reward conversion (Sec. 3, r_t = g(z_t)) ---
GUIDE_REWARD = {"positive": 0.1, "neutral": 0.0, "negative": -0.1}


def guide_to_reward(guide: str) -> float:
    """r_t = g(z_t): +0.1 for "positive", 0 for "neutral", -0.1 for "negative"; anything else
    (None too) is unreadable and counts as neutral: 0."""
    return GUIDE_REWARD.get(guide, 0.0)


def step_rewards(guides: torch.Tensor) -> torch.Tensor:
    """r_t = g(z_t) for every step of a batch: guides (N, T) index GUIDES (the guide written at
    step t; -1 where none is) -> r_t (N, T), 0 where none is. z_1 judges no move, yet its reward
    is paid as any other: it enters the internal return I_j (under step credit the scale of
    every step's credit, std_j I_j), though no action's reward-to-go."""
    table = torch.tensor([guide_to_reward(word) for word in GUIDES] + [0.0],
                         device=guides.device)  # index -1 reads the last entry
    return table[guides]


def length_neutral(rewards: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
    """Guard (--internal-return mean): each r_t divided by its episode's length, so that the
    episode's internal return is the mean of its rewards, not their sum. rewards (N, T) and
    steps (N,) -> (N, T); an episode of 0 steps is divided by 1."""
    return rewards / steps.clamp(min=1)[:, None]


# --- Self-Guide: stage-wise trust schedule lambda(u) ("trust follows competence") ---
def trust_schedule(iteration: int, total: int, kind: str = "trapezoid",
                   enter_at: float = 0.5) -> float:
    """lambda(u) for training iteration u in 1..total.

    trapezoid (the paper, 80 iterations: 0-40 warm-up at 0, 40-50 linear to 1, 50-70 at 1,
    70-80 linear back to 0), here as fractions of training, with f = u / total:
    rise = clip((f - enter_at) / (1/8), 0, 1), fall = clip((1 - f) / (1/8), 0, 1) and
    lambda = min(rise, fall): 0 until enter_at (0.5), 1 from enter_at + 1/8 to 7/8, 0 at the
    last iteration. no_anneal is the rise alone; immediate is 1 throughout; never is 0
    throughout. Any other kind is a ValueError that names the four."""
    if kind == "never":
        return 0.0
    if kind == "immediate":
        return 1.0
    fraction, ramp = iteration / total, 0.125  # f = u / total
    rise = min(max((fraction - enter_at) / ramp, 0.0), 1.0)
    if kind == "no_anneal":
        return rise
    if kind == "trapezoid":
        return min(rise, max((1.0 - fraction) / ramp, 0.0))  # rise <= 1 caps the fall
    raise ValueError(f"unknown trust schedule {kind!r}; use trapezoid, immediate, never or "
                     f"no_anneal")


def trust_at(cfg: Config, iteration: int) -> float:
    """lambda(u) of this run: its schedule where an internal reward is paid, else 0."""
    return trust_schedule(iteration, cfg.iterations,
                          cfg.schedule if cfg.pays_internal_reward else "never", cfg.enter_at)


# --- Self-Guide: composite return (Sec. 3, R(tau; u) = R_env(tau) + lambda(u) * sum_t r_t) ---
def composite_return(env_return, rewards, trust: float):
    """R = R_env + trust * internal_return, internal_return = sum_t r_t (0 for a step without
    a guide). env_return (N,), rewards (N, T) -> (R, internal_return), each (N,). --credit
    trajectory (the paper) trains on R's group advantage; the default's step credit does not."""
    internal_return = rewards.sum(1)
    return env_return + trust * internal_return, internal_return


# --- The episode: one token stream [<bos> <mode> o_1 z_1 a_1 o_2 z_2 a_2 ...] ---
# Every token records its slot: context (read), guide or action (written). Masks come from slots.
SLOT_CONTEXT, SLOT_GUIDE, SLOT_ACTION = 0, 1, 2
# One word, one token; the mode token says whether the episode has a guide slot.
SPECIAL = ["<pad>", "<unk>", "<bos>", "<eos>", "<guided>", "<unguided>"]
WORDS = SPECIAL + list(GUIDES) + list(ACTIONS) + list(toy_env.OBSERVATION_VOCAB)
WORD_ID = {word: i for i, word in enumerate(WORDS)}
PAD, _, BOS, EOS, GUIDED, UNGUIDED = range(len(SPECIAL))  # in SPECIAL's order
GUIDE_IDS = [WORD_ID[w] for w in GUIDES]
ACTION_IDS = [WORD_ID[w] for w in ACTIONS]
WRITABLE_IDS = GUIDE_IDS + ACTION_IDS  # the only words the agent ever writes
assert PAD == SLOT_CONTEXT == 0  # right-padding a stream with zeros pads tokens and slots alike


def slot_vocab_mask(device) -> torch.Tensor:
    """(3, W) bool, rows indexed by slot (SLOT_CONTEXT, SLOT_GUIDE, SLOT_ACTION), the last
    axis by the writable words in WRITABLE_IDS order (the three guides, then the four moves): True
    where the slot may hold the word. The guide slot holds only guides, the action slot only
    moves; the context row is all True (context is never sampled or scored)."""
    mask = torch.zeros(3, len(WRITABLE_IDS), dtype=torch.bool, device=device)
    mask[SLOT_CONTEXT] = True
    mask[SLOT_GUIDE, :len(GUIDE_IDS)] = True
    mask[SLOT_ACTION, len(GUIDE_IDS):] = True
    return mask


@lru_cache(maxsize=2**16)  # mazes repeat their observations
def observation_ids(observation: str) -> tuple:  # (token ids, the cell: R x MAX_SIZE + C)
    row, column = toy_env.parse_observation(observation)[0]
    return tuple(WORD_ID[word] for word in observation.split()), row * toy_env.MAX_SIZE + column


# --- Policy: a tiny GPT-2 ---
def episode_length(cfg: Config) -> int:  # <bos> <mode>, then per step o_t's words, z_t, a_t
    return 2 + cfg.max_steps * (cfg.make_env().observation_length + 2)


def vocab_size(cfg: Config) -> int:  # WORDS up to the last the maze can show
    return len(WORDS) - len(toy_env.OBSERVATION_VOCAB) + cfg.make_env().words


def make_policy(cfg: Config):
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(
        vocab_size=vocab_size(cfg), n_positions=episode_length(cfg), n_embd=cfg.n_embd,
        n_layer=cfg.n_layer, n_head=cfg.n_head, bos_token_id=BOS, eos_token_id=EOS,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,  # rollout and update: one network
        activation_function="gelu_pytorch_tanh",  # GPT-2's tanh GELU, one fused kernel
        use_cache=False))  # training passes keep no KV cache; the rollout asks for one


def writable_logits(policy, tokens, cache=None) -> torch.Tensor:
    """(N, L) -> (N, L, W) by transformers' forward (with a cache, the new tokens only)."""
    return policy(tokens, cache=cache, use_cache=cache is not None).logits[..., WRITABLE_IDS]


# --- Rollout: all episodes advance together, one token stream each, KV-cached ---
@dataclasses.dataclass
class Rollouts:
    """A batch of N finished episodes; T = max_steps, L = their token length."""
    tokens: torch.Tensor         # (N, L) <pad> after an episode ends
    slots: torch.Tensor          # (N, L) SLOT_GUIDE / SLOT_ACTION where the policy wrote
    logprobs: torch.Tensor       # (N, L) log-prob under the sampling distribution; 0 in context
    guides: torch.Tensor         # (N, T) index into GUIDES of the guide written; -1 if none
    truths: torch.Tensor         # (N, T) index into GUIDES of the true progress z_t judges
    cells: torch.Tensor          # (N, T) the cell o_t names, row x MAX_SIZE + column; -1 after
    env_return: torch.Tensor     # (N,) R_env: 1.0 on success
    steps: torch.Tensor          # (N,) moves taken
    optimal: torch.Tensor        # (N,) shortest path at the start


@torch.no_grad()  # playing needs no gradients; the update recomputes what it trains
def rollout(policy, task_seeds, guided: bool, cfg: Config, generator=None,
            greedy=False) -> Rollouts:
    """One episode per task seed, all in one batch, each step costing only its new tokens (a
    DynamicCache): o_t, then z_t ~ pi(. | h_{t-1}, o_t) if guided, then a_t ~ pi(. | ..., z_t)."""
    from transformers import DynamicCache
    device = next(policy.parameters()).device
    allowed = slot_vocab_mask(device)
    envs = [cfg.make_env() for _ in task_seeds]
    resets = [env.reset(seed=seed) for env, seed in zip(envs, task_seeds)]
    observations, optimal = [o for o, _ in resets], [info["optimal_steps"] for _, info in resets]
    n, horizon = len(envs), cfg.max_steps
    word_ids = torch.tensor(WRITABLE_IDS, device=device)  # a writable column's token id
    running, env_return, steps = [True] * n, [0.0] * n, [0] * n  # lists: the envs are Python
    previous_truth, active = [-1] * n, torch.tensor(running, device=device)
    guides, truths, cells = (torch.full((n, horizon), -1, dtype=torch.long, device=device)
                             for _ in range(3))
    blocks = []  # (tokens, slots, logprobs), each (n, k), in stream order
    cache = DynamicCache(config=policy.config)

    def write(tokens, slot, logprobs=None):
        slots = torch.where(active[:, None], slot, SLOT_CONTEXT).expand_as(tokens)
        logprobs = torch.zeros(tokens.shape, device=device) if logprobs is None else logprobs
        blocks.append((tokens, slots, torch.where(slots != SLOT_CONTEXT, logprobs, 0.0)))

    def sample(logits, slot, temperature):  # constrained decoding: (n, W) -> (n,), (n,)
        logp = torch.log_softmax(logits.masked_fill(~allowed[slot], -math.inf) / temperature, -1)
        choice = (logp.argmax(-1) if greedy
                  else torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1))
        return choice, logp.gather(-1, choice[:, None]).squeeze(-1)

    pending = torch.tensor([[BOS, GUIDED if guided else UNGUIDED]] * n, device=device)
    write(pending, SLOT_CONTEXT)
    for t in range(horizon):
        observed = torch.tensor([observation_ids(o)[0] for o in observations], device=device)
        observed = torch.where(active[:, None], observed, PAD)  # (n, O), O words an observation
        write(observed, SLOT_CONTEXT)
        pending = torch.cat([pending, observed], 1)
        truths[:, t] = torch.where(active, torch.tensor(previous_truth, device=device), -1)
        cells[:, t] = torch.where(active, torch.tensor([observation_ids(o)[1] for o in
                                                        observations], device=device), -1)
        if guided:  # z_t ~ pi(. | h_{t-1}, o_t): judge before acting
            logits = writable_logits(policy, pending, cache)[:, -1]                # (n, W)
            guide, logp = sample(logits, SLOT_GUIDE, cfg.guide_temperature)
            guides[:, t] = torch.where(active, guide, -1)  # writable indices 0-2 are GUIDES
            pending = torch.where(active, word_ids[guide], PAD)[:, None]
            write(pending, SLOT_GUIDE, logp[:, None])
        # a_t ~ pi(. | h_{t-1}, o_t, z_t)
        action, logp = sample(writable_logits(policy, pending, cache)[:, -1], SLOT_ACTION,
                              cfg.temperature)
        action = word_ids[action]
        pending = torch.where(active, action, PAD)[:, None]
        write(pending, SLOT_ACTION, logp[:, None])
        # finished episodes stop stepping their environment; they only pad the batch
        moves = action.tolist()
        for i in [i for i in range(n) if running[i]]:
            observations[i], reward, terminated, truncated, info = envs[i].step(WORDS[moves[i]])
            previous_truth[i] = GUIDES.index(toy_env.true_polarity(info["progress"]))
            env_return[i] += reward
            steps[i] += 1
            running[i] = not (terminated or truncated)
        if not any(running):
            break
        active = torch.tensor(running, device=device)
    tokens, slots, logprobs = (torch.cat(parts, 1) for parts in zip(*blocks))
    return Rollouts(tokens, slots, logprobs, guides, truths, cells,
                    *(torch.tensor(v, device=device) for v in (env_return, steps, optimal)))


# --- GRPO: group-normalised advantages (A_i = (R_i - mean R) / (std R + eps)) ---
def zero_variance(returns: torch.Tensor) -> torch.Tensor:  # (groups, G) -> (groups,): all equal?
    return (returns == returns[:, :1]).all(dim=1)


def group_advantages(returns: torch.Tensor, eps: float = 1e-6, scale: bool = True):
    """returns: (num_groups, G), each row the G rollouts of one task. Returns (num_groups, G).

    The std is the population one (divide by G). A group whose returns are all equal (every
    rollout failed, say) gets exactly zero. scale=False gives Dr. GRPO's R - mean."""
    centered = returns - returns.mean(dim=1, keepdim=True)
    if scale:
        centered = centered / (returns.std(dim=1, unbiased=False, keepdim=True) + eps)
    return torch.where(zero_variance(returns)[:, None], torch.zeros_like(centered), centered)


# --- GRPO with step-level credit (departure 5: --credit step) ---
def step_credit(env_advantages, rewards, trust: float, group_size: int, scale: bool = True,
                eps: float = 1e-6, own: bool = False):
    """Per-step advantages that credit each action only with the internal rewards that judge
    it or later moves. env_advantages: (N,), group_advantages of R_env; rewards: (N, T), r_t
    of the guide written at step t (which judges move t-1). Returns the advantages (N, T) of
    a_t, or with own=True of z_t:

        A_{i,t} = A_i^env + lambda * (S_{i,t} - mean_j S_{j,t}) / (std_j I_j + eps)

    S_{i,t} = r_{i,t+1} + r_{i,t+2} + ... is a_t's internal reward-to-go (z_{t+1} judges a_t);
    the baseline is the group's mean of it at the same step (0 after a rollout's end), the
    scale the group's std of the internal returns I_j = sum_t r_{j,t}. A group whose I are all
    equal (a constant guide) adds nothing. With own=True (a guide, --guide-advantage
    composite) z_t is credited from its own r_t on. scale=False (Dr. GRPO) drops the division
    by std_j I_j. At lambda = 0 this is exactly A_i^env."""
    num_groups, horizon = len(rewards) // group_size, rewards.shape[1]
    to_go = rewards.flip(1).cumsum(1).flip(1)          # (N, T): r_t + r_{t+1} + ..., z_t's own on
    internal = to_go[:, 0].view(num_groups, group_size)  # (num_groups, G): I_j
    if not own:
        to_go = F.pad(to_go[:, 1:], (0, 1))             # (N, T): a_t is judged from r_{t+1} on
    per_group = to_go.view(num_groups, group_size, horizon)
    centred = (per_group - per_group.mean(dim=1, keepdim=True)).view_as(to_go)  # (N, T)
    if scale:
        std = internal.std(dim=1, unbiased=False).repeat_interleave(group_size)[:, None]
        centred = centred / (std + eps)
    flat = zero_variance(internal).repeat_interleave(group_size)[:, None]         # (N, 1)
    return env_advantages[:, None] + trust * torch.where(flat, 0.0, centred)


def per_token(slots, action_advantages, guide_advantages):
    """Spread per-step advantages over the token stream. slots (N, L); action_advantages and
    guide_advantages (N, T), column t for step t. Returns (N, L): each action token gets its
    step's action advantage, each guide token its step's guide advantage, context 0. A token's
    step is read off the slots, never off token ids: the number of action tokens before it."""
    is_action = slots == SLOT_ACTION
    step = (is_action.cumsum(1) - is_action.long()).clamp(max=action_advantages.shape[1] - 1)
    return torch.where(is_action, action_advantages.gather(1, step),
                       torch.where(slots == SLOT_GUIDE, guide_advantages.gather(1, step), 0.0))


# --- GRPO: one iteration's advantages (--credit and --guide-advantage combine the above) ---
def iteration_advantages(batch: Rollouts, cfg: Config, trust: float, rewards=None):
    """Each token's advantage (N, L) and R (N,) under --credit and --guide-advantage. rewards
    (N, T): r_t, by default the guides' g(z_t) (experiments/research.py passes its controls')."""
    rewards = step_rewards(batch.guides) if rewards is None else rewards                 # (N, T)
    if cfg.internal_return == "mean":
        rewards = length_neutral(rewards, batch.steps)
    returns, _ = composite_return(batch.env_return, rewards, trust)
    grouped, horizon = (-1, cfg.group_size), rewards.shape[1]
    scale = cfg.advantage == "grpo"
    env_advantage = (group_advantages(batch.env_return.view(grouped), scale=scale).flatten()
                     if cfg.credit == "step" or cfg.guide_advantage == "env" else None)   # (N,)
    # an action's advantage: one per step (--credit step) or R's, one per rollout (the paper)
    if cfg.credit == "step":
        action_advantage = step_credit(env_advantage, rewards, trust, cfg.group_size, scale)
    else:
        action_advantage = group_advantages(returns.view(grouped), scale=scale).flatten() \
            [:, None].expand(-1, horizon)                                                  # (N, T)
    if cfg.guide_advantage == "composite":  # the paper: as the actions
        guide_advantage = (step_credit(env_advantage, rewards, trust, cfg.group_size, scale,
                                       own=True) if cfg.credit == "step" else action_advantage)
    else:  # env, a guard: a guide is never paid for the reward it grants
        guide_advantage = env_advantage[:, None].expand(-1, horizon)
    return per_token(batch.slots, action_advantage, guide_advantage), returns


# --- The training pass: log pi of each written word, as the rollout sampled it ---
def scored_positions(slots) -> torch.Tensor:  # (Q,): where any row holds a guide or action
    return (slots != SLOT_CONTEXT).any(0).nonzero().squeeze(-1)


def last_block_logits(policy, tokens, positions) -> torch.Tensor:
    """policy(tokens, logits_to_keep=positions)'s writable logits, to rounding: tokens (N, L),
    positions (Q,) -> (N, Q, W); the last block's queries, MLP and head at `positions` only."""
    gpt, (n, length) = policy.transformer, tokens.shape
    hidden = gpt.wte(tokens) + gpt.wpe(torch.arange(length, device=tokens.device))  # (N, L, C)
    for block in gpt.h[:-1]:  # earlier blocks: every position is some later query's key
        hidden = block(hidden)
    block, attention, width = gpt.h[-1], gpt.h[-1].attn, hidden.shape[-1]
    x = block.ln_1(hidden)
    weight, bias = attention.c_attn.weight, attention.c_attn.bias  # (C, 3C), (3C,): q | k | v
    query = x[:, positions] @ weight[:, :width] + bias[:width]              # (N, Q, C)
    key, value = (x @ weight[:, width:] + bias[width:]).split(width, -1)    # (N, L, C) each

    def heads(z):  # (N, S, C) -> (N, H, S, C / H)
        return z.view(n, z.shape[1], attention.num_heads, attention.head_dim).transpose(1, 2)

    causal = positions[:, None] >= torch.arange(length, device=tokens.device)  # (Q, L)
    mixed = F.scaled_dot_product_attention(heads(query), heads(key), heads(value),
                                           attn_mask=causal, scale=attention.scaling)
    hidden = hidden[:, positions] + attention.c_proj(mixed.transpose(1, 2).reshape(n, -1, width))
    hidden = hidden + block.mlp(block.ln_2(hidden))                         # (N, Q, C)
    return gpt.ln_f(hidden) @ policy.lm_head.weight[WRITABLE_IDS].T         # (N, Q, W)


def constrained_logprobs(logits, target_slots, temperature: float = 1.0,
                         guide_temperature: float | None = None) -> torch.Tensor:
    """The rollout's distribution: logits (N, Q, W), their slots (N, Q) -> log-probs (N, Q, W)."""
    allowed = slot_vocab_mask(logits.device)[target_slots]                   # (N, Q, W)
    by_slot = [1.0, temperature if guide_temperature is None else guide_temperature, temperature]
    temperatures = torch.tensor(by_slot, device=logits.device)[target_slots, None]  # (N, Q, 1)
    return torch.log_softmax(logits.masked_fill(~allowed, -math.inf) / temperatures, -1)


def writable_column(device) -> torch.Tensor:  # (V,): a writable word's column in WRITABLE_IDS
    column = torch.zeros(len(WORDS), dtype=torch.long, device=device)
    column[WRITABLE_IDS] = torch.arange(len(WRITABLE_IDS), device=device)
    return column


def token_logprobs(policy, tokens, slots, temperature: float = 1.0,
                   guide_temperature: float | None = None) -> torch.Tensor:
    """log pi of each written token as sampled, by a training pass: (N, L), 0 in context."""
    targets = scored_positions(slots)                   # (Q,), all >= 1; position p predicts p+1
    logits = last_block_logits(policy, tokens, targets - 1)                 # (N, Q, W)
    logp = constrained_logprobs(logits, slots[:, targets], temperature, guide_temperature)
    column = writable_column(tokens.device)[tokens[:, targets]]             # (N, Q); 0: context
    chosen = logp.gather(-1, column[..., None]).squeeze(-1)                  # (N, Q)
    chosen = torch.zeros(tokens.shape, device=tokens.device).index_copy(1, targets, chosen)
    return torch.where(slots != SLOT_CONTEXT, chosen, torch.zeros_like(chosen))  # (N, L)


# --- GRPO: clipped surrogate with a k3 KL to the reference, one mean over written tokens ---
KL_LOG_RATIO_MAX = 20.0  # see grpo_loss; below it the loss is the formula's, to the last bit


def grpo_loss(new_logprobs, old_logprobs, advantages, slots, clip: float,
              reference_logprobs=None, kl_weights=None):
    """All inputs (N, L), aligned with the tokens; slots marks the guide and action tokens,
    advantages each token's advantage, kl_weights the KL weight per token (guide and action
    weighted apart).

    loss = mean over generated tokens of -min(rho A, clip(rho) A) + kl_weights * KL_k3(pi || ref),
    rho = exp(log pi - log pi_old), KL_k3 = e^x - x - 1 with x = log ref - log pi clamped at
    KL_LOG_RATIO_MAX. Returns (loss, stats): the clip fraction, the approximate KL to the
    rollout policy and the mean KL to the reference, over the generated tokens."""
    generated = slots != SLOT_CONTEXT
    log_ratio = torch.where(generated, new_logprobs - old_logprobs, 0.0)
    ratio = log_ratio.exp()
    per_token_loss = -torch.min(ratio * advantages, ratio.clamp(1 - clip, 1 + clip) * advantages)
    kl = torch.zeros_like(per_token_loss)
    if reference_logprobs is not None:
        # k3 grows as e^x: a guide pushed 88 nats below the reference would make the loss inf.
        # Clamped (as verl does), such a token gets no KL gradient, as the clip gives none.
        log_ref_ratio = torch.where(generated, reference_logprobs - new_logprobs, 0.0)
        log_ref_ratio = log_ref_ratio.clamp(max=KL_LOG_RATIO_MAX)
        kl = log_ref_ratio.exp() - log_ref_ratio - 1  # k3: unbiased, always >= 0
        per_token_loss = per_token_loss + kl_weights * kl
    count = generated.sum().clamp(min=1)
    loss = torch.where(generated, per_token_loss, 0.0).sum() / count
    with torch.no_grad():
        def mean(x):  # over the generated tokens
            return torch.where(generated, x, 0.0).sum().item() / count.item()
        stats = {"clip_fraction": mean(((ratio - 1).abs() > clip).float()),
                 "approx_kl": mean(ratio - 1 - log_ratio), "kl_ref": mean(kl)}
    return loss, stats


# --- GRPO: the update, several clipped minibatch passes over one iteration's rollouts ---
def grpo_update(policy, optimizer, rollouts: Rollouts, token_advantages, reference_logprobs,
                kl_weights, cfg: Config, generator) -> dict:
    """cfg.update_epochs passes of cfg.minibatches clipped steps on grpo_loss; their stats."""
    stats = []
    for _ in range(cfg.update_epochs):
        order = torch.randperm(len(rollouts.tokens), generator=generator, device=generator.device)
        for batch in order.chunk(cfg.minibatches):
            batch = batch.to(rollouts.tokens.device)
            new_logprobs = token_logprobs(policy, rollouts.tokens[batch], rollouts.slots[batch],
                                          cfg.temperature, cfg.guide_temperature)
            loss, batch_stats = grpo_loss(
                new_logprobs, rollouts.logprobs[batch], token_advantages[batch],
                rollouts.slots[batch], cfg.clip,
                None if reference_logprobs is None else reference_logprobs[batch],
                None if kl_weights is None else kl_weights[batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
            if not torch.isfinite(norm):  # one step would turn every weight to NaN: stop here
                raise FloatingPointError(f"the GRPO gradient is not finite (loss {loss.item():.3g},"
                                         f" seed {cfg.seed}); the policy was not updated with it."
                                         f" Lower --lr, or raise --guide-temperature")
            optimizer.step()
            stats.append(batch_stats)
    return {key: sum(s[key] for s in stats) / len(stats) for key in stats[0]}


# --- One GRPO iteration with Self-Guide, and what it logs (success, loops, the guide) ---
def revisit_moves(cells: torch.Tensor) -> torch.Tensor:
    """(N, T) cells -> (N, T) bool: the move z_t judges returns to a cell left (a loop)."""
    earlier = torch.ones(cells.shape[1], cells.shape[1], device=cells.device).tril(-2).bool()
    seen = ((cells[:, :, None] == cells[:, None, :]) & earlier).any(-1)         # (N, T)
    moved = F.pad(cells[:, 1:] != cells[:, :-1], (1, 0))
    return seen & moved & (cells >= 0)


def episode_metrics(rollouts: Rollouts) -> dict:  # success, steps, loops, the guide's figures
    success, revisits = rollouts.env_return > 0, revisit_moves(rollouts.cells)
    metrics = {"success": success.float().mean().item(),
               "steps": rollouts.steps.float().mean().item(),
               "steps_over_optimal": (rollouts.steps[success] / rollouts.optimal[success])
               .mean().item() if success.any() else None,  # None (JSON null): none succeeded
               "looping_episodes": revisits.any(1).float().mean().item(),  # the paper's error
               "revisits": revisits.sum(1).float().mean().item()}
    written = rollouts.guides >= 0
    if not written.any():
        return metrics
    counts = torch.bincount(rollouts.guides[written], minlength=3).float()
    for name, count in zip(GUIDES, counts):
        metrics[f"share_{name}"] = (count / counts.sum()).item()
    judged = written & (rollouts.truths >= 0)
    truth, correct = rollouts.truths[judged], rollouts.guides[judged] == rollouts.truths[judged]
    recall = [correct[truth == c].float().mean().item() for c in range(3) if (truth == c).any()]
    metrics["guide_balanced_accuracy"] = sum(recall) / len(recall) if recall else None
    return metrics


@dataclasses.dataclass
class TrainState:
    """What a run carries from one iteration to the next, besides the policy's weights."""
    optimizer: torch.optim.Optimizer
    tasks: random.Random            # draws the training tasks
    sampler: torch.Generator        # samples guides and actions
    shuffler: torch.Generator       # orders the minibatches
    iteration: int = 0              # iterations done
    records: list = dataclasses.field(default_factory=list)  # one per iteration: the log


def new_train_state(policy, cfg: Config) -> TrainState:
    device = next(policy.parameters()).device
    return TrainState(torch.optim.AdamW(policy.parameters(), lr=cfg.lr, weight_decay=0.0),
                      random.Random(cfg.seed), torch.Generator(device=device).manual_seed(cfg.seed),
                      torch.Generator().manual_seed(cfg.seed))


def grpo_iteration(policy, reference, cfg: Config, state: TrainState) -> dict:
    """One GRPO iteration, its steps in order; returns its log line (and keeps it). reference:
    the frozen prior."""
    iteration = state.iteration + 1
    trust = trust_at(cfg, iteration)                                            # lambda(u)
    # 1. rollouts: G episodes of each sampled task; at every step a guide, then an action
    task_seeds = [state.tasks.randrange(TRAIN_SEED_RANGE) for _ in range(cfg.tasks_per_iter)]
    policy.eval()
    batch = rollout(policy, [s for s in task_seeds for _ in range(cfg.group_size)],
                    cfg.guided, cfg, state.sampler)
    # 2. r_t, the returns and each written token's advantage: iteration_advantages, above
    token_advantages, returns = cfg.advantages(batch, trust, iteration, state)  # (N, L), (N,)
    # 3. the reference's log-probs of what was written, for the KL to the prior
    reference_logprobs = kl_weights = None
    if cfg.kl_guide > 0 or cfg.kl_action > 0:
        with torch.no_grad():
            reference_logprobs = token_logprobs(reference, batch.tokens, batch.slots,
                                                cfg.temperature, cfg.guide_temperature)  # (N, L)
        kl_weights = torch.where(batch.slots == SLOT_GUIDE, cfg.kl_guide, cfg.kl_action)
    # 4. the update: clipped minibatch passes over the rollouts
    update = grpo_update(policy, state.optimizer, batch, token_advantages, reference_logprobs,
                         kl_weights, cfg, state.shuffler)
    # 5. the log line: the episodes' figures, the groups where R or R_env is flat, the update's
    grouped = (-1, cfg.group_size)
    record = {"iteration": iteration, "trust": trust, **episode_metrics(batch),
              "zero_variance_groups": zero_variance(returns.view(grouped)).float().mean().item(),
              "env_zero_variance_groups":
                  zero_variance(batch.env_return.view(grouped)).float().mean().item(), **update}
    state.records.append(record)
    state.iteration = iteration
    return record


# ==========================================================================================
# The method ends here. Below: what one run needs around it: the Stage 0 prior it starts from
# (the pretrained LLM's stand-in) with its cache and checkpoints, the loop with its held-out
# evaluations, the command line, --show, main. experiments/ imports this file.
# ==========================================================================================

# --- Stage 0: the prior (stands in for the pretrained LLM; departure 1), cached by settings ---
def encode_episode(steps, guided: bool):  # [(o_t, z_t, a_t), ...] -> (ids, slots)
    tokens, slots = [BOS, GUIDED if guided else UNGUIDED], [SLOT_CONTEXT, SLOT_CONTEXT]
    for observation, guide, action in steps:
        words = list(observation_ids(observation)[0])
        tokens += words + ([WORD_ID[guide]] if guided else []) + [WORD_ID[action]]
        slots += [SLOT_CONTEXT] * len(words) + [SLOT_GUIDE] * guided + [SLOT_ACTION]
    return tokens, slots


def demonstration_corpus(cfg: Config):  # (2 x prior_episodes, L) each: both formats
    env, tokens, slots, length = cfg.make_env(), [], [], episode_length(cfg)
    for i in tqdm(range(cfg.prior_episodes), desc="demonstrations", leave=False):
        steps, _ = toy_env.demonstrate(env, PRIOR_SEED_BASE + cfg.seed * 10**6 + i,
                                       cue_noise=cfg.cue_noise)
        for ids, kinds in (encode_episode(steps, guided=True), encode_episode(steps, guided=False)):
            tokens.append(ids + [PAD] * (length - len(ids)))  # PAD is SLOT_CONTEXT: 0
            slots.append(kinds + [SLOT_CONTEXT] * (length - len(kinds)))
    return torch.tensor(tokens), torch.tensor(slots)


def clone_demonstrator(policy, tokens, slots, cfg: Config, device):
    """Behaviour cloning of the guides and actions (not observations); yields each loss."""
    generator = torch.Generator().manual_seed(cfg.seed)
    updates = cfg.prior_epochs * math.ceil(len(tokens) / cfg.prior_batch)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=cfg.prior_lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda i: 0.5 * (1 + math.cos(math.pi * i / updates)))
    for _ in range(cfg.prior_epochs):
        for batch in torch.randperm(len(tokens), generator=generator).split(cfg.prior_batch):
            batch_tokens, batch_slots = tokens[batch].to(device), slots[batch].to(device)
            logp = token_logprobs(policy, batch_tokens, batch_slots)
            loss = -logp.sum() / (batch_slots != SLOT_CONTEXT).sum()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            yield loss.item()


def train_prior(cfg: Config, device):
    """Stage 0: a new policy cloned for --prior-epochs (or cfg.cloned_enough): (prior, losses)."""
    torch.manual_seed(cfg.seed)
    policy, losses = make_policy(cfg).to(device), []
    tokens, slots = demonstration_corpus(cfg)
    updates = cfg.prior_epochs * math.ceil(len(tokens) / cfg.prior_batch)
    for loss in tqdm(clone_demonstrator(policy, tokens, slots, cfg, device), desc="Stage 0",
                     total=updates, leave=False):
        losses.append(loss)
        if cfg.cloned_enough(policy, len(losses)):
            break
    policy.config.stage0 = {"updates": len(losses)}
    return policy.eval(), losses


def prior_key(cfg: Config) -> str:  # 12 hex digits of the settings a prior depends on
    text = json.dumps({"words": vocab_size(cfg), **cfg.prior_settings()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def load_or_train_prior(cfg: Config, device):  # from the cache if there and whole
    folder = Path(cfg.prior_cache) / f"prior-{prior_key(cfg)}"
    if folder.exists():
        try:
            return load_policy(folder, cfg, device)
        except (Exception, SystemExit) as error:  # cut by a full disk, a copy, a crash
            tqdm.write(f"the cached prior {folder} cannot be read ({error}): cloned again")
            shutil.rmtree(folder, ignore_errors=True)
    start = time.perf_counter()
    policy, losses = train_prior(cfg, device)
    tqdm.write(f"Stage 0 prior: {cfg.prior_episodes} demonstrations, cloned (both formats) in "
               f"{time.perf_counter() - start:.0f} s, {len(losses)} updates, final loss "
               f"{losses[-1]:.3f} -> {folder}")
    save_policy(policy, folder, whole=True)  # (another process's copy, if it was first, stays)
    return policy


# --- The cache and checkpoints: each file written beside its target, then renamed onto it ---
def partial_path(path) -> Path:
    return Path(path).with_name(f".{Path(path).name}.partial-{os.getpid()}")


def write_atomic(path, text: str):
    temporary = partial_path(path)
    temporary.write_text(text)
    os.replace(temporary, path)


def build_tokenizer():  # word-level, over WORDS, built in code (nothing downloaded)
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    backend = Tokenizer(models.WordLevel(vocab=WORD_ID, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", unk_token="<unk>",
                                   bos_token="<bos>", eos_token="<eos>")


def save_policy(policy, folder, whole: bool = False):
    """save_pretrained, renamed in file by file, weights last; whole: the folder at once."""
    folder, temporary = Path(folder), partial_path(folder)
    (folder.parent if whole else folder).mkdir(parents=True, exist_ok=True)
    try:
        policy.save_pretrained(temporary)
        build_tokenizer().save_pretrained(temporary)
        if whole:
            try:
                os.rename(temporary, folder)
            except OSError:  # another process's copy got there first: it stays
                if not folder.exists():
                    raise
            return
        for file in sorted(temporary.iterdir(), key=lambda f: f.name == "model.safetensors"):
            os.replace(file, folder / file.name)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def load_policy(folder, cfg: Config, device):  # config.json first: a wrong folder is one line
    from transformers import AutoModelForCausalLM
    path = Path(folder)
    if not (path / "config.json").exists() or not (path / "model.safetensors").exists():
        raise SystemExit(f"error: {str(folder)!r} holds no saved policy (no config.json and "
                         f"model.safetensors); give a folder written by selfguide.py")
    try:
        saved = json.loads((path / "config.json").read_text())
    except ValueError:
        raise SystemExit(f"error: {str(folder)!r}/config.json is not a saved config") from None
    if saved.get("vocab_size") != vocab_size(cfg) or \
            saved.get("n_positions", 0) < episode_length(cfg):
        raise SystemExit(f"error: {str(folder)!r} was trained for other settings "
                         f"({saved.get('vocab_size')} words, {saved.get('n_positions')} positions;"
                         f" these need {vocab_size(cfg)} and {episode_length(cfg)})")
    return AutoModelForCausalLM.from_pretrained(path).to(device).eval()


# --- Training: the iterations, a held-out evaluation every --eval-every, the log ---
def concat_rollouts(parts) -> Rollouts:  # one batch, streams right-padded with 0
    width, merged = max(p.tokens.shape[1] for p in parts), {}
    for f in dataclasses.fields(Rollouts):
        tensors = [getattr(p, f.name) for p in parts]
        if f.name in ("tokens", "slots", "logprobs"):
            tensors = [F.pad(t, (0, width - t.shape[1])) for t in tensors]
        merged[f.name] = torch.cat(tensors)
    return Rollouts(**merged)


def play_held_out(policy, cfg: Config, guided: bool, greedy=True, passes=1,
                  batch_size=512) -> Rollouts:
    """The fixed held-out tasks (never trained on), played `passes` times."""
    seeds = [EVAL_SEED_BASE + i for i in range(cfg.eval_tasks)]
    generator = torch.Generator(device=next(policy.parameters()).device).manual_seed(cfg.seed)
    return concat_rollouts([rollout(policy, seeds[i:i + batch_size], guided, cfg, generator,
                                    greedy=greedy)
                            for _ in range(passes) for i in range(0, len(seeds), batch_size)])


def evaluate(policy, cfg: Config, guided: bool, greedy=True, passes=1, batch_size=512) -> dict:
    """Metrics on the fixed held-out tasks, pooled over `passes`."""
    return episode_metrics(play_held_out(policy, cfg, guided, greedy, passes, batch_size))


def metric_text(value, digits: int) -> str:  # '-' where a metric is undefined (None)
    return "-" if value is None else f"{value:.{digits}f}"


def format_metrics(metrics: dict) -> str:  # one line: success, steps, the guide's figures
    line = f"success {metrics['success']:.3f}  steps {metrics['steps']:.1f}"
    if "share_positive" in metrics:
        line += (f"  guide +/0/- {metrics['share_positive']:.2f}/{metrics['share_neutral']:.2f}/"
                 f"{metrics['share_negative']:.2f}  guide bal.acc "
                 f"{metric_text(metrics['guide_balanced_accuracy'], 3)}")
    return line


def train(policy, reference, cfg: Config, log_file=None) -> list[dict]:
    """cfg.iterations GRPO iterations, a JSON line each to log_file. Returns the records."""
    state = new_train_state(policy, cfg)
    bar = tqdm(range(cfg.iterations), desc=f"GRPO {cfg.variant} seed {cfg.seed}", leave=False)
    for _ in bar:
        record = grpo_iteration(policy, reference, cfg, state)
        if record["iteration"] % cfg.eval_every == 0 or record["iteration"] == cfg.iterations:
            record["eval"] = evaluate(policy, cfg, cfg.guided)  # and at the last iteration
            tqdm.write(f"{cfg.variant} seed {cfg.seed} iter {record['iteration']:4d}  lambda "
                       f"{record['trust']:.2f}  held-out {format_metrics(record['eval'])}")
        bar.set_postfix(success=f"{record['success']:.2f}", trust=f"{record['trust']:.2f}")
        if log_file is not None:
            log_file.write(json.dumps(record) + "\n")
            log_file.flush()
    return state.records


def final_metrics(records: list, count: int) -> dict:  # held-out means over the last `count`
    evaluations = [r["eval"] for r in records if "eval" in r][-count:]
    defined = {key: [e[key] for e in evaluations if e.get(key) is not None]
               for key in evaluations[-1]}
    return {key: sum(values) / len(values) if values else None for key, values in defined.items()}


# --- The command line: a --flag per Config field ---
def add_settings(parser, settings):  # a --flag per field of the dataclass `settings`
    for f in dataclasses.fields(settings):
        kind = ({"action": argparse.BooleanOptionalAction} if isinstance(f.default, bool)
                else {"type": type(f.default), "choices": f.metadata["choices"]})
        parser.add_argument("--" + flag(f.name), default=f.default, help=f.metadata["help"], **kind)


def parse_settings(parser, argv=None) -> dict:  # Config's values, --paper-faithful's as defaults
    parser.add_argument("--paper-faithful", action="store_true", help="the paper's objective, "
                        "departures 2, 5 and 7 taken back: " + ", ".join(
                            f"--{flag(k)} {v}" for k, v in PAPER_FAITHFUL.items()))
    values = vars(parser.parse_args(argv))
    if values.pop("paper_faithful"):
        parser.set_defaults(**PAPER_FAITHFUL)
        values = vars(parser.parse_args(argv))
        values.pop("paper_faithful")
    return values


def parse_config(argv=None) -> Config:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_settings(parser, Config)
    try:
        return Config(**parse_settings(parser, argv))
    except ValueError as error:
        parser.error(str(error))  # exits with a usage line, never a traceback


# --- The run's environment: transformers' version, the device, the seeds ---
def check_transformers(version: str):  # before 5.24, cache= is ignored: the rollout breaks
    if tuple(int(part) for part in version.split(".")[:2]) < (5, 24):
        raise SystemExit(f"error: selfguide.py needs transformers>=5.24 (found {version}); "
                         f"pip install -r requirements.txt")


def pick_device(name: str) -> torch.device:
    name = ("cuda" if torch.cuda.is_available() else "cpu") if name == "auto" else name
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"error: --device {name} asked for, but torch sees no CUDA device")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise SystemExit(f"error: unknown --device {name!r}; use auto, cpu, cuda or cuda:N")
    if device.type == "cuda":  # same seed, same GPU, same numbers: no atomics in the backward
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before cuBLAS starts
        torch.use_deterministic_algorithms(True)
    return device


def seed_everything(seed: int):
    random.seed(seed)
    torch.manual_seed(seed)


# --- One run: train (or --eval-only), the summary table, --show ---
def show_episodes(policy, cfg: Config, count: int, guided: bool) -> str:
    """The first `count` held-out episodes, greedy, as toy_env.episode_text writes them."""
    seeds = [EVAL_SEED_BASE + i for i in range(count)]
    batch, texts = rollout(policy, seeds, guided, cfg, greedy=True), []
    for i, seed in enumerate(seeds):
        written = zip(batch.tokens[i].tolist(), batch.slots[i].tolist())
        moves = [WORDS[token] for token, slot in written if slot == SLOT_ACTION]
        guides = [GUIDES[g] if g >= 0 else None for g in batch.guides[i].tolist()]
        texts.append(toy_env.episode_text(cfg.make_env(), seed, guides, moves,
                                          f"held-out maze {i} (task {seed})"))
    return "\n\n".join(texts)


def summary_table(rows) -> str:  # rows: [(name, metrics)] -> a Markdown table.
    lines = ["| policy | success | steps | steps / optimal | guide bal. acc. | positive guides |",
             "|---|---|---|---|---|---|"]
    for name, m in rows:
        guide = (f"{metric_text(m['guide_balanced_accuracy'], 3)} | {m['share_positive']:.2f}"
                 if "share_positive" in m else "- | -")
        lines.append(f"| {name} | {m['success']:.3f} | {m['steps']:.1f} | "
                     f"{metric_text(m['steps_over_optimal'], 2)} | {guide} |")
    return "\n".join(lines)


def checked_folder(path, option: str):  # created, and writable: else one clear line
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / f".selfguide-write-test-{os.getpid()}").touch()
        (Path(path) / f".selfguide-write-test-{os.getpid()}").unlink()
    except OSError as error:
        raise SystemExit(f"error: {option} {str(path)!r} cannot be written "
                         f"({error.strerror or error})") from None


def run_eval_only(cfg: Config, device):  # --eval-only: greedy and sampled, with and without guides
    policy = (load_policy(cfg.init_from, cfg, device) if cfg.init_from
              else load_or_train_prior(cfg, device))
    if cfg.show:
        print(show_episodes(policy, cfg, cfg.show, cfg.guided) + "\n")
    rows = [(f"{slot} guide slot, {how}", evaluate(policy, cfg, guided, greedy, passes))
            for how, greedy, passes in [("greedy", True, 1), ("sampled x3", False, 3)]
            for slot, guided in [("without", False), ("with", True)]]
    print(summary_table(rows))
    return rows


def run_training(cfg: Config, device, out: Path):  # prior, training, the summary table
    start = time.perf_counter()
    prior = load_or_train_prior(cfg, device)
    policy = load_policy(cfg.init_from, cfg, device) if cfg.init_from else copy.deepcopy(prior)
    rows = [("prior, no guide (ReAct)", evaluate(prior, cfg, guided=False)),
            ("prior, guide (ReAct w/ SG)", evaluate(prior, cfg, guided=True))]
    stage0 = time.perf_counter() - start
    for name, metrics in rows:
        tqdm.write(f"{name}: {format_metrics(metrics)}")
    write_atomic(out / "selfguide_config.json", json.dumps(dataclasses.asdict(cfg), indent=2))
    with open(out / "log.jsonl", "w") as log_file:  # a line per iteration, flushed as it comes
        try:
            records = train(policy, prior, cfg, log_file)
        except KeyboardInterrupt:
            save_policy(policy, out)
            print(f"\nstopped by Ctrl-C or SIGTERM; the policy trained so far is saved in {out}")
            return None
    save_policy(policy, out)
    rows += [(f"trained ({cfg.variant}), final policy", records[-1]["eval"]),
             (f"trained ({cfg.variant}), mean of the last {cfg.final_evals} evaluations",
              final_metrics(records, cfg.final_evals))]
    write_atomic(out / "summary.md", summary_table(rows) + "\n")
    print(f"\n{summary_table(rows)}\n\ngreedy, {cfg.eval_tasks} held-out tasks; policy, config "
          f"and log.jsonl in {out}\ntime: Stage 0 and the prior's evaluations {stage0:.0f} s, "
          f"GRPO {time.perf_counter() - start - stage0:.0f} s (with its held-out evaluations)")
    if cfg.show:
        print("\n" + show_episodes(policy, cfg, cfg.show, cfg.guided))
    return rows


def stop_like_ctrl_c(signum, frame):  # SIGTERM stops a run as Ctrl-C does: the policy is saved
    raise KeyboardInterrupt


def run(cfg: Config):  # one run of these settings: every path checked first, then the work
    check_transformers(transformers.__version__)
    device, out = pick_device(cfg.device), Path(cfg.out or f"runs/{cfg.variant}-seed{cfg.seed}")
    if cfg.init_from:  # every path is checked before any work: a wrong one fails in a second
        load_policy(cfg.init_from, cfg, "cpu")
    if not (cfg.eval_only and cfg.init_from):
        checked_folder(cfg.prior_cache, "--prior-cache")
    if not cfg.eval_only:
        checked_folder(out, "--out")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    previous_handler = signal.signal(signal.SIGTERM, stop_like_ctrl_c)
    try:
        seed_everything(cfg.seed)
        return run_eval_only(cfg, device) if cfg.eval_only else run_training(cfg, device, out)
    except KeyboardInterrupt:  # before any training (Stage 0, an evaluation): nothing to save
        print("\nstopped by Ctrl-C or SIGTERM before anything was trained; nothing to save")
        return None
    finally:
        signal.signal(signal.SIGTERM, previous_handler)


def main(argv=None):
    return run(parse_config(argv))


if __name__ == "__main__":
    main()
