"""The paper's table on the toy: every row of Self-Guide's comparison, trained per seed from
that seed's own Stage 0 prior, with paired statistics.

    python experiments/compare.py --quick          # the laptop demo: 2 seeds, core rows (~3 min)
    python experiments/compare.py --rows sampling --seeds 10 --seed 500 --workers 2 --out runs/familiar
                                                   # the README's headline table
    python experiments/compare.py --controls       # + the oracle and random rewards
    python experiments/plots.py runs/compare       # its figures (plots.py reads its files)
    python experiments/compare.py --help           # selfguide.py's settings, then these

Each row is selfguide.py's own run with a few settings changed (ROWS); this file adds nothing
to the method. Rows are paired by seed (the same prior, the same task seeds): each row's
difference in held-out success to GRPO and to GRPO w/ SG comes with a 95% t-interval over the
seeds. Rows that agree up to the first iteration with lambda > 0 train that prefix once (a
trunk) and branch from a snapshot of it; each (seed, trunk) is a work unit, saved as it
finishes, so a comparison that is stopped resumes when the same command runs again. The
research report, experiments/REPORT.md, gives every table's command.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent),  # selfguide.py, toy_env.py
                str(Path(__file__).resolve().parent)]  # probe.py

import torch  # noqa: E402
import transformers  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

import selfguide as sg  # noqa: E402
import instruments  # noqa: E402
import research  # noqa: E402
from probe import probe_episodes, probe_metrics  # noqa: E402
from selfguide import setting  # noqa: E402


@dataclass
class Seeds:
    """An experiment over seeds (checkpoints.py, priors.py): its own settings; every other flag
    is one of selfguide.py's and the research variants' (research.Config)."""
    seeds: int = setting(5, "seeds (each with its own prior), from --seed on")
    workers: int = setting(1, "seeds run in parallel processes (1 thread each)")

    def __post_init__(self):
        for name in ("seeds", "workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} must be at least 1")


@dataclass
class Experiment(Seeds):
    """The comparison's own settings; every other flag is research.Config's."""
    seeds: int = setting(3, "seeds (each with its own prior), from --seed on")
    rows: str = setting("paper", "paper (every row of ROWS), core (GRPO, GRPO w/ SG, GRPO w/ SG "
                                 "& GR), oracle (GRPO with and without the oracle reward, by "
                                 "credit: where can a dense reward pay?), slot (what the guide "
                                 "slot costs GRPO, and why) or sampling (the core rows, and the "
                                 "guided ones with guides sampled in training at the other "
                                 "temperature, 0.1 or 1) or house (the paper's rows, guides "
                                 "trained by the KL alone, guides at temperature 1) or guide "
                                 "(the core rows, the full method with guides paid for the "
                                 "outcome, and guides paid for the truth, each at 0.1 and 1) "
                                 "or gradient (the full method's guides trained by the KL "
                                 "alone, and by the paper's composite advantage, at 0.1 and 1: "
                                 "with --rows guide, what reaches the guide) or hindsight (guides "
                                 "paid against the agent's own hindsight, at 0.1 and 1, against "
                                 "a placebo, the truth and env at 1) "
                                 "or coevolution (hindsight, the placebo, the truth and env, at "
                                 "1) or hindsight-default (the full method, and hindsight at 0.1 "
                                 "and 1) or critic (GRPO, coevolution's rows, and hindsight's "
                                 "critic paying the moves as r_t, the guides at the env guard)",
                        ["paper", "core", "oracle", "slot", "sampling", "house", "guide",
                         "gradient", "hindsight", "coevolution", "hindsight-default", "critic"])
    controls: bool = setting(False, "add the control rows (oracle and random reward)")
    guards: bool = setting(False, "add the guard ablation rows")
    quick: bool = setting(False, "a smaller preset for a laptop demo: see QUICK")


QUICK = {"seeds": 2, "workers": 2, "rows": "core"}
ONE_RUN_ONLY = ("eval_only", "init_from", "show")  # selfguide.py's, for a single run


def parse_settings(argv, own, description: str, out: str, preset=None):
    """The research variants' settings (research.Config, selfguide.py's and the report's) and
    an experiment's own (the dataclass `own`) from
    one command line; the default --out is `out`; with --quick, `preset` changes defaults
    (flags given explicitly still win). Bad values, and the settings of a single run, exit in
    one usage line. Returns (cfg, the experiment's settings)."""
    def parser_with(defaults: dict):
        parser = argparse.ArgumentParser(description=description,
                                         formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        sg.add_settings(parser, research.Config)
        sg.add_settings(parser, own)
        parser.set_defaults(out=out, **defaults)
        return parser

    parser = parser_with({})
    values = sg.parse_settings(parser, argv)  # with --paper-faithful's defaults
    if preset and values["quick"]:
        parser = parser_with(preset)
        values = sg.parse_settings(parser, argv)
    names = {f.name for f in dataclasses.fields(own)}
    try:
        cfg = research.Config(**{k: v for k, v in values.items() if k not in names})
        exp = own(**{k: v for k, v in values.items() if k in names})
    except ValueError as error:
        parser.error(str(error))  # exits with a usage line, never a traceback
    given = [f"--{sg.flag(k)}" for k in ONE_RUN_ONLY if values[k]]
    if given:
        parser.error(f"{', '.join(given)} goes with a single run of selfguide.py, not an "
                     f"experiment of many")
    return cfg, exp


def parse_args(argv=None) -> tuple[sg.Config, Experiment]:
    return parse_settings(argv, Experiment, __doc__.split("\n\n")[0], "runs/compare", QUICK)


def compare_folder(cfg: sg.Config) -> Path:
    return Path(cfg.out or "runs/compare")


# --- the rows: the paper's table and its ablations, controls, guards ---

ROWS = [  # (row, settings that differ from the run's own); the paper's table and its ablations
    ("GRPO", {"variant": "grpo"}),
    ("GRPO w/ SG", {"variant": "sg"}),
    ("GRPO w/ SG & GR", {"variant": "sg_gr"}),
    ("  ablation: immediate lambda = 1", {"variant": "sg_gr", "schedule": "immediate"}),
    ("  ablation: no annealing", {"variant": "sg_gr", "schedule": "no_anneal"}),
    ("  ablation: reward enters at 25%", {"variant": "sg_gr", "enter_at": 0.25}),
    ("GRPO w/ SG & GR, paper-faithful", {"variant": "sg_gr", **sg.PAPER_FAITHFUL}),
]
CONTROL_ROWS = [  # --controls: what any internal reward can do here (controls, not methods)
    ("control: oracle reward for the guide's", {"variant": "sg_gr", "internal_reward": "oracle"}),
    ("control: random reward, the guides' shares",
     {"variant": "sg_gr", "internal_reward": "random"}),
    ("control: oracle reward, no guide slot", {"variant": "grpo", "internal_reward": "oracle"}),
]
ORACLE_ROWS = [  # --rows oracle: can a perfect internal reward help GRPO here, and how credited?
    ("GRPO", {"variant": "grpo"}),
    ("GRPO + oracle reward, trajectory credit",
     {"variant": "grpo", "internal_reward": "oracle", "credit": "trajectory"}),
    ("GRPO + oracle reward, step credit",
     {"variant": "grpo", "internal_reward": "oracle", "credit": "step"}),
]
SLOT_ROWS = [  # --rows slot: why does the guide slot cost GRPO? (lambda = 0 in every row)
    ("GRPO", {"variant": "grpo"}),
    ("GRPO w/ SG", {"variant": "sg"}),
    ("  guides trained by the KL alone", {"variant": "sg", "guide_advantage": "none"}),
    ("  guides sampled at temperature 0.5", {"variant": "sg", "guide_temperature": 0.5}),
    ("  no guide KL", {"variant": "sg", "kl_guide": 0.0}),
]


def sampling_rows(guide_temperature: float) -> list:
    """--rows sampling: does the sampling noise of the guides in training cost the slot? The
    core rows, and the guided ones again at the other guide temperature (0.1, or 1 when the
    run's own --guide-temperature is not 1)."""
    other = 0.1 if guide_temperature == 1.0 else 1.0
    return ROWS[:3] + [(f"{row}, guides at temperature {other:g}",
                        {"variant": variant, "guide_temperature": other})
                       for row, variant in [("GRPO w/ SG", "sg"), ("GRPO w/ SG & GR", "sg_gr")]]


HOUSE_ROWS = ROWS + [  # --rows house: does the guide co-evolve where it has a reason to?
    ("GRPO w/ SG & GR, guides trained by the KL alone",
     {"variant": "sg_gr", "guide_advantage": "none"}),
    ("GRPO w/ SG, guides at temperature 1", {"variant": "sg", "guide_temperature": 1.0}),
    ("GRPO w/ SG & GR, guides at temperature 1", {"variant": "sg_gr", "guide_temperature": 1.0}),
]
GUIDE_ROWS = ROWS[:3] + [  # --rows guide: can the guide learn, and does the outcome teach it?
    ("GRPO w/ SG & GR, guides at temperature 1", {"variant": "sg_gr", "guide_temperature": 1.0}),
    ("GRPO w/ SG & GR, outcome guard", {"variant": "sg_gr", "guide_advantage": "outcome"}),
    ("GRPO w/ SG & GR, outcome guard, guides at temperature 1",
     {"variant": "sg_gr", "guide_advantage": "outcome", "guide_temperature": 1.0}),
    ("control: guides paid for the truth", {"variant": "sg_gr", "guide_advantage": "truth"}),
    ("control: guides paid for the truth, at temperature 1",
     {"variant": "sg_gr", "guide_advantage": "truth", "guide_temperature": 1.0}),
]
GRADIENT_ROWS = [  # --rows gradient: with --rows guide's env rows, what reaches the guide
    (f"GRPO w/ SG & GR, guide advantage {advantage}, guides at temperature {temperature:g}",
     {"variant": "sg_gr", "guide_advantage": advantage, "guide_temperature": temperature})
    for advantage in ("none", "composite") for temperature in (0.1, 1.0)]
HINDSIGHT_ROWS = [  # --rows hindsight: does a guide paid against the agent's own hindsight learn?
    ("GRPO w/ SG & GR, guides at temperature 1", {"variant": "sg_gr", "guide_temperature": 1.0}),
    ("GRPO w/ SG & GR, hindsight", {"variant": "sg_gr", "guide_advantage": "hindsight"}),
    ("GRPO w/ SG & GR, hindsight, guides at temperature 1",
     {"variant": "sg_gr", "guide_advantage": "hindsight", "guide_temperature": 1.0}),
    ("control: placebo, guides at temperature 1",
     {"variant": "sg_gr", "guide_advantage": "placebo", "guide_temperature": 1.0}),
    ("control: guides paid for the truth, at temperature 1",
     {"variant": "sg_gr", "guide_advantage": "truth", "guide_temperature": 1.0}),
]
COEVOLUTION_ROWS = [HINDSIGHT_ROWS[i] for i in (0, 2, 3, 4)]  # --rows coevolution
CRITIC_ROWS = [ROWS[0]] + COEVOLUTION_ROWS + [  # --rows critic: whose gain is hindsight's?
    ("control: the critic without the guide, guides at temperature 1",
     {"variant": "sg_gr", "internal_reward": "hindsight", "guide_temperature": 1.0})]
HINDSIGHT_DEFAULT_ROWS = [ROWS[2]] + HINDSIGHT_ROWS[1:3]  # --rows hindsight-default
GUARD_ROWS = [  # --guards: which guard the full method needs, starting from the paper as written
    ("GRPO w/ SG & GR, paper-faithful", {"variant": "sg_gr", **sg.PAPER_FAITHFUL}),
    ("  + guide KL only", {"variant": "sg_gr", **sg.PAPER_FAITHFUL, "kl_guide": 0.1}),
    ("  + length-neutral mean only", {"variant": "sg_gr", **sg.PAPER_FAITHFUL,
                                      "internal_return": "mean"}),
    ("  + guide trained by env advantage only", {"variant": "sg_gr", **sg.PAPER_FAITHFUL,
                                                 "guide_advantage": "env"}),
    ("  + guide KL and env-advantage guide (paper's sum)",
     {"variant": "sg_gr", **sg.PAPER_FAITHFUL, "kl_guide": 0.1, "guide_advantage": "env"}),
    ("  + all three guards", {"variant": "sg_gr", **sg.PAPER_FAITHFUL, "kl_guide": 0.1,
                              "internal_return": "mean", "guide_advantage": "env"}),
]


def compare_rows(cfg: sg.Config, exp: Experiment) -> list:
    """The rows a comparison trains, in table order, each once."""
    rows = {"paper": ROWS, "core": ROWS[:3], "oracle": ORACLE_ROWS, "slot": SLOT_ROWS,
            "sampling": sampling_rows(cfg.guide_temperature), "house": HOUSE_ROWS,
            "guide": GUIDE_ROWS, "gradient": GRADIENT_ROWS, "hindsight": HINDSIGHT_ROWS,
            "coevolution": COEVOLUTION_ROWS, "hindsight-default": HINDSIGHT_DEFAULT_ROWS,
            "critic": CRITIC_ROWS}[exp.rows] \
        + (CONTROL_ROWS if exp.controls else []) + (GUARD_ROWS if exp.guards else [])
    return list(dict(rows).items())


def expand(result: dict) -> dict:
    """A kept, compact result (results.py) back in this file's form: histories [(iteration,
    metrics)], each run's lambda(u) from the config; compare.py's own, as it is."""
    if not result["per_seed"] or isinstance(
            next(iter(result["per_seed"][0].values()))["history"], list):
        return result
    settings = {f.name for f in sg.dataclasses.fields(research.Config)}
    base = research.Config(**{k: v for k, v in result["config"].items() if k in settings})
    rows = dict(compare_rows(base, Experiment(
        **{k: v for k, v in result["config"].items() if k in ("rows", "controls", "guards")})))
    for seed in result["per_seed"]:
        for row, run in seed.items():
            columns = run["history"]
            run["history"] = [(i, {k: v[n] for k, v in columns.items()
                                   if k != "iteration" and v[n] is not None})
                              for n, i in enumerate(columns["iteration"])]
            cfg = sg.dataclasses.replace(base, **rows.get(row, {}))
            run["trust"] = ([sg.trust_at(cfg, u) for u in range(1, cfg.iterations + 1)]
                            if row in rows else [])
    return result


# --- trunk sharing: rows that agree while lambda = 0 train that prefix once ---

def first_trusted_iteration(cfg: sg.Config) -> int:
    """The first iteration with lambda > 0 (cfg.iterations + 1 if none): up to it, a row
    computes exactly what its trunk computes, so --compare trains that prefix once."""
    return next((i for i in range(1, cfg.iterations + 1) if sg.trust_at(cfg, i) > 0),
                cfg.iterations + 1)


def trunk_config(cfg: sg.Config) -> sg.Config:
    """The lambda = 0 run a row shares its first iterations with: plain GRPO for the rows
    without a guide slot, GRPO w/ SG for the others. Until lambda > 0, everything about the
    internal reward (its source, its form, its credit, which advantage the guide gets) is
    multiplied by zero, so those settings are reset here and rows that differ only in them
    share one trunk. (Guides trained by the KL alone, or paid for the outcome, the truth,
    hindsight or the placebo, differ from the first iteration on; hindsight's critic builds
    its V from the first iteration on, so that row is its own trunk.)"""
    if cfg.internal_reward == "hindsight":
        return cfg
    # env's guide advantage is composite's at lambda = 0: A_env; every other differs from it
    guide_advantage = "composite" if cfg.guide_advantage == "env" else cfg.guide_advantage
    return dataclasses.replace(cfg, variant="grpo" if cfg.variant == "grpo" else "sg",
                               schedule="trapezoid", enter_at=0.5, internal_reward="guide",
                               internal_return="sum", guide_advantage=guide_advantage,
                               credit="trajectory")


def snapshot(policy, state: sg.TrainState) -> dict:
    return {"policy": copy.deepcopy(policy.state_dict()),
            "optimizer": copy.deepcopy(state.optimizer.state_dict()),
            "tasks": state.tasks.getstate(), "sampler": state.sampler.get_state(),
            "shuffler": state.shuffler.get_state(), "iteration": state.iteration,
            "records": list(state.records),
            "research": copy.deepcopy(vars(state).get("research"))}  # research.Carried, if any


def restore(saved: dict, prior, cfg: sg.Config):
    """A policy and TrainState that continue exactly where `saved` was taken."""
    policy = copy.deepcopy(prior)
    policy.load_state_dict(saved["policy"])
    state = sg.new_train_state(policy, cfg)
    # load_state_dict keeps the saved moment tensors as they are, so without this copy a
    # second branch from the same snapshot would start from the first branch's moments
    state.optimizer.load_state_dict(copy.deepcopy(saved["optimizer"]))
    state.tasks.setstate(saved["tasks"])
    state.sampler.set_state(saved["sampler"])
    state.shuffler.set_state(saved["shuffler"])
    state.iteration, state.records = saved["iteration"], list(saved["records"])
    if saved["research"] is not None:
        state.research = copy.deepcopy(saved["research"])
    return policy, state


def train_until(policy, prior, cfg: research.Config, state: sg.TrainState, until: int,
                probe=None):
    """Continue the run of `state` to iteration `until`, exactly as selfguide.train runs it,
    each held-out evaluation with instruments.evaluate's metrics (and given a probe, the
    guide's on it) and each record with instruments.training_figures."""
    for _ in tqdm(range(state.iteration, until), desc=f"GRPO {cfg.variant} seed {cfg.seed}",
                  leave=False):
        record = sg.grpo_iteration(policy, prior, cfg, state)
        if record["iteration"] % cfg.eval_every == 0 or record["iteration"] == cfg.iterations:
            record["eval"] = instruments.evaluate(policy, cfg, cfg.guided)
            if probe is not None and cfg.guided:
                record["eval"].update(probe_metrics(policy, probe, cfg))
        batch, advantages, targets = research.carried(state, cfg).last
        record.update(instruments.training_figures(batch, advantages, targets, prior, cfg))


def train_rows(prior, configs: dict, probe=None) -> dict:
    """Train every row's config from the prior, training each shared lambda = 0 prefix once
    (the probe, if given, judged at every evaluation of a guided row). Returns {row: (policy,
    records)}; the result equals training each row on its own."""
    trunks = {}
    for row, cfg in configs.items():
        key = json.dumps(dataclasses.asdict(trunk_config(cfg)), sort_keys=True)
        trunks.setdefault(key, []).append(row)
    results = {}
    for rows in trunks.values():
        trunk = trunk_config(configs[rows[0]])
        branch_points = sorted({first_trusted_iteration(configs[r]) - 1 for r in rows})
        policy, saved = copy.deepcopy(prior), {}
        state = sg.new_train_state(policy, trunk)
        for point in branch_points:
            train_until(policy, prior, trunk, state, point, probe if trunk.guided else None)
            saved[point] = snapshot(policy, state)
        for row in rows:
            cfg = configs[row]
            policy, state = restore(saved[first_trusted_iteration(cfg) - 1], prior, cfg)
            train_until(policy, prior, cfg, state, cfg.iterations, probe if cfg.guided else None)
            results[row] = (policy, state.records)
    return results


# --- work units: one seed's prompting rows, or one seed's rows of one trunk ---

def unit_path(cfg: sg.Config, rows=None) -> Path:
    """Where a work unit saves its rows the moment it finishes: one seed's prompting
    rows (rows None), or one seed's rows that share a trunk (named after the first)."""
    name = "prompting" if rows is None else slug(rows[0][0])
    return Path(cfg.out) / "units" / f"seed{cfg.seed}-{name}.json"


def compare_prior(cfg: sg.Config):
    """One seed's first unit: its own prior (cloned once and cached) and the two
    prompting rows, which are that prior evaluated without and with the guide slot."""
    torch.set_num_threads(1)  # the same numbers whatever --workers is (tiny models gain little)
    sg.seed_everything(cfg.seed)
    prior = sg.load_or_train_prior(cfg, sg.pick_device(cfg.device))
    probe = probe_episodes(prior, cfg)
    results = {"ReAct": {"final": sg.evaluate(prior, cfg, guided=False), "history": []},
               "ReAct w/ SG": {"final": {**instruments.evaluate(prior, cfg, guided=True),
                                         **probe_metrics(prior, probe, cfg)}, "history": []}}
    stage0 = getattr(prior.config, "stage0", None) or {}  # how the prior was cloned, if recorded
    results["ReAct w/ SG"]["final"].update(  # (a prior cloned to a guide target, research.py)
        prior_updates=stage0.get("updates"),
        prior_calibration_accuracy=getattr(prior.config, "calibration_accuracy",
                                           stage0.get("calibration_accuracy")))  # older caches
    sg.write_atomic(unit_path(cfg), json.dumps(results))


def compare_trunk(cfg: sg.Config, rows):
    """One seed's work unit: the rows that share a lambda = 0 trunk, trained from
    the seed's cached prior. Their logs go to the run folder as seed<k>-<row>.jsonl."""
    torch.set_num_threads(1)
    sg.seed_everything(cfg.seed)
    prior = sg.load_or_train_prior(cfg, sg.pick_device(cfg.device))
    configs = {row: dataclasses.replace(cfg, **overrides) for row, overrides in rows}
    probe = probe_episodes(prior, cfg) if any(c.guided for c in configs.values()) else None
    trained = train_rows(prior, configs, probe)
    results = {}
    for row, (policy, records) in trained.items():
        final = {**sg.final_metrics(records, cfg.final_evals), **training_means(records)}
        if configs[row].guided:  # the final policy's guide on the fixed probe (probe.py)
            final.update(probe_metrics(policy, probe, cfg))
        results[row] = {"final": final,
                        "history": [(r["iteration"], r["eval"]) for r in records if "eval" in r],
                        "trust": [r["trust"] for r in records]}
        sg.write_atomic(Path(cfg.out) / f"seed{cfg.seed}-{slug(row)}.jsonl",
                     "".join(json.dumps(r) + "\n" for r in records))
    sg.write_atomic(unit_path(cfg, rows), json.dumps(results))  # last: the unit is done


GRADIENT_KEYS = ("guide_sensitivity", "action_sensitivity", "guide_off_prior", "guide_push",
                 "guide_push_stale_negative", "guide_push_stale_positive", "target_coverage",
                 "target_accuracy", "target_accuracy_stale")  # instruments.training_figures


EARLY = 20  # iterations: early_target_coverage, the predictor registered in REPORT section 14


def training_means(records: list) -> dict:
    """What reached the guide over a run: each gradient diagnostic of the per-iteration
    records (instruments.training_figures) averaged over the iterations, as train_<key>; and
    the hindsight targets' coverage over the first EARLY iterations, as early_target_coverage."""
    means = {}
    for key in GRADIENT_KEYS:
        values = [r[key] for r in records if r.get(key) is not None]
        if values:
            means[f"train_{key}"] = sum(values) / len(values)
    early = [r["target_coverage"] for r in records[:EARLY] if r.get("target_coverage") is not None]
    if early:
        means["early_target_coverage"] = sum(early) / len(early)
    return means


def slug(row: str) -> str:
    return "-".join("".join(c if c.isalnum() else " " for c in row.lower()).split())


# --- paired statistics and the table ---

def mean_and_spread(values):
    """Mean and sample std of the values that are defined (not None)."""
    values = [v for v in values if v is not None]
    if not values:
        return float("nan"), float("nan")
    mean = sum(values) / len(values)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / max(len(values) - 1, 1))


T_975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086]  # Student t, 97.5%, df 1..20


def t_975(df: int) -> float:
    """Student t's 97.5% point: the table, past it the Cornish-Fisher expansion of t in 1/df
    (within 0.0003 of t for df > 20)."""
    z = 1.959964  # the normal's 97.5% point
    return T_975[df - 1] if df <= len(T_975) else (
        z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2))


def paired_interval(differences) -> tuple[float, float]:
    """Mean of paired differences and the half-width of its 95% t-interval (seeds are the
    pairs: same prior, same seed). Half-width nan for fewer than two pairs."""
    mean, spread = mean_and_spread(differences)
    n = len(differences)
    if n < 2:
        return mean, float("nan")
    return mean, t_975(n - 1) * spread / math.sqrt(n)


def interval_text(differences) -> str:
    """Paired differences as the tables print them: mean [95% t-interval]; one pair (a
    one-seed run) has no interval, and says so rather than print nan."""
    mean, half = paired_interval(differences)
    if math.isnan(half):
        return f"{mean:+.3f} [one pair: no interval]"
    return f"{mean:+.3f} [{mean - half:+.3f}, {mean + half:+.3f}]"


def cell(values, digits: int = 3) -> str:
    """Mean ± std over the seeds where defined; '-' where no seed has the figure."""
    mean, spread = mean_and_spread(values)
    return "-" if mean != mean else f"{mean:.{digits}f} ± {spread:.{digits}f}"


def verdict(differences, threshold: float = 0.0, margin: float | None = None) -> str:
    """REPORT's standard for a claim "above `threshold`": shown (the whole 95% interval above
    it), not shown (below), not resolved (it holds the threshold); with a margin declared
    first, whether the interval also lies inside +-margin (equivalent)."""
    mean, half = paired_interval(differences)
    said = ("shown" if mean - half > threshold else "not shown" if mean + half < threshold
            else "not resolved")
    if margin is not None:
        said += "; equivalent" if -margin < mean - half and mean + half < margin else \
            "; not equivalent"
    return said


def compare_table(per_seed: list[dict], baselines=("GRPO", "GRPO w/ SG")) -> str:
    """The paper's table on the toy: mean +- sample std over seeds, and each row's paired
    difference in success to each baseline row (same seed, same prior), mean [95%
    t-interval]. The second baseline isolates the guide reward: rows with a guide slot
    against the same slot at lambda = 0."""
    columns = [("success", "held-out success", 3), ("steps_over_optimal", "steps / optimal", 2),
               ("guide_balanced_accuracy", "guide bal. acc.", 3),
               ("guide_progress_accuracy", "guide progress acc.", 3),
               ("share_positive", "positive guides", 2)]
    baselines = [b for b in baselines if b in per_seed[0]] if len(per_seed) > 1 else []
    lines = [f"| row | {columns[0][1]} | " + "".join(f"vs {b} [95% CI] | " for b in baselines) +
             " | ".join(c[1] for c in columns[1:]) + " |",
             "|---|" + "---|" * (len(columns) + len(baselines))]
    for row in per_seed[0]:
        cells = []
        for key, _, digits in columns:
            mean, spread = mean_and_spread([seed[row]["final"].get(key) for seed in per_seed])
            cells.append("-" if math.isnan(mean) else
                         f"{mean:.{digits}f} ± {spread:.{digits}f}" if len(per_seed) > 1 else
                         f"{mean:.{digits}f}")
        for k, baseline in enumerate(baselines):
            differences = [seed[row]["final"]["success"] - seed[baseline]["final"]["success"]
                           for seed in per_seed]
            cells.insert(1 + k, "-" if row == baseline else interval_text(differences))
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


PROGRESS = "guide_progress_accuracy"  # bumps left out (selfguide.episode_metrics)


def guide_accuracy_key(metrics: dict) -> str:
    """The guide's accuracy to show: the progress accuracy, or the balanced one in results
    made before the progress accuracy was recorded."""
    return PROGRESS if PROGRESS in metrics else "guide_balanced_accuracy"


def co_evolution(per_seed: list[dict]) -> list[str]:
    """What the table cannot show at a glance: how much of the oracle's gain the guide's own
    reward captures, and whether each guide got more accurate as its policy got better."""
    lines = []
    pairs = [("GRPO w/ SG & GR", "control: oracle reward for the guide's")]
    for method, oracle in pairs:
        if {method, oracle, "GRPO w/ SG"} <= set(per_seed[0]) and len(per_seed) > 1:
            gains = [[seed[row]["final"]["success"] - seed["GRPO w/ SG"]["final"]["success"]
                      for seed in per_seed] for row in (method, oracle)]
            (guide, _), (ceiling, _) = (mean_and_spread(g) for g in gains)
            verdict = ("no gain for the guide to capture" if ceiling <= 0 else
                       "the guide captures none of the oracle's gain" if guide <= 0 else
                       f"the guide captures {guide / ceiling:.0%} of the oracle's gain")
            lines.append(f"Over GRPO w/ SG, the guide's reward gains {guide:+.3f} and the "
                         f"oracle's {ceiling:+.3f}: {verdict}")
    for row in per_seed[0]:
        if not per_seed[0][row]["history"] or "guide_balanced_accuracy" not in \
                per_seed[0][row]["final"]:
            continue
        start = mean_and_spread([s["ReAct w/ SG"]["final"]["guide_balanced_accuracy"]
                                 for s in per_seed])[0]
        final = mean_and_spread([s[row]["final"]["guide_balanced_accuracy"] for s in per_seed])[0]
        correlations = [pearson([m["success"] for _, m in s[row]["history"]],
                                [m["guide_balanced_accuracy"] for _, m in s[row]["history"]])
                        for s in per_seed]
        progress = [mean_and_spread([s[r]["final"].get(PROGRESS) for s in per_seed])[0]
                    for r in ("ReAct w/ SG", row)]
        lines.append(f"{row.strip()}: guide balanced accuracy {start:.3f} (prior) -> {final:.3f}; "
                     f"correlation with held-out success over its evaluations "
                     f"{mean_and_spread(correlations)[0]:+.2f} (mean over seeds)" +
                     ("" if PROGRESS not in per_seed[0][row]["final"] else
                      f"; progress accuracy {progress[0]:.3f} -> {progress[1]:.3f}"))
        for key, where in [(PROGRESS, ""),
                           ("guide_true_prob_progress", "; probability of the true word"),
                           ("guide_accuracy_stale", "; where the stale map errs"),
                           ("guide_true_prob_stale", "; probability of the true word there"),
                           ("guide_true_prob_stale_negative",
                            "; there, on the truly negative moves (into its dead end)"),
                           ("guide_true_prob_stale_positive",
                            "; on the truly positive ones (out of it)")]:
            for prefix, judged in [("", "its own rollouts"), ("probe_", "the fixed probe")]:
                pair = [[s[r]["final"].get(prefix + key) for s in per_seed]
                        for r in ("ReAct w/ SG", row)]
                if key == PROGRESS and not prefix or None in pair[0] + pair[1]:
                    continue  # the own-rollout progress accuracy is above; or not recorded
                lines[-1] += (f"{where}, on {judged} {mean_and_spread(pair[0])[0]:.3f} -> "
                              f"{mean_and_spread(pair[1])[0]:.3f}, "
                              f"{interval_text([a - b for a, b in zip(pair[1], pair[0])])}")
                where = ""
        gradient = [mean_and_spread([s[row]["final"].get(f"train_{k}") for s in per_seed])[0]
                    for k in GRADIENT_KEYS]
        if not math.isnan(gradient[0]):
            lines[-1] += (f"; over training, the guides' sensitivity |d log p / d logits| "
                          f"{gradient[0]:.3g} (the actions' {gradient[1]:.3g}), their push "
                          f"|A| x that {gradient[3]:.3g}, guides off the prior's word "
                          f"{gradient[2]:.3f}")
        if not math.isnan(gradient[7]):
            lines[-1] += (f"; its targets on {gradient[6]:.3f} of the judged guides, the "
                          f"true word on {gradient[7]:.3f} of them")
    return lines


def pearson(xs, ys) -> float | None:
    """Pearson's r of two equally long lists; None if either is constant or has a None."""
    if None in xs or None in ys or len(xs) < 2:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx, syy = sum((x - mx) ** 2 for x in xs), sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else None


def command_line(script: str, argv=None) -> str:
    """The command that made a table, as the tables print it."""
    return f"python experiments/{script} " + " ".join(sys.argv[1:] if argv is None else argv)


def write_results(out: Path, stem: str, text: str, data, quiet: bool = False):
    """A harness's results: its text as <stem>.md, its numbers as <stem>.json; the text printed
    unless quiet."""
    sg.write_atomic(out / f"{stem}.md", text + "\n")
    sg.write_atomic(out / f"{stem}.json", json.dumps(data))
    if not quiet:
        print(f"\n{text}\n\nwritten to {out}/{stem}.md")


# --- the comparison: resumable, refused when another command owns the folder ---

RESULT_FREE_SETTINGS = ("workers", "threads", "quick", "out")  # no number depends on these


def claim_compare_folder(out: Path, cfg: sg.Config, exp: Experiment):
    """A comparison's folder belongs to the command that started it: the same command resumes
    it, a different one is refused in one line rather than mixed in. (A folder started by
    `selfguide.py --compare`, before this harness had a file of its own, also resumes: the
    settings it saved that no longer exist are not compared.)"""
    settings = {k: v for k, v in {**dataclasses.asdict(cfg), **dataclasses.asdict(exp)}.items()
                if k not in RESULT_FREE_SETTINGS}
    path = out / "compare-settings.json"
    if not path.exists():
        out.mkdir(parents=True, exist_ok=True)
        sg.write_atomic(path, json.dumps(settings, indent=1, sort_keys=True))
        return
    try:
        saved = json.loads(path.read_text())
    except ValueError:
        raise SystemExit(f"error: {path} is not readable; remove {out} to start over") from None
    changed = [f"--{sg.flag(k)} {saved.get(k)} there, {settings[k]} now"
               for k in sorted(settings) if saved.get(k) != settings[k]]
    if changed:
        raise SystemExit(f"error: {out} holds a comparison made with other settings "
                         f"({'; '.join(changed)}); give another --out, or remove {out} to "
                         f"start over")


def compare_units(cfg: sg.Config, rows, configs) -> list:
    """[(seed's config, rows)]: one work unit per seed and trunk (the rows that share a
    lambda = 0 prefix up to the same branch point), the biggest first so that the workers
    finish together."""
    groups = {}
    for index, (row, overrides) in enumerate(rows):
        row_cfg = dataclasses.replace(cfg, **overrides)
        branch = first_trusted_iteration(row_cfg) - 1
        key = (json.dumps(dataclasses.asdict(trunk_config(row_cfg)), sort_keys=True), branch,
               index if branch == 0 else -1)  # nothing to share: a unit of its own
        groups.setdefault(key, []).append((row, overrides))
    work = {key: len(group) * cfg.iterations - key[1] * (len(group) - 1)  # iterations to train
            for key, group in groups.items()}
    return [(c, groups[key]) for key in sorted(groups, key=work.get, reverse=True) for c in configs]


def run_units(workers: int, *phases):
    """Each phase (function, [args, ...]) in turn, its calls in order, or spread over `workers`
    spawned processes: one tqdm lock for all of them (each making its own leaves semaphores
    behind at exit), and no progress bars in the workers, whose bars would interleave (tqdm
    reads TQDM_DISABLE when a spawned worker imports it)."""
    if workers == 1 or sum(len(calls) for _, calls in phases) < 2:
        for function, calls in phases:
            for args in calls:
                function(*args)
        return
    import multiprocessing
    spawn = multiprocessing.get_context("spawn")
    os.environ["TQDM_DISABLE"] = "1"
    try:
        with spawn.Pool(workers, initializer=tqdm.set_lock, initargs=(spawn.RLock(),)) as pool:
            for function, calls in phases:
                pool.starmap(function, calls)
    finally:
        os.environ.pop("TQDM_DISABLE")


def run_compare(cfg: sg.Config, exp: Experiment):
    """Every row of the table for --seeds seeds, spread over --workers processes. Each work
    unit is saved under --out as it finishes, so an interrupted comparison (Ctrl-C, SIGTERM,
    a reboot) resumes where it stopped when the same command is run again."""
    rows = compare_rows(cfg, exp)
    out = compare_folder(cfg)
    claim_compare_folder(out, cfg, exp)
    (out / "units").mkdir(exist_ok=True)
    configs = [dataclasses.replace(cfg, seed=cfg.seed + k, out=str(out)) for k in range(exp.seeds)]
    units = compare_units(cfg, rows, configs)
    prompting = [c for c in configs if not unit_path(c).exists()]
    trunks = [(c, group) for c, group in units if not unit_path(c, group).exists()]
    total = len(configs) + len(units)
    done = total - len(prompting) - len(trunks)
    if done:
        print(f"resuming {out}: {done} of {total} work units (seed x trunk) are saved there and "
              f"skipped; training the other {total - done}")
    start = time.perf_counter()
    try:
        run_units(exp.workers, (compare_prior, [(c,) for c in prompting]),
                  (compare_trunk, trunks))
    except KeyboardInterrupt:
        saved = sum(unit_path(c).exists() for c in configs) + \
            sum(unit_path(c, group).exists() for c, group in units)
        print(f"\nstopped by Ctrl-C or SIGTERM: {saved} of {total} work units are saved in "
              f"{out}; run the same command again to train the rest")
        return None
    per_seed = [json.loads(unit_path(c).read_text()) for c in configs]
    for c, group in units:
        per_seed[configs.index(c)].update(json.loads(unit_path(c, group).read_text()))
    per_seed = [{row: seed[row] for row in ["ReAct", "ReAct w/ SG"] + [r for r, _ in rows]}
                for seed in per_seed]  # table order
    minutes = (time.perf_counter() - start) / 60
    table = (compare_table(per_seed) + "\n\n"
             + "\n".join(f"- {line}" for line in co_evolution(per_seed)))
    seeds_text = ", ".join(str(c.seed) for c in configs)
    header = (f"Held-out greedy success on {cfg.eval_tasks} tasks, each run's final score the "
              f"mean of its last {cfg.final_evals} evaluations (every {cfg.eval_every} "
              f"iterations); mean ± std over seeds {seeds_text}; paired differences (same seed, "
              f"same prior) with 95% t-intervals over the seeds; {minutes:.1f} min"
              f"{f' (and earlier runs for {done} units)' if done else ''}.\n"
              f"Command: python experiments/compare.py " + " ".join(sys.argv[1:]))
    sg.write_atomic(out / "compare.md", header + "\n\n" + table + "\n")
    sg.write_atomic(out / "compare.json", json.dumps(
        {"command": command_line("compare.py"), "commit": source_commit(),
         "config": {**dataclasses.asdict(cfg), **dataclasses.asdict(exp)},
         "seeds": [c.seed for c in configs], "minutes": minutes, "per_seed": per_seed},
        separators=(",", ":")))
    print(f"\n{header}\n\n{table}\n\nwritten to {out}/compare.md and compare.json")
    return per_seed


def source_commit() -> str | None:
    """The commit of this checkout, '+changes' after it if files differ from it; None outside
    a git checkout."""
    import subprocess
    try:
        head, changes = (subprocess.run(["git", *args], cwd=Path(__file__).parent, check=True,
                                        capture_output=True, text=True).stdout.strip()
                         for args in (["rev-parse", "HEAD"],
                                      ["status", "--porcelain", "--untracked-files=no"]))
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+changes" if changes else "")


def main(argv=None):
    cfg, exp = parse_args(argv)
    sg.check_transformers(transformers.__version__)
    sg.pick_device(cfg.device)
    sg.checked_folder(cfg.prior_cache, "--prior-cache")
    sg.checked_folder(compare_folder(cfg), "--out")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    previous_handler = signal.signal(signal.SIGTERM, sg.stop_like_ctrl_c)
    try:
        per_seed = run_compare(cfg, exp)
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
    return per_seed


if __name__ == "__main__":
    main()
