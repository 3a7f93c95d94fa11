"""Paired differences that compare.md does not print: one row against any other row, seeds
pooled over several comparisons, or another metric than success.

    python experiments/paired.py runs/familiar success 'GRPO w/ SG|ReAct w/ SG'
    python experiments/paired.py runs/A,runs/B success 'ablation: immediate lambda = 1|GRPO'
    python experiments/paired.py runs/I-fresh revisits 'GRPO w/ SG & GR|ReAct w/ SG'
    python experiments/paired.py --runs 'runs/pair/trl-{seed}|runs/pair/selfguide-{seed}' 0,1,2
    python experiments/paired.py --runs 'runs/ft/sg_gr-{seed}|runs/ft/grpo-{seed}' 0,1 revisits

The first argument is one or more comparison folders (their compare.json), comma-separated;
then the metric of each run's final score; then pairs 'row A|row B' (row names as in the
table, leading spaces optional). Prints A - B per pair: the mean over the pooled seeds, its
95% t-interval, and on how many seeds A is above B. With --runs, the pair is two run folders
(their log.jsonl, each scored as selfguide.py scores a run: the mean of its last
--final-evals evaluations, as its selfguide_config.json says) with {seed} filled in from the
seeds given, on success or the metric named after the seeds.
"""
import json
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

import compare  # noqa: E402
import plots  # noqa: E402  (its log reader; matplotlib only when a figure is drawn)
import selfguide as sg  # noqa: E402


def pooled_seeds(folders: str) -> list:
    missing = [f for f in folders.split(",") if not (Path(f) / "compare.json").exists()]
    if missing:
        raise SystemExit(f"error: no compare.json in {', '.join(missing)}: give a comparison's "
                         f"--out (experiments/compare.py), once it has finished")
    return [seed for folder in folders.split(",")
            for seed in json.loads((Path(folder) / "compare.json").read_text())["per_seed"]]


def row(seed: dict, name: str) -> dict:
    found = [r for r in seed if r.strip() == name.strip()]
    if not found:
        raise SystemExit(f"error: no row {name.strip()!r}; the rows: "
                         + ", ".join(r.strip() for r in seed))
    return seed[found[0]]["final"]


def metric(seed: dict, name: str, key: str) -> float:
    final = row(seed, name)
    if final.get(key) is None:
        raise SystemExit(f"error: row {name.strip()!r} has no {key!r}; it has: "
                         f"{', '.join(k for k, v in final.items() if v is not None)}")
    return final[key]


def interval_line(name: str, differences: list) -> str:
    return (f"{name}: {compare.interval_text(differences)}, above on "
            f"{sum(d > 0 for d in differences)} of {len(differences)} seeds")


def run_score(folder: str, key: str = "success") -> float:
    config = json.loads((Path(folder) / "selfguide_config.json").read_text())
    final = sg.final_metrics(plots.read_log(Path(folder) / "log.jsonl"), config["final_evals"])
    if final.get(key) is None:
        raise SystemExit(f"error: {folder}'s evaluations have no {key!r}; they have: "
                         f"{', '.join(k for k, v in final.items() if v is not None)}")
    return final[key]


def parse_args(argv=None) -> list:
    """The command line as given, if it has one of the two shapes above; else the usage."""
    argv = sys.argv[1:] if argv is None else argv
    runs = argv[:1] == ["--runs"] and len(argv) in (3, 4) and argv[1].count("|") == 1
    if not runs and (len(argv) < 3 or argv[0].startswith("-")
                     or any(pair.count("|") != 1 for pair in argv[2:])):
        raise SystemExit(__doc__)
    return argv


def main(argv=None):
    argv = parse_args(argv)
    if argv[0] == "--runs":
        (a, b), key = argv[1].split("|"), (argv[3:] or ["success"])[0]
        pairs = [(run_score(a.format(seed=s), key), run_score(b.format(seed=s), key))
                 for s in argv[2].split(",")]
        lines = [f"{a} / {b}: " + ", ".join(f"{x:.3f} / {y:.3f}" for x, y in pairs),
                 interval_line(f"{a} - {b}, {key}", [x - y for x, y in pairs])]
        print("\n".join(lines))
        return lines
    seeds, key = pooled_seeds(argv[0]), argv[1]
    lines = []
    for pair in argv[2:]:
        a, b = pair.split("|")
        lines.append(interval_line(f"{a.strip()} - {b.strip()}, {key}",
                                   [metric(s, a, key) - metric(s, b, key) for s in seeds]))
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
