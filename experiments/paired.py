"""Paired differences that compare.md does not print: one row against any other row, seeds
pooled over several comparisons, or another metric than success.

    python experiments/paired.py runs/familiar success 'GRPO w/ SG|ReAct w/ SG'
    python experiments/paired.py runs/A,runs/B success 'ablation: immediate lambda = 1|GRPO'
    python experiments/paired.py runs/I-fresh revisits 'GRPO w/ SG & GR|ReAct w/ SG'
    python experiments/paired.py --runs 'runs/pair/trl-{seed}|runs/pair/selfguide-{seed}' 0,1,2
    python experiments/paired.py --runs 'runs/ft/sg_gr-{seed}|runs/ft/grpo-{seed}' 0,1 revisits
    python experiments/paired.py --plays \
        'runs/sg_gr-{seed}-play:ReAct w/ SG, greedy|runs/grpo-{seed}-play:ReAct, greedy' 1,2
    python experiments/paired.py --plays \
        'runs/sg-{seed}-play:ReAct w/ SG, sampled|runs/warm300:ReAct w/ SG, sampled' 1,2 --first 50

The first argument is one or more comparison folders (their compare.json), comma-separated;
then the metric of each run's final score; then pairs 'row A|row B' (row names as in the
table, leading spaces optional). Prints A - B per pair: the mean over the pooled seeds, its
95% t-interval, and on how many seeds A is above B. With --runs, the pair is two run folders
(their log.jsonl, each scored as selfguide.py scores a run: the mean of its last
--final-evals evaluations, as its selfguide_config.json says) with {seed} filled in from the
seeds given, on success or the metric named after the seeds. With --plays, each side is a
prompted.py play, 'folder:play' (its --out or the folder results.py kept it in, and a row of its
table), paired maze by maze on each seed; over several seeds, twice more: over the mazes (each
maze's difference the mean of the seeds') and over the seeds (each seed's the mean of the mazes').
--first N pairs the first N mazes of each side: prompted.py numbers a set's mazes from the same
first task seed, so a play of 300 mazes holds a play of 50's mazes first (a warm start played
once on 300 mazes, with two sampled draws a maze, against models played on its first 50).
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


def play_side(side: str, seed: str = "{seed}") -> tuple:
    """'folder:play' as (folder, play), {seed} filled in (left as it is by default)."""
    folder, _, play = side.format(seed=seed).partition(":")
    return folder, play


def per_maze(side: str, seed: str) -> list:
    """A prompted.py play's success maze by maze: side is 'folder:play', {seed} filled in."""
    folder, name = play_side(side, seed)
    path = Path(folder) / "prompted.json"
    if not path.exists():
        raise SystemExit(f"error: no prompted.json in {folder}: give a prompted.py run's --out "
                         f"or a kept one (experiments/results/<name>), then ':' and a play")
    rows = json.loads(path.read_text())
    rows = rows["rows"] if rows.get("kind") == "prompted" else rows  # as results.py keeps it
    if name not in rows:
        raise SystemExit(f"error: {folder} has no play {name!r}; it has: {', '.join(rows)}")
    return rows[name]["per_maze"]


def plays_lines(a: str, b: str, seeds: list, first: int | None = None) -> list:
    """a - b maze by maze on each seed, on the `first` mazes of each side if given; over several
    seeds, over the mazes and over the seeds (each side named by its folder's last part, the
    seed filled in, and its play). The two sides must play the same mazes (prompted.py's
    --mazes, --size...): only their number is checked here."""
    if len(set(seeds)) < len(seeds):
        raise SystemExit(f"error: a seed given twice ({','.join(seeds)}): each seed once")
    per_seed = []
    for seed in seeds:
        x, y = per_maze(a, seed), per_maze(b, seed)
        if first is not None:
            for side, played in ((a, x), (b, y)):
                if len(played) < first:
                    raise SystemExit(f"error: --first {first}, but seed {seed}'s "
                                     f"{play_side(side, seed)[0]} played {len(played)} mazes")
            x, y = x[:first], y[:first]
        if len(x) != len(y):
            raise SystemExit(f"error: seed {seed}: {len(x)} mazes against {len(y)}; pair plays "
                             f"of the same mazes (prompted.py's --eval-tasks)")
        if per_seed and len(x) != len(per_seed[0]):
            raise SystemExit(f"error: seed {seed} played {len(x)} mazes, seed {seeds[0]} "
                             f"{len(per_seed[0])}: pair the same mazes on every seed")
        per_seed.append([p - q for p, q in zip(x, y)])

    def name(side, seed="{seed}"):
        folder, play = play_side(side, seed)
        return f"{Path(folder).name}:{play}"

    lines = [f"{name(a, seed)} - {name(b, seed)}, paired on {len(d)} mazes: "
             f"{compare.interval_text(d)}" for seed, d in zip(seeds, per_seed)]
    if len(seeds) > 1:
        mazes, both = [sum(d) / len(d) for d in zip(*per_seed)], f"{name(a)} - {name(b)}"
        lines += [f"{both}, seeds {','.join(seeds)}, over the {len(mazes)} mazes (each the mean "
                  f"of the seeds'): {compare.interval_text(mazes)}",
                  interval_line(f"{both}, seeds {','.join(seeds)}, over the seeds (each the "
                                f"mean of the mazes')", [sum(d) / len(d) for d in per_seed])]
    return lines


def parse_args(argv=None) -> list:
    """The command line as given, if it has one of the three shapes above; else the usage."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--plays"] and argv[1:2] and argv[1].count("|") == 1 and (
            len(argv) == 3 or len(argv) == 5 and argv[3] == "--first" and argv[4].isdigit()
            and int(argv[4]) > 0):
        return argv
    runs = argv[:1] == ["--runs"] and len(argv) in (3, 4) and argv[1].count("|") == 1
    if not runs and (len(argv) < 3 or argv[0].startswith("-")
                     or any(pair.count("|") != 1 for pair in argv[2:])):
        raise SystemExit(__doc__)
    return argv


def main(argv=None):
    argv = parse_args(argv)
    if argv[0] == "--plays":
        lines = plays_lines(*argv[1].split("|"), argv[2].split(","),
                            int(argv[4]) if len(argv) == 5 else None)
        print("\n".join(lines))
        return lines
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
