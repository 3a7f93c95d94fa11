"""The paper's table on its own benchmark, ScienceWorld, at this scale: ReAct, ReAct w/ SG,
GRPO, GRPO w/ SG and GRPO w/ SG & GR on the four find-* tasks, one tiny prior per seed (cloned
with that seed from the shared corpus of the train variations; it plays the paper's
pretrained model), the three trained rows from that seed's prior, every row scored on every
test variation, between the floor (a random valid action) and the ceiling (the gold path).

    python experiments/scienceworld_table.py --seeds 1,2,3,4,5 --out runs/sw            # the table
    python experiments/scienceworld_table.py --seeds 1,2,3,4,5 --out runs/sw --dry-run  # its commands
    python experiments/scienceworld_table.py --seeds 800 --mazes tuning --out runs/sw-dev \\
        --run "--lr 1e-4"                       # settings tried on the dev variations

Work units, each kept in --out once done (a stopped run resumes at the first missing one; at
most --parallel at once, one thread each):
- `baselines.json`: the floor and the ceiling (python examples/science_world.py --out ...);
- `prior-<seed>.json`: the seed's prior cloned (or read from its cache), evaluated greedily
  without and with its assessment (ReAct, ReAct w/ SG): python
  experiments/scienceworld_table.py prior --seed <seed> ...;
- `<variant>-<seed>/`: python examples/trl_freetext.py --world scienceworld --model <the seed's
  prior> --seed <seed> --variant <variant> --no-prior-rows --save-every 10 ..., the three
  trained rows (a run stopped midway resumes from its last checkpoint).
`units.json` in --out holds every unit's command: an --out whose units ran with other
settings (another turn format or --run) is refused in one line. Then the table (means over
the seeds: success, mean score, valid actions, the guide's balanced accuracy against the
score's change), the paired differences (seeds as pairs, 95% t-intervals) and REGISTERED's
claims judged by REPORT's standard; scienceworld.json and .md in --out (`python
experiments/results.py save` keeps them). Needs TRL and ScienceWorld.
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(Path(__file__).resolve().parent), str(ROOT), str(ROOT / "examples")]

import compare  # noqa: E402  (paired intervals)

ARMS = {"grpo": "GRPO", "sg": "GRPO w/ SG", "sg_gr": "GRPO w/ SG & GR"}
PRIOR_ROWS = {"react": "ReAct", "react_sg": "ReAct w/ SG"}
PAIRS = [(1, "GRPO", "ReAct"), (2, "GRPO w/ SG", "GRPO"), (3, "GRPO w/ SG & GR", "GRPO w/ SG"),
         (4, "GRPO w/ SG & GR", "GRPO"), (5, "ReAct w/ SG", "ReAct")]
G1 = ("G1 the guide's balanced accuracy, GRPO w/ SG & GR - ReAct w/ SG", "GRPO w/ SG & GR",
      "ReAct w/ SG", "guide_balanced_accuracy")
# The third table's claims, registered in the commit that starts it (REPORT section 15, with
# the settings chosen on dev and each claim's expected verdict): (name, the row, the row it
# is paired with, the figure). Each is "above 0": shown where the whole 95%
# t-interval of the paired differences lies above 0. The figures are greedy, on the 300 test
# variations: success (the task done, score 100) and the mean score (a failure counts 0),
# paired over the seeds (each seed its own prior, and its three runs from it).
REGISTERED = [(f"{kind}{n} {row} - {other}", row, other, key)
              for kind, key in (("S", "success"), ("M", "score")) for n, row, other in PAIRS] \
    + [G1]
# The first two tables' claims (superseded, kept as they ran): the same, but one prior for
# every seed, so the prior's two formats (S5, M5) were paired over the test variations
SUPERSEDED = [(name, row, other, key, "tasks" if row == "ReAct w/ SG" else "seeds")
              for name, row, other, key in REGISTERED]


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1,2,3,4,5", help="comma-separated seeds of the "
                                                             "trained runs")
    parser.add_argument("--out", default="runs/sw", help="folder of the work units")
    parser.add_argument("--mazes", default="held-out", choices=["held-out", "tuning"],
                        help="held-out: the test variations (every reported figure); tuning: "
                             "the dev variations (to choose settings on)")
    parser.add_argument("--run", default="", help="settings every run and prior takes, as "
                                                  "trl_freetext.py's flags (quoted)")
    parser.add_argument("--parallel", type=int, default=2, help="units at once (one thread each)")
    parser.add_argument("--dry-run", action="store_true", help="print the missing units' "
                                                               "commands, run nothing")
    args = parser.parse_args(argv)
    try:
        args.seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds takes comma-separated integers, not {args.seeds!r}")
    if len(set(args.seeds)) != len(args.seeds) or args.parallel < 1:
        parser.error("--seeds must not repeat a seed, and --parallel must be at least 1")
    try:  # every unit's settings, refused here in one line before any work
        settings(args, args.seeds[0])
    except SystemExit:
        parser.error(f"--run {args.run!r}: trl_freetext.py refuses it (above)")
    return args


def settings(args, seed: int) -> tuple:
    """trl_freetext.py's settings (Config, FreeText) of a seed's units."""
    import trl_freetext
    return trl_freetext.parse_config(["--world", "scienceworld", "--mazes", args.mazes,
                                      "--seed", str(seed), *shlex.split(args.run)])


def prior_model(args, seed: int) -> str:
    """The folder a seed's trained runs start from: --model's, or its prior's cache (whose
    name holds every setting it depends on, the turn's format included)."""
    import trl_freetext
    cfg, ft = settings(args, seed)
    return ft.model or str(trl_freetext.prior_folder(cfg, ft))


# --- The work units, as commands anyone can rerun ---

def units(args) -> list:
    """[(name, its output, the command, the unit it waits for)], in the order they run."""
    python, world = sys.executable, ["--world", "scienceworld", "--mazes", args.mazes]
    settings, out = shlex.split(args.run), Path(args.out)
    split = {"held-out": "test", "tuning": "dev"}[args.mazes]
    found = [("baselines", out / "baselines.json",
              [python, "examples/science_world.py", "--split", split, "--out",
               str(out / "baselines.json")], None)]
    trained = [w for i, w in enumerate(settings)  # the prior's folder takes --model's place
               if w != "--model" and (i == 0 or settings[i - 1] != "--model")]
    # a trained run keeps a checkpoint every 10 iterations, and a stopped one resumes from it
    keep = [] if "--save-every" in settings else ["--save-every", "10"]
    for seed in args.seeds:
        prior = f"prior-{seed}"
        found.append((prior, out / f"{prior}.json",
                      [python, "experiments/scienceworld_table.py", "prior", "--seed", str(seed),
                       "--threads", "1", *world, *settings, "--out", str(out / f"{prior}.json")],
                      None))
        for variant in ARMS:
            run = out / f"{variant}-{seed}"
            found.append((f"{variant}-{seed}", run / "summary.md",
                          [python, "examples/trl_freetext.py", *world, "--model",
                           prior_model(args, seed), "--seed", str(seed), "--variant", variant,
                           "--no-prior-rows", "--threads", "1", *keep, *trained,
                           "--out", str(run)],
                          prior))
    return found


def stamped(args, found: list):
    """units.json in --out: every unit's command (a prior unit's with the folder its prior
    is cached in, whose name holds every setting and the turn's format), written before any
    runs; one clear line if a unit kept there ran with other settings."""
    path = Path(args.out) / "units.json"
    kept = json.loads(path.read_text()) if path.exists() else {}
    now = {name: shlex.join(["python" if w == sys.executable else w for w in command])
           + (f"  (prior: {prior_model(args, int(name[6:]))})" if name.startswith("prior-")
              else "") for name, _, command, _ in found}
    differ = sorted(name for name in kept.keys() & now.keys() if kept[name] != now[name])
    if differ:
        raise SystemExit(f"error: {args.out} holds units run with other settings ({', '.join(differ)}"
                         f"; e.g. {kept[differ[0]]}): give another --out")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**kept, **now}, indent=1))


def run_units(args):
    """Run the missing units, at most --parallel at once, a unit after the one it waits for;
    each one's output in its .log beside it. A failed unit stops the harness in one line."""
    found = units(args)
    todo = [u for u in found if not u[1].exists()]
    if args.dry_run:
        for _, _, command, _ in todo:
            print(shlex.join(["python" if w == sys.executable else w for w in command]))
        return False
    stamped(args, found)
    running, done = {}, {name for name, output, _, _ in found if output.exists()}
    while todo or running:
        for name, process in list(running.items()):
            if process.poll() is None:
                continue
            del running[name]
            if process.returncode:
                for other in running.values():
                    other.terminate()
                raise SystemExit(f"error: unit {name} failed (exit {process.returncode}); its "
                                 f"output: {Path(args.out) / (name + '.log')}")
            done.add(name)
            print(f"{time.strftime('%H:%M:%S')} done: {name}", flush=True)
        ready = [u for u in todo if u[3] is None or u[3] in done]
        while ready and len(running) < args.parallel:
            name, _, command, _ = ready.pop(0)
            todo.remove(next(u for u in todo if u[0] == name))
            log = Path(args.out) / f"{name}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            print(f"{time.strftime('%H:%M:%S')} start: {shlex.join(command[1:])}", flush=True)
            running[name] = subprocess.Popen(command, cwd=ROOT, stdout=open(log, "w"),
                                             stderr=subprocess.STDOUT)
        time.sleep(5)
    return True


def prior_unit(argv=None):
    """`prior`: a seed's prior, cloned (cached) and evaluated greedily on --mazes without and
    with its assessment; its metrics, and its cloning's record, written to --out as JSON."""
    import trl_freetext as freetext
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    own, rest = parser.parse_known_args(argv)
    cfg, ft = freetext.parse_config(rest)
    freetext.science_world.check_installed()
    freetext.sg.seed_everything(cfg.seed)
    if cfg.threads:
        freetext.torch.set_num_threads(cfg.threads)
    device, start = freetext.sg.pick_device(cfg.device), time.perf_counter()
    folder = freetext.model_folder(ft.model) or freetext.load_or_clone_prior(cfg, ft, device)
    cloned = time.perf_counter() - start
    model, tokenizer = freetext.load_model(folder, device)
    rows, seeds = {}, freetext.evaluated_seeds(cfg, ft)
    for key, guided in (("react", False), ("react_sg", True)):
        start = time.perf_counter()  # evaluate's play, with each episode's outcome kept
        batch = freetext.concat_episodes([
            freetext.play(model, tokenizer, seeds[i:i + ft.eval_batch], guided, cfg, ft, 0,
                          greedy=True) for i in range(0, len(seeds), ft.eval_batch)])
        rows[key] = {**freetext.sg.episode_metrics(batch.steps), **freetext.shares(batch),
                     "seconds": time.perf_counter() - start,
                     "per_task": {"success": (batch.scores >= 100).float().tolist(),
                                  "score": batch.scores.clamp(min=0).tolist()}}
        print(f"{PRIOR_ROWS[key]}: {freetext.describe(rows[key])}", flush=True)
    record = Path(folder) / "stage0.json"  # the tiny prior's cloning (a chat model has none)
    stage0 = json.loads(record.read_text()) if record.exists() else None
    freetext.sg.write_atomic(Path(own.out), json.dumps(
        {"seed": cfg.seed, "prior": str(folder), "stage0": stage0, "clone_seconds": cloned,
         **rows}))


# --- The table ---

FIGURES = [("success", "success", 3), ("score", "mean score", 1),
           ("valid_actions", "valid actions", 3), ("guide_balanced_accuracy",
                                                   "guide bal. acc.", 3),
           ("share_positive", "positive guides", 2)]


def trained_rows(out: Path, seed: int) -> dict:
    """A seed's trained rows: each run's final evaluation, its training minutes, and the
    share of its sampled training episodes that succeeded."""
    import plots
    rows = {}
    for variant, name in ARMS.items():
        records = plots.read_log(out / f"{variant}-{seed}" / "log.jsonl")
        rows[name] = {**records[-1]["eval"], "training_minutes": sum(
            r["generation_seconds"] + r.get("scoring_seconds", 0.0) + r["update_seconds"]
            for r in records) / 60,
            "rollout_success": sum(r["success"] for r in records) / len(records)}
    return rows


def gather(out: Path, seeds: list) -> dict:
    """The units' figures: {"baselines": {...}, "per_seed": [{row: metrics}]}, each seed's
    prior rows from its own prior, and its cloning's record in "stage0"."""
    per_seed, stage0 = [], []
    for seed in seeds:
        prior = json.loads((out / f"prior-{seed}.json").read_text())
        rows = {name: {k: v for k, v in prior[key].items() if k != "per_task"}
                for key, name in PRIOR_ROWS.items()}
        per_seed.append({**rows, **trained_rows(out, seed)})
        stage0.append(prior["stage0"])
    return {"baselines": json.loads((out / "baselines.json").read_text()), "per_seed": per_seed,
            "stage0": stage0}


def rows_and_baselines(result: dict) -> list:
    """The rows (mean ± std over the seeds), then the floor and the ceiling."""
    import science_world
    per_seed, base = result["per_seed"], result["baselines"]
    lines = ["| row | " + " | ".join(title for _, title, _ in FIGURES) + " |",
             "|---" * (len(FIGURES) + 1) + "|"]
    for name in list(PRIOR_ROWS.values()) + list(ARMS.values()):
        lines.append(f"| {name} | " + " | ".join(
            compare.cell([seed[name].get(key) for seed in per_seed], digits)
            for key, _, digits in FIGURES) + " |")
    return lines + ["", "| baseline | success | mean score | steps |", "|---|---|---|---|",
                    science_world.mean_row("random valid action (the floor)", base["random"]),
                    science_world.mean_row("gold path (the ceiling)", base["gold"])]


def claim_line(name: str, key: str, differences: list, over: str) -> str:
    return (f"  {name}, {key}: {compare.interval_text(differences)}, above on "
            f"{sum(d > 0 for d in differences)}, below on {sum(d < 0 for d in differences)} "
            f"of {len(differences)} {over if len(differences) > 1 else over[:-1]}: "
            f"{compare.verdict(differences)}")


def table(result: dict) -> str:
    """The rows, the floor and the ceiling, each seed's rows (success / mean score: what one
    seed's command prints), then the registered claims' paired differences and verdicts."""
    per_seed, rows = result["per_seed"], list(PRIOR_ROWS.values()) + list(ARMS.values())
    lines = rows_and_baselines(result) + ["", "| seed | " + " | ".join(rows) + " |",
                                          "|---" * (len(rows) + 1) + "|"]
    for seed, figures in zip(result["seeds"], per_seed):
        lines.append(f"| {seed} | " + " | ".join(
            f"{figures[name]['success']:.3f} / {figures[name]['score']:.1f}" for name in rows)
            + " |")
    lines += ["", f"the registered claims (REPORT section 15), each above 0: paired differences, "
                  f"mean [95% t-interval], over seeds {', '.join(map(str, result['seeds']))}:"]
    for name, row, other, key in REGISTERED:
        lines.append(claim_line(name, key, [seed[row][key] - seed[other][key]
                                            for seed in per_seed], "seeds"))
    return "\n".join(lines)


def superseded_table(result: dict) -> str:
    """The first two tables (one prior for every seed), as they were printed: the rows, the
    floor and the ceiling, each seed's trained rows, then their claims (the prior's two
    formats paired over the test variations)."""
    per_seed = result["per_seed"]
    lines = rows_and_baselines(result) + ["", "| seed | " + " | ".join(ARMS.values()) + " |",
                                          "|---" * (len(ARMS) + 1) + "|"]
    for seed, rows in zip(result["seeds"], per_seed):
        lines.append(f"| {seed} | " + " | ".join(
            f"{rows[name]['success']:.3f} / {rows[name]['score']:.1f}" for name in ARMS.values())
            + " |")
    lines += ["", f"the registered claims (REPORT section 15), each above 0: paired differences, "
                  f"mean [95% t-interval], over seeds {', '.join(map(str, result['seeds']))} or "
                  f"over the {len(result['prior_per_task']['ReAct']['success'])} tasks:"]
    for name, row, other, key, over in SUPERSEDED:
        if over == "seeds":
            differences = [seed[row][key] - seed[other][key] for seed in per_seed]
        else:
            mine, theirs = (result["prior_per_task"][r][key] for r in (row, other))
            differences = [a - b for a, b in zip(mine, theirs)]
        lines.append(claim_line(name, key, differences, over))
    return "\n".join(lines)


def players_table(result: dict) -> str:
    """Candidate players (priors) on the dev variations, a line each (what it is, its
    cloning, the share of the demonstrator's actions it writes teacher-forced, success / mean
    score / valid actions in each format), then the chosen one against each other, paired over
    the variations."""
    players, chosen = result["players"], result["chosen"]
    lines = ["| player | what | cloning | teacher-forced actions | ReAct | ReAct w/ SG |",
             "|---|---|---|---|---|---|"]
    for name, player in players.items():
        rows = [player[key] for key in PRIOR_ROWS]
        lines.append(f"| {name} | {player['what']} | "
                     f"{player['clone_seconds'] / 60:.0f} min, final loss "
                     f"{player['stage0']['final_loss']:.3f} | "
                     f"{player['stage0']['predicted']['moves']:.0%} | " + " | ".join(
                         f"{r['success']:.2f} / {r['score']:.1f} / {r['valid_actions']:.2f}"
                         for r in rows) + " |")
    count = len(players[chosen]["react"]["per_task"]["success"])
    lines += ["", f"{chosen} against each other player, ReAct, paired over the {count} dev "
                  f"variations:"]
    for name, player in players.items():
        for key in ("success", "score"):
            if name != chosen:
                mine, theirs = (p["react"]["per_task"][key] for p in (players[chosen], player))
                lines.append(claim_line(f"{chosen} - {name}", key,
                                        [a - b for a, b in zip(mine, theirs)], "tasks"))
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["prior"]:
        return prior_unit(argv[1:])
    args = parse_args(argv)
    import science_world
    science_world.check_installed()
    if not run_units(args):
        return None
    out = Path(args.out)
    result = {"kind": "scienceworld-priors",
              "command": compare.command_line("scienceworld_table.py", argv),
              "commit": compare.source_commit(),
              "seeds": args.seeds, **gather(out, args.seeds)}
    text = table(result)
    (out / "scienceworld.json").write_text(json.dumps(result))
    (out / "scienceworld.md").write_text(f"Command: {result['command']}\n\n{text}\n")
    print(text)
    return text


if __name__ == "__main__":
    main()
