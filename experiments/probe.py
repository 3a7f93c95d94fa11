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
at every held-out evaluation of every guided policy they train (compare.train_until).
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent),  # selfguide.py, toy_env.py
                str(Path(__file__).resolve().parent)]  # instruments.py

import torch  # noqa: E402

import selfguide as sg  # noqa: E402
from instruments import experiment_metrics, held_out_tasks, judge_streams, measured  # noqa: E402
from research import Episodes  # noqa: E402

BATCH = 512  # episodes per forward pass (and per rollout batch, as selfguide.evaluate)


def probe_episodes(prior, cfg: sg.Config) -> Episodes:
    """The probe: the prior's greedy episodes, with its guide slot, on the held-out tasks."""
    seeds = held_out_tasks(cfg)
    return measured(sg.concat_rollouts([sg.rollout(prior, seeds[i:i + BATCH], True, cfg,
                                                   greedy=True)
                                        for i in range(0, len(seeds), BATCH)]), cfg, seeds)


def judge(policy, probe: Episodes) -> Episodes:
    """The probe as `policy` judges it: at each guide slot of the stored episodes, read as they
    are, its greedy guide (`guides`, -1 where the episode has no guide) and its distribution
    over the guide words (`guide_probs`, temperature 1)."""
    logp = judge_streams(policy, probe, BATCH)                                 # (N, T, 3)
    written = probe.guides >= 0
    return dataclasses.replace(probe, guides=torch.where(written, logp.argmax(-1), -1),
                               guide_probs=torch.where(written[..., None], logp.exp(), 0.0))


def probe_metrics(policy, probe: Episodes, cfg: sg.Config) -> dict:
    """The guide metrics of selfguide.episode_metrics (shares, balanced accuracy) and of
    instruments.experiment_metrics (accuracy, progress accuracy, the stale moves by true
    word, ...) for `policy` judging the probe, each named probe_<metric>."""
    judged = judge(policy, probe)
    metrics = {**sg.episode_metrics(judged), **experiment_metrics(judged, cfg)}
    return {f"probe_{k}": v for k, v in metrics.items()
            if k.startswith("guide_") or k.startswith("share_")}
