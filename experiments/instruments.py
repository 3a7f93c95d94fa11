"""What the experiments measure beyond the method's own metrics, derived from what the method
returns (a rollout's cells and guides, an iteration's advantages and hindsight targets):

- the stale moves: in a house with a stale door (`--house --stale-door`), the moves whose
  true progress the stale map misjudges, read off the cells and the map; the guide's accuracy
  and probability of the true word there, all together and apart by the true word (truly
  negative: the map calls good a move into its dead end; truly positive: it calls bad one out);
- the revisits apart from the other moves (`--cue-misjudge revisit` misjudges every one);
- what an update can move in a guide: its sensitivity, the L1 norm 2 (1 - p_T(word)) / T of
  d log p_T(word) / d logits, whatever the advantage; its push, that norm times |A|, the
  policy-gradient term's at ratio 1 (the clip and the KL left out), over all guides and on
  the stale moves by their true word; the share of guides off the prior's greedy word;
- with hindsight targets (also computed, then coined, for the placebo), how often a judged
  guide has one and how often it is the true word;
- the probability the guide gives the true word on the moves that change the distance, which
  sees what the top word hides (a wrong word that fell from 0.999 to 0.6 scores the same
  argmax accuracy).

compare.train_until adds these to each iteration's record (and to each held-out evaluation's,
with the guide's accuracies of research.guide_accuracies and its figures on the fixed probe),
which is how compare.py and checkpoints.py log them; `python selfguide.py` logs the method's
figures only.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # selfguide.py, toy_env.py

import torch  # noqa: E402

import research  # noqa: E402
import selfguide as sg  # noqa: E402
from research import NEGATIVE, POSITIVE  # noqa: E402
from toy_env import MAX_SIZE  # noqa: E402

PROGRESS_OF = torch.tensor([1, 0, -1])  # the true progress of GUIDES' words, by index


@torch.no_grad()
def judge_streams(policy, batch: sg.Rollouts, rows: int = 512) -> torch.Tensor:
    """How `policy` would judge at each guide slot of the batch's streams, read as they are
    (teacher-forced, whoever wrote them): its log-probs of GUIDES at temperature 1, (N, T, 3);
    0 where the episode has no guide. Of the policy that played the batch, the distribution it
    sampled its guides from (before the guide temperature), to rounding."""
    judged = torch.zeros(batch.guides.shape + (len(sg.GUIDES),), device=batch.tokens.device)
    for part in torch.arange(len(batch.tokens), device=batch.tokens.device).split(rows):
        tokens, slots = batch.tokens[part], batch.slots[part]                    # (b, L)
        targets = sg.scored_positions(slots)                                     # (Q,)
        logp = sg.constrained_logprobs(sg.last_block_logits(policy, tokens, targets - 1),
                                       slots[:, targets])                        # (b, Q, W)
        logp = torch.zeros(slots.shape + logp.shape[-1:], device=logp.device) \
            .index_copy(1, targets, logp)                                       # (b, L, W)
        judged[part] = by_step(logp[..., :len(sg.GUIDES)], slots, sg.SLOT_GUIDE,
                               batch.guides.shape[1])
    return judged


def by_step(per_token, slots, slot: int, horizon: int) -> torch.Tensor:
    """A figure per token (N, L, ...) read at the tokens of one slot, by step: (N, T, ...), 0
    where the slot holds nothing. A token's step is the number of action tokens before it."""
    is_action = slots == sg.SLOT_ACTION
    step = is_action.cumsum(1) - is_action.long()                                # (N, L)
    row, position = (slots == slot).nonzero(as_tuple=True)
    out = torch.zeros((slots.shape[0], horizon) + per_token.shape[2:], device=slots.device)
    out[row, step[row, position]] = per_token[row, position].float()
    return out


def measured(batch: sg.Rollouts, cfg: research.Config, tasks, judge=None) -> research.Episodes:
    """A batch played on `tasks` (task seeds, in order) with its mazes and, given a `judge`
    (the policy whose guides these are), its guide distribution (judge_streams)."""
    written = batch.guides >= 0
    probs = (None if judge is None or not written.any() else
             torch.where(written[..., None], judge_streams(judge, batch).exp(), 0.0))  # (N, T, 3)
    mazes = torch.tensor([research.maze_of(cfg, task) for task in tasks], device=written.device)
    return research.Episodes(**vars(batch), mazes=mazes, guide_probs=probs)


def stale_moves(batch: research.Episodes, cfg: sg.Config) -> torch.Tensor | None:
    """(N, T) bool: the move z_t judges is one the stale map misjudges (its believed progress,
    the sign of the change in the map's distance, is not the true one); None without a stale
    door. Read off the cells and each episode's maze, as toy_env's info["stale"] says it."""
    if not cfg.stale_door:
        return None
    believed, stale = {}, torch.zeros(batch.cells.shape, dtype=torch.bool)
    cells, truths = batch.cells.tolist(), batch.truths.tolist()
    for i, maze in enumerate(batch.mazes.tolist()):
        if maze not in believed:
            env = cfg.make_env()
            env.reset(seed=maze)  # a house's maze whatever the start; else the task's own
            believed[maze] = env.believed
        distance = believed[maze]
        for t in range(1, batch.steps[i].item()):
            before, after = (divmod(c, MAX_SIZE) for c in (cells[i][t - 1], cells[i][t]))
            thought = (distance[before] > distance[after]) - (distance[before] < distance[after])
            stale[i, t] = thought != PROGRESS_OF[truths[i][t]].item()
    return stale.to(batch.cells.device)


def experiment_metrics(rollouts: research.Episodes, cfg: research.Config) -> dict:
    """The guide's accuracies (research.guide_accuracies); the probability of the true word on
    the moves that change the distance; the guide's accuracy on the revisits and on the other
    moves; and where a stale map errs (all together and by true word) its accuracy and its
    probability of the true word."""
    metrics, written = research.guide_accuracies(rollouts), rollouts.guides >= 0
    judged = written & (rollouts.truths >= 0)
    if written.any() and rollouts.guide_probs is not None:
        truth = rollouts.truths[judged]
        true_prob = rollouts.guide_probs[judged].gather(-1, truth[:, None]).squeeze(-1)  # (J,)
        by_truth = [true_prob[truth == word].mean().item() for word in (POSITIVE, NEGATIVE)
                    if (truth == word).any()]
        metrics["guide_true_prob_progress"] = sum(by_truth) / len(by_truth) if by_truth else None
    correct = rollouts.guides == rollouts.truths                                  # (N, T)
    revisit = sg.revisit_moves(rollouts.cells)
    kinds = [("revisit", judged & revisit), ("other", judged & ~revisit)]
    stale = stale_moves(rollouts, cfg)
    if stale is not None:
        kinds += [("stale", judged & stale),
                  ("stale_negative", judged & stale & (rollouts.truths == NEGATIVE)),
                  ("stale_positive", judged & stale & (rollouts.truths == POSITIVE))]
    true_prob = (None if rollouts.guide_probs is None else
                 rollouts.guide_probs.gather(-1, rollouts.truths.clamp(min=0)[..., None])
                 .squeeze(-1))                                                    # (N, T)
    for name, kind in kinds:
        if not written.any():
            break
        metrics[f"guide_accuracy_{name}"] = (correct[kind].float().mean().item()
                                             if kind.any() else None)
        if name.startswith("stale") and true_prob is not None and kind.any():
            metrics[f"guide_true_prob_{name}"] = true_prob[kind].mean().item()
    return {k: v for k, v in metrics.items()
            if v is not None or not k.startswith("guide_accuracy_stale")}


def evaluate(policy, cfg: sg.Config, guided: bool, judge=None) -> dict:
    """selfguide.evaluate's metrics on the held-out tasks, with experiment_metrics; the guide
    distribution is `judge`'s (default: the policy's)."""
    played = measured(sg.play_held_out(policy, cfg, guided), cfg, held_out_tasks(cfg),
                      policy if judge is None else judge)
    return {**sg.episode_metrics(played), **experiment_metrics(played, cfg)}


def held_out_tasks(cfg: sg.Config) -> list:  # the tasks selfguide.play_held_out plays, in order
    return [sg.EVAL_SEED_BASE + i for i in range(cfg.eval_tasks)]


def training_figures(batch: research.Episodes, advantages, targets, reference,
                     cfg: sg.Config) -> dict:
    """What an update can move in the guide (the module's docstring), from one iteration's
    rollouts, token advantages (N, L) and hindsight targets (N, T) or None: under the placebo
    these are the hindsight targets before its coin, so target_accuracy says how right
    hindsight would have been on the placebo's rollouts, not what the placebo paid."""
    temperature = torch.where(batch.slots == sg.SLOT_GUIDE, cfg.guide_temperature,
                              cfg.temperature)
    sensitivity = 2 * (1 - batch.logprobs.exp()) / temperature                   # (N, L)
    log = {"action_sensitivity": sensitivity[batch.slots == sg.SLOT_ACTION].mean().item()}
    if not cfg.guided:
        return log
    written, horizon = batch.guides >= 0, batch.guides.shape[1]
    log["guide_sensitivity"] = sensitivity[batch.slots == sg.SLOT_GUIDE].mean().item()
    prior_word = judge_streams(reference, batch).argmax(-1)                       # (N, T)
    log["guide_off_prior"] = (batch.guides != prior_word)[written].float().mean().item()
    push = by_step(sensitivity * advantages.abs(), batch.slots, sg.SLOT_GUIDE, horizon)
    stale = stale_moves(batch, cfg)
    kinds = [("", written)]
    if stale is not None:
        kinds += [(f"_stale_{name}", written & stale & (batch.truths == word))
                  for name, word in [("negative", NEGATIVE), ("positive", POSITIVE)]]
    for suffix, kind in kinds:
        log[f"guide_push{suffix}"] = push[kind].mean().item() if kind.any() else None
    if targets is not None:
        judged = written & (batch.truths >= 0)
        has = judged & (targets >= 0)
        log["target_coverage"] = has.sum().item() / max(judged.sum().item(), 1)
        log["target_accuracy"] = ((targets == batch.truths)[has].float().mean().item()
                                  if has.any() else None)
        if stale is not None and (has & stale).any():
            log["target_accuracy_stale"] = (targets == batch.truths)[has & stale] \
                .float().mean().item()
    return log
