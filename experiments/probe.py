"""A fixed probe of the guide: every policy judges the same stored trajectories.

The guide's accuracy on a policy's own rollouts mixes two things: how well it judges, and
which moves it is asked to judge (a policy that walks where judging is easy scores higher
without judging any better). On the probe every policy judges the very same moves: the
prior's greedy held-out episodes, stored once per seed. Each policy reads those token
streams (teacher-forced, the prior's own guides and moves in the history) and writes its
greedy guide at every guide slot, and its probability of each guide word; the guides are
scored against the true progress of the moves they judge, as selfguide.episode_metrics scores
a rollout's.

    probe = probe_episodes(prior, cfg)       # the prior's greedy held-out episodes
    probe_metrics(checkpoint, probe, cfg)    # {"probe_guide_progress_accuracy": ..., ...}

The prior's probe metrics equal its own greedy evaluation's guide metrics (the same
episodes, its own guides): a test checks it. compare.py and checkpoints.py record the probe
for every guided policy they train, through `observer`, the hook they give
selfguide.grpo_iteration:

    hook = observer(policy, prior, cfg, probe)     # compare.py's train_until
    selfguide.grpo_iteration(policy, prior, cfg, state, hook)
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent),  # selfguide.py, toy_env.py
                str(Path(__file__).resolve().parent)]  # instruments.py

import torch  # noqa: E402

import selfguide as sg  # noqa: E402
from instruments import experiment_metrics, judge_streams, training_figures  # noqa: E402

BATCH = 512  # episodes per forward pass (and per rollout batch, as selfguide.evaluate)


def probe_episodes(prior, cfg: sg.Config) -> sg.Rollouts:
    """The probe: the prior's greedy episodes, with its guide slot, on the held-out tasks."""
    seeds = [sg.EVAL_SEED_BASE + i for i in range(cfg.eval_tasks)]
    return sg.concat_rollouts([sg.rollout(prior, seeds[i:i + BATCH], True, cfg, greedy=True)
                               for i in range(0, len(seeds), BATCH)])


def judge(policy, probe: sg.Rollouts) -> sg.Rollouts:
    """The probe as `policy` judges it: at each guide slot of the stored episodes, read as they
    are, its greedy guide (`guides`, -1 where the episode has no guide) and its distribution
    over the guide words (`guide_probs`, temperature 1)."""
    logp = judge_streams(policy, probe, BATCH)                                 # (N, T, 3)
    written = probe.guides >= 0
    return dataclasses.replace(probe, guides=torch.where(written, logp.argmax(-1), -1),
                               guide_probs=torch.where(written[..., None], logp.exp(), 0.0))


def probe_metrics(policy, probe: sg.Rollouts, cfg: sg.Config) -> dict:
    """The guide metrics of selfguide.episode_metrics (shares, accuracy, balanced and
    progress accuracy, ...) and of instruments.experiment_metrics (the stale moves, by true
    word) for `policy` judging the probe, each named probe_<metric>."""
    judged = judge(policy, probe)
    metrics = {**sg.episode_metrics(judged), **experiment_metrics(judged, cfg)}
    return {f"probe_{k}": v for k, v in metrics.items()
            if k.startswith("guide_") or k.startswith("share_")}


def observer(policy, reference, cfg: sg.Config, probe: sg.Rollouts | None = None):
    """A hook for selfguide.grpo_iteration that adds instruments.training_figures to each
    iteration's record (with the hindsight targets research.Config.advantages left in
    state.carry), and experiment_metrics (and, given a probe, the guide's on it) to each
    held-out evaluation's."""
    def observe(record, batch, advantages, state, held_out):
        record.update(training_figures(batch, advantages, state.carry.get("targets"),
                                       reference, cfg))
        if held_out is not None:
            record["eval"].update(experiment_metrics(held_out, cfg))
            if probe is not None and cfg.guided:
                record["eval"].update(probe_metrics(policy, probe, cfg))
    return observe
