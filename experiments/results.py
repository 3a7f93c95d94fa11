"""The results the docs cite, kept in the repository: each comparison's compare.json, compact
(compact: final figures per seed and row, the histories the figures draw, no
weights, no per-iteration logs), with the command and the commit that made it, in
experiments/results/<name>/. Every table the docs print from one is printed here, and a test
checks that the docs hold it verbatim.

    python experiments/results.py save runs/hindsight-house-tuning hindsight-house-tuning
    python experiments/results.py show hindsight-house-tuning     # its tables, as the docs hold them
    python experiments/results.py list                            # what is kept

`save` refuses a comparison that has no commit recorded (made before compare.py recorded one)
unless --commit names it.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

import compare  # noqa: E402

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
    """A kept compare.json, as compare.py writes it (expand), or a kept checkpoints.json or
    prompted.json."""
    for kind in ("checkpoints", "prompted"):
        if (KEPT / name / f"{kind}.json").exists():
            return json.loads((KEPT / name / f"{kind}.json").read_text())
    path = KEPT / name / "compare.json"
    if not path.exists():
        raise SystemExit(f"error: no {path}; `python experiments/results.py list` says what is "
                         f"kept")
    return expand(json.loads(path.read_text()))


def expand(result: dict) -> dict:
    """A compact result back in compare.py's form: histories [(iteration, metrics)], each
    run's lambda(u) from the config; compare.py's own, as it is."""
    if not result["per_seed"] or isinstance(
            next(iter(result["per_seed"][0].values()))["history"], list):
        return result
    settings = {f.name for f in sg.dataclasses.fields(sg.Config)}
    base = sg.Config(**{k: v for k, v in result["config"].items() if k in settings})
    rows = dict(compare.compare_rows(base, compare.Experiment(
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


def keep(name: str, kind: str, result: dict) -> Path:
    """results/<name>/<kind>.json, one compact line."""
    out = KEPT / name / f"{kind}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, separators=(",", ":")) + "\n")
    return out


def save(folder: str, name: str, commit: str | None = None) -> Path:
    """A comparison's compare.json (compare.py's --out), compacted, or a checkpoint
    experiment's checkpoints.json (checkpoints.py's) or a prompted model's prompted.json
    (prompted.py's), rounded, into results/<name>/; a prompted run stopped midway is kept
    with what it played, marked partial."""
    folder = Path(folder)
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
                "commit": commit, "seeds": [int(s) for s in seeds],
                ("rows" if kind == "prompted" else "per_seed"): figures,
                **({"partial": stopped.group(0)} if stopped else {})})
    path = folder / "compare.json"
    if not path.exists():
        raise SystemExit(f"error: no compare.json in {folder}: give a finished comparison's --out")
    result = json.loads(path.read_text())
    result["commit"] = commit or result.get("commit")
    if not result["commit"]:
        raise SystemExit(f"error: {path} records no commit (made before compare.py recorded "
                         f"one): say which with --commit")
    if "command" not in result:
        settings = (folder / "compare.md").read_text().splitlines()[1]
        result["command"] = settings.removeprefix("Command: ")
    return keep(name, "compare", compact(result))


def cell(values, digits: int = 3) -> str:
    """Mean ± std over the seeds where defined; '-' where no seed has the figure."""
    mean, spread = compare.mean_and_spread(values)
    return "-" if mean != mean else f"{mean:.{digits}f} ± {spread:.{digits}f}"


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


def hindsight_table(per_seed: list) -> str:
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
               start: int = 50, end: int = 150) -> str:
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


def default_table(per_seed: list) -> str:
    """Hindsight in the default maze: success against the default, and the guide's sureness."""
    rows = [r for r in per_seed[0] if r != "ReAct"]
    return paired_table(per_seed, rows, [
        ("success", "held-out success", None),
        ("success", "vs GRPO w/ SG & GR [95% CI]", "GRPO w/ SG & GR"),
        ("probe_guide_true_prob_progress", "probe: p(true word)", None),
        ("probe_guide_true_prob_progress", "vs the prior [95% CI]", "ReAct w/ SG"),
        ("share_positive", "\"positive\", own rollouts", None),
        ("train_target_accuracy", "hindsight target = truth, in training", None)])


TABLES = {  # what the docs print from each kept comparison, besides compare.py's own table
    "hindsight-house-tuning": [hindsight_table, rise_table],
    "coevolution-house": [hindsight_table, rise_table],
    "hindsight-default-tuning": [default_table],
}


def tables(name: str) -> list:
    """The tables the docs hold from results/<name>: compare.py's, then TABLES'; a checkpoint
    experiment's, checkpoints.py's."""
    result = load(name)
    if result.get("kind") == "prompted":
        import prompted
        return [prompted.table(result["rows"])] + ([result["partial"]] if "partial" in result
                                                    else [])  # a run stopped midway says so
    per_seed = result["per_seed"]
    if result.get("kind") == "checkpoints":
        import checkpoints
        return [checkpoints.tables(per_seed)]
    return [compare.compare_table(per_seed)] + [table(per_seed) for table in
                                                TABLES.get(name, [])]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    keep = verbs.add_parser("save", help="keep a comparison's results under a name")
    keep.add_argument("folder")
    keep.add_argument("name")
    keep.add_argument("--commit", default=None, help="the commit that made them, if unrecorded")
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
