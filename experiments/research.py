"""The report's research variants and controls: selfguide.py's method with the settings the
report studies, composed through the methods its Config lets a subclass override (make_env,
prior_settings, cloned_enough, pays_internal_reward, advantages). The method file names none
of them.

    python experiments/research.py --no-cue --house --stale-door --min-distance 8 \\
        --guide-advantage hindsight --guide-temperature 1     # one run, as selfguide.py runs
    python experiments/research.py --dist --no-cue --prior-epochs 8
    python experiments/research.py --help                     # selfguide.py's settings, then these

compare.py, checkpoints.py and priors.py read their command lines as this `Config`. What it
adds (and what the method does not record, computed here: each episode's maze, the guide's
accuracy and progress accuracy):
- the world: the distance in place of the cue (`--dist`), one maze for every task (`--house`)
  whose prior plans on a stale map (`--stale-door`), a demonstrator that misjudges every
  revisit (`--cue-misjudge revisit`), a prior cloned until its guide reaches a target
  (`--prior-guide-target`, checked on calibration mazes of its own);
- what the guides are paid against (`--guide-advantage`): the episode's outcome (a guard),
  nothing but the KL (none), the truth (a control), the agent's own hindsight, or a placebo;
- r_t in the guide's place (`--internal-reward`): the controls, the oracle (the truth: what a
  perfect guide would pay) and random (a reward that carries no information), in GRPO w/ SG &
  GR or, the oracle, in plain GRPO; and the critic without the guide (hindsight's target pays
  each move as its r_t, as the oracle pays the truth).
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import hashlib
import random
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # selfguide.py, toy_env.py

import torch  # noqa: E402

import selfguide as sg  # noqa: E402
import toy_env  # noqa: E402
from selfguide import setting  # noqa: E402

CALIBRATION_SEED_BASE = 2 * 10**9  # --prior-guide-target's checks: mazes of their own
GUIDE_ADVANTAGES = ["composite", "env", "outcome", "hindsight", "none", "truth", "placebo"]
POSITIVE, NEUTRAL, NEGATIVE = range(3)  # GUIDES' indices


@dataclass
class Config(sg.Config):
    internal_reward: str = setting(
        "guide", "r_t: guide (the paper); controls: oracle (true progress), random, or "
                 "hindsight (the hindsight target's word: its critic, without the guide)",
        ["guide", "oracle", "random", "hindsight"])
    guide_advantage: str = setting(
        "env", "guide tokens' advantage: composite (the paper), env or outcome (guards), "
               "hindsight (+1 / -1 against the agent's own experience), none, truth or "
               "placebo (controls)", GUIDE_ADVANTAGES)
    # the world and the prior (each enters the prior's key when set)
    dist: bool = setting(False, "show the maze distance dist:K in place of the cue (--no-cue)")
    cue_misjudge: str = setting(
        "none", "revisit: the demonstrator calls every move back onto a visited cell negative",
        list(toy_env.MISJUDGED))
    prior_guide_target: float = setting(
        0.0, "clone until the greedy guide judges moves that change the distance this well")
    prior_check: int = setting(25, "cloning updates between two checks of that target")
    house: bool = setting(False, "every task in one maze (toy_env's house); only starts differ")
    stale_door: bool = setting(False, "the demonstrator plans and judges on toy_env's stale map")

    def __post_init__(self):  # its own checks first: the method's end with make_env's
        if self.prior_check < 1:
            raise ValueError("--prior-check must be at least 1")
        if not 0 <= self.prior_guide_target <= 1:
            raise ValueError("--prior-guide-target is in [0, 1]")
        if self.cue_misjudge != "none" and not (self.cue or self.dist):
            raise ValueError("--cue-misjudge changes the demonstrator reading the cue or the "
                             "distance: add --cue or --dist")
        if self.stale_door and (self.cue or self.dist):
            raise ValueError("--stale-door's demonstrator judges by its stale map, not by a "
                             "cue or a distance: add --no-cue")
        if self.cue and self.dist:
            raise ValueError("--dist shows the distance in place of the cue (on by default): "
                             "add --no-cue")
        if self.internal_reward != "guide" and self.variant == "sg":
            raise ValueError("--variant sg pays no internal reward (lambda = 0): use sg_gr for a "
                             "control (or grpo for the oracle)")
        if self.internal_reward == "random" and not self.guided:
            raise ValueError("--internal-reward random draws with the shares of the policy's "
                             "guides: it needs a guide slot (--variant sg_gr)")
        first = sg.PRIOR_SEED_BASE + self.seed * 10**6  # the demonstrations' first task
        if CALIBRATION_SEED_BASE - self.prior_episodes < first < CALIBRATION_SEED_BASE + 200:
            raise ValueError(f"--seed {self.seed} would clone its prior on the calibration "
                             f"mazes: choose another")
        super().__post_init__()

    @property
    def pays_internal_reward(self) -> bool:  # and plain GRPO paid a control's r_t
        return super().pays_internal_reward or (self.variant == "grpo" and
                                                self.internal_reward != "guide")

    def make_env(self) -> toy_env.GridWorld:
        return toy_env.GridWorld(self.size, self.wall_prob, self.min_distance, self.max_steps,
                                 cue=self.cue, dist=self.dist,
                                 house=self.seed if self.house else None,
                                 stale_door=self.stale_door, cue_misjudge=self.cue_misjudge)

    def prior_settings(self) -> dict:  # the method's, and the research settings off their default
        method = {f.name for f in dataclasses.fields(sg.Config)} | {"internal_reward"}  # not r_t
        return {**super().prior_settings(), **{
            f.name: getattr(self, f.name) for f in dataclasses.fields(self)
            if f.name not in method and getattr(self, f.name) != f.default}}

    def cloned_enough(self, policy, updates: int) -> bool:
        """--prior-guide-target: every --prior-check updates, the greedy guide's progress
        accuracy on the calibration mazes, recorded (policy.config.calibration_accuracy); stop
        once it reaches the target, so every seed's prior is equally mature."""
        if not self.prior_guide_target or updates % self.prior_check:
            return False
        policy.config.calibration_accuracy = calibration_accuracy(policy, self)
        return policy.config.calibration_accuracy >= self.prior_guide_target

    def advantages(self, batch: sg.Rollouts, trust: float, iteration: int, state) -> tuple:
        """iteration_advantages below, on the rollouts with their mazes, with the hindsight
        targets where the settings ask (hindsight, the placebo, the critic; from the V carried
        on the state). The episodes, their token advantages and targets stay there (last) for
        compare.train_until's instruments."""
        memory = carried(state, self)
        batch = Episodes(**vars(batch),
                         mazes=training_mazes(memory, state, self, batch.env_return.device))
        targets = None
        if self.guide_advantage in ("hindsight", "placebo") or self.internal_reward == "hindsight":
            targets = hindsight_targets(batch, memory.values)                             # (N, T)
        advantages, returns = iteration_advantages(batch, self, trust, iteration, targets)
        memory.last = (batch, advantages, targets)
        return advantages, returns


# --- what the experiments read beside the method's rollouts ---

@dataclass
class Episodes(sg.Rollouts):
    """sg.Rollouts with what the experiments read beside them."""
    mazes: torch.Tensor  # (N,) the maze each is played in (GridWorld.maze), as maze_of gives it
    guide_probs: torch.Tensor | None = None  # (N, T, 3) a policy's guide distribution at T 1


def maze_of(cfg: Config, task: int) -> int:  # GridWorld.maze: a house's number, else the task
    return cfg.seed if cfg.house else task


@dataclass
class Carried:
    """What Config.advantages carries on a run's sg.TrainState, as its attribute `research`."""
    tasks: random.Random  # the task draws, in step with grpo_iteration's (training_mazes)
    values: dict = dataclasses.field(default_factory=dict)  # hindsight's V (hindsight_targets)
    last: tuple | None = None  # the last iteration's (Episodes, token advantages, targets)


def carried(state: sg.TrainState, cfg: Config) -> Carried:
    if "research" not in vars(state):
        state.research = Carried(random.Random(cfg.seed))  # as sg.new_train_state seeds tasks
    return state.research


def training_mazes(memory: Carried, state: sg.TrainState, cfg: Config, device) -> torch.Tensor:
    """(N,) the mazes of the iteration's rollouts: grpo_iteration draws tasks_per_iter tasks
    from state.tasks and plays each group_size times; the same draws, from the carried stream."""
    tasks = [memory.tasks.randrange(sg.TRAIN_SEED_RANGE) for _ in range(cfg.tasks_per_iter)]
    if memory.tasks.getstate() != state.tasks.getstate():
        raise RuntimeError("the research run's task draws are out of step with the method's")
    return torch.tensor([maze_of(cfg, t) for t in tasks for _ in range(cfg.group_size)],
                        device=device)


def guide_accuracies(rollouts: sg.Rollouts) -> dict:
    """The guide's accuracy over the moves it judged, and its progress accuracy: the mean
    recall of "positive" and of "negative" (the moves that changed the distance; a bump is
    rare); None where undefined, none without a guide."""
    written = rollouts.guides >= 0
    if not written.any():
        return {}
    judged = written & (rollouts.truths >= 0)
    truth, correct = rollouts.truths[judged], rollouts.guides[judged] == rollouts.truths[judged]
    moved = [correct[truth == word].float().mean().item() for word in (POSITIVE, NEGATIVE)
             if (truth == word).any()]
    return {"guide_accuracy": correct.float().mean().item() if judged.any() else None,
            "guide_progress_accuracy": sum(moved) / len(moved) if moved else None}


def calibration_accuracy(policy, cfg: Config) -> float:
    """The greedy guide's progress accuracy on the 200 calibration mazes."""
    batch = sg.rollout(policy, [CALIBRATION_SEED_BASE + i for i in range(200)], True, cfg,
                       greedy=True)
    return guide_accuracies(batch)["guide_progress_accuracy"] or 0.0


# --- what the guides are paid against, and the critic's r_t ---

def internal_rewards(batch: sg.Rollouts, cfg: Config, iteration: int, targets=None):
    """r_t (N, T) of --internal-reward. guide: the method's, g(z_t). oracle (a control):
    0.1 x the true progress of the move z_t judges, in place of g(z_t). hindsight (the critic):
    0.1 x the polarity of the target hindsight_targets gave z_t. random (a control): each
    written guide's polarity redrawn independently of the move, with the shares of this
    batch's guides, from a generator seeded by seed x 10^6 + iteration."""
    guides = batch.guides
    if cfg.internal_reward == "oracle":
        guides = batch.truths
    elif cfg.internal_reward == "hindsight":
        if targets is None:
            raise ValueError("--internal-reward hindsight needs targets: "
                             "hindsight_targets(batch, values)")
        guides = targets
    elif cfg.internal_reward == "random":
        control = torch.Generator(device=guides.device).manual_seed(cfg.seed * 10**6 + iteration)
        written = guides >= 0
        shares = torch.bincount(guides[written], minlength=len(sg.GUIDES)).float()
        drawn = torch.multinomial(shares, guides.numel(), replacement=True, generator=control)
        guides = torch.where(written, drawn.view_as(guides), -1)
    return sg.step_rewards(guides)


def iteration_advantages(batch: sg.Rollouts, cfg: Config, trust: float, iteration: int,
                         targets=None) -> tuple:
    """selfguide.iteration_advantages on the r_t of internal_rewards, with the guide advantages
    of guide_advantages where the settings ask. targets (N, T): hindsight_targets. Returns
    (N, L), (N,)."""
    guides = guide_advantages(batch, cfg, iteration, targets)                   # (N, T) or None
    method = copy.copy(cfg)  # what selfguide computes, with the method's settings
    if guides is not None:
        method.guide_advantage = "env"  # its guide tokens' advantages are replaced below
    advantages, returns = sg.iteration_advantages(
        batch, method, trust, internal_rewards(batch, cfg, iteration, targets))
    if guides is not None:
        advantages = torch.where(batch.slots == sg.SLOT_GUIDE,
                                 sg.per_token(batch.slots, guides, guides), advantages)
    return advantages, returns


def guide_advantages(batch: sg.Rollouts, cfg: Config, iteration: int, targets=None):
    """The guides' advantages (N, T) of the research settings of --guide-advantage, or None
    for the method's (composite, env). outcome: A_env x the word's polarity (+1 / 0 / -1):
    a constant word earns sum_i A_env,i = 0 at a step all the group plays, less where only
    failures play on (a success ends early), so praise never earns. none: 0, the KL alone.
    truth, hindsight, placebo: +1 for the target's word, -1 for another, where there is a
    target (the true progress; hindsight_targets; placebo_targets, drawn from a generator
    seeded by seed x 10^6 + iteration)."""
    kind = cfg.guide_advantage
    if kind in ("composite", "env"):
        return None
    if kind == "outcome":
        env = sg.group_advantages(batch.env_return.view(-1, cfg.group_size),
                                  scale=cfg.advantage == "grpo").flatten()             # (N,)
        polarity = sg.step_rewards(batch.guides) / sg.GUIDE_REWARD["positive"]
        return env[:, None] * polarity
    if kind == "none":
        return torch.zeros(batch.guides.shape, device=batch.guides.device)
    if targets is None and kind != "truth":
        raise ValueError(f"--guide-advantage {kind} needs targets: "
                         f"hindsight_targets(batch, values)")
    target = {"truth": batch.truths, "hindsight": targets}.get(kind)
    if kind == "placebo":
        control = torch.Generator(device=batch.guides.device).manual_seed(
            cfg.seed * 10**6 + iteration)
        target = placebo_targets(targets, control)
    right = torch.where(batch.guides == target, 1.0, -1.0)
    return torch.where((batch.guides >= 0) & (target >= 0), right, 0.0)


# --- Hindsight: a guide's target from the agent's own rollouts ---

HINDSIGHT_DISCOUNT = 0.95  # V(s) counts a success k moves after s as 0.95^k: nearer is better
HINDSIGHT_MEMORY = 0.9     # each iteration, what earlier iterations saw weighs 0.9 times less


def hindsight_targets(batch: Episodes, values: dict) -> torch.Tensor:
    """The word each guide is paid against under --guide-advantage hindsight, drawn from the
    agent's own rollouts and nothing else: (N, T) indices into GUIDES, -1 where there is none.

    V(s) is the success the agent reached from state s (a maze's cell, as o_t names it): the
    mean over every visit of HINDSIGHT_DISCOUNT^(moves left) x R_env. z_t judges the move
    from s_{t-1} to s_t, and its target is the sign of V(s_t) - V(s_{t-1}): positive,
    negative, or neutral for a bump (the cell did not change). z_t's target is fixed before z_t
    is written (s_{t-1} and s_t are known), and rollout i's V leaves out its own visits (it is
    the other rollouts' of this iteration, and what earlier ones saw), so a word cannot earn its
    target by steering: it can change which moves rollout i makes later, never what a cell is
    worth. Where V cannot tell (a cell no other rollout reached, or two cells with
    one value) there is no target. `values` carries {(maze, cell): [discounted successes,
    visits]} across iterations: decayed by HINDSIGHT_MEMORY, then this batch's visits added
    (in place)."""
    cells, steps = batch.cells.tolist(), batch.steps.tolist()
    mazes, success = batch.mazes.tolist(), batch.env_return.tolist()
    own = []  # per rollout, {(maze, cell): [discounted successes, visits]}
    for i, row in enumerate(cells):
        visits = {}
        for t in range(steps[i]):  # o_t is seen with steps - t moves left
            entry = visits.setdefault((mazes[i], row[t]), [0.0, 0])
            entry[0] += HINDSIGHT_DISCOUNT ** (steps[i] - t) * success[i]
            entry[1] += 1
        own.append(visits)
    for key in list(values):
        values[key] = [v * HINDSIGHT_MEMORY for v in values[key]]
        if values[key][1] < 0.01:  # unseen for about 45 iterations: forgotten
            del values[key]
    for visits in own:
        for key, (total, count) in visits.items():
            entry = values.setdefault(key, [0.0, 0.0])
            entry[0], entry[1] = entry[0] + total, entry[1] + count

    def value(i, cell):  # V(cell) without rollout i's own visits; None if no one else came
        total, count = values[(mazes[i], cell)]
        mine_total, mine_count = own[i][(mazes[i], cell)]
        rest = count - mine_count
        return (total - mine_total) / rest if rest > 1e-6 else None

    targets = torch.full(batch.cells.shape, -1, dtype=torch.long, device="cpu")  # filled by hand
    for i, row in enumerate(cells):
        for t in range(1, steps[i]):  # z_0 judges no move
            if row[t] == row[t - 1]:
                targets[i, t] = NEUTRAL  # a bump: nothing changed
                continue
            after, before = value(i, row[t]), value(i, row[t - 1])
            if after is not None and before is not None and after != before:
                targets[i, t] = POSITIVE if after > before else NEGATIVE
    return targets.to(batch.cells.device)


def placebo_targets(targets: torch.Tensor, generator) -> torch.Tensor:
    """The placebo (--guide-advantage placebo): the hindsight targets with each move's word
    redrawn by a fair coin, positive or negative; bumps stay neutral, and where hindsight has
    no target neither does the placebo. It pays as often as hindsight and carries no
    information about a move, and no word can farm it: on a move, positive and negative each
    earn 0 on average, neutral -1."""
    coin = torch.randint(2, targets.shape, generator=generator, device=targets.device) * 2
    return torch.where((targets == POSITIVE) | (targets == NEGATIVE), coin, targets)


def prior_fingerprint(cfg: sg.Config) -> str | None:
    """The cached prior of these settings as 12 hex digits (sha256 over its tensors, by name),
    None if it is not cloned yet: the same on two machines only if both cloned the same prior.
    Another CPU kind's float kernels can clone another prior from the same seed, and every row
    trained from it then differs too."""
    from safetensors.torch import load_file
    path = Path(cfg.prior_cache) / f"prior-{sg.prior_key(cfg)}" / "model.safetensors"
    if not path.exists():
        return None
    weights, digest = load_file(path), hashlib.sha256()
    for name in sorted(weights):
        digest.update(name.encode() + weights[name].contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:12]


def parse_args(argv=None) -> Config:
    """This command line: selfguide.py's, with the research settings."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    sg.add_settings(parser, Config)
    try:
        return Config(**sg.parse_settings(parser, argv))
    except ValueError as error:
        parser.error(str(error))  # exits with a usage line, never a traceback


def main(argv=None):
    """One run, as selfguide.py runs the method, then its prior's fingerprint: a reader on
    another machine can tell whether the run started from the prior the report's did."""
    cfg = parse_args(argv)
    rows = sg.run(cfg)
    fingerprint = prior_fingerprint(cfg)
    if rows is not None and fingerprint:
        print(f"the prior's fingerprint: {fingerprint} (the same on two machines only if both "
              f"cloned the same prior)")
    return rows


if __name__ == "__main__":
    main()
