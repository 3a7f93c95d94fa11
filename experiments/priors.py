"""Stage 0's priors, one per seed, on the held-out mazes: how long each was cloned, what its
greedy guide scored on the calibration mazes and on the held-out ones. With
--prior-guide-target this is the spread the target leaves from seed to seed.

    python experiments/priors.py --seeds 5 --seed 100 --workers 2 --dist --no-cue \\
        --prior-epochs 3 --prior-guide-target 0.8 --prior-check 10 --out runs/P-tuning

Each seed's prior is cloned once and cached (selfguide's prior cache), then evaluated with and
without the guide slot, as compare.py's prompting rows; each seed is saved as it finishes.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]

import compare  # noqa: E402
import selfguide as sg  # noqa: E402


def parse_args(argv=None) -> tuple[sg.Config, compare.Seeds]:
    return compare.parse_settings(argv, compare.Seeds, __doc__.split("\n\n")[0],
                                  "runs/priors-table")


COLUMNS = [("prior_updates", "cloning updates", 0),
           ("prior_calibration_accuracy", "calibration progress acc.", 3),
           ("guide_progress_accuracy", "held-out progress acc.", 3),
           ("guide_balanced_accuracy", "held-out bal. acc.", 3),
           ("guide_accuracy", "held-out accuracy", 3)]


def table(seeds: list[int], guided: list[dict], unguided: list[dict]) -> str:
    """A row per seed, then the mean and the spread (sample std, and min to max)."""
    head = ["seed"] + [label for _, label, _ in COLUMNS] + ["ReAct w/ SG", "ReAct"]
    rows = [[m.get(key) for key, _, _ in COLUMNS] + [m["success"], u["success"]]
            for m, u in zip(guided, unguided)]
    digits = [d for _, _, d in COLUMNS] + [3, 3]
    cell = lambda v, d: "-" if v is None else f"{v:.{d}f}"  # noqa: E731
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    lines += [f"| {s} | " + " | ".join(cell(v, d) for v, d in zip(r, digits)) + " |"
              for s, r in zip(seeds, rows)]
    columns = list(zip(*rows))
    spread = []
    for values, d in zip(columns, digits):
        values = [v for v in values if v is not None]
        mean, std = compare.mean_and_spread(values)
        spread.append("-" if not values else
                      f"{mean:.{d}f} ± {std:.{d}f} ({min(values):.{d}f}-{max(values):.{d}f})")
    return "\n".join(lines + ["| mean ± std (min-max) | " + " | ".join(spread) + " |"])


def main(argv=None):
    cfg, exp = parse_args(argv)
    sg.checked_folder(cfg.prior_cache, "--prior-cache")
    out = Path(cfg.out)
    (out / "units").mkdir(parents=True, exist_ok=True)
    configs = [dataclasses.replace(cfg, seed=cfg.seed + k) for k in range(exp.seeds)]
    todo = [c for c in configs if not compare.unit_path(c).exists()]
    compare.run_units(exp.workers, (compare.compare_prior, [(c,) for c in todo]))
    units = [json.loads(compare.unit_path(c).read_text()) for c in configs]
    text = table([c.seed for c in configs], [u["ReAct w/ SG"]["final"] for u in units],
                 [u["ReAct"]["final"] for u in units])
    header = (f"Stage 0 priors, greedy on {cfg.eval_tasks} held-out mazes. Command: python "
              f"experiments/priors.py " + " ".join(sys.argv[1:] if argv is None else argv))
    sg.write_atomic(out / "priors.md", header + "\n\n" + text + "\n")
    print(f"{header}\n\n{text}\n\nwritten to {out}/priors.md")
    return units


if __name__ == "__main__":
    main()
