"""The results the docs cite, kept in the repository: each comparison's compare.json, compact
(compact: final figures per seed and row, the histories the figures draw, no
weights, no per-iteration logs), with the command and the commit that made it, in
experiments/results/<name>/. Every table the docs print from one is printed here, and a test
checks that the docs hold it verbatim.

    python experiments/results.py save runs/hindsight-house-tuning hindsight-house-tuning
    python experiments/results.py show hindsight-house-tuning     # its tables, as the docs hold them
    python experiments/results.py list                            # what is kept
    python experiments/results.py save runs/tune/grpo-lr1e-5,runs/tune/grpo-lr3e-5 tune \
        --commit 333f772                                # training runs of trl_freetext.py

`save` refuses a comparison that has no commit recorded (made before compare.py recorded one)
unless --commit names it. It keeps a comparison (compare.py's --out), a checkpoint experiment
(checkpoints.py's), a prompted model's plays (prompted.py's), or, comma-separated, training
runs of examples/trl_freetext.py (each run's --out: its evaluations, the success before
training in its format, its training minutes and peak, and its command, rebuilt from its
selfguide_config.json and checked by parsing it back).
"""
from __future__ import annotations

import argparse
import json
import math
import random
import re
import shlex
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

import compare  # noqa: E402
from compare import cell, verdict  # noqa: E402  (the standard, beside its interval)
import plots  # noqa: E402  (its log reader; matplotlib only when a figure is drawn)

import selfguide as sg  # noqa: E402

KEPT = Path(__file__).resolve().parent / "results"
HISTORY_KEYS = ("success", "steps", "share_positive", "guide_balanced_accuracy",
                "guide_progress_accuracy", "guide_accuracy_revisit", "guide_accuracy_stale",
                "probe_guide_true_prob_progress", "probe_guide_true_prob_stale",
                "probe_guide_true_prob_stale_negative", "probe_guide_true_prob_stale_positive")
ENV_1 = "GRPO w/ SG & GR, guides at temperature 1"
HINDSIGHT_1 = "GRPO w/ SG & GR, hindsight, guides at temperature 1"
PLACEBO_1 = "control: placebo, guides at temperature 1"
TRUTH_1 = "control: guides paid for the truth, at temperature 1"
CRITIC_1 = "control: the critic without the guide, guides at temperature 1"


def rounded(value, digits: int):
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(v, digits) for v in value]
    return value


def compact(result: dict) -> dict:
    """compare.json as kept: each run's final figures to 6 decimals, its evaluations'
    HISTORY_KEYS (what the figures draw) as columns to 4, lambda(u) left out (the config
    gives it)."""
    def columns(history):
        keys = [k for k in HISTORY_KEYS if any(k in m for _, m in history)]
        return {"iteration": [i for i, _ in history],
                **{k: [m.get(k) for _, m in history] for k in keys}}
    per_seed = [{row: {"final": rounded(run["final"], 6),
                       "history": rounded(columns(run["history"]), 4)}
                 for row, run in seed.items()} for seed in result["per_seed"]]
    return {**{k: v for k, v in result.items() if k != "per_seed"}, "per_seed": per_seed}


def load(name: str) -> dict:
    """A kept compare.json, as compare.py writes it (expand), or a kept checkpoints.json,
    prompted.json or runs.json."""
    for kind in ("checkpoints", "prompted", "runs", "scienceworld"):
        if (KEPT / name / f"{kind}.json").exists():
            return json.loads((KEPT / name / f"{kind}.json").read_text())
    path = KEPT / name / "compare.json"
    if not path.exists():
        raise SystemExit(f"error: no {path}; `python experiments/results.py list` says what is "
                         f"kept")
    return compare.expand(json.loads(path.read_text()))


def keep(name: str, kind: str, result: dict) -> Path:
    """results/<name>/<kind>.json, one compact line."""
    out = KEPT / name / f"{kind}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, separators=(",", ":")) + "\n")
    return out


def freetext_command(config: dict, folder: Path) -> str:
    """The trl_freetext.py command that makes a run's recorded settings: a flag for each
    setting that differs from the default, less those the parser derives from the others
    (--kl-action from --kl-guide, say), checked by parsing the command back."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import contextlib
    import io

    import trl_freetext

    def text(value) -> str:  # a float as short as it parses back exactly
        short = f"{value:g}" if isinstance(value, float) else str(value)
        return short if not isinstance(value, float) or float(short) == value else repr(value)

    def words(keys):
        flags = []
        for key in keys:
            value = config[key]
            flags += ([f"--{'' if value else 'no-'}{sg.flag(key)}"] if isinstance(value, bool)
                      else [f"--{sg.flag(key)}", text(value)])
        return flags

    def parsed(keys):  # the settings the command makes; None where the parser refuses it
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                cfg, ft = trl_freetext.parse_config(words(keys))
        except SystemExit:
            return None
        return {**sg.dataclasses.asdict(cfg), **sg.dataclasses.asdict(ft)}

    defaults = parsed([])
    if set(config) != set(defaults):  # a run of an older or newer trl_freetext.py
        raise SystemExit(f"error: {folder}'s settings are not this trl_freetext.py's: "
                         f"{', '.join(sorted(set(config) ^ set(defaults)))}")
    defaults = parsed(["world"])  # the run's world's defaults (WORLD_DEFAULTS), not the maze's
    keys = ["world"] + [key for key in config if config[key] != defaults[key]]
    for _ in range(2):  # a derived setting may be refused as a flag until another one goes
        for key in list(keys):
            if parsed([k for k in keys if k != key]) == config:
                keys.remove(key)
    made = parsed(keys)
    if made != config:
        raise SystemExit(f"error: no trl_freetext.py command makes {folder}'s settings: "
                         + ", ".join(k for k in config if made is None or made[k] != config[k]))
    return "python examples/trl_freetext.py " + shlex.join(words(keys))


def training_run(folder: Path) -> dict:
    """A trl_freetext.py run as kept: its command, evaluations (iteration: success) and final
    score (the mean of the last --final-evals, as selfguide scores a run), the success before
    training in its format (summary.md's prior row), training minutes (generation, scoring and
    update) and the peak resident set by its last iteration (GiB, before that iteration's
    evaluation), rounded."""
    import freetext  # the free-text comparison's rows (VARIANTS)
    if not (folder / "log.jsonl").exists() or not (folder / "summary.md").exists():
        raise SystemExit(f"error: {folder} holds no finished trl_freetext.py run (log.jsonl, "
                         f"summary.md)")
    config = json.loads((folder / "selfguide_config.json").read_text())
    records = plots.read_log(folder / "log.jsonl")
    prior = freetext.VARIANTS["grpo" if config["variant"] == "grpo" else "sg_gr"][1]
    return rounded({
        "command": freetext_command(config, folder), "variant": config["variant"],
        "before": plots.prior_row((folder / "summary.md").read_text(), prior)["success"],
        "final": sg.final_metrics(records, config["final_evals"])["success"],
        "evaluations": {r["iteration"]: r["eval"]["success"] for r in records if "eval" in r},
        "training_minutes": sum(r["generation_seconds"] + r.get("scoring_seconds", 0.0)
                                + r["update_seconds"] for r in records) / 60,
        "peak_gib": max(r["peak_memory_gib"] for r in records)}, 6)


def command_flags(command: str) -> dict:
    """A command's flags and their values ('' for a switch)."""
    words = shlex.split(command)
    return {w: words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else ""
            for i, w in enumerate(words) if w.startswith("--")}


def runs_table(runs: dict) -> str:
    """Kept training runs, a line each: the flags they differ in (their --out aside), their
    variant, success before training, at each evaluation and as scored (the mean of the last
    --final-evals), training minutes and the peak resident set of the iterations."""
    flags = {name: command_flags(run["command"]) for name, run in runs.items()}
    differ = [flag for flag in dict.fromkeys(f for run in flags.values() for f in run)
              if flag not in ("--out", "--variant")
              and len({run.get(flag) for run in flags.values()}) > 1]
    iterations = sorted({int(i) for run in runs.values() for i in run["evaluations"]})
    lines = ["| run | variant | before | " + " | ".join(f"iteration {i}" for i in iterations)
             + " | mean of the last evaluations | training | peak in training |",
             "|---|---|---|" + "---|" * len(iterations) + "---|---|---|"]
    for name, run in runs.items():
        label = " ".join(f"{flag} {flags[name][flag]}".strip() if flag in flags[name] else
                         f"(no {flag})" for flag in differ) or name
        at = {int(i): v for i, v in run["evaluations"].items()}
        lines.append(f"| {label} | {run['variant']} | {run['before']:.3f} | "
                     + " | ".join(f"{at[i]:.3f}" if i in at else "-" for i in iterations)
                     + f" | {run['final']:.3f} | {run['training_minutes']:.1f} min | "
                     f"{run['peak_gib']:.1f} GiB |")
    return "\n".join(lines)


def full_commit(commit: str) -> str:
    """A commit's whole hash (git's, where this is a clone that has it), else as given."""
    import subprocess
    commit = commit.strip()
    found = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"],
                           cwd=KEPT.parent, capture_output=True, text=True)
    return found.stdout.strip() or commit


def save(folder: str, name: str, commit: str | None = None) -> Path:
    """A comparison's compare.json (compare.py's --out), compacted, or a checkpoint
    experiment's checkpoints.json (checkpoints.py's), a prompted model's prompted.json
    (prompted.py's) or training runs of trl_freetext.py (comma-separated; training_run),
    rounded, into results/<name>/; a prompted run stopped midway is kept with what it
    played, marked partial. A commit given is kept whole (full_commit)."""
    if "," in folder or (Path(folder) / "log.jsonl").exists():  # training runs
        if not commit:
            raise SystemExit(f"error: say which commit made {folder} with --commit")
        folders = [Path(f) for f in folder.split(",") if f]
        commits = [full_commit(c) for c in commit.split(",")]
        commits *= len(folders) if len(commits) == 1 else 1
        if len(commits) != len(folders):
            raise SystemExit(f"error: --commit names {len(commits)} commits for "
                             f"{len(folders)} runs: one for all, or one a run")
        if len({f.name for f in folders}) < len(folders):
            raise SystemExit("error: two runs of one name: a kept run is known by its folder's "
                             "name")
        runs = {f.name: {**training_run(f), "commit": c} for f, c in zip(folders, commits)}
        return keep(name, "runs", {"kind": "runs", "command": "\n".join(
            run["command"] for run in runs.values()), "commit": ", ".join(dict.fromkeys(commits)),
            "seeds": [], "runs": runs})
    folder = Path(folder)
    if (folder / "scienceworld.json").exists():  # scienceworld_table.py's table: its figures, rounded
        result = json.loads((folder / "scienceworld.json").read_text())
        result["commit"] = full_commit(commit) if commit else result.get("commit")
        if not result["commit"] or result["commit"].endswith("+changes"):
            raise SystemExit(f"error: {folder} was made from changed files or records no "
                             f"commit: say which commit made it with --commit")
        return keep(name, "scienceworld", rounded(result, 6))  # (its kind: how it prints)
    for kind in ("prompted", "checkpoints"):  # their figures, with the command their .md heads
        if (folder / f"{kind}.json").exists() and not (folder / "compare.json").exists():
            if not commit:
                raise SystemExit(f"error: say which commit made {folder} with --commit")
            head = (folder / f"{kind}.md").read_text()
            seeds = (head.split("seeds ")[1].split(";")[0].split(", ")
                     if kind == "checkpoints" else [])
            figures = rounded(json.loads((folder / f"{kind}.json").read_text()), 6)
            stopped = re.search(r"stopped or still playing: \d+ of \d+ plays done", head)
            return keep(name, kind, {
                "kind": kind, "command": head.split("Command: ")[1].splitlines()[0],
                "commit": full_commit(commit), "seeds": [int(s) for s in seeds],
                ("rows" if kind == "prompted" else "per_seed"): figures,
                **({"partial": stopped.group(0)} if stopped else {})})
    path = folder / "compare.json"
    if not path.exists():
        raise SystemExit(f"error: no compare.json in {folder}: give a finished comparison's --out")
    result = json.loads(path.read_text())
    result["commit"] = full_commit(commit) if commit else result.get("commit")
    if not result["commit"]:
        raise SystemExit(f"error: {path} records no commit (made before compare.py recorded "
                         f"one): say which with --commit")
    if "command" not in result:
        settings = (folder / "compare.md").read_text().splitlines()[1]
        result["command"] = settings.removeprefix("Command: ")
    return keep(name, "compare", compact(result))


def paired_table(per_seed: list, rows: list, columns: list) -> str:
    """A Markdown table, a line per row: each column (metric, label, baseline row or None) is
    the metric's mean ± std over the seeds, or its paired difference to the baseline row,
    mean [95% t-interval] ('-' for the baseline itself or where a seed lacks the metric). A
    column may name a fourth item, the test a row's name must pass to be shown ('-' if not)."""
    lines = ["| row | " + " | ".join(column[1] for column in columns) + " |",
             "|---|" + "---|" * len(columns)]
    for row in rows:
        cells = []
        for metric, _, baseline, *shown in columns:
            if shown and not shown[0](row):
                cells.append("-")
                continue
            values = [seed[row]["final"].get(metric) for seed in per_seed]
            if baseline is None:
                cells.append(cell(values))
                continue
            others = [seed[baseline]["final"].get(metric) for seed in per_seed]
            cells.append("-" if row == baseline or None in values + others else
                         compare.interval_text([a - b for a, b in zip(values, others)]))
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def hindsight_table(per_seed: list, seeds=None) -> str:  # (seeds: unused)
    """The co-evolution comparison's guide table: success against env at 1; on the fixed probe's
    stale moves, the true word's probability by true word, against the placebo; how often the
    hindsight target was the true word in training (for hindsight's rows only: the placebo's
    record holds the hindsight targets before its coin, not the words it paid)."""
    rows = [r for r in per_seed[0] if r != "ReAct"]
    return paired_table(per_seed, rows, [
        ("success", "held-out success", None),
        ("success", f"vs {ENV_1.removeprefix('GRPO w/ SG & GR, ')} [95% CI]", ENV_1),
        ("probe_guide_true_prob_stale_negative", "probe, truly negative stale moves: "
                                                 "p(true word)", None),
        ("probe_guide_true_prob_stale_negative", "vs the placebo [95% CI]", PLACEBO_1),
        ("probe_guide_true_prob_stale_positive", "truly positive ones: p(true word)", None),
        ("probe_guide_true_prob_stale_positive", "vs the placebo [95% CI]", PLACEBO_1),
        ("train_target_accuracy", "hindsight target = truth, in training", None,
         lambda row: "hindsight" in row)])


def rise_table(per_seed: list, key: str = "probe_guide_true_prob_stale",
               start: int = 50, end: int = 150, seeds=None) -> str:  # (seeds: unused)
    """Whether the guide's judgement follows the policy's competence: on the fixed probe's
    stale moves, the true word's probability at iteration `start` and at `end` (the
    evaluations there), and its rise, against the placebo's rise; held-out success beside."""
    def two_evaluations(run):  # a run's figures at the two evaluations, as paired_table reads them
        at = dict(run["history"])
        first, last = (at.get(i, {}).get(key) for i in (start, end))
        return {"final": {"success_start": at.get(start, {}).get("success"), "at_start": first,
                          "at_end": last, "rise": None if None in (first, last) else last - first}}

    rows = [r for r in per_seed[0] if r not in ("ReAct", "ReAct w/ SG")]
    figures = [{row: two_evaluations(seed[row]) for row in rows} for seed in per_seed]
    return paired_table(figures, rows, [
        ("success_start", f"held-out success, iteration {start}", None),
        ("at_start", f"probe, stale moves: p(true word), iteration {start}", None),
        ("at_end", f"iteration {end}", None),
        ("rise", "the rise", None),
        ("rise", "vs the placebo's rise [95% CI]", PLACEBO_1)])


def default_table(per_seed: list, seeds=None) -> str:  # (seeds: unused)
    """Hindsight in the default maze: success against the default, and the guide's sureness."""
    rows = [r for r in per_seed[0] if r != "ReAct"]
    return paired_table(per_seed, rows, [
        ("success", "held-out success", None),
        ("success", "vs GRPO w/ SG & GR [95% CI]", "GRPO w/ SG & GR"),
        ("probe_guide_true_prob_progress", "probe: p(true word)", None),
        ("probe_guide_true_prob_progress", "vs the prior [95% CI]", "ReAct w/ SG"),
        ("share_positive", "\"positive\", own rollouts", None),
        ("train_target_accuracy", "hindsight target = truth, in training", None)])


def fisher_interval(xs, ys) -> tuple:
    """Pearson's r of paired figures and its 95% interval by Fisher's z,
    tanh(atanh r +- 1.96 / sqrt(n - 3)); (None, None, None) where r is undefined."""
    pairs = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None]
    r = compare.pearson([x for x, _ in pairs], [y for _, y in pairs]) if len(pairs) > 3 else None
    if r is None:
        return None, None, None
    z, half = math.atanh(max(min(r, 1 - 1e-12), -1 + 1e-12)), 1.96 / math.sqrt(len(pairs) - 3)
    return r, math.tanh(z - half), math.tanh(z + half)


def sign_test(differences) -> tuple:
    """The seeds above 0 and below 0 (those at 0 dropped) and the exact two-sided sign-test p:
    twice the binomial tail (n, 1/2) at the smaller count, at most 1."""
    signs = [round(d, 9) for d in differences]
    above, below = sum(d > 0 for d in signs), sum(d < 0 for d in signs)
    n = above + below
    tail = sum(math.comb(n, k) for k in range(min(above, below) + 1)) / 2 ** n
    return above, below, min(1.0, 2 * tail)


def wilcoxon_signed_rank(differences) -> tuple:
    """Wilcoxon's signed-rank test with the zeros dropped (Wilcoxon's way, not Pratt's): W+,
    the sum of the ranks of |d| where d > 0 (tied |d| share their mean rank); the count
    ranked; and the exact two-sided p, twice the smaller tail of W+ over the 2^n equally
    likely sign patterns of those ranks (exact with ties too), at most 1."""
    kept = sorted((abs(d), d > 0) for d in (round(d, 9) for d in differences) if d != 0)
    ranks = [1 + sum(b < a for b, _ in kept) + (sum(b == a for b, _ in kept) - 1) / 2
             for a, _ in kept]
    w_plus = sum(rank for rank, (_, positive) in zip(ranks, kept) if positive)
    patterns = {0: 1}  # twice a rank sum (an integer) -> the sign patterns that reach it
    for rank in ranks:
        step, before = round(2 * rank), patterns
        patterns = dict(before)
        for total, count in before.items():
            patterns[total + step] = patterns.get(total + step, 0) + count
    at = round(2 * w_plus)
    low = sum(count for total, count in patterns.items() if total <= at)
    high = sum(count for total, count in patterns.items() if total >= at)
    return w_plus, len(kept), min(1.0, 2 * min(low, high) / 2 ** len(kept))


def bootstrap_interval(differences, resamples: int = 10_000, seed: int = 0) -> tuple:
    """The mean's 95% percentile bootstrap interval: the figures resampled with replacement
    `resamples` times by random.Random(seed), and the sorted means at 0.025 (resamples - 1)
    and 0.975 (resamples - 1), rounded (the 251st and 9,750th of 10,000)."""
    draw, n = random.Random(seed), len(differences)
    means = sorted(sum(draw.choices(differences, k=n)) / n for _ in range(resamples))
    return means[round(0.025 * (resamples - 1))], means[round(0.975 * (resamples - 1))]


def normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


def over_sample_spread(given, n: int, points: int = 1000) -> float:
    """E[given(w)], w the sample SD of n normal figures over their true SD (w^2 (n - 1) is
    chi-square with n - 1 degrees of freedom): the midpoint rule over w's density."""
    df = n - 1
    top = 1 + 12 / math.sqrt(2 * df)  # w is about 1, give or take 1 / sqrt(2 df)
    constant = math.log(2 * df) - df / 2 * math.log(2) - math.lgamma(df / 2)
    total = 0.0
    for k in range(points):
        w = (k + 0.5) * top / points
        total += math.exp(constant + math.log(w) + (df / 2 - 1) * math.log(df * w * w)
                          - df * w * w / 2) * given(w)
    return total * top / points


def power_above(shift: float, spread: float, n: int) -> float:
    """The chance that the standard says shown for a claim above a threshold (the 95% paired
    t-interval of n differences wholly above it) when the true mean lies `shift` above the
    threshold and the differences' true SD is `spread`: the noncentral t, integrated
    numerically over the sample SD."""
    se, t = spread / math.sqrt(n), compare.t_975(n - 1)
    return over_sample_spread(lambda w: normal_cdf(shift / se - t * w), n)


def power_equivalent(true: float, spread: float, n: int, margin: float = 0.1) -> float:
    """The chance that the standard says equivalent (the 95% interval wholly inside +-margin,
    two one-sided tests) when the true mean is `true` and the true SD `spread`."""
    se, t = spread / math.sqrt(n), compare.t_975(n - 1)
    return over_sample_spread(lambda w: max(0.0, normal_cdf((margin - t * se * w - true) / se)
                                            - normal_cdf((t * se * w - margin - true) / se)), n)


def power_correlation(r: float, n: int) -> float:
    """The chance that Fisher's z interval of Pearson's r on n pairs excludes 0 when the true
    correlation is r: the normal with atanh(r) sqrt(n - 3) against 1.96, both sides."""
    z = math.atanh(r) * math.sqrt(n - 3)
    return normal_cdf(z - 1.96) + normal_cdf(-z - 1.96)


def needed(power, target: float = 0.8, high: float = 2.0) -> float:
    """The smallest x in [0, high] with power(x) >= target (power rising in x), by bisection."""
    low = 0.0
    for _ in range(40):
        low, high = (low, (low + high) / 2) if power((low + high) / 2) >= target else \
            ((low + high) / 2, high)
    return high


PAPER_GAIN = 0.08  # the paper's average gain of the full method over GRPO (PAPER.md)
CLAIMS = [  # section 14's claims on critic-house: name, figure, row - row, threshold, margin
    ("1. hindsight - placebo, probe, truly negative stale moves",
     "probe_guide_true_prob_stale_negative", HINDSIGHT_1, PLACEBO_1, 0.1, None),
    ("2. the same, truly positive", "probe_guide_true_prob_stale_positive",
     HINDSIGHT_1, PLACEBO_1, 0.1, None),
    ("3a. the same on its own rollouts, truly negative", "guide_true_prob_stale_negative",
     HINDSIGHT_1, PLACEBO_1, 0.1, None),
    ("3b. the same on its own rollouts, truly positive", "guide_true_prob_stale_positive",
     HINDSIGHT_1, PLACEBO_1, 0.1, None),
    ("4. success, hindsight - GRPO", "success", HINDSIGHT_1, "GRPO", 0.0, 0.1),
    ("5. success, hindsight - placebo", "success", HINDSIGHT_1, PLACEBO_1, 0.0, 0.1),
    ("6. success, hindsight - env at 1", "success", HINDSIGHT_1, ENV_1, 0.0, 0.1),
    ("7. success, hindsight - the critic", "success", HINDSIGHT_1, CRITIC_1, 0.0, 0.1),
    ("8. success, the critic - env at 1", "success", CRITIC_1, ENV_1, 0.0, None)]
STEERING = "9. the final guides on the prior's moves - the prior's guides"  # K-critic's claim
PREDICTORS = [("10. early target coverage", "early_target_coverage", HINDSIGHT_1),
              ("10'. env at 1's final success", "success", ENV_1)]


def claim_differences(per_seed: list, key: str, a: str, b: str) -> list:
    """Row a's figure minus row b's, by seed, on the seeds where both have it (none where a
    comparison lacks a row)."""
    pairs = [(s[a]["final"].get(key), s[b]["final"].get(key)) for s in per_seed
             if a in s and b in s]
    return [x - y for x, y in pairs if x is not None and y is not None]


def learning(seed: dict):
    """Claim 10's learning figure: the mean of claims 1 and 2's differences (the one defined)."""
    hindsight, placebo = seed[HINDSIGHT_1]["final"], seed[PLACEBO_1]["final"]
    found = [hindsight[k] - placebo[k] for k in ("probe_guide_true_prob_stale_negative",
                                                 "probe_guide_true_prob_stale_positive")
             if None not in (hindsight.get(k), placebo.get(k))]
    return sum(found) / len(found) if found else None


def registered_table(per_seed: list, seeds: list | None = None) -> str:
    """REPORT section 14's claims, each judged by the standard, in the order registered
    (claim 9, the checkpoint experiment, is K-critic's: steering_claim); then, with the seeds, the
    median seed by claim 10's learning figure (the lower of the two middle ones), the
    README's one-seed demo."""
    lines = ["| claim, registered | threshold | figure [95% CI], seeds above the threshold | verdict |",
             "|---|---|---|---|"]
    for name, key, a, b, threshold, margin in CLAIMS:
        found = claim_differences(per_seed, key, a, b)
        above = sum(d > threshold for d in found)
        declared = "" if margin is None else f", margin +-{margin}"
        lines.append(f"| {name} | {threshold:+.1f}{declared} | " + (
            f"{compare.interval_text(found)}, {above} of {len(found)} | "
            f"{verdict(found, threshold, margin)} |" if found else "- | - |"))
    learned = [learning(seed) for seed in per_seed]
    for name, key, row in PREDICTORS:
        r, low, high = fisher_interval([s[row]["final"].get(key) for s in per_seed], learned)
        said = "-" if r is None else \
            "shown" if low > 0 else "not shown" if high < 0 else "not resolved"
        lines.append(f"| {name} predicts learning (Pearson r) | 0 | "
                     f"{'-' if r is None else f'{r:+.3f} [{low:+.3f}, {high:+.3f}]'} | {said} |")
    against_0 = [(name.split(".")[0], sign_test(found)) for name, key, a, b, threshold, _ in CLAIMS
                 if threshold and (found := claim_differences(per_seed, key, a, b))]
    if against_0:  # the guide's claims read against 0, as a reader may: the count of seeds
        lines += ["", "Not pre-registered, claims " + ", ".join(n for n, _ in against_0)
                  + " against 0 instead of the +0.1 claimed, by the sign test (exact, the seeds "
                  "at 0 dropped): " + "; ".join(f"{n}, {above} above, {below} below, p = {p:.4f}"
                                                for n, (above, below, p) in against_0) + "."]
    ranked = sorted((figure, seed) for figure, seed in zip(learned, seeds or []) if figure is not None)
    if ranked:
        figure, seed = ranked[(len(ranked) - 1) // 2]
        lines += ["", f"The median seed by the learning figure (claim 10's), the lower of the two "
                      f"middle ones if the count is even: seed {seed}, {figure:+.3f} (of "
                      f"{len(ranked)} seeds)."]
    return "\n".join(lines)


POWER_ROWS = ["SD of the differences, 420-429 (section 13)", "SD, 430-459 (after the run)",
              "shown: the true difference assumed",
              "its power, with the SD of 420-429; of 430-459",
              "the true difference shown 80% of the time, the same",
              "equivalent within +-0.10: power at a true 0, the same",
              "at a true +0.08, the same"]


def power_column(after: list, before: list, threshold: float, margin) -> list:
    """A claim's power (power_table), a cell for each of POWER_ROWS; with two SDs, 'before;
    after' (the SD of 420-429; of 430-459), at n = the seeds judged."""
    n, reference = len(after), threshold + 0.1 if threshold else PAPER_GAIN
    spreads = [compare.mean_and_spread(d)[1] if len(d) > 1 else None for d in (before, after)]

    def both(figure, text="{:.2f}"):
        return "; ".join("-" if sd is None else text.format(figure(sd)) for sd in spreads)
    cells = [f"{sd:.3f}" if sd is not None else "-" for sd in spreads] + [
        f"{reference:+.2f}", both(lambda sd: power_above(reference - threshold, sd, n)),
        both(lambda sd: threshold + needed(lambda x: power_above(x, sd, n)), "{:+.3f}")]
    return cells + ([both(lambda sd: power_equivalent(true, sd, n, margin))
                     for true in (0.0, PAPER_GAIN)] if margin is not None else ["-", "-"])


def power_table(per_seed: list, seeds=None) -> str:  # (seeds: unused)
    """The power of each registered claim of section 14 (a column each) at the seeds it was
    judged on: a claim above a threshold by the paired t (power_above) at a true difference
    0.1 above it (claims 1-3) or the paper's gain, +0.08 (success), and the true difference it
    shows 80% of the time; a margin's equivalence by the two one-sided tests
    (power_equivalent) at a true 0 and +0.08; each with the SD of the same differences on
    section 13's seeds 420-429 (coevolution-house, claim 9's K-hindsight; '-' where no such
    row ran), then on 430-459 (after the run). The predictors by Fisher's z
    (power_correlation) at a true r = +0.3."""
    earlier = load("coevolution-house")["per_seed"]
    columns = []
    for name, key, a, b, threshold, margin in CLAIMS:
        after = claim_differences(per_seed, key, a, b)
        columns.append((name.split(".")[0], len(after), power_column(
            after, claim_differences(earlier, key, a, b), threshold, margin)))
    after, before = (steering_differences(load(name)["per_seed"])
                     for name in ("K-critic", "K-hindsight"))
    columns.append(("9", len(after), power_column(after, before, 0.0, None)))
    for name, key, row in PREDICTORS:
        n = sum(s[row]["final"].get(key) is not None and learning(s) is not None
                for s in per_seed)
        columns.append((name.split(".")[0], n, [
            "-", "-", "r = +0.30", f"{power_correlation(0.3, n):.2f}",
            f"r = {needed(lambda r: power_correlation(r, n), high=0.999):+.3f}", "-", "-"]))
    lines = ["| claim (seeds judged) | " + " | ".join(f"{name} ({n})" for name, n, _ in columns)
             + " |", "|---|" + "---|" * len(columns)]
    lines += [f"| {label} | " + " | ".join(cells[k] for _, _, cells in columns) + " |"
              for k, label in enumerate(POWER_ROWS)]
    return "\n".join(lines)


def steering_differences(per_seed: list) -> list:
    """Claim 9's figure by seed, from a checkpoint experiment: the final checkpoint's guides
    steering the prior's moves, success minus the prior's own guides steering them."""
    return [s["steered"]["prior"][-1]["success"] - s["steered"]["prior"][0]["success"]
            for s in per_seed]


def steering_claim(per_seed: list, seeds=None) -> str:  # (seeds: unused)
    """REPORT section 14's claim 9 from a checkpoint experiment, judged by the standard (above
    0); then the same differences by tests that do not lean on the t-interval's normal mean,
    none of them registered: the sign test, Wilcoxon's signed-rank test and the bootstrap."""
    found = steering_differences(per_seed)
    above, below, sign_p = sign_test(found)
    w_plus, ranked, wilcoxon_p = wilcoxon_signed_rank(found)
    low, high = bootstrap_interval(found)
    mean = sum(found) / len(found)
    return "\n".join([
        "| claim, registered | threshold | figure [95% CI], seeds above, below | verdict |",
        "|---|---|---|---|",
        f"| {STEERING} | +0.0 | {compare.interval_text(found)}, {above} above, {below} below "
        f"(of {len(found)}) | {verdict(found, 0.0)} |", "",
        "| claim 9's differences, other tests (not pre-registered) | figure | two-sided p |",
        "|---|---|---|",
        f"| sign test, exact binomial, the seeds at 0 dropped | {above} above, {below} below, "
        f"{len(found) - above - below} at 0 | {sign_p:.4f} |",
        f"| Wilcoxon signed-rank, exact, zeros dropped (Wilcoxon's way), ties at their mean rank "
        f"| W+ = {w_plus:.1f} of {ranked * (ranked + 1) / 2:.1f} ({ranked} seeds ranked) | "
        f"{wilcoxon_p:.4f} |",
        f"| bootstrap of the mean, 95% percentile interval, 10,000 resamples of the seeds "
        f"(random.Random(0)) | {mean:+.3f} [{low:+.3f}, {high:+.3f}] | - |"])


def steering_seeds(per_seed: list, seeds=None) -> str:
    """Claim 9 seed by seed, the seeds ordered by its difference, then by the final guide's
    learning: claim 9's difference; the final guide's p(true word) on the probe's stale moves;
    the prior's guide-sensitivity (its success with its own guides minus without); the final
    guides against the prior's on the final policy's moves. Then, not pre-registered, how
    claim 9 splits at 0.3 on the final guide's p(true word) and where the prior's
    guide-sensitivity is 0."""
    found = steering_differences(per_seed)
    stale = [s["probe"][-1]["probe_guide_true_prob_stale"] for s in per_seed]
    sensitive = [s["own"][0]["success"] - s["unguided"][0]["success"] for s in per_seed]
    final = [s["steered"]["final"][-1]["success"] - s["steered"]["final"][0]["success"]
             for s in per_seed]
    order = sorted(range(len(per_seed)), key=lambda k: (-round(found[k], 9), -stale[k]))
    names = seeds or list(range(len(per_seed)))
    def signed(value):  # a difference; exactly 0 as 0, the zeros the sign test drops
        return "0" if round(value, 9) == 0 else f"{value:+.3f}"
    rows = [("claim 9: the final guides - the prior's, on the prior's moves", found, signed),
            ("the final guide, the probe's stale moves: p(true word)", stale, "{:.3f}".format),
            ("the prior: success with its guides - without", sensitive, signed),
            ("the final policy's moves: the final guides - the prior's", final, signed)]
    lines = ["| seed | " + " | ".join(str(names[k]) for k in order) + " |",
             "|---|" + "---|" * len(order)]
    lines += [f"| {label} | " + " | ".join(text(values[k]) for k in order) + " |"
              for label, values, text in rows]

    def split(group):  # claim 9's difference above, at, below 0 on these seeds
        signs = [round(found[k], 9) for k in group]
        return sum(d > 0 for d in signs), sum(d == 0 for d in signs), sum(d < 0 for d in signs)
    learned = [k for k in order if stale[k] > 0.3]
    rest = [k for k in order if stale[k] <= 0.3]
    steered = [k for k in order if round(found[k], 9) > 0]
    deaf = [k for k in order if round(sensitive[k], 9) == 0]
    lines += ["", "Not pre-registered: on the {} seeds whose final guide puts more than 0.3 on "
              "the stale moves' true word, claim 9's difference is above 0 on {}, 0 on {}, below "
              "on {}; on the other {}, above on {}, 0 on {}, below on {}. The prior's success with "
              "its guides minus without is 0 on {} seeds, {} of them among the {} above 0."
              .format(len(learned), *split(learned), len(rest), *split(rest), len(deaf),
                      len(set(deaf) & set(steered)), len(steered))]
    return "\n".join(lines)


TABLES = {  # what the docs print from each kept comparison, besides compare.py's own table
    "hindsight-house-tuning": [hindsight_table, rise_table],
    "coevolution-house": [hindsight_table, rise_table],
    "hindsight-default-tuning": [default_table],
    "critic-house": [hindsight_table, registered_table, power_table],  # REPORT section 14
    "K-critic": [steering_claim, steering_seeds],  # its claim 9
}


def tables(name: str) -> list:
    """The tables the docs hold from results/<name>: compare.py's (a checkpoint experiment's,
    checkpoints.py's), then TABLES'."""
    result = load(name)
    if result.get("kind") == "runs":
        return [runs_table(result["runs"])]
    if result.get("kind") in ("scienceworld", "scienceworld-priors", "scienceworld-players"):
        import scienceworld_table  # the first two tables had one prior for every seed
        return [{"scienceworld": scienceworld_table.superseded_table,
                 "scienceworld-priors": scienceworld_table.table,
                 "scienceworld-players": scienceworld_table.players_table}[result["kind"]](
                     result)]
    if result.get("kind") == "prompted":
        import prompted
        return [prompted.table(result["rows"])] + ([result["partial"]] if "partial" in result
                                                    else [])  # a run stopped midway says so
    per_seed = result["per_seed"]
    if result.get("kind") == "checkpoints":
        import checkpoints
        first = checkpoints.tables(per_seed)
    else:
        first = compare.compare_table(per_seed)
    return [first] + [table(per_seed, seeds=result["seeds"]) for table in TABLES.get(name, [])]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    keep = verbs.add_parser("save", help="keep a comparison's results under a name")
    keep.add_argument("folder", help="its --out, or training runs' --out folders, comma-separated")
    keep.add_argument("name")
    keep.add_argument("--commit", default=None, help="the commit that made them, where the "
                      "results do not record it (all but compare.py's): for training runs one "
                      "for all, or one a run, comma-separated")
    verbs.add_parser("show", help="print a kept comparison's tables").add_argument("name")
    verbs.add_parser("list", help="the kept comparisons")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.verb == "save":
        print(f"written {save(args.folder, args.name, args.commit)}")
    elif args.verb == "show":
        result = load(args.name)
        seeds = f", seeds {', '.join(map(str, result['seeds']))}" if result["seeds"] else ""
        print(f"{result['command']}\n(commit {result['commit']}{seeds})\n\n"
              + "\n\n".join(tables(args.name)))
    else:
        for folder in sorted(p.parent.name for p in KEPT.glob("*/*.json")):
            print(folder)


if __name__ == "__main__":
    main()
