"""Departure 3 measured: the free-text path (examples/trl_freetext.py) against the constrained
bridge (examples/trl_selfguide.py), GRPO and GRPO w/ SG & GR, paired on the same seeds.

    python experiments/freetext.py --seeds 1,2,3,4,5 --out runs/ft
    python experiments/freetext.py --seeds 1,2,3,4,5 --out runs/ft --dry-run

Each of the four runs per seed is its script's own command, run one after another with its
output in the run's folder (run.log); a run already in --out (its summary.md) is read, not
run again; --dry-run prints the commands of the missing runs and stops. Then a row per path
and variant (means over the seeds): its prior and its trained policy on the held-out mazes
(greedy; the mean of the last 3 evaluations) and its guide's balanced accuracy, before and
after; over training, its own rollouts' success, the share of its groups without an
advantage (no success in the group and, without the guide's reward, nothing else to tell
its rollouts apart), and how often its replies could not be read (free text only: the
constrained slots cannot fail). Then the paired differences, seeds as pairs, each with its
95% t-interval.

Both paths run --iterations 100; the free text samples at --temperature 0.5, chosen on seed 0
(examples/README.md: at temperature 1 the tiny prior's sampled moves reach almost no goal),
the constrained bridge at its default 1. Needs TRL (pip install trl==1.16.0).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

import paired  # noqa: E402  (its paired-difference line)
import plots  # noqa: E402  (its log reader)
import selfguide as sg  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PATHS = {"ft": ("free text", "examples/trl_freetext.py", ["--temperature", "0.5"]),
         "trl": ("constrained", "examples/trl_selfguide.py", [])}
VARIANTS = {"grpo": ("GRPO", "prior, no guide (ReAct)"),
            "sg_gr": ("GRPO w/ SG & GR", "prior, guide (ReAct w/ SG)")}
ITERATIONS = 100


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1,2,3,4,5", help="comma-separated seeds")
    parser.add_argument("--out", default="runs/ft", help="folder of the runs")
    parser.add_argument("--threads", type=int, default=1, help="each run's --threads")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the commands of the missing runs, run nothing")
    args = parser.parse_args(argv)
    try:
        args.seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds takes comma-separated integers, not {args.seeds!r}")
    if len(set(args.seeds)) != len(args.seeds) or args.threads < 1:
        parser.error("--seeds must not repeat a seed, and --threads must be at least 1")
    return args


def folder(out: str, path: str, variant: str, seed: int) -> Path:
    return Path(out) / f"{path}-{variant}-{seed}"


def command(out: str, path: str, variant: str, seed: int, threads: int) -> list:
    """The run's own command, as a reader would type it."""
    _, script, extra = PATHS[path]
    return ["python", script, "--seed", str(seed), "--variant", variant, *extra,
            "--iterations", str(ITERATIONS), "--threads", str(threads),
            "--out", str(folder(out, path, variant, seed))]


def scores(run: Path, variant: str) -> dict:
    """One run as the table reads it: prior and trained held-out success, and the guide's
    balanced accuracy; over training, its rollouts' success, the share of its groups without
    an advantage, and its rollouts' unreadable and unparseable shares."""
    records = plots.read_log(run / "log.jsonl")
    config = json.loads((run / "selfguide_config.json").read_text())
    final = sg.final_metrics(records, config["final_evals"])
    over = lambda key: (None if any(r.get(key) is None for r in records)  # noqa: E731
                        else sum(r[key] for r in records) / len(records))
    prior = plots.prior_row((run / "summary.md").read_text(), VARIANTS[variant][1])
    return {"prior": prior["success"], "trained": final["success"],
            "prior_balanced": prior["balanced"], "balanced": final.get("guide_balanced_accuracy"),
            "rollouts": over("success"), "flat": over("zero_variance_groups"),
            "unreadable": over("unreadable"), "unparseable": over("unparseable")}


def mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def table(runs: dict, seeds: list) -> str:
    """runs[(path, variant)] = per-seed scores -> a row per path and variant (means over
    the seeds), then the paired differences."""
    head = ["path, variant", "prior", "trained", "gain", "guide bal. acc., prior -> trained",
            "rollouts' success, over training", "groups without an advantage",
            "unreadable / no move, over training"]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for (path, variant), rows in runs.items():
        prior, trained = mean(r["prior"] for r in rows), mean(r["trained"] for r in rows)
        failures = "-" if path == "trl" else (
            f"{sg.metric_text(mean(r['unreadable'] for r in rows), 4)} / "
            f"{sg.metric_text(mean(r['unparseable'] for r in rows), 4)}")
        balanced = "-" if variant == "grpo" else (
            f"{sg.metric_text(mean(r['prior_balanced'] for r in rows), 3)} -> "
            f"{sg.metric_text(mean(r['balanced'] for r in rows), 3)}")
        lines.append(f"| {PATHS[path][0]}, {VARIANTS[variant][0]} | {prior:.3f} | "
                     f"{trained:.3f} | {trained - prior:+.3f} | "
                     f"{balanced} | "
                     f"{mean(r['rollouts'] for r in rows):.3f} | "
                     f"{mean(r['flat'] for r in rows):.3f} | {failures} |")
    gain = lambda r: r["trained"] - r["prior"]  # noqa: E731
    pairs = [("free text: GRPO w/ SG & GR - GRPO, trained", ("ft", "sg_gr"), ("ft", "grpo"),
              "trained"),
             ("constrained: GRPO w/ SG & GR - GRPO, trained", ("trl", "sg_gr"), ("trl", "grpo"),
              "trained"),
             ("free text, GRPO: gain over its prior", ("ft", "grpo"), None, gain),
             ("free text, GRPO w/ SG & GR: gain over its prior", ("ft", "sg_gr"), None, gain),
             ("GRPO: gain, free text - constrained", ("ft", "grpo"), ("trl", "grpo"), gain),
             ("GRPO w/ SG & GR: gain, free text - constrained", ("ft", "sg_gr"),
              ("trl", "sg_gr"), gain)]
    text = [f"\nheld-out success, greedy; seeds {','.join(map(str, seeds))}; paired "
            f"differences, mean [95% t-interval]:"]
    for name, a, b, key in pairs:
        value = key if callable(key) else (lambda r, k=key: r[k])
        differences = [value(x) - (value(y) if b else 0.0)
                       for x, y in zip(runs[a], runs[b] if b else runs[a])]
        text.append("  " + paired.interval_line(name, differences))
    return "\n".join(lines + text)


def main(argv=None):
    args = parse_args(argv)
    wanted = [(p, v, s) for s in args.seeds for p in PATHS for v in VARIANTS]
    missing = [w for w in wanted if not (folder(args.out, *w) / "summary.md").exists()]
    for path, variant, seed in missing:
        words = command(args.out, path, variant, seed, args.threads)
        print(" ".join(words), flush=True)
        if args.dry_run:
            continue
        run = folder(args.out, path, variant, seed)
        run.mkdir(parents=True, exist_ok=True)
        with open(run / "run.log", "w") as log:
            done = subprocess.run([sys.executable, str(ROOT / words[1]), *words[2:]],
                                  stdout=log, stderr=subprocess.STDOUT)
        if done.returncode:
            raise SystemExit(f"error: the run failed (exit {done.returncode}); its output: "
                             f"{run / 'run.log'}")
    if args.dry_run:
        return None
    runs = {(p, v): [scores(folder(args.out, p, v, s), v) for s in args.seeds]
            for p in PATHS for v in VARIANTS}
    text = table(runs, args.seeds)
    print(text)
    return text


if __name__ == "__main__":
    main()
