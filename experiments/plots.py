"""The figures of a comparison or of one run, from the files they wrote (needs matplotlib).

    python experiments/plots.py runs/compare      # compare.png and co-evolution.png there
    python experiments/plots.py runs/sg_gr-seed0  # a single run's curves.png, from log.jsonl
    python experiments/plots.py runs/dev/a,runs/dev/b   # runs side by side: runs.png in runs/dev

plots.py depends on compare.py (its statistics and its files), never the other way round.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # compare.py beside this file

import compare  # noqa: E402


def pyplot():
    """matplotlib's pyplot, drawing to files; matplotlib is optional (only the figures need it)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("error: the figures need matplotlib: pip install matplotlib") from None
    return plt


def shade_trust(axis, iterations, trust):
    """lambda(u) shaded behind a plot, on its own right-hand scale."""
    shade = axis.twinx()
    shade.fill_between(iterations, trust, color="0.9", step="mid", zorder=0)
    shade.set_ylim(0, 1.05)
    shade.set_ylabel("trust lambda(u)", color="0.5")
    axis.set_zorder(shade.get_zorder() + 1)
    axis.patch.set_visible(False)


def plot_compare(folder: Path, figure_path: Path):
    """Top: each row's held-out success minus GRPO's on the same seed (paired: the priors'
    spread cancels), mean +- std over seeds, with lambda(u) shaded behind. Bottom: the
    guide's balanced accuracy (solid) and share of "positive" (dotted)."""
    plt = pyplot()
    results = json.loads((folder / "compare.json").read_text())
    per_seed, cfg = results["per_seed"], results["config"]

    def points(seed, row, key, start_row):  # [(iteration, value)]; iteration 0 is the prior
        return [(0, seed[start_row]["final"][key])] + [(i, m[key]) for i, m in seed[row]["history"]]

    def curve(row, key, start_row, minus_grpo=False):  # iterations, mean, std over seeds
        per = [points(seed, row, key, start_row) for seed in per_seed]
        if minus_grpo:
            per = [[(i, v - g) for (i, v), (_, g) in zip(p, points(seed, "GRPO", key, "ReAct"))]
                   for p, seed in zip(per, per_seed)]
        stats = [compare.mean_and_spread([p[k][1] for p in per]) for k in range(len(per[0]))]
        return [i for i, _ in per[0]], [m for m, _ in stats], [s for _, s in stats]

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 7), sharex=True)
    trust = per_seed[0]["GRPO w/ SG & GR"]["trust"]
    for axis in (top, bottom):
        shade_trust(axis, range(1, len(trust) + 1), trust)
    lines = [("GRPO w/ SG", "tab:blue"), ("GRPO w/ SG & GR", "tab:red"),
             ("GRPO w/ SG & GR, paper-faithful", "tab:orange"),
             ("control: oracle reward for the guide's", "tab:green"),
             ("control: random reward, the guides' shares", "tab:purple")]
    top.axhline(0, color="tab:gray", linewidth=1.5, label="GRPO (the zero line)")
    for row, color in [line for line in lines if line[0] in per_seed[0]]:
        x, mean, std = curve(row, "success", "ReAct w/ SG", minus_grpo=True)
        top.plot(x, mean, color=color, marker="o", markersize=3, label=row)
        top.fill_between(x, [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)],
                         color=color, alpha=0.12)
        for key, style in [("guide_balanced_accuracy", "-"), ("share_positive", ":")]:
            x, mean, _ = curve(row, key, "ReAct w/ SG")
            bottom.plot(x, mean, color=color, linestyle=style, marker="o", markersize=3)
    top.set_ylabel("held-out success minus GRPO's\n(same seed, greedy)")
    top.legend(loc="lower left", fontsize=7)
    bottom.axhline(1 / 3, color="0.6", linewidth=0.8)
    bottom.set_ylabel("guide vs true progress: balanced\naccuracy (solid), positive share (dotted)")
    bottom.set_xlabel("GRPO iteration")
    maze = (f"{cfg['size']}x{cfg['size']} maze, start >= {cfg['min_distance']} steps away, "
            f"{cfg['max_steps']} moves{', hot/cold cue' if cfg['cue'] else ''}"
            f"{', dist:K' if cfg.get('dist') else ''}")
    top.set_title(f"Self-Guide on the toy: {maze}; {len(per_seed)} seeds, mean ± std", fontsize=9)
    fig.tight_layout()
    figure_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(figure_path, dpi=110)
    print(f"figure written to {figure_path}")


def plot_co_evolution(folder: Path, figure_path: Path):
    """Does the guide get better as its policy does? Each guided row's path through (success,
    guide accuracy) over training, mean over seeds, from the prior (x) to the end (dot). Left:
    the held-out greedy guide at each evaluation. Right: the training rollouts' sampled guides,
    each point the mean of --eval-every iterations (from the rows' logs). The accuracy is on
    the moves the prior misjudges (--cue-misjudge revisit) where there are such, else the
    moves its stale map misjudges (--stale-door), else the progress accuracy (the balanced one
    in results made before it was recorded)."""
    plt = pyplot()
    results = json.loads((folder / "compare.json").read_text())
    per_seed, cfg, seeds = results["per_seed"], results["config"], results["seeds"]
    key = ("guide_accuracy_revisit" if cfg.get("cue_misjudge", "none") != "none"
           else "guide_accuracy_stale" if cfg.get("stale_door")
           else compare.guide_accuracy_key(per_seed[0]["ReAct w/ SG"]["final"]))
    rows = [row for row in per_seed[0] if per_seed[0][row]["history"]
            and per_seed[0][row]["final"].get(key) is not None]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8), sharey=True)

    def mean_path(paths):  # [[(x, y), ...] per seed] -> mean x and mean y per point
        points = range(len(paths[0]))
        return ([compare.mean_and_spread([p[k][0] for p in paths])[0] for k in points],
                [compare.mean_and_spread([p[k][1] for p in paths])[0] for k in points])

    def sampled(seed, row):  # (success, accuracy) per window of eval_every training iterations
        log = read_log(folder / f"seed{seed}-{compare.slug(row)}.jsonl")
        windows = [log[i:i + cfg["eval_every"]] for i in range(0, len(log), cfg["eval_every"])]
        return [(compare.mean_and_spread([r["success"] for r in w])[0],
                 compare.mean_and_spread([r.get(key) for r in w])[0]) for w in windows]

    for row, color in zip(rows, plt.rcParams["axes.prop_cycle"].by_key()["color"] * 2):
        prior = [(s["ReAct w/ SG"]["final"]["success"], s["ReAct w/ SG"]["final"][key])
                 for s in per_seed]
        held_out = mean_path([[p] + [(m["success"], m[key]) for _, m in s[row]["history"]]
                              for p, s in zip(prior, per_seed)])
        for axis, (xs, ys) in [(axes[0], held_out),
                               (axes[1], mean_path([sampled(seed, row) for seed in seeds]))]:
            axis.plot(xs, ys, color=color, marker="o", markersize=2.5, linewidth=1,
                      label=row.strip())
            axis.plot(xs[0], ys[0], color=color, marker="x", markersize=7)
            axis.plot(xs[-1], ys[-1], color=color, marker="o", markersize=7)
    axes[0].set_title("held-out, greedy guide (x: the prior)", fontsize=9)
    axes[1].set_title(f"training rollouts, sampled guides (mean of {cfg['eval_every']} "
                      f"iterations)", fontsize=9)
    axes[0].set_ylabel(key.replace("_", " "))
    for axis in axes:
        axis.set_xlabel("success")
    axes[0].legend(fontsize=7, loc="best")
    fig.suptitle(f"Co-evolution: does the guide improve with the policy? {len(seeds)} seeds, "
                 f"mean", fontsize=10)
    fig.tight_layout()
    fig.savefig(figure_path, dpi=110)
    print(f"figure written to {figure_path}")


def read_log(path: Path) -> list:
    """A run's log.jsonl; a last line cut short (the run was killed mid-write) is left out."""
    records = []
    for number_, line in enumerate(path.read_text().splitlines(), 1):
        try:
            records.append(json.loads(line))
        except ValueError:
            print(f"warning: {path} line {number_} is cut short or damaged; left out",
                  file=sys.stderr)
    return records


def prior_row(summary: str, name: str) -> dict:
    """The summary table's row `name` (the prior's, as the run evaluated it before
    training): its success and guide bal. acc. (None where '-')."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in summary.splitlines() if line.startswith("|")]
    for cells in rows:
        if cells[0] == name:
            value = lambda column: (None if cells[rows[0].index(column)] == "-"  # noqa: E731
                                    else float(cells[rows[0].index(column)]))
            return {"success": value("success"), "balanced": value("guide bal. acc.")}
    raise SystemExit(f"error: no row {name!r} in a summary.md")


def plot_run(folder: Path) -> Path:
    """One run's curves from its log.jsonl, into <folder>/curves.png. Top: held-out (greedy)
    success and the training rollouts' (sampled) success, with lambda(u) shaded behind.
    Bottom: the guide's shares and balanced accuracy, held-out and in training."""
    plt = pyplot()
    records = read_log(folder / "log.jsonl")
    if not records:
        raise SystemExit(f"error: {folder}/log.jsonl holds no iteration yet; nothing to plot")
    evals = [(r["iteration"], r["eval"]) for r in records if "eval" in r]
    iterations = [r["iteration"] for r in records]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 6.5), sharex=True)
    for axis in (top, bottom):
        shade_trust(axis, iterations, [r["trust"] for r in records])
    top.plot(iterations, [r["success"] for r in records], color="tab:blue", alpha=0.35,
             linewidth=0.8, label="training rollouts (sampled)")
    top.plot([i for i, _ in evals], [m["success"] for _, m in evals], color="tab:blue",
             marker="o", markersize=3, label="held-out (greedy)")
    top.set_ylabel("success")
    top.legend(loc="lower right", fontsize=7)
    if "share_positive" in records[0]:
        for key, color in [("share_positive", "tab:green"), ("share_neutral", "tab:gray"),
                           ("share_negative", "tab:red"), ("guide_balanced_accuracy", "k")]:
            label = key.replace("share_", "share ").replace(
                "guide_balanced_accuracy", "balanced accuracy")
            bottom.plot(iterations, [r[key] for r in records], color=color, alpha=0.35,
                        linewidth=0.8)
            bottom.plot([i for i, _ in evals], [m[key] for _, m in evals], color=color,
                        marker="o", markersize=3, label=label)
        bottom.axhline(1 / 3, color="0.6", linewidth=0.8)
        bottom.legend(loc="lower right", fontsize=7, ncol=2)
    else:
        bottom.text(0.5, 0.5, "no guide slot (--variant grpo)", ha="center",
                    transform=bottom.transAxes)
    bottom.set_ylabel("guide: shares and balanced accuracy\n(dots held-out, lines training)")
    bottom.set_xlabel("GRPO iteration")
    top.set_title(f"{folder}: {len(records)} iterations", fontsize=9)
    fig.tight_layout()
    figure = folder / "curves.png"
    fig.savefig(figure, dpi=110)
    print(f"figure written to {figure}")
    return figure


def plot_runs(folders: list) -> Path:
    """Several runs' greedy evaluations over training, side by side, into runs.png in their
    common folder: success, and (ScienceWorld's) the mean score; each run labelled by the
    settings it differs in (its selfguide_config.json); the prior's success before training,
    from the first run's summary.md (the row without the guide), a dashed line. The legend
    goes below the axes, clear of the curves."""
    plt = pyplot()
    configs = [json.loads((f / "selfguide_config.json").read_text()) for f in folders]
    differ = [k for k in configs[0] if k != "out" and len({str(c.get(k)) for c in configs}) > 1]
    scored = any("score" in r.get("eval", {}) for r in read_log(folders[0] / "log.jsonl"))
    fig, axes = plt.subplots(1, 2 if scored else 1, figsize=(10 if scored else 6, 3.8))
    axes = list(axes) if scored else [axes]
    for folder, config in zip(folders, configs):
        evals = [(r["iteration"], r["eval"]) for r in read_log(folder / "log.jsonl")
                 if "eval" in r]
        label = " ".join(f"{k} {config[k]}" for k in differ) or folder.name
        for axis, key in zip(axes, ["success", "score"]):
            axis.plot([i for i, _ in evals], [m[key] for _, m in evals], marker="o",
                      markersize=3, label=label)
    summary = folders[0] / "summary.md"
    if summary.exists():
        before = prior_row(summary.read_text(), "prior, no guide (ReAct)")["success"]
        axes[0].axhline(before, color="gray", linestyle="--", linewidth=1,
                        label="the prior, before training")
    for axis, key in zip(axes, ["greedy success", "greedy mean score"]):
        axis.set_xlabel("GRPO iteration")
        axis.set_ylabel(key)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.045 * ((len(labels) + 1) // 2), 1, 1))  # room for its rows
    parent = folders[0].resolve().parent  # the runs' common folder
    while not all(parent in f.resolve().parents for f in folders):
        parent = parent.parent
    figure = parent / "runs.png"
    fig.savefig(figure, dpi=110)
    print(f"figure written to {figure}")
    return figure


HINDSIGHT_LINES = [("GRPO w/ SG & GR, guides at temperature 1", "env at 1", "tab:gray"),
                   ("GRPO w/ SG & GR, hindsight, guides at temperature 1", "hindsight at 1",
                    "tab:red"),
                   ("control: placebo, guides at temperature 1", "placebo at 1", "tab:purple"),
                   ("control: guides paid for the truth, at temperature 1", "truth at 1 (control)",
                    "tab:green")]


def plot_hindsight(folder: Path, figure_path: Path):
    """Co-evolution with a mechanism, over training: held-out success, and (in the house) on
    the fixed probe's stale moves the guide's probability of the true word, apart for the
    truly negative moves (into the stale map's dead end) and the truly positive ones (out of
    it); each row of HINDSIGHT_LINES the comparison holds, mean +- std over seeds, the prior
    at iteration 0."""
    plt = pyplot()
    per_seed = load_comparison(folder)["per_seed"]
    panels = [("success", "held-out success (greedy)"),
              ("probe_guide_true_prob_stale_negative", "probe: p(true word),\ntruly negative "
                                                       "stale moves"),
              ("probe_guide_true_prob_stale_positive", "probe: p(true word),\ntruly positive "
                                                       "stale moves")]
    # the stale panels only where the maze has a stale door (the house): elsewhere, success
    panels = [(key, label) for key, label in panels if key in per_seed[0]["ReAct w/ SG"]["final"]]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.7 * len(panels), 3.6), sharex=True,
                             squeeze=False)
    axes = axes[0]
    for axis, (key, label) in zip(axes, panels):
        for row, name, color in [line for line in HINDSIGHT_LINES if line[0] in per_seed[0]]:
            paths = [[(0, seed["ReAct w/ SG"]["final"][key])]
                     + [(i, m[key]) for i, m in seed[row]["history"] if key in m]
                     for seed in per_seed]
            stats = [compare.mean_and_spread([p[k][1] for p in paths])
                     for k in range(len(paths[0]))]
            x, mean = [i for i, _ in paths[0]], [m for m, _ in stats]
            axis.plot(x, mean, color=color, marker="o", markersize=3, label=name)
            axis.fill_between(x, [m - s for m, s in stats], [m + s for m, s in stats],
                              color=color, alpha=0.12)
        axis.set_ylabel(label)
        axis.set_xlabel("GRPO iteration")
        axis.set_ylim(-0.02, 1.02)
    axes[0].legend(loc="lower right", fontsize=7)
    fig.suptitle(f"{folder.name}: a guide paid against the agent's own hindsight "
                 f"({len(per_seed)} seed{'s' * (len(per_seed) > 1)}, mean ± std)", fontsize=9)
    fig.tight_layout()
    figure_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(figure_path, dpi=110)
    print(f"figure written to {figure_path}")


def load_comparison(folder: Path) -> dict:
    """A comparison's compare.json, compare.py's or one kept in experiments/results/."""
    return compare.expand(json.loads((folder / "compare.json").read_text()))


def plot_comparison(folder: Path):
    """A comparison's figures, into its folder: with hindsight's rows, plot_hindsight;
    otherwise the paper's rows and the guide's path."""
    if HINDSIGHT_LINES[1][0] in load_comparison(folder)["per_seed"][0]:
        return plot_hindsight(folder, folder / "hindsight.png")
    plot_compare(folder, folder / "compare.png")
    plot_co_evolution(folder, folder / "co-evolution.png")


def parse_args(argv=None) -> Path:
    """The one folder to plot; anything else exits with the usage line."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        raise SystemExit("usage: python experiments/plots.py FOLDER (a comparison's --out, or "
                         "a run's folder)")
    return Path(argv[0])


def main(argv=None):
    folder = parse_args(argv)
    if "," in str(folder):
        return plot_runs([Path(f) for f in str(folder).split(",")])
    if (folder / "compare.json").exists():
        return plot_comparison(folder)
    if (folder / "log.jsonl").exists():
        return plot_run(folder)
    raise SystemExit(f"error: no compare.json or log.jsonl in {str(folder)!r} to plot; run "
                     f"experiments/compare.py or selfguide.py first (or give its --out)")


if __name__ == "__main__":
    main()
