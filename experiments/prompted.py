"""A chat model prompted on the maze, with and without writing its assessment first: the paper's
ReAct against ReAct w/ SG, paired maze by maze.

    python experiments/prompted.py --model smollm2 --example --size 4 --min-distance 3 \\
        --max-steps 12 --eval-tasks 100 --out runs/prompted-smollm2
    python experiments/prompted.py --model random --size 4 --min-distance 3 --max-steps 12 \\
        --eval-tasks 100 --out runs/uniform      # the baseline: moves drawn uniformly, no model
    python experiments/prompted.py --model runs/heldout/sg_gr-seed1 --example --size 4 \\
        --min-distance 3 --max-steps 12 --eval-tasks 50 --against runs/heldout/warm
    python experiments/prompted.py --help        # selfguide.py's and the free-text path's settings

Every held-out maze (selfguide's held-out tasks) is played four ways by the same model:
without and with the assessment, greedy and sampled at --temperature (a draw per maze, the
same seed for both formats; --no-sampled or --no-greedy plays one of the two). Each row
reports success, the format's failures (unreadable assessments, replies without a move) and
the guide's balanced and progress accuracy against the maze's truth; the two formats are
paired on the same mazes: the mean difference in success with its 95% t-interval over the
mazes. --against pairs each row with other runs' on the same mazes (a trained model against
the one it started from, or another trained one). Each play is written to --out as it ends,
so a long run stopped midway keeps the plays it finished (its heading says how many). The
free-text path (examples/trl_freetext.py) plays every episode; this file only tallies.
"""
from __future__ import annotations

import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent / "examples"),
                str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]

import torch  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

import compare  # noqa: E402
import research  # noqa: E402
import selfguide as sg  # noqa: E402
import trl_freetext as freetext  # noqa: E402

BATCH = 50  # episodes per generate batch
RANDOM_DRAWS = 200  # episodes per maze of the uniform baseline (--model random)


@dataclass
class Play:
    """How the model is played, beside selfguide.py's and the free-text path's settings."""
    greedy: bool = sg.setting(True, "play greedily (--no-greedy: sampled only, e.g. the sampled "
                                    "plays of a model whose greedy ones are kept)")
    sampled: bool = sg.setting(True, "also play sampled at --temperature (--no-sampled: greedy "
                                     "only)")
    draws: int = sg.setting(1, "sampled episodes per maze and format (each draw its own seeds, "
                               "the same for both formats): a maze's success is their mean")
    against: str = sg.setting("", "other runs' --out folders, comma-separated (their "
                                  "prompted.json, the same mazes): each row paired against "
                                  "each of theirs maze by maze, e.g. a trained model against "
                                  "its warm start")

    def __post_init__(self):
        if self.draws < 1:
            raise ValueError("--draws must be at least 1")
        if not self.greedy and not self.sampled:
            raise ValueError("--no-greedy and --no-sampled leave nothing to play")


def play_all(model, tokenizer, cfg, ft, guided: bool, greedy: bool, draws: int = 1) -> dict:
    """Every maze of the set `draws` times (draw d from seeds cfg.seed + 10^5 d + its batch's
    first index): selfguide's metrics and the format's failures over all episodes, and per
    maze the share of its draws that reached the goal."""
    seeds = freetext.evaluated_seeds(cfg, ft)
    size = BATCH if ft.world == "maze" else ft.eval_batch  # ScienceWorld: a simulator an episode
    batches = [(d, i) for d in range(draws) for i in range(0, len(seeds), size)]
    play = f"{'ReAct w/ SG' if guided else 'ReAct'}, {'greedy' if greedy else 'sampled'}"
    parts = [freetext.play(model, tokenizer, seeds[i:i + size], guided, cfg, ft,
                           cfg.seed + 10**5 * d + i, greedy=greedy)
             for d, i in tqdm(batches, desc=f"{play}: batches of {size} tasks", leave=False)]
    episodes = freetext.concat_episodes(parts)
    done = episodes.steps.env_return > 0 if episodes.scores is None else episodes.scores >= 100
    reached = done.float().view(draws, len(seeds))                                # (draws, mazes)
    return {**sg.episode_metrics(episodes.steps), **research.guide_accuracies(episodes.steps),
            **freetext.shares(episodes), "per_maze": reached.mean(0).tolist()}


def uniform_walk(cfg, first: int) -> dict:
    """Moves drawn uniformly from the four, RANDOM_DRAWS episodes on every maze of the set
    whose first task seed is `first`: what a model that reads nothing would reach. A play's
    row: success, steps, and each maze's share of episodes that reached the goal."""
    env, rng, per_maze, steps = cfg.make_env(), random.Random(cfg.seed), [], 0
    for i in range(cfg.eval_tasks):
        reached = 0
        for _ in range(RANDOM_DRAWS):
            env.reset(seed=first + i)
            done = False
            while not done:
                _, reward, terminated, truncated, _ = env.step(rng.choice(sg.ACTIONS))
                done, steps = terminated or truncated, steps + 1
            reached += reward > 0
        per_maze.append(reached / RANDOM_DRAWS)
    return {"success": sum(per_maze) / len(per_maze), "steps": steps / (len(per_maze) * RANDOM_DRAWS),
            "unparseable": 0.0, "per_maze": per_maze}


def table(rows: dict, against: dict | None = None) -> str:
    """A row per way of playing, then the paired difference of the two formats; with other
    runs' rows (`against`: {folder: rows}), each row minus each of theirs played the same way
    (greedy or sampled), in either format: a trained model against its warm start, or GRPO w/
    SG & GR's assessing play against GRPO's plain play."""
    science = any("score" in m for m in rows.values())  # ScienceWorld's: its score, valid actions
    lines = ["| play | success | steps | unreadable assessments | replies without a move | "
             "guide bal. acc. | guide progress acc. | positive guides |"
             + (" mean score | valid actions |" if science else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|---|" if science else "")]
    for name, m in rows.items():
        lines.append(f"| {name} | {m['success']:.3f} | {m['steps']:.1f} | "
                     f"{sg.metric_text(m.get('unreadable'), 3)} | {m['unparseable']:.3f} | "
                     f"{sg.metric_text(m.get('guide_balanced_accuracy'), 3)} | "
                     f"{sg.metric_text(m.get('guide_progress_accuracy'), 3)} | "
                     f"{sg.metric_text(m.get('share_positive'), 2)} |"
                     + (f" {m['score']:.1f} | {m['valid_actions']:.3f} |" if science else ""))
    lines.append("")
    for how in [h for h in ("greedy", "sampled")
                if f"ReAct, {h}" in rows and f"ReAct w/ SG, {h}" in rows]:
        lines.append(paired_line("ReAct w/ SG - ReAct", how, rows[f"ReAct w/ SG, {how}"],
                                 rows[f"ReAct, {how}"], science))
    for other, theirs in (against or {}).items():
        for how in ("greedy", "sampled"):
            for mine, their in [(a, b) for a in ("ReAct", "ReAct w/ SG")
                                for b in ("ReAct", "ReAct w/ SG")
                                if f"{a}, {how}" in rows and f"{b}, {how}" in theirs]:
                lines.append(paired_line(f"{mine} - {other}'s {their}", how,
                                         rows[f"{mine}, {how}"], theirs[f"{their}, {how}"],
                                         science))
    return "\n".join(lines)


def paired_line(name: str, how: str, a: dict, b: dict, science: bool = False) -> str:
    """a - b maze by maze (ScienceWorld: variation by variation): the mean difference in
    success and its 95% t-interval."""
    differences = [x - y for x, y in zip(a["per_maze"], b["per_maze"])]
    return (f"- {name}, {how}, paired on {len(differences)} "
            f"{'variations' if science else 'mazes'}: "
            f"{compare.interval_text(differences)}")


def read_against(folder: str, mazes: int) -> dict:
    """Another run's rows to pair with, checked before any play: its prompted.json, on as many
    mazes as this run plays."""
    path = Path(folder) / "prompted.json"
    if not path.exists():
        raise SystemExit(f"error: --against {folder}: no prompted.json there (give another "
                         f"prompted.py run's --out)")
    rows = json.loads(path.read_text())
    played = {len(r["per_maze"]) for r in rows.values() if "per_maze" in r}
    if played != {mazes}:
        raise SystemExit(f"error: --against {folder} played {sorted(played) or 'no'} mazes, "
                         f"this run plays {mazes} (--eval-tasks)")
    return rows


def parse_args(argv=None):
    return freetext.parse_config(argv, Play, __doc__.split("\n\n")[0])


def main(argv=None):
    cfg, ft, how_played = parse_args(argv)
    if not ft.model:
        raise SystemExit("error: give a chat model: --model smollm2, a folder, or random")
    if ft.model == "random" and ft.world != "maze":
        raise SystemExit("error: --model random walks the maze; ScienceWorld's floor, a random "
                         "valid action, is python examples/science_world.py")
    if ft.model == "random":  # its row written as a play's, to keep and to pair with
        if how_played.against or how_played.draws > 1 or not how_played.greedy \
                or not how_played.sampled:
            raise SystemExit("error: --model random plays RANDOM_DRAWS uniform walks a maze, "
                             "neither greedy nor sampled: no --against, --draws, --no-greedy "
                             "or --no-sampled")
        rows = {"uniform random moves": uniform_walk(cfg, freetext.MAZES[ft.mazes])}
        out = Path(cfg.out or "runs/prompted-random")
        sg.checked_folder(out, "--out")
        compare.write_results(out, "prompted", (
            f"uniform random moves on {cfg.eval_tasks} {ft.mazes} {cfg.size}x{cfg.size} mazes "
            f"(start at least {cfg.min_distance} moves away, {cfg.max_steps} moves), "
            f"{RANDOM_DRAWS} episodes each. Command: "
            f"{compare.command_line('prompted.py', argv)}\n\n{table(rows)}"), rows)
        return rows
    folder = freetext.model_folder(ft.model)
    device = sg.pick_device(cfg.device)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    out = Path(cfg.out or "runs/prompted")
    sg.checked_folder(out, "--out")
    against = {folder: read_against(folder, cfg.eval_tasks)
               for folder in how_played.against.split(",") if folder}
    model, tokenizer = freetext.load_model(folder, device)
    start, rows = time.perf_counter(), {}
    hows = [(how, greedy) for how, greedy, asked in (("greedy", True, how_played.greedy),
                                                     ("sampled", False, how_played.sampled))
            if asked]
    plays = [(how, greedy, name, guided) for how, greedy in hows
             for name, guided in (("ReAct", False), ("ReAct w/ SG", True))]
    where = (f"{cfg.size}x{cfg.size} mazes (start at least {cfg.min_distance} moves away, "
             f"{cfg.max_steps} moves)" if ft.world == "maze" else
             f"ScienceWorld {freetext.tasks_played(ft)} ({cfg.max_steps} actions)")
    played = (f"{ft.model} on {cfg.eval_tasks} {ft.mazes if ft.world == 'maze' else ''}"
              f"{' ' if ft.world == 'maze' else ''}{where}, "
              + " and ".join(["greedy"] * how_played.greedy + [
                  f"sampled at temperature {cfg.temperature:g}"
                  + (f" ({how_played.draws} draws a maze)" if how_played.draws > 1 else "")]
                  * how_played.sampled))
    for done, (how, greedy, name, guided) in enumerate(plays, 1):
        rows[f"{name}, {how}"] = play_all(model, tokenizer, cfg, ft, guided, greedy,
                                          1 if greedy else how_played.draws)
        print(f"{name}, {how}: {freetext.describe(rows[f'{name}, {how}'])}", flush=True)
        finished = done == len(plays)
        status = (f"{time.perf_counter() - start:.0f} s" if finished else
                  f"stopped or still playing: {done} of {len(plays)} plays done")
        # each play kept as it ends: a long run stopped midway keeps what it played
        compare.write_results(out, "prompted", f"{played}; {status}. Command: "
                              f"{compare.command_line('prompted.py', argv)}\n\n"
                              f"{table(rows, against)}", rows, quiet=not finished)
    return rows


if __name__ == "__main__":
    main()
