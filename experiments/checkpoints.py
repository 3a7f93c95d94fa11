"""The paper's checkpoint experiment on the toy: does guidance from later in training help a
fixed policy more? Guides written by checkpoint k of the full method (the prior, 25%, 50%,
75% of training, the final policy) steer the moves of a fixed policy (the prior's, and the
final policy's), on the held-out mazes; each checkpoint also plays on its own, which gives
the paper's error analysis (how often episodes loop) over training, and judges the fixed
probe (probe.py: the prior's greedy held-out episodes), which tells a guide that judges
better from one that walks where judging is easy.

    python experiments/checkpoints.py --seeds 5 --seed 600 --workers 2 --out runs/K-default
    python experiments/checkpoints.py --seeds 5 --seed 600 --workers 2 --dist --no-cue \\
        --prior-epochs 3 --prior-guide-target 0.8 --prior-check 10 --out runs/K-immature
    python experiments/checkpoints.py --help      # selfguide.py's settings, then these

The full method is trained per seed from that seed's prior, exactly as selfguide.py trains
it (the same run as the GRPO w/ SG & GR row of experiments/compare.py on the same settings);
the checkpoint writes the guides through `Steered`, a model whose guide words' logits are the
checkpoint's and every other word's the fixed policy's.
Every difference is paired by seed against the prior's own guidance, with a 95% t-interval
over the seeds. Each seed is a work unit saved as it finishes, so a stopped run resumes.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import signal
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import DynamicCache  # noqa: E402
from transformers.modeling_outputs import CausalLMOutput  # noqa: E402

import compare  # noqa: E402
import instruments  # noqa: E402
import selfguide as sg  # noqa: E402
from probe import probe_episodes, probe_metrics  # noqa: E402

FRACTIONS = (0.0, 0.25, 0.5, 0.75, 1.0)  # of training: the checkpoints that write guides
NAMES = ["prior", "25%", "50%", "75%", "final"]


def parse_args(argv=None) -> tuple[sg.Config, compare.Seeds]:
    cfg, exp = compare.parse_settings(argv, compare.Seeds, __doc__.split("\n\n")[0],
                                      "runs/checkpoints")
    if cfg.variant != "sg_gr":
        raise SystemExit("error: the checkpoints are the full method's: --variant sg_gr")
    return cfg, exp


class Steered(torch.nn.Module):
    """`policy` moving, `guide_policy` judging: the logits of the guide words are guide_policy's,
    every other word's policy's. The rollout's constrained decoding samples the guide slot
    among the guide words and the action slot among the moves, so guide_policy writes every
    guide and policy every move, each reading the whole stream with its own KV cache."""

    def __init__(self, policy, guide_policy):
        super().__init__()
        self.policy, self.guide_policy, self.config = policy, guide_policy, policy.config
        self.caches = None  # (the rollout's cache, guide_policy's own beside it)

    def forward(self, tokens, cache=None, use_cache=False, **kwargs):
        if cache is not None and (self.caches is None or self.caches[0] is not cache):
            self.caches = (cache, DynamicCache(config=self.guide_policy.config))  # a new rollout
        guide_cache = self.caches[1] if cache is not None else None
        logits = self.policy(tokens, cache=cache, use_cache=use_cache, **kwargs).logits
        judged = self.guide_policy(tokens, cache=guide_cache, use_cache=use_cache, **kwargs).logits
        logits[..., sg.GUIDE_IDS] = judged[..., sg.GUIDE_IDS]
        return CausalLMOutput(logits=logits)


def run_seed(cfg: sg.Config):
    """One seed: train the full method, keeping the checkpoints; every (guide source, fixed
    policy) pair evaluated; saved as units/seed<k>.json."""
    torch.set_num_threads(1)
    sg.seed_everything(cfg.seed)
    prior = sg.load_or_train_prior(cfg, sg.pick_device(cfg.device))
    policy, checkpoints = copy.deepcopy(prior), [copy.deepcopy(prior)]
    state = sg.new_train_state(policy, cfg)
    for fraction in FRACTIONS[1:]:  # the one run, continued exactly from checkpoint to checkpoint
        compare.train_until(policy, prior, cfg, state, int(fraction * cfg.iterations))
        checkpoints.append(copy.deepcopy(policy).eval())
    fixed = {"prior": prior, "final": checkpoints[-1]}
    probe = probe_episodes(prior, cfg)
    results = {
        "own": [instruments.evaluate(c, cfg, guided=True) for c in checkpoints],
        "probe": [probe_metrics(c, probe, cfg) for c in checkpoints],
        "unguided": [instruments.evaluate(c, cfg, guided=False) for c in checkpoints],
        "steered": {name: [instruments.evaluate(Steered(policy, c), cfg, guided=True, judge=c)
                           for c in checkpoints] for name, policy in fixed.items()},
        "final_metrics": sg.final_metrics(state.records, cfg.final_evals)}
    sg.write_atomic(unit(cfg), json.dumps(results))


def unit(cfg: sg.Config) -> Path:
    return Path(cfg.out) / "units" / f"seed{cfg.seed}.json"


def interval_cell(values, baseline) -> str:
    """Mean of the paired differences to `baseline` [95% t-interval]."""
    return compare.interval_text([v - b for v, b in zip(values, baseline)])


def mean_cell(values, digits=3) -> str:
    mean, spread = compare.mean_and_spread(values)
    return f"{mean:.{digits}f} ± {spread:.{digits}f}"


def tables(per_seed: list[dict]) -> str:
    """The steering table (guide source x fixed policy) and the own-play table with loops.
    The guide's accuracy is its progress accuracy (the balanced one in results made before
    the progress accuracy was recorded)."""
    key = compare.guide_accuracy_key(per_seed[0]["own"][0])
    label = "progress acc." if key == compare.PROGRESS else "bal. acc."
    lines = [f"| guides written by | the prior's moves: success | vs the prior's own guides "
             f"[95% CI] | their guides' {label} | the final policy's moves: success | vs "
             f"the prior's guides [95% CI] | their guides' {label} |",
             "|---|---|---|---|---|---|---|"]
    for k, name in enumerate(NAMES):
        cells = []
        for fixed in ("prior", "final"):
            runs = [s["steered"][fixed] for s in per_seed]
            success = [r[k]["success"] for r in runs]
            cells += [mean_cell(success),
                      "-" if k == 0 else interval_cell(success, [r[0]["success"] for r in runs]),
                      mean_cell([r[k][key] for r in runs])]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", f"| checkpoint, playing alone | success with its guides | without | guide "
              f"{label} | looping episodes | revisits per episode |", "|---|---|---|---|---|---|"]
    for k, name in enumerate(NAMES):
        own = [s["own"][k] for s in per_seed]
        lines.append(f"| {name} | {mean_cell([m['success'] for m in own])} | "
                     f"{mean_cell([s['unguided'][k]['success'] for s in per_seed])} | "
                     f"{mean_cell([m[key] for m in own])} | "
                     f"{mean_cell([m['looping_episodes'] for m in own])} | "
                     f"{mean_cell([m['revisits'] for m in own], 2)} |")
    if "probe" in per_seed[0]:  # results made before the probe lack it
        lines += ["", probe_table(per_seed, key, label)]
    return "\n".join(lines)


def probe_table(per_seed: list[dict], key: str, label: str) -> str:
    """Each checkpoint's guide judging the fixed probe (the prior's greedy held-out episodes,
    probe.py): the same moves for every checkpoint, paired by seed against the prior. Beside
    each accuracy, the mean probability the guide puts on the true word (which moves before
    the top word does), and the same on the stale moves where the house records them, all
    together and by their true word (instruments.experiment_metrics)."""
    columns = [("probe_" + key, f"guide {label}"),
               ("probe_guide_true_prob_progress", "probability of the true word"),
               ("probe_guide_accuracy_stale", "stale moves: accuracy"),
               ("probe_guide_true_prob_stale", "stale moves: probability of the true word"),
               ("probe_guide_true_prob_stale_negative", "the truly negative ones"),
               ("probe_guide_true_prob_stale_positive", "the truly positive ones")]
    # a metric some seed lacks is left out: the stale moves outside the house, or results
    # made before the metric was recorded
    columns = [(k, name) for k, name in columns
               if all(s["probe"][0].get(k) is not None for s in per_seed)]
    lines = ["| checkpoint, judging the probe | "
             + " | ".join(f"{name} | vs the prior [95% CI]" for _, name in columns)
             + " | guide accuracy | positive guides |",
             "|---|" + "---|---|" * len(columns) + "---|---|"]
    for k, name in enumerate(NAMES):
        own = [s["probe"][k] for s in per_seed]
        cells = []
        for metric, _ in columns:
            values = [m[metric] for m in own]
            prior = [s["probe"][0][metric] for s in per_seed]
            cells += [mean_cell(values), "-" if k == 0 else interval_cell(values, prior)]
        lines.append(f"| {name} | " + " | ".join(cells) + " | "
                     f"{mean_cell([m['probe_guide_accuracy'] for m in own])} | "
                     f"{mean_cell([m['probe_share_positive'] for m in own], 2)} |")
    return "\n".join(lines)


def main(argv=None):
    cfg, exp = parse_args(argv)
    sg.check_transformers(transformers.__version__)
    sg.pick_device(cfg.device)
    out = Path(cfg.out)
    for folder, option in [(cfg.prior_cache, "--prior-cache"), (out, "--out")]:
        sg.checked_folder(folder, option)
    compare.claim_compare_folder(out, cfg, exp)
    (out / "units").mkdir(exist_ok=True)
    configs = [dataclasses.replace(cfg, seed=cfg.seed + k) for k in range(exp.seeds)]
    todo = [c for c in configs if not unit(c).exists()]
    previous_handler = signal.signal(signal.SIGTERM, sg.stop_like_ctrl_c)
    try:
        compare.run_units(exp.workers, (run_seed, [(c,) for c in todo]))
    except KeyboardInterrupt:
        print(f"\nstopped: {sum(unit(c).exists() for c in configs)} of {len(configs)} seeds "
              f"are saved in {out}; run the same command again to do the rest")
        return None
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
    per_seed = [json.loads(unit(c).read_text()) for c in configs]
    text = (f"Held-out greedy success on {cfg.eval_tasks} tasks, seeds "
            f"{', '.join(str(c.seed) for c in configs)}; mean ± std over seeds, paired "
            f"differences with 95% t-intervals.\nCommand: "
            f"{compare.command_line('checkpoints.py', argv)}\n\n{tables(per_seed)}")
    compare.write_results(out, "checkpoints", text, per_seed)
    return per_seed


if __name__ == "__main__":
    main()
