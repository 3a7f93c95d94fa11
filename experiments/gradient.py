"""What could reach the guide while a comparison trained: per row, the gradient diagnostics
every iteration logs (instruments.training_figures, which compare.train_until records),
over the first and the last iterations, averaged over the seeds. REPORT section 12's tables
of the gradient.

    python experiments/gradient.py runs/guide-house-tuning
    python experiments/gradient.py runs/gradient-house-tuning,runs/guide-house-tuning --window 5

- guide sensitivity: the mean over the written guides of |d log p_T(word) / d logits|, the L1
  norm of (onehot - p_T) / T at the temperature T the guide was sampled at: what a unit of
  advantage could move (the advantage itself, the clip and the KL left out; the advantage-
  weighted figure is compare.py's guide push);
- guides off the prior's word: the share of written guides that are not the prior's greedy word;
- action sensitivity: the same norm as the guide's, over the written moves.

The first argument is one or more comparison folders (their compare.json and each run's
per-iteration log, seed<seed>-<row>.jsonl), comma-separated; rows without the diagnostics
(GRPO, the prompting rows) are left out.
"""
import argparse
import json
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

import compare  # noqa: E402
import plots  # noqa: E402  (its log reader)

COLUMNS = [("guide_sensitivity", "first"), ("guide_sensitivity", "last"),
           ("guide_off_prior", "first"), ("guide_off_prior", "last"),
           ("action_sensitivity", "first")]


def window_means(records: list, key: str, window: int) -> tuple:
    """The mean of `key` over the first and over the last `window` iterations of one run."""
    values = [r[key] for r in records if r.get(key) is not None]
    if not values:
        return None, None
    return (sum(values[:window]) / len(values[:window]),
            sum(values[-window:]) / len(values[-window:]))


def run_means(log: Path, window: int) -> dict | None:
    """One run's {(key, first|last): mean} from its per-iteration log; None if it logged no
    guide sensitivity (GRPO, the prompting rows)."""
    records = [r for r in plots.read_log(log) if "iteration" in r]
    means = {(key, end): value for key in compare.GRADIENT_KEYS
             for end, value in zip(("first", "last"), window_means(records, key, window))}
    return None if means[("guide_sensitivity", "first")] is None else {**means, "n": len(records)}


def gradient_rows(folders: str, window: int) -> dict:
    """{row: {(key, first|last): mean over seeds}, "seeds": [...], "iterations": n} for every
    row whose runs logged the diagnostics, in table order; a row in two folders counts each
    seed once."""
    runs = {}  # row -> {seed: that run's means}
    for folder in folders.split(","):
        path = Path(folder) / "compare.json"
        if not path.exists():
            raise SystemExit(f"error: no compare.json in {folder}: give a comparison's --out "
                             f"(experiments/compare.py), once it has finished")
        result = json.loads(path.read_text())
        for seed, per_row in zip(result["seeds"], result["per_seed"]):
            for row in per_row:
                log = Path(folder) / f"seed{seed}-{compare.slug(row)}.jsonl"
                if seed not in runs.get(row.strip(), {}) and log.exists():
                    means = run_means(log, window)
                    if means:
                        runs.setdefault(row.strip(), {})[seed] = means
    return {row: {**{c: sum(m[c] for m in by_seed.values()) / len(by_seed) for c in COLUMNS},
                  "seeds": list(by_seed), "iterations": next(iter(by_seed.values()))["n"]}
            for row, by_seed in runs.items()}


def table(rows: dict, window: int) -> str:
    last = max(e["iterations"] for e in rows.values())
    lines = [f"| row | seeds | guide sensitivity, iterations 1-{window} | the same, "
             f"{last - window + 1}-{last} | guides off the prior's word, 1-{window} | the same, "
             f"{last - window + 1}-{last} | action sensitivity, 1-{window} |",
             "|---|---|---|---|---|---|---|"]
    for row, e in rows.items():
        seeds = ", ".join(str(s) for s in e["seeds"])
        lines.append(f"| {row} | {seeds} | " + " | ".join(
            f"{e[c]:.3g}" if c[0] != "guide_off_prior" else f"{e[c]:.3f}" for c in COLUMNS) + " |")
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", help="comparison folders, comma-separated")
    parser.add_argument("--window", type=int, default=10, help="iterations at each end")
    args = parser.parse_args(argv)
    if args.window < 1:
        raise SystemExit("error: --window must be at least 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    rows = gradient_rows(args.folders, args.window)
    if not rows:
        raise SystemExit(f"error: no run in {args.folders} logged the guide's gradient (a guided "
                         f"row trained by this version of selfguide.py)")
    text = table(rows, args.window)
    print(text)
    return text


if __name__ == "__main__":
    main()
