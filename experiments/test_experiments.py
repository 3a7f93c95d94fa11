"""Tests for the experiment harness (compare.py, plots.py, benchmark.py): its statistics,
trunk sharing, resumable work units and figures. The method's own tests are in
test_selfguide.py; the tiny settings and fixtures all share are in conftest.py.

    python -m pytest -q test_toy_env.py test_selfguide.py experiments/ examples/
"""
import json
import math
import re
import shlex
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "experiments")]

import benchmark  # noqa: E402
import checkpoints  # noqa: E402
import compare  # noqa: E402
import gradient  # noqa: E402
import instruments  # noqa: E402
import plots  # noqa: E402
import priors  # noqa: E402
import probe  # noqa: E402
import prompted  # noqa: E402
import research  # noqa: E402
import selfguide as sg  # noqa: E402
import toy_env  # noqa: E402
from conftest import (TINY, TINY_ARGS, fake_episodes, first_rollouts,  # noqa: E402
                      tiny_policy, two_hand_built_episodes)

MATPLOTLIB = "the figures' tests need the optional matplotlib: pip install matplotlib"


def tiny_config(**overrides) -> research.Config:
    """conftest's tiny settings as the harnesses read them: research.Config."""
    return research.Config(**{**TINY, **overrides})


def hand_built_episodes(**fields) -> research.Episodes:
    """conftest's two hand-built episodes as the instruments read them, both in maze 0."""
    return research.Episodes(**{**vars(two_hand_built_episodes()),
                                "mazes": torch.zeros(2, dtype=torch.long), **fields})
COMPARE_ARGS = TINY_ARGS + ["--rows", "core", "--seeds", "2", "--workers", "1"]


@pytest.fixture(scope="session")
def comparison(prior_cache, tmp_path_factory):
    """compare.py with COMPARE_ARGS, run once a session: (its per-seed results, its folder),
    read by the tests of resuming, of a refused command and of the figures."""
    out = tmp_path_factory.getbasetemp() / "comparison"
    per_seed = compare.main(COMPARE_ARGS + ["--prior-cache", str(prior_cache), "--out", str(out)])
    return per_seed, out


# --- the command line and the rows ---

def test_quick_preset_changes_defaults_but_explicit_flags_win():
    _, quick = compare.parse_args(["--quick"])
    assert all(getattr(quick, name) == value for name, value in compare.QUICK.items())
    _, explicit = compare.parse_args(["--quick", "--seeds", "5", "--rows", "paper"])
    assert (explicit.seeds, explicit.rows, explicit.workers) == (5, "paper", 2)


def test_default_rows_are_the_papers_table_and_one_run_settings_are_refused(capsys):
    cfg, exp = compare.parse_args([])
    assert compare.compare_rows(cfg, exp) == compare.ROWS and cfg.out == "runs/compare"
    for argv in (["--show", "1"], ["--eval-only"], ["--init-from", "runs/x"]):
        with pytest.raises(SystemExit) as stop:
            compare.parse_args(argv)
        assert stop.value.code == 2
        assert "goes with a single run of selfguide.py" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        compare.parse_args(["--seeds", "0"])
    assert "--seeds must be at least 1" in capsys.readouterr().err


def test_compare_rows_add_labelled_controls_once():
    rows = [name for name, _ in compare.compare_rows(
        sg.Config(), compare.Experiment(controls=True, guards=True))]
    assert len(rows) == len(set(rows))
    controls = [name for name in rows if name.startswith("control:")]
    assert len(controls) == 3
    assert not any(n.startswith("control:") for n, _ in compare.compare_rows(sg.Config(), compare.Experiment()))


# --- paired statistics and the table ---

def test_co_evolution_reports_the_captured_share_and_the_accuracy_trend():
    def seed(sg_success, method, oracle, accuracies):
        history = [(i, {"success": s, "guide_balanced_accuracy": a})
                   for i, (s, a) in enumerate(zip([0.1, 0.2, 0.3], accuracies))]
        final = {"success": method, "guide_balanced_accuracy": accuracies[-1]}
        return {"ReAct w/ SG": {"final": {"success": 0.1, "guide_balanced_accuracy": 0.5},
                                "history": []},
                "GRPO w/ SG": {"final": {"success": sg_success}, "history": []},
                "GRPO w/ SG & GR": {"final": final, "history": history},
                "control: oracle reward for the guide's": {"final": {"success": oracle},
                                                            "history": []}}
    lines = compare.co_evolution([seed(0.30, 0.32, 0.40, [0.5, 0.6, 0.7]),
                             seed(0.30, 0.34, 0.40, [0.7, 0.6, 0.5])])
    assert "guide's reward gains +0.030 and the oracle's +0.100: the guide captures 30%" in lines[0]
    worse = compare.co_evolution([seed(0.30, 0.28, 0.40, [0.5, 0.6, 0.7])] * 2)
    assert "gains -0.020 and the oracle's +0.100: the guide captures none" in worse[0]
    assert "0.500 (prior) -> 0.600" in lines[1] and "+0.00" in lines[1]  # r = +1 and -1
    assert "progress accuracy" not in lines[1]  # not in these results: not printed
    with_progress = [seed(0.30, 0.32, 0.40, [0.5, 0.6, 0.7]) for _ in range(2)]
    for s, (start, end) in zip(with_progress, [(0.75, 0.8), (0.85, 0.9)]):
        s["ReAct w/ SG"]["final"]["guide_progress_accuracy"] = start
        s["GRPO w/ SG & GR"]["final"]["guide_progress_accuracy"] = end
    assert "; progress accuracy 0.800 -> 0.850" in compare.co_evolution(with_progress)[1]
    assert compare.pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(0.9934, abs=1e-4)
    assert compare.pearson([1, 1, 1], [2, 4, 7]) is None
    assert compare.pearson([2, 4, 7], [1, 1, 1]) is None  # either list constant
    assert compare.pearson([1, None, 3], [2, 4, 7]) is None  # a None in either list
    assert compare.pearson([1, 2, 3], [2, None, 7]) is None
    assert compare.pearson([1, 2], [5, 3]) == pytest.approx(-1.0)  # two points: a line
    assert compare.pearson([1], [5]) is None


def test_co_evolution_at_its_edges_one_seed_no_gain_a_zero_gain_and_only_its_rows():
    """One seed: no share line (a share needs a spread) and no index past the first seed; an
    oracle that gains nothing or loses: nothing to capture; a guide's reward that gains
    exactly 0: none captured; exactly the three rows the share needs are enough."""
    def seed(sg_success, method, oracle):
        return {"GRPO w/ SG": {"final": {"success": sg_success}, "history": []},
                "GRPO w/ SG & GR": {"final": {"success": method}, "history": []},
                "control: oracle reward for the guide's": {"final": {"success": oracle},
                                                            "history": []}}
    assert compare.co_evolution([seed(0.3, 0.4, 0.5)]) == []
    alone = seed(0.3, 0.4, 0.5)
    alone["ReAct w/ SG"] = {"final": {"success": 0.1, "guide_balanced_accuracy": 0.5},
                            "history": []}
    alone["GRPO w/ SG & GR"] = {"final": {"success": 0.4, "guide_balanced_accuracy": 0.75},
                                "history": [(2, {"success": 0.2, "guide_balanced_accuracy": 0.6}),
                                            (4, {"success": 0.4, "guide_balanced_accuracy": 0.7})]}
    assert compare.co_evolution([alone]) == [
        "GRPO w/ SG & GR: guide balanced accuracy 0.500 (prior) -> 0.750; correlation with "
        "held-out success over its evaluations +1.00 (mean over seeds)"]
    for oracle in (0.3, 0.2):  # the oracle gains 0, or loses 0.1
        lines = compare.co_evolution([seed(0.3, 0.4, oracle)] * 2)
        assert len(lines) == 1 and lines[0].endswith(": no gain for the guide to capture")
    lines = compare.co_evolution([seed(0.3, 0.3, 0.5)] * 2)
    assert lines == ["Over GRPO w/ SG, the guide's reward gains +0.000 and the oracle's +0.200: "
                     "the guide captures none of the oracle's gain"]


def test_paired_interval_matches_a_hand_computed_t_interval():
    differences = [0.02, 0.05, -0.01, 0.04, 0.03]
    mean = sum(differences) / 5
    sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / 4)
    assert compare.paired_interval(differences) == pytest.approx((mean, 2.776 * sd / math.sqrt(5)))
    assert math.isnan(compare.paired_interval([0.1])[1])
    assert compare.interval_text([0.1]) == "+0.100 [one pair: no interval]"  # not "[+nan, +nan]"
    assert compare.verdict([0.1]) == "not resolved"


def test_paired_interval_past_twenty_degrees_of_freedom_stays_near_the_t_table():
    """Past df 20 the t quantile comes from an expansion in 1/df, within 0.0003 of Student's
    t (scipy.stats.t.ppf(0.975, df), to 6 places); at df 20 the table itself (2.086), at df 21
    the expansion."""
    table = {21: 2.079614, 22: 2.073873, 25: 2.059539, 30: 2.042272, 40: 2.021075,
             60: 2.000298, 120: 1.979930, 1000: 1.962339}
    for df, t975 in table.items():
        differences = [(-1) ** k * 0.1 for k in range(df + 1)]
        mean, spread = compare.mean_and_spread(differences)
        _, half = compare.paired_interval(differences)
        assert abs(half / (spread / math.sqrt(df + 1)) - t975) < 0.0003, df
    at_20 = [(-1) ** k * 0.1 for k in range(21)]
    _, spread = compare.mean_and_spread(at_20)
    assert compare.paired_interval(at_20)[1] == pytest.approx(2.086 * spread / math.sqrt(21))


def test_compare_table_is_exact_markdown_for_one_seed_and_for_several():
    seed = {"ReAct": {"final": {"success": 0.25}},
            "GRPO": {"final": {"success": 0.5, "steps_over_optimal": 1.25,
                               "share_positive": None}},
            "GRPO w/ SG": {"final": {"success": 0.75, "steps_over_optimal": 1.5,
                                     "guide_balanced_accuracy": 0.875,
                                     "guide_progress_accuracy": 0.9375, "share_positive": 0.625}}}
    assert compare.compare_table([seed]) == "\n".join([
        "| row | held-out success | steps / optimal | guide bal. acc. | guide progress acc. "
        "| positive guides |",
        "|---|---|---|---|---|---|",
        "| ReAct | 0.250 | - | - | - | - |",
        "| GRPO | 0.500 | 1.25 | - | - | - |",
        "| GRPO w/ SG | 0.750 | 1.50 | 0.875 | 0.938 | 0.62 |"])
    other = json.loads(json.dumps(seed))
    for row, value in [("ReAct", 0.35), ("GRPO", 0.4), ("GRPO w/ SG", 0.85)]:
        other[row]["final"]["success"] = value
    # GRPO w/ SG - GRPO: +0.25 and +0.45, sd 0.1414, half-width 12.706 x 0.1414 / sqrt(2)
    assert compare.compare_table([seed, other]) == "\n".join([
        "| row | held-out success | vs GRPO [95% CI] | vs GRPO w/ SG [95% CI] | steps / optimal "
        "| guide bal. acc. | guide progress acc. | positive guides |",
        "|---|---|---|---|---|---|---|---|",
        "| ReAct | 0.300 ± 0.071 | -0.150 [-1.421, +1.121] | -0.500 [-0.500, -0.500] | - | - "
        "| - | - |",
        "| GRPO | 0.450 ± 0.071 | - | -0.350 [-1.621, +0.921] | 1.25 ± 0.00 | - | - | - |",
        "| GRPO w/ SG | 0.800 ± 0.071 | +0.350 [-0.921, +1.621] | - | 1.50 ± 0.00 "
        "| 0.875 ± 0.000 | 0.938 ± 0.000 | 0.62 ± 0.00 |"])
    # without a GRPO w/ SG row, one column of differences; an undefined value is left out of
    # its mean (X - GRPO: +0.1 and +0.2, sd 0.0707, half-width 12.706 x 0.0707 / sqrt(2))
    per_seed = [{"GRPO": {"final": {"success": 0.5, "steps_over_optimal": 1.2}},
                 "X": {"final": {"success": 0.6, "steps_over_optimal": 1.1}}},
                {"GRPO": {"final": {"success": 0.7, "steps_over_optimal": None}},
                 "X": {"final": {"success": 0.9, "steps_over_optimal": 1.3}}}]
    assert compare.compare_table(per_seed) == "\n".join([
        "| row | held-out success | vs GRPO [95% CI] | steps / optimal | guide bal. acc. | "
        "guide progress acc. | positive guides |",
        "|---|---|---|---|---|---|---|",
        "| GRPO | 0.600 ± 0.141 | - | 1.20 ± 0.00 | - | - | - |",
        "| X | 0.750 ± 0.212 | +0.150 [-0.485, +0.785] | 1.20 ± 0.14 | - | - | - |"])


def test_co_evolution_lines_pair_own_rollouts_and_the_probe_on_stale_moves_and_gradients():
    """Each guided row's line: the progress accuracy, then each of the probability of the true
    word, the stale moves' accuracy and their probability of the true word, on its own
    rollouts and on the fixed probe, prior -> trained with the paired interval; then what
    reached the guide over training. Two seeds, the differences hand-computed."""
    prior = {"success": 0.1, "guide_balanced_accuracy": 0.5, "guide_progress_accuracy": 0.6,
             "guide_true_prob_progress": 0.55, "guide_accuracy_stale": 0.0,
             "guide_true_prob_stale": 0.1, "probe_guide_progress_accuracy": 0.6,
             "probe_guide_true_prob_progress": 0.55, "probe_guide_accuracy_stale": 0.0,
             "probe_guide_true_prob_stale": 0.1}

    def seed(up):  # the trained row: every figure `up` above the prior's
        final = {k: (v + up if k != "success" else 0.3) for k, v in prior.items()}
        final.update(train_guide_sensitivity=0.02 + up, train_action_sensitivity=1.5,
                     train_guide_off_prior=0.01, train_guide_push=0.005)
        return {"ReAct w/ SG": {"final": dict(prior), "history": []},
                "GRPO w/ SG & GR": {"final": final, "history": [
                    (2, {"success": 0.2, "guide_balanced_accuracy": 0.5}),
                    (4, {"success": 0.3, "guide_balanced_accuracy": 0.5 + up})]}}
    line = compare.co_evolution([seed(0.1), seed(0.3)])[0]
    # differences 0.1 and 0.3: mean 0.2, sample std 0.1414, t(0.975, 1 df) = 12.706
    half = 12.706 * 0.1414214 / math.sqrt(2)
    pair = f"+0.200 [{0.2 - half:+.3f}, {0.2 + half:+.3f}]"
    assert line == (
        "GRPO w/ SG & GR: guide balanced accuracy 0.500 (prior) -> 0.700; correlation with "
        "held-out success over its evaluations +1.00 (mean over seeds); progress accuracy "
        f"0.600 -> 0.800, on the fixed probe 0.600 -> 0.800, {pair}; probability of the true "
        f"word, on its own rollouts 0.550 -> 0.750, {pair}, on the fixed probe 0.550 -> 0.750, "
        f"{pair}; where the stale map errs, on its own rollouts 0.000 -> 0.200, {pair}, on the "
        f"fixed probe 0.000 -> 0.200, {pair}; probability of the true word there, on its own "
        f"rollouts 0.100 -> 0.300, {pair}, on the fixed probe 0.100 -> 0.300, {pair}; over "
        "training, the guides' sensitivity |d log p / d logits| 0.22 (the actions' 1.5), their "
        "push |A| x that 0.005, guides off the prior's word 0.010")
    # a hindsight row's line ends with how often it had a target, and how right that was
    hindsight = [seed(0.1), seed(0.3)]
    for k, s in enumerate(hindsight):
        s["GRPO w/ SG & GR"]["final"].update(train_target_coverage=0.4 + k / 10,
                                             train_target_accuracy=0.9)
    assert compare.co_evolution(hindsight)[0].endswith(
        "; its targets on 0.450 of the judged guides, the true word on 0.900 of them")
    # and the stale moves by their true word, where a house records them
    for s in hindsight:
        for who, up in (("ReAct w/ SG", 0.0), ("GRPO w/ SG & GR", 0.5)):
            s[who]["final"].update(probe_guide_true_prob_stale_negative=0.1 + up,
                                   probe_guide_true_prob_stale_positive=0.2)
    line = compare.co_evolution(hindsight)[0]
    assert ("; there, on the truly negative moves (into its dead end), on the fixed probe "
            "0.100 -> 0.600, +0.500 [+0.500, +0.500]; on the truly positive ones (out of it), "
            "on the fixed probe 0.200 -> 0.200, +0.000 [+0.000, +0.000]") in line


# --- trunk sharing: rows branch off the lambda = 0 prefix they share ---

def same_method_records(records, alone) -> bool:
    """compare.py's records hold selfguide's and the instruments' figures: selfguide's equal."""
    def method(record, keys):
        return {k: (method(v, keys[k]) if k == "eval" else v) for k, v in record.items()
                if k in keys}
    return [method(r, a) for r, a in zip(records, alone)] == alone


def test_branching_off_the_shared_prefix_equals_training_each_row_alone():
    cfg = research.Config(**{**TINY, "iterations": 8, "eval_every": 4})
    sg.seed_everything(0)
    prior = sg.make_policy(cfg).eval()
    configs = {"sg": sg.dataclasses.replace(cfg, variant="sg"),
               "trapezoid": sg.dataclasses.replace(cfg, variant="sg_gr"),
               "no_anneal": sg.dataclasses.replace(cfg, variant="sg_gr", schedule="no_anneal"),
               "immediate": sg.dataclasses.replace(cfg, variant="sg_gr", schedule="immediate"),
               "step credit": sg.dataclasses.replace(cfg, variant="sg_gr", credit="step"),
               "oracle": sg.dataclasses.replace(cfg, variant="sg_gr", internal_reward="oracle"),
               "random": sg.dataclasses.replace(cfg, variant="sg_gr", internal_reward="random",
                                                credit="step"),
               "grpo": sg.dataclasses.replace(cfg, variant="grpo"),
               "grpo + oracle": sg.dataclasses.replace(cfg, variant="grpo",
                                                       internal_reward="oracle"),
               "outcome": sg.dataclasses.replace(cfg, variant="sg_gr", guide_advantage="outcome"),
               "truth": sg.dataclasses.replace(cfg, variant="sg_gr", guide_advantage="truth"),
               "hindsight": sg.dataclasses.replace(cfg, variant="sg_gr",
                                                   guide_advantage="hindsight"),
               "placebo": sg.dataclasses.replace(cfg, variant="sg_gr", guide_advantage="placebo"),
               "critic": sg.dataclasses.replace(cfg, variant="sg_gr", internal_reward="hindsight"),
               "grpo + critic": sg.dataclasses.replace(cfg, variant="grpo",
                                                       internal_reward="hindsight")}
    branched = compare.train_rows(prior, configs)
    # trapezoid and no_anneal branch from the same snapshot: the second must not inherit the
    # first one's optimizer state
    assert compare.first_trusted_iteration(configs["trapezoid"]) == 5
    assert compare.first_trusted_iteration(configs["no_anneal"]) == 5
    for row, row_cfg in configs.items():
        alone = sg.copy.deepcopy(prior)
        alone_records = sg.train(alone, prior, row_cfg)
        policy, records = branched[row]
        assert len(records) == 8 and same_method_records(records, alone_records), row
        for a, b in zip(policy.parameters(), alone.parameters()):
            assert torch.equal(a, b), row
    # with the probe, every evaluation also records the guide's on it, and nothing else moves
    episodes = probe.probe_episodes(prior, cfg)
    policy, records = compare.train_rows(prior, {"hindsight": configs["hindsight"]},
                                         episodes)["hindsight"]
    assert all(torch.equal(a, b) for a, b in zip(policy.parameters(),
                                                 branched["hindsight"][0].parameters()))
    evaluations = [r["eval"] for r in records if "eval" in r]
    assert len(evaluations) == 2 and evaluations[-1] == {
        **branched["hindsight"][1][-1]["eval"], **probe.probe_metrics(policy, episodes, cfg)}
    assert "probe_guide_true_prob_progress" in evaluations[0]


# --- work units that survive faults ---

def test_an_interrupted_compare_resumes_to_the_table_of_an_uninterrupted_one(
        tmp_path, prior_cache, comparison, monkeypatch, capsys):
    cache = ["--prior-cache", str(prior_cache)]
    whole, whole_folder = comparison
    real_trunk, calls = compare.compare_trunk, []

    def interrupted(cfg, rows):
        calls.append(rows[0][0])
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_trunk(cfg, rows)

    monkeypatch.setattr(compare, "compare_trunk", interrupted)
    out = tmp_path / "resumed"
    capsys.readouterr()
    assert compare.main(COMPARE_ARGS + cache + ["--out", str(out)]) is None
    stopped = capsys.readouterr().out
    units = len(list((out / "units").iterdir()))
    assert units == 4 and f"{units} of " in stopped and "run the same command again" in stopped
    assert not (out / "compare.json").exists()
    monkeypatch.setattr(compare, "compare_trunk", real_trunk)
    saved = {unit: unit.stat().st_mtime_ns for unit in (out / "units").iterdir()}
    resumed = compare.main(COMPARE_ARGS + cache + ["--out", str(out), "--workers", "2"])
    total = len(list((out / "units").iterdir()))
    assert f"resuming {out}: 4 of {total} work units" in capsys.readouterr().out and total > 4
    assert all(unit.stat().st_mtime_ns == time for unit, time in saved.items())  # not redone
    assert resumed == json.loads(json.dumps(whole))  # every row, every evaluation, every seed
    table = lambda folder: (folder / "compare.md").read_text().split("\n\n", 1)[1]  # noqa: E731
    assert table(out) == table(whole_folder)
    # every guided row's final policy judged the fixed probe, the prior's episodes of its seed
    for seed in resumed:
        assert {r for r in seed if "probe_guide_accuracy" in seed[r]["final"]} == \
            {"ReAct w/ SG", "GRPO w/ SG", "GRPO w/ SG & GR"}
    # the two guided rows' lines: the progress accuracy and the true word's probability there
    assert table(out).count("on the fixed probe") == 2 * 2
    logs = sorted(whole_folder.glob("seed*.jsonl"))
    assert len(logs) == 2 * 3  # seeds x trained rows
    for log in logs:
        assert log.read_text() == (out / log.name).read_text(), log.name


def test_a_different_command_on_the_same_compare_folder_is_refused(tmp_path, prior_cache,
                                                                    comparison, capsys):
    import shutil
    first, folder = comparison
    shutil.copytree(folder, tmp_path / "c")
    cache, out = ["--prior-cache", str(prior_cache)], ["--out", str(tmp_path / "c")]
    with pytest.raises(SystemExit, match=r"other settings \(--seeds 2 there, 3 now\)"):
        compare.main(COMPARE_ARGS + cache + out + ["--seeds", "3"])
    assert not (tmp_path / "c" / "units" / "seed2-prompting.json").exists()  # nothing trained
    again = compare.main(COMPARE_ARGS + cache + out + ["--workers", "2"])  # the same command:
    assert "resuming" in capsys.readouterr().out and again == json.loads(json.dumps(first))


def test_sigterm_stops_a_compare_that_the_same_command_then_finishes(tmp_path, prior_cache):
    import os
    import signal
    import subprocess
    import sys
    import time
    args = COMPARE_ARGS + ["--prior-cache", str(prior_cache), "--out", str(tmp_path / "c"),
                           "--iterations", "20"]
    # faulthandler: should the process die of a signal (SIGABRT, say), stderr shows each thread's stack
    run = subprocess.Popen([sys.executable, str(ROOT / "experiments" / "compare.py")] + args, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    deadline = time.time() + 120
    while not list((tmp_path / "c").glob("units/seed1-prompting.json")) and time.time() < deadline:
        time.sleep(0.2)
    run.send_signal(signal.SIGTERM)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0 and "Traceback" not in err, (run.returncode, out[-2000:], err[-6000:])
    assert "stopped by Ctrl-C or SIGTERM" in out
    done = len(list((tmp_path / "c" / "units").iterdir()))
    assert 2 <= done < 8  # 2 seeds x (prompting rows + 3 trunks)
    finished = subprocess.run([sys.executable, str(ROOT / "experiments" / "compare.py")] + args, capture_output=True,
                              text=True, timeout=300)
    assert finished.returncode == 0 and "Traceback" not in finished.stderr
    assert f"resuming {tmp_path / 'c'}: {done} of 8 work units" in finished.stdout
    assert (tmp_path / "c" / "compare.md").exists()


def test_a_folder_started_by_selfguide_py_compare_resumes_here(tmp_path):
    """Before the harness had its own file, `selfguide.py --compare` saved every setting of
    one Config, flags that are gone now included: such a folder still belongs to its command."""
    cfg, exp = compare.parse_args(COMPARE_ARGS + ["--out", str(tmp_path)])
    settings = {**sg.dataclasses.asdict(cfg), **sg.dataclasses.asdict(exp), "compare": True,
                "bench": False}
    for name in compare.RESULT_FREE_SETTINGS:
        settings.pop(name)
    (tmp_path / "compare-settings.json").write_text(json.dumps(settings))
    compare.claim_compare_folder(tmp_path, cfg, exp)  # no SystemExit
    with pytest.raises(SystemExit, match=r"--iterations 3 there, 4 now"):
        compare.claim_compare_folder(tmp_path, sg.dataclasses.replace(cfg, iterations=4), exp)


# --- the checkpoint experiment ---

def test_a_second_model_writes_the_guides_and_the_policy_the_actions():
    """Steered(policy, guide_policy) in selfguide's rollout: every guide's log-prob is the guide
    model's under its own full forward pass of the stream, every action's the policy's; a copy
    of the policy as its own guide model changes nothing. With a cache per rollout, a second
    rollout of the same Steered model plays the same episodes."""
    cfg = tiny_config()
    policy, guide_policy = tiny_policy(seed=0), tiny_policy(seed=1)
    steered = checkpoints.Steered(policy, guide_policy)
    mixed = sg.rollout(steered, list(range(12)), True, cfg, torch.Generator().manual_seed(0))
    with torch.no_grad():
        from_policy = sg.token_logprobs(policy, mixed.tokens, mixed.slots, cfg.temperature)
        from_guide = sg.token_logprobs(guide_policy, mixed.tokens, mixed.slots, cfg.temperature)
    is_guide, is_action = mixed.slots == sg.SLOT_GUIDE, mixed.slots == sg.SLOT_ACTION
    assert torch.allclose(mixed.logprobs[is_guide], from_guide[is_guide], atol=1e-5)
    assert torch.allclose(mixed.logprobs[is_action], from_policy[is_action], atol=1e-5)
    assert not torch.allclose(from_policy[is_guide], from_guide[is_guide], atol=1e-3)
    again = sg.rollout(steered, list(range(12)), True, cfg, torch.Generator().manual_seed(0))
    assert torch.equal(again.tokens, mixed.tokens)
    alone = sg.rollout(policy, list(range(12)), True, cfg, torch.Generator().manual_seed(0))
    itself = sg.rollout(checkpoints.Steered(policy, sg.copy.deepcopy(policy)), list(range(12)),
                        True, cfg, torch.Generator().manual_seed(0))
    assert torch.equal(alone.tokens, itself.tokens)
    assert torch.allclose(alone.logprobs, itself.logprobs, atol=1e-6)


def test_checkpoints_steer_fixed_policies_and_the_run_is_selfguides_own(tmp_path, prior_cache,
                                                                         capsys):
    cache = ["--prior-cache", str(prior_cache)]
    per_seed = checkpoints.main(TINY_ARGS + cache + ["--seeds", "1", "--out", str(tmp_path / "k")])
    seed = per_seed[0]
    assert len(seed["own"]) == len(checkpoints.FRACTIONS) == len(seed["steered"]["prior"])
    # the checkpoints come from the very run `python selfguide.py` trains with these settings,
    # on the one thread each seed of the experiment runs on (another count can move the last
    # bits of a float: the same numbers need the same thread count)
    run = tmp_path / "run"
    rows = sg.main(TINY_ARGS + cache + ["--threads", "1", "--out", str(run)])
    method = rows[-1][1]  # the checkpoints' records hold the instruments' figures too
    assert {k: seed["final_metrics"][k] for k in method} == method
    # steering, replayed with that run's saved final policy and the cached prior
    cfg = research.parse_args(TINY_ARGS + cache)  # as the harness reads it
    prior, final = sg.load_or_train_prior(cfg, "cpu"), sg.load_policy(run, cfg, "cpu")
    assert seed["own"][-1] == instruments.evaluate(final, cfg, True)
    steered = {name: instruments.evaluate(checkpoints.Steered(policy, guide), cfg, True,
                                          judge=guide)
               for name, policy, guide in [("prior", prior, final), ("final", final, prior)]}
    assert (seed["steered"]["prior"][-1], seed["steered"]["final"][0]) == (
        steered["prior"], steered["final"])
    assert seed["steered"]["prior"][0] == seed["own"][0]  # steered by a copy of itself: alone
    table = (tmp_path / "k" / "checkpoints.md").read_text()
    assert table.count("\n| final |") == 3 and table.count("\n| 25% |") == 3
    assert table.count("progress acc.") == 4 and "bal. acc." not in table
    # the fixed probe: the prior judging its own greedy episodes is its own greedy evaluation
    # (the probe reads them by a full forward pass, the play by its KV cache: to rounding)
    assert seed["probe"][0] == pytest.approx({f"probe_{k}": v for k, v in seed["own"][0].items()
                                              if k.startswith(("guide_", "share_"))}, rel=1e-6)
    assert len(seed["probe"]) == len(checkpoints.FRACTIONS) and "\n| final | " in \
        table.split("judging the probe")[1]
    assert "written to" in capsys.readouterr().out


def test_probe_table_shows_the_true_words_probability_and_the_stale_moves_where_recorded():
    def probe(k, scale, stale=True):  # checkpoint k of a seed whose figures grow by `scale`
        m = {"probe_guide_progress_accuracy": 0.5, "probe_guide_true_prob_progress": 0.5,
             "probe_guide_accuracy": 0.5, "probe_share_positive": 0.5}
        if stale:
            m |= {"probe_guide_accuracy_stale": 0.0, "probe_guide_true_prob_stale": scale * k}
        return m
    per_seed = [{"probe": [probe(k, scale) for k in range(5)]} for scale in (0.1, 0.2)]
    table = checkpoints.probe_table(per_seed, compare.PROGRESS, "progress acc.").splitlines()
    header = [c.strip() for c in table[0].split("|")[1:-1]]
    assert header == ["checkpoint, judging the probe", "guide progress acc.",
                      "vs the prior [95% CI]", "probability of the true word",
                      "vs the prior [95% CI]", "stale moves: accuracy", "vs the prior [95% CI]",
                      "stale moves: probability of the true word", "vs the prior [95% CI]",
                      "guide accuracy", "positive guides"]
    final = [c.strip() for c in table[-1].split("|")[1:-1]]
    # the final checkpoint's stale probabilities 0.4 and 0.8 against the prior's 0 and 0:
    # mean 0.6, sample std 0.283, half-width t(0.975, 1 dof) 12.706 x 0.283 / sqrt(2) = 2.541
    assert final[0] == "final" and final[7] == "0.600 ± 0.283"
    assert final[8] == "+0.600 [-1.941, +3.141]"
    assert [c.strip() for c in table[2].split("|")[1:-1]][2] == "-"  # the prior: no difference
    # results made before the stale moves (or the probability) were recorded: no such column
    older = [{"probe": [probe(k, 0.1, stale=False) for k in range(5)]} for _ in range(2)]
    assert "stale" not in checkpoints.probe_table(older, compare.PROGRESS, "progress acc.")

# --- the priors' table ---

def test_priors_table_gives_a_row_a_seed_then_the_mean_spread_and_range():
    guided = [{"prior_updates": 10, "prior_calibration_accuracy": 0.5, "guide_accuracy": None,
               "guide_progress_accuracy": 0.7, "guide_balanced_accuracy": 0.6, "success": 0.25},
              {"prior_updates": 30, "prior_calibration_accuracy": None, "guide_accuracy": None,
               "guide_progress_accuracy": 0.9, "guide_balanced_accuracy": 0.8, "success": 0.75}]
    unguided = [{"success": 0.1}, {"success": 0.3}]
    assert priors.table([3, 4], guided, unguided) == "\n".join([
        "| seed | cloning updates | calibration progress acc. | held-out progress acc. | "
        "held-out bal. acc. | held-out accuracy | ReAct w/ SG | ReAct |",
        "|---|---|---|---|---|---|---|---|",
        "| 3 | 10 | 0.500 | 0.700 | 0.600 | - | 0.250 | 0.100 |",
        "| 4 | 30 | - | 0.900 | 0.800 | - | 0.750 | 0.300 |",
        "| mean ± std (min-max) | 20 ± 14 (10-30) | 0.500 ± 0.000 (0.500-0.500) | "
        "0.800 ± 0.141 (0.700-0.900) | 0.700 ± 0.141 (0.600-0.800) | - | "
        "0.500 ± 0.354 (0.250-0.750) | 0.200 ± 0.141 (0.100-0.300) |"])


def test_priors_evaluates_each_seeds_cached_prior_and_resumes(tmp_path, prior_cache):
    args = TINY_ARGS + ["--seeds", "2", "--workers", "1", "--prior-cache", str(prior_cache),
                        "--out", str(tmp_path)]
    units = priors.main(args)
    cfg, _ = priors.parse_args(args)
    for k, unit in enumerate(units):  # each seed's own prior, evaluated without and with guides
        seed_cfg = sg.dataclasses.replace(cfg, seed=k)
        prior = sg.load_policy(prior_cache / f"prior-{sg.prior_key(seed_cfg)}", seed_cfg, "cpu")
        assert unit["ReAct"]["final"] == sg.evaluate(prior, seed_cfg, guided=False)
        evaluated = sg.evaluate(prior, seed_cfg, guided=True)
        assert {k: unit["ReAct w/ SG"]["final"][k] for k in evaluated} == evaluated
        assert unit["ReAct w/ SG"]["final"]["prior_updates"] == prior.config.stage0["updates"]
    written = (tmp_path / "priors.md").read_text()
    assert written.endswith(priors.table([0, 1], [u["ReAct w/ SG"]["final"] for u in units],
                                         [u["ReAct"]["final"] for u in units]) + "\n")
    saved = {u: u.stat().st_mtime_ns for u in (tmp_path / "units").iterdir()}
    assert priors.main(args) == units  # the same command again: every seed read back
    assert all(u.stat().st_mtime_ns == t for u, t in saved.items())


# --- the fixed probe: every policy judges the prior's stored episodes ---

def test_the_probe_of_the_prior_is_its_own_greedy_evaluation():
    """On its own greedy episodes, the prior's teacher-forced guides (a full forward pass) are
    the guides its KV-cached rollout wrote, so its probe metrics are its evaluation's."""
    cfg, prior = tiny_config(eval_tasks=40), tiny_policy(seed=3)
    episodes = probe.probe_episodes(prior, cfg)
    judged = probe.judge(prior, episodes)
    assert torch.equal(judged.guides, episodes.guides)
    evaluated = instruments.evaluate(prior, cfg, guided=True)
    metrics = probe.probe_metrics(prior, episodes, cfg)
    assert metrics["probe_guide_accuracy"] is not None
    expected = {f"probe_{k}": v for k, v in evaluated.items() if k.startswith(("guide_", "share_"))}
    assert metrics.keys() == expected.keys() and "probe_guide_true_prob_progress" in metrics
    for key, value in expected.items():  # the true word's probability: teacher-forced, to rounding
        assert metrics[key] == (pytest.approx(value, abs=1e-6) if "true_prob" in key else value)


def test_the_probe_scores_another_policys_guides_on_the_stored_moves():
    """Another policy's probe guide at each slot is the argmax over the guide words of its own
    full forward pass over the stored stream up to that slot, one slot at a time; scored
    against the stored moves' truths by hand."""
    cfg = tiny_config(eval_tasks=6)
    prior, other = tiny_policy(seed=3), tiny_policy(seed=4)
    episodes = probe.probe_episodes(prior, cfg)
    judged_by_other = probe.judge(other, episodes)
    guides = judged_by_other.guides
    guide_ids = [sg.WORD_ID[w] for w in sg.GUIDES]
    right = judged = 0
    true_probs = {0: [], 2: []}  # by the truth of the judged move (positive, negative)
    for i in range(len(episodes.tokens)):
        slots = episodes.slots[i].tolist()
        positions = [p for p, s in enumerate(slots) if s == sg.SLOT_GUIDE]
        assert (guides[i] >= 0).sum().item() == len(positions) > 0
        for t, p in enumerate(positions):
            with torch.no_grad():
                logits = other(episodes.tokens[i, :p][None]).logits[0, -1, guide_ids]
            assert guides[i, t].item() == logits.argmax().item()
            assert torch.allclose(judged_by_other.guide_probs[i, t], logits.softmax(-1), atol=1e-5)
            truth = episodes.truths[i, t].item()
            if truth >= 0:
                right, judged = right + (guides[i, t].item() == truth), judged + 1
            if truth in true_probs:
                true_probs[truth].append(logits.softmax(-1)[truth].item())
    metrics = probe.probe_metrics(other, episodes, cfg)
    assert metrics["probe_guide_accuracy"] == pytest.approx(right / judged)
    by_truth = [sum(p) / len(p) for p in true_probs.values() if p]
    assert metrics["probe_guide_true_prob_progress"] == pytest.approx(
        sum(by_truth) / len(by_truth), abs=1e-5)
    assert not torch.equal(guides, episodes.guides)  # another policy: other guides somewhere


# --- the instruments: stale moves, revisits, what an update can move in a guide ---

def test_stale_moves_are_where_the_environment_says_the_stale_map_errs():
    """In a house with a stale door: instruments.stale_moves, read off the cells, is the
    environment's own info["stale"], replayed move by move; the guide's accuracy there is
    experiment_metrics'."""
    cfg = tiny_config(size=12, min_distance=8, max_steps=26, house=True, stale_door=True,
                      seed=3)
    batch = instruments.measured(sg.rollout(tiny_policy(size=12, min_distance=8, max_steps=26),
                                            list(range(12)), True, cfg,
                                            torch.Generator().manual_seed(0)), cfg, range(12))
    stale_map = instruments.stale_moves(batch, cfg)
    right = judged = 0
    for i in range(12):
        moves = [sg.WORDS[t] for t, s in zip(batch.tokens[i].tolist(), batch.slots[i].tolist())
                 if s == sg.SLOT_ACTION]
        env = cfg.make_env()
        env.reset(seed=i)
        stale = [False] + [env.step(move)[4]["stale"] for move in moves][:-1]
        steps = batch.steps[i].item()
        assert stale_map[i, :steps].tolist() == stale and not stale_map[i, steps:].any()
        for t in range(1, steps):
            if stale[t]:
                right += batch.guides[i, t].item() == batch.truths[i, t].item()
                judged += 1
    assert judged > 0
    metrics = instruments.experiment_metrics(batch, cfg)
    assert metrics["guide_accuracy_stale"] == pytest.approx(right / judged)
    plain_cfg = tiny_config()
    plain = instruments.measured(sg.rollout(tiny_policy(), list(range(4)), True, plain_cfg,
                                            torch.Generator().manual_seed(0)), plain_cfg, range(4))
    assert instruments.stale_moves(plain, plain_cfg) is None
    assert "guide_accuracy_stale" not in instruments.experiment_metrics(plain, plain_cfg)


def test_the_probability_of_the_true_word_averages_the_two_kinds_of_move():
    """Judged (truth positive, p .7), (positive, p .2), (negative, p .4): the mean over the
    positive moves and the mean over the negative ones, averaged."""
    probs = torch.zeros(2, 3, 3)
    probs[0, 1], probs[0, 2], probs[1, 1] = (torch.tensor(p) for p in
                                             ([.7, .2, .1], [.2, .1, .7], [.5, .1, .4]))
    rollouts = hand_built_episodes(guide_probs=probs)
    metrics = instruments.experiment_metrics(rollouts, research.Config(**TINY))
    assert metrics["guide_true_prob_progress"] == pytest.approx(((.7 + .2) / 2 + .4) / 2)
    assert "guide_true_prob_progress" not in instruments.experiment_metrics(
        hand_built_episodes(), research.Config(**TINY))  # no distribution measured


def test_experiment_metrics_split_the_revisits_and_the_stale_moves_by_true_word(monkeypatch):
    rollouts = hand_built_episodes()
    cfg = tiny_config()
    metrics = instruments.experiment_metrics(rollouts, cfg)
    # judged: (guide 0, truth 0) right, (2, 0) wrong and a revisit, (0, 2) wrong
    assert metrics == {"guide_accuracy": pytest.approx(1 / 3),
                       "guide_progress_accuracy": (1 / 2 + 0) / 2,
                       "guide_accuracy_revisit": 0.0, "guide_accuracy_other": 0.5}
    probs = torch.zeros(2, 3, 3)
    probs[0, 1], probs[0, 2], probs[1, 1] = (torch.tensor(p) for p in
                                             ([.7, .2, .1], [.2, .1, .7], [.5, .1, .4]))
    stale = torch.tensor([[False, False, True], [False, True, False]])
    monkeypatch.setattr(instruments, "stale_moves", lambda batch, cfg: stale)
    metrics = instruments.experiment_metrics(sg.dataclasses.replace(rollouts, guide_probs=probs),
                                             cfg)
    assert metrics["guide_true_prob_stale"] == pytest.approx((.2 + .4) / 2)
    assert metrics["guide_accuracy_stale"] == 0.0
    # by the true word: (0, 2) is truly positive (p .2), (1, 1) truly negative (p .4)
    assert metrics["guide_true_prob_stale_positive"] == pytest.approx(.2)
    assert metrics["guide_true_prob_stale_negative"] == pytest.approx(.4)
    assert metrics["guide_accuracy_stale_positive"] == metrics["guide_accuracy_stale_negative"] == 0
    right = sg.dataclasses.replace(rollouts, guides=torch.tensor([[1, 0, 0], [0, 0, -1]]),
                                   guide_probs=probs)
    metrics = instruments.experiment_metrics(right, cfg)  # the truly positive one judged right
    assert (metrics["guide_accuracy_stale_positive"], metrics["guide_accuracy_stale_negative"],
            metrics["guide_accuracy_stale"]) == (1.0, 0.0, 0.5)
    stale = torch.tensor([[False] * 3, [False, True, False]])
    assert "guide_accuracy_stale_positive" not in instruments.experiment_metrics(right, cfg)
    # nothing judged: the revisit split is None (JSON null), never NaN
    unjudged = sg.dataclasses.replace(rollouts, truths=torch.full((2, 3), -1))
    monkeypatch.setattr(instruments, "stale_moves", lambda batch, cfg: None)
    assert instruments.experiment_metrics(unjudged, cfg) == {
        "guide_accuracy": None, "guide_progress_accuracy": None, "guide_accuracy_revisit": None,
        "guide_accuracy_other": None}


def test_judge_streams_reads_the_guides_distribution_as_a_full_forward_and_the_rollout_give_it():
    """Teacher-forced, every slot at once, in slices of four rows: at each guide slot the log
    of the softmax over the three guide words (temperature 1) of a full forward over the
    stream up to that slot, one slot at a time; and at the word written, the log-prob the
    KV-cached rollout sampled it with (guides sampled at temperature 1 here); 0 elsewhere."""
    cfg = tiny_config(guide_temperature=1.0)
    policy = tiny_policy()
    batch = sg.rollout(policy, list(range(6)), True, cfg, torch.Generator().manual_seed(1))
    written = batch.guides >= 0
    judged = instruments.judge_streams(policy, batch, rows=4)
    guide_ids = [sg.WORD_ID[w] for w in sg.GUIDES]
    for i in range(6):
        positions = [p for p, s in enumerate(batch.slots[i].tolist()) if s == sg.SLOT_GUIDE]
        assert len(positions) == batch.steps[i] > 0
        for t, p in enumerate(positions):
            with torch.no_grad():
                logits = policy(batch.tokens[i, :p][None]).logits[0, -1, guide_ids]
            assert torch.allclose(judged[i, t].exp(), logits.softmax(-1), atol=1e-5)
            assert judged[i, t, batch.guides[i, t]] == pytest.approx(batch.logprobs[i, p].item(),
                                                                    abs=1e-5)
    assert (judged[~written] == 0).all()


def test_training_figures_say_what_gradient_reaches_the_guide_and_how_often_it_leaves_the_prior():
    """guide_sensitivity: the mean over the sampled guides of the L1 norm of d log p_T(z) / d
    logits, by autograd on each guide slot's three logits; guide_push: each norm times its
    advantage's size; guide_off_prior: the share of sampled guides that are not the
    reference's greedy word, by a full forward per slot. compare.py's records hold them."""
    cfg = tiny_config(variant="sg", guide_temperature=0.5, temperature=0.7, iterations=1,
                      eval_every=5, update_epochs=1)
    policy, reference = tiny_policy(seed=0), tiny_policy(seed=1)
    before = sg.copy.deepcopy(policy)
    state = sg.new_train_state(policy, cfg)
    batch, _ = first_rollouts(before, cfg)  # the iteration's own draws, replayed
    compare.train_until(policy, reference, cfg, state, 1)
    record = state.records[-1]
    advantages = sg.iteration_advantages(batch, cfg, 0.0)[0]
    guide_ids = [sg.WORD_ID[w] for w in sg.GUIDES]
    norms, off, pushes, action_norms = [], [], [], []
    for i in range(len(batch.tokens)):
        positions = [p for p, s in enumerate(batch.slots[i].tolist()) if s == sg.SLOT_GUIDE]
        for t, p in enumerate(positions):
            prefix = batch.tokens[i, :p][None]
            with torch.no_grad():
                off.append(batch.guides[i, t].item() !=
                           reference(prefix).logits[0, -1, guide_ids].argmax().item())
            logits = before(prefix).logits[0, -1, guide_ids].detach().requires_grad_()
            torch.log_softmax(logits / cfg.guide_temperature, -1)[batch.guides[i, t]].backward()
            norms.append(logits.grad.abs().sum().item())
            pushes.append(norms[-1] * advantages[i, p].abs().item())
        moves = [p for p, s in enumerate(batch.slots[i].tolist()) if s == sg.SLOT_ACTION]
        for p in moves:  # by autograd too, at the actions' own temperature (0.7)
            logits = before(batch.tokens[i, :p][None]).logits[0, -1, sg.ACTION_IDS]
            logits = logits.detach().requires_grad_()
            word = sg.ACTION_IDS.index(batch.tokens[i, p].item())
            torch.log_softmax(logits / cfg.temperature, -1)[word].backward()
            action_norms.append(logits.grad.abs().sum().item())
    assert record["guide_off_prior"] == pytest.approx(sum(off) / len(off))
    assert 0 < record["guide_off_prior"] < 1
    assert record["guide_sensitivity"] == pytest.approx(sum(norms) / len(norms), rel=1e-5)
    assert record["guide_push"] == pytest.approx(sum(pushes) / len(pushes), rel=1e-5)
    assert record["action_sensitivity"] == pytest.approx(sum(action_norms) / len(action_norms),
                                                         rel=1e-5)
    assert 0 < record["guide_push"] and "target_accuracy" not in record
    bare = sg.copy.deepcopy(policy)
    assert "guide_sensitivity" not in sg.grpo_iteration(  # the method's own figures only
        bare, reference, cfg, sg.new_train_state(bare, cfg))
    plain_cfg = tiny_config(variant="grpo", iterations=1, eval_every=5)
    plain = tiny_policy()
    plain_state = sg.new_train_state(plain, plain_cfg)
    compare.train_until(plain, reference, plain_cfg, plain_state, 1)
    unguided = plain_state.records[-1]
    assert unguided["action_sensitivity"] > 0 and "guide_sensitivity" not in unguided


def test_a_hindsight_runs_record_says_how_often_it_had_a_target_and_how_right():
    cfg = tiny_config(variant="sg_gr", guide_advantage="hindsight", iterations=2, eval_every=5)
    policy, reference = tiny_policy(), tiny_policy(seed=1)
    state = sg.new_train_state(policy, cfg)
    compare.train_until(policy, reference, cfg, state, 1)
    record = state.records[-1]
    batch, _ = first_rollouts(tiny_policy(), cfg)
    draws = sg.random.Random(cfg.seed)  # the tasks, drawn as grpo_iteration draws them
    tasks = [draws.randrange(sg.TRAIN_SEED_RANGE) for _ in range(cfg.tasks_per_iter)]
    targets = research.hindsight_targets(instruments.measured(
        batch, cfg, [t for t in tasks for _ in range(cfg.group_size)]), {})
    judged = (batch.guides >= 0) & (batch.truths >= 0)
    has = judged & (targets >= 0)
    assert record["target_coverage"] == pytest.approx(has.sum().item() / judged.sum().item())
    assert record["target_accuracy"] == pytest.approx(
        (targets == batch.truths)[has].float().mean().item())


def test_the_registered_predictor_is_the_targets_coverage_over_the_first_twenty_iterations():
    records = [{"target_coverage": 0.01 * u} for u in range(1, 31)] + [{"iteration": 31}]
    means = compare.training_means(records)
    assert means["early_target_coverage"] == pytest.approx(0.01 * sum(range(1, 21)) / 20)
    assert means["train_target_coverage"] == pytest.approx(0.01 * sum(range(1, 31)) / 30)
    assert "early_target_coverage" not in compare.training_means([{"iteration": 1}])


# --- what reached the guide: the gradient diagnostics over the first and last iterations ---

def test_gradient_table_averages_each_end_of_each_run_then_the_seeds(tmp_path):
    """Per row: the mean over the first and the last `window` iterations of each run's logged
    diagnostics, then over the seeds; a row in two folders counts each seed once; rows that
    logged none are left out; a folder without compare.json is refused in one line."""
    def log(folder, seed, row, guide, off, action):
        records = [{"iteration": i + 1, "guide_sensitivity": g, "guide_off_prior": o,
                    "action_sensitivity": a} for i, (g, o, a) in enumerate(zip(guide, off, action))]
        records[1]["eval"] = {"success": 0.5}  # an evaluation's record is an iteration's too
        (folder / f"seed{seed}-{compare.slug(row)}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in records))
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, seeds in ((a, [1, 2]), (b, [2, 3])):
        folder.mkdir()
        (folder / "compare.json").write_text(json.dumps({
            "seeds": seeds, "per_seed": [{"GRPO": {}, "  the full method": {}} for _ in seeds]}))
        (folder / f"seed{seeds[0]}-grpo.jsonl").write_text(json.dumps({"iteration": 1}) + "\n")
    log(a, 1, "  the full method", [1, 2, 3, 4], [0.0, 0.5, 0.5, 1.0], [8, 8, 8, 8])
    log(a, 2, "  the full method", [3, 3, 3, 3], [0.0, 0.0, 0.0, 0.0], [2, 2, 2, 2])
    log(b, 2, "  the full method", [99, 99, 99, 99], [1, 1, 1, 1], [9, 9, 9, 9])  # seed 2 again
    log(b, 3, "  the full method", [5, 5, 5, 7], [0.5, 0.5, 1.0, 1.0], [4, 4, 4, 4])
    rows = gradient.gradient_rows(f"{a},{b}", 2)
    assert list(rows) == ["the full method"]  # GRPO logged nothing to average
    full = rows["the full method"]
    assert full["seeds"] == [1, 2, 3] and full["iterations"] == 4
    assert full[("guide_sensitivity", "first")] == pytest.approx((1.5 + 3 + 5) / 3)
    assert full[("guide_sensitivity", "last")] == pytest.approx((3.5 + 3 + 6) / 3)
    assert full[("guide_off_prior", "first")] == pytest.approx((0.25 + 0 + 0.5) / 3)
    assert full[("guide_off_prior", "last")] == pytest.approx((0.75 + 0 + 1.0) / 3)
    assert full[("action_sensitivity", "first")] == pytest.approx((8 + 2 + 4) / 3)
    assert "| the full method | 1, 2, 3 | 3.17 | 4.17 | 0.250 | 0.583 | 4.67 |" in \
        gradient.main([f"{a},{b}", "--window", "2"])
    assert "iterations 1-2 | the same, 3-4 |" in gradient.table(rows, 2)
    with pytest.raises(SystemExit, match="no compare.json in .*nowhere"):
        gradient.main([str(tmp_path / "nowhere")])
    with pytest.raises(SystemExit, match="--window must be at least 1"):
        gradient.parse_args([str(a), "--window", "0"])


# --- a chat model prompted: the two formats paired maze by maze ---

def test_prompted_pairs_the_formats_on_the_same_mazes():
    def row(per_maze, unreadable=None):
        return {"success": sum(per_maze) / len(per_maze), "steps": 5.0, "unparseable": 0.25,
                "unreadable": unreadable, "per_maze": per_maze}
    rows = {"ReAct, greedy": row([0.0, 0.0, 1.0]), "ReAct w/ SG, greedy": row([1.0, 0.0, 1.0], 0.5),
            "ReAct, sampled": row([0.0, 1.0, 0.0]), "ReAct w/ SG, sampled": row([1.0, 1.0, 1.0], 0.0)}
    text = prompted.table(rows)
    assert "| ReAct w/ SG, greedy | 0.667 | 5.0 | 0.500 | 0.250 | - | - | - |" in text
    assert "| ReAct, greedy | 0.333 | 5.0 | - | 0.250 |" in text
    # differences (1, 0, 0): mean 1/3, sample std 0.577, t(0.975, 2 df) = 4.303
    half = 4.303 * math.sqrt(1 / 3) / math.sqrt(3)
    assert f"greedy, paired on 3 mazes: +0.333 [{1 / 3 - half:+.3f}, {1 / 3 + half:+.3f}]" in text
    half = 4.303 * math.sqrt(1 / 3) / math.sqrt(3)  # differences (1, 0, 1): the same spread
    assert f"sampled, paired on 3 mazes: +0.667 [{2 / 3 - half:+.3f}, {2 / 3 + half:+.3f}]" in text
    greedy_only = prompted.table({k: v for k, v in rows.items() if "greedy" in k})
    assert "greedy, paired on 3 mazes" in greedy_only and "sampled" not in greedy_only


def test_prompted_pairs_each_row_against_another_run_maze_by_maze(monkeypatch, tmp_path):
    """--against: a trained model's rows against its warm start's, the same way played, and its
    assessing play against the other's plain play; refused before any play when the other run
    is missing or played other mazes."""
    def row(per_maze):
        return {"success": sum(per_maze) / len(per_maze), "steps": 5.0, "unparseable": 0.0,
                "per_maze": per_maze}
    warm = {"ReAct, greedy": row([0.0, 0.0, 1.0]), "ReAct w/ SG, greedy": row([0.0, 1.0, 1.0])}
    trained = {"ReAct, greedy": row([1.0, 0.0, 1.0]), "ReAct w/ SG, greedy": row([1.0, 1.0, 1.0]),
               "ReAct, sampled": row([1.0, 1.0, 1.0]), "ReAct w/ SG, sampled": row([1.0, 1.0, 1.0])}
    text = prompted.table(trained, {"runs/warm": warm})
    for mine, theirs, mean, sd in (  # differences (1, 0, 0), (1, 0, 0), (1, 1, 0), (1, -1, 0)
            ("ReAct", "ReAct", 1 / 3, math.sqrt(1 / 3)),
            ("ReAct w/ SG", "ReAct w/ SG", 1 / 3, math.sqrt(1 / 3)),
            ("ReAct w/ SG", "ReAct", 2 / 3, math.sqrt(1 / 3)), ("ReAct", "ReAct w/ SG", 0.0, 1.0)):
        half = 4.303 * sd / math.sqrt(3)
        assert (f"- {mine} - runs/warm's {theirs}, greedy, paired on 3 mazes: {mean:+.3f} "
                f"[{mean - half:+.3f}, {mean + half:+.3f}]") in text
    assert "runs/warm's ReAct, sampled" not in text  # the other run played greedily only
    assert "runs/warm" not in prompted.table(trained)
    two = prompted.table(trained, {"runs/warm": warm, "runs/other": trained})
    assert "- ReAct - runs/other's ReAct, sampled, paired on 3 mazes: +0.000" in two
    assert two.count("runs/warm's") == 4 and two.count("runs/other's") == 8
    partial = {"ReAct, greedy": trained["ReAct, greedy"]}  # a run stopped after one play
    text = prompted.table(partial, {"runs/warm": warm})
    assert text.count("runs/warm's") == 2 and "ReAct w/ SG - " not in text
    assert prompted.table(trained, {"runs/warm": partial}).count("runs/warm's") == 2
    (tmp_path / "prompted.json").write_text(json.dumps(warm))
    assert prompted.read_against(str(tmp_path), 3) == warm
    monkeypatch.setattr(prompted.freetext, "load_model", lambda *a: pytest.fail("played"))
    monkeypatch.setattr(prompted.freetext, "model_folder", lambda name: name)
    args = ["--model", "any", "--out", str(tmp_path / "out")]
    for mazes, against, error in (
            (4, tmp_path, "played [3] mazes, this run plays 4 (--eval-tasks)"),
            (3, f"{tmp_path},{tmp_path / 'none'}", "none: no prompted.json there")):
        with pytest.raises(SystemExit, match=re.escape(error)):
            prompted.main(args + ["--eval-tasks", str(mazes), "--against", str(against)])


def no_model_but(monkeypatch, play):
    """prompted.py with no model loaded: any --model name is taken as it is, and `play` stands
    in for freetext.play."""
    monkeypatch.setattr(prompted.freetext, "play", play)
    monkeypatch.setattr(prompted.freetext, "load_model", lambda folder, device: (None, None))
    monkeypatch.setattr(prompted.freetext, "model_folder", lambda name: name)


def test_prompted_draws_several_sampled_episodes_a_maze_and_scores_their_mean(monkeypatch,
                                                                             tmp_path):
    """--draws 2: each format's sampled play twice, each draw its own seeds (the same for both
    formats); a maze's success is the mean of its draws, and the two formats are paired on it."""
    calls = []

    def fake_play(model, tokenizer, seeds, guided, cfg, ft, seed, greedy=False):
        calls.append((guided, greedy, seed))
        wins = {(True, 0): [1.0, 0.0, 1.0], (True, 10**5): [1.0, 1.0, 0.0],
                (False, 0): [0.0, 0.0, 1.0], (False, 10**5): [0.0, 0.0, 0.0]}
        return fake_episodes(prompted.freetext, len(seeds), guided,
                             wins.get((guided, seed), [0.0] * len(seeds)))
    no_model_but(monkeypatch, fake_play)
    rows = prompted.main(["--model", "any", "--size", "4", "--min-distance", "3", "--max-steps",
                          "2", "--eval-tasks", "3", "--draws", "2", "--seed", "0",
                          "--out", str(tmp_path)])
    sampled = [(guided, seed) for guided, greedy, seed in calls if not greedy]
    assert sampled == [(False, 0), (False, 10**5), (True, 0), (True, 10**5)]
    assert rows["ReAct w/ SG, sampled"]["per_maze"] == [1.0, 0.5, 0.5]
    assert rows["ReAct, sampled"]["per_maze"] == [0.0, 0.0, 0.5]
    assert rows["ReAct w/ SG, sampled"]["success"] == pytest.approx(4 / 6)
    differences = [1.0, 0.5, 0.0]
    assert f"sampled, paired on 3 mazes: {compare.interval_text(differences)}" in \
        (tmp_path / "prompted.md").read_text()
    assert "(2 draws a maze)" in (tmp_path / "prompted.md").read_text()


def test_a_prompted_run_stopped_midway_keeps_the_plays_it_finished(monkeypatch, tmp_path):
    """Each play is written as it ends: a run stopped in its sampled plays keeps both greedy
    rows, paired, and says how far it got; the finished run's files replace them."""
    def fake_play(model, tokenizer, seeds, guided, cfg, ft, seed, greedy=False):
        if not greedy:
            raise KeyboardInterrupt
        return fake_episodes(prompted.freetext, len(seeds), guided,
                             [1.0, 0.0, 1.0] if guided else [0.0, 0.0, 1.0])
    no_model_but(monkeypatch, fake_play)
    args = ["--model", "any", "--size", "4", "--min-distance", "3", "--max-steps", "2",
            "--eval-tasks", "3", "--seed", "0", "--out", str(tmp_path)]
    with pytest.raises(KeyboardInterrupt):
        prompted.main(args)
    kept = json.loads((tmp_path / "prompted.json").read_text())
    assert list(kept) == ["ReAct, greedy", "ReAct w/ SG, greedy"]
    assert kept["ReAct w/ SG, greedy"]["per_maze"] == [1.0, 0.0, 1.0]
    text = (tmp_path / "prompted.md").read_text()
    assert "stopped or still playing: 2 of 4 plays done" in text
    assert f"greedy, paired on 3 mazes: {compare.interval_text([1.0, 0.0, 0.0])}" in text
    prompted.main(args + ["--no-sampled"])
    assert "plays done" not in (tmp_path / "prompted.md").read_text()


def test_prompted_plays_the_held_out_or_the_tuning_mazes_greedy_sampled_or_both(monkeypatch,
                                                                              tmp_path, capsys):
    """--mazes tuning plays selfguide's calibration mazes (never trained on, never held out);
    --no-sampled plays greedily only, --no-greedy sampled only."""
    played = []

    def fake_play(model, tokenizer, seeds, guided, cfg, ft, seed, greedy=False):
        played.append((tuple(seeds), guided, greedy))
        return fake_episodes(prompted.freetext, len(seeds), guided)
    no_model_but(monkeypatch, fake_play)
    args = ["--model", "any", "--size", "4", "--min-distance", "3", "--max-steps", "2",
            "--eval-tasks", "3"]
    rows = prompted.main(args + ["--mazes", "tuning", "--no-sampled", "--out", str(tmp_path)])
    assert list(rows) == ["ReAct, greedy", "ReAct w/ SG, greedy"]
    assert played == [(tuple(research.CALIBRATION_SEED_BASE + i for i in range(3)), g, True)
                      for g in (False, True)]
    assert "3 tuning 4x4 mazes (start at least 3 moves away, 2 moves), greedy;" in \
        (tmp_path / "prompted.md").read_text()
    played.clear()
    prompted.main(args + ["--out", str(tmp_path)])
    assert "held-out 4x4 mazes (start at least 3 moves away, 2 moves), greedy and sampled at " \
        "temperature 0.5;" in (tmp_path / "prompted.md").read_text()
    assert [(s[0], g, gr) for s, g, gr in played] == [
        (sg.EVAL_SEED_BASE, False, True), (sg.EVAL_SEED_BASE, True, True),
        (sg.EVAL_SEED_BASE, False, False), (sg.EVAL_SEED_BASE, True, False)]
    played.clear()
    rows = prompted.main(args + ["--no-greedy", "--draws", "2", "--out", str(tmp_path)])
    assert list(rows) == ["ReAct, sampled", "ReAct w/ SG, sampled"]
    assert [g for _, _, g in played] == [False] * 4  # two draws a format, none greedy
    assert "mazes (start at least 3 moves away, 2 moves), sampled at temperature 0.5 (2 draws " \
        "a maze);" in (tmp_path / "prompted.md").read_text()
    with pytest.raises(SystemExit):
        prompted.parse_args(args + ["--no-greedy", "--no-sampled"])
    assert "--no-greedy and --no-sampled leave nothing to play" in capsys.readouterr().err


def test_uniform_moves_reach_the_goal_as_often_as_the_exact_walk(monkeypatch, tmp_path):
    """The baseline of --model random against the exact probability that uniform moves reach
    the goal within max_steps on the same mazes (a walk over the open cells, a bump stays)."""
    cfg = sg.Config(size=4, min_distance=3, max_steps=12, eval_tasks=3)
    env, exact = cfg.make_env(), []
    for i in range(cfg.eval_tasks):
        env.reset(seed=sg.EVAL_SEED_BASE + i)
        where = {env._position: 1.0}  # probability of each cell, not yet at the goal
        reached = 0.0
        for _ in range(cfg.max_steps):
            after = {}
            for (r, c), p in where.items():
                for dr, dc in toy_env.MOVES.values():
                    cell = (r + dr, c + dc) if (r + dr, c + dc) in env._open else (r, c)
                    after[cell] = after.get(cell, 0.0) + p / 4
            reached += after.pop(env._goal, 0.0)
            where = after
        exact.append(reached)
    # 4,000 walks a maze: the estimate's std is about 0.007 a maze and 0.004 pooled, while a
    # walk one move short reaches the goal 0.015 to 0.029 less often on these mazes
    monkeypatch.setattr(prompted, "RANDOM_DRAWS", 4000)
    estimate = prompted.uniform_walk(cfg, sg.EVAL_SEED_BASE)["success"]
    assert 0.05 < sum(exact) / 3 < 0.95 and estimate == pytest.approx(sum(exact) / 3, abs=0.008)
    for i, probability in enumerate(exact):  # maze by maze: a maze's episodes are its own
        alone = prompted.uniform_walk(sg.dataclasses.replace(cfg, eval_tasks=1),
                                      sg.EVAL_SEED_BASE + i)["success"]
        assert alone == pytest.approx(probability, abs=0.013), i
    args = ["--model", "random", "--size", "4", "--min-distance", "3", "--max-steps", "12",
            "--eval-tasks", "3", "--out", str(tmp_path / "uniform")]
    row = prompted.main(args)["uniform random moves"]
    assert row["success"] == prompted.uniform_walk(cfg, sg.EVAL_SEED_BASE)["success"]  # same draws
    assert len(row["per_maze"]) == 3 and all(  # each maze's share of its walks
        (share * prompted.RANDOM_DRAWS).is_integer() for share in row["per_maze"])
    with pytest.raises(SystemExit, match="no --against, --draws"):
        prompted.main(args + ["--draws", "2"])
    # written as a play: kept by results.py, paired maze by maze by paired.py
    written = json.loads((tmp_path / "uniform" / "prompted.json").read_text())
    assert written == {"uniform random moves": row}
    assert "| uniform random moves |" in (tmp_path / "uniform" / "prompted.md").read_text()
    # --mazes tuning: the walk on selfguide's calibration mazes, not the held-out ones
    tuning = prompted.main(args + ["--mazes", "tuning"])["uniform random moves"]["success"]
    walked = prompted.uniform_walk(cfg, research.CALIBRATION_SEED_BASE)["success"]
    assert tuning == walked != estimate


# --- figures (skipped without matplotlib) ---

def drawn(monkeypatch) -> dict:
    """Each figure the plots save, by file name, kept for its drawn data (still written)."""
    import matplotlib.figure
    figures, save = {}, matplotlib.figure.Figure.savefig

    def keep(figure, path, *args, **kwargs):
        figures[Path(path).name] = figure
        return save(figure, path, *args, **kwargs)
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    return figures


def labelled_lines(figure) -> dict:
    """{label: (x, y)} of a figure's labelled lines, over all its axes."""
    return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata()))
            for axis in figure.axes for line in axis.get_lines()
            if not line.get_label().startswith("_")}


def test_plot_of_a_comparison_draws_its_figures_into_its_folder(tmp_path, comparison,
                                                                 monkeypatch):
    """A real comparison's folder (the figures' numbers: the synthetic tests below)."""
    import shutil
    pytest.importorskip("matplotlib", reason=MATPLOTLIB)
    figures = drawn(monkeypatch)
    per_seed, folder = comparison
    out = shutil.copytree(folder, tmp_path / "c")
    plots.main([str(out)])
    assert sorted(figures) == ["co-evolution.png", "compare.png"]
    axis = figures["co-evolution.png"].axes[0]  # no misjudged moves: the progress accuracy
    assert axis.get_ylabel() == "guide progress accuracy"
    held_out = {line.get_label(): list(line.get_ydata()) for line in axis.get_lines()}
    first = [s["GRPO w/ SG"]["history"][0][1]["guide_progress_accuracy"] for s in per_seed]
    assert None not in first  # the first evaluation's, mean over seeds:
    assert held_out["GRPO w/ SG"][1] == pytest.approx(sum(first) / len(first))
    for name in figures:
        assert (out / name).stat().st_size > 10_000


def synthetic_comparison(folder: Path, seeds=(0, 1, 2), evals=(2, 4, 6), eval_every=2,
                         key="guide_accuracy_revisit"):
    """A compare.json and the rows' logs with every number different (drawn at random), so
    a figure that draws the wrong row, seed, iteration or baseline is seen. The accuracy
    (`key`: on the revisits with --cue-misjudge revisit, else the progress accuracy) is
    undefined (None) at some points, as it can be."""
    import random
    rng = random.Random(0)
    value = lambda: round(rng.random(), 4)  # noqa: E731
    per_seed = []
    for seed in seeds:
        rows = {}
        for row in ("ReAct", "ReAct w/ SG", "GRPO", "GRPO w/ SG", "GRPO w/ SG & GR"):
            guided = "SG" in row
            metrics = lambda: {"success": value(), **({k: value() for k in (  # noqa: E731
                key, "guide_balanced_accuracy", "share_positive")} if guided else {})}
            rows[row] = {"final": metrics(), "trust": [value() for _ in range(evals[-1])],
                         "history": [(i, metrics()) for i in evals] if "GRPO" in row else []}
            if "GRPO" in row:
                log = [{"iteration": i, "success": value(), key: value()}
                       for i in range(1, evals[-1] + 1)]
                log[1][key] = None  # the window of iterations 1-2 has one defined value
                (folder / f"seed{seed}-{compare.slug(row)}.jsonl").write_text(
                    "".join(json.dumps(r) + "\n" for r in log))
        if seed == seeds[0]:  # the mean over seeds at iteration 2 is over the other seeds
            rows["GRPO w/ SG"]["history"][0][1][key] = None
        per_seed.append(rows)
    config = {"size": 5, "min_distance": 4, "max_steps": 8, "cue": True, "dist": False,
              "cue_misjudge": "revisit" if "revisit" in key else "none",
              "stale_door": "stale" in key, "eval_every": eval_every}
    (folder / "compare.json").write_text(json.dumps(
        {"config": config, "seeds": list(seeds), "per_seed": per_seed}))
    return json.loads((folder / "compare.json").read_text())["per_seed"], key


def mean_of_defined(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values)


@pytest.mark.parametrize("key", ["guide_accuracy_revisit", "guide_accuracy_stale",
                                 "guide_progress_accuracy"])
def test_plot_of_a_comparison_draws_its_own_numbers(tmp_path, monkeypatch, key):
    """compare.png: each row's success minus GRPO's on the same seed, mean over seeds, from
    the prior (iteration 0: ReAct w/ SG minus ReAct) to the end. co-evolution.png: each
    guided row's mean path through (success, guide accuracy), held-out from the prior on,
    and in training as means over windows of --eval-every iterations of its log."""
    pytest.importorskip("matplotlib", reason=MATPLOTLIB)
    figures = drawn(monkeypatch)
    per_seed, key = synthetic_comparison(tmp_path, key=key)
    mean = mean_of_defined
    plots.main([str(tmp_path)])
    lines = labelled_lines(figures["compare.png"])
    for row in ("GRPO w/ SG", "GRPO w/ SG & GR"):
        x, y = lines[row]
        assert x == [0, 2, 4, 6]
        start = mean([s["ReAct w/ SG"]["final"]["success"] - s["ReAct"]["final"]["success"]
                      for s in per_seed])
        gains = [mean([s[row]["history"][k][1]["success"] - s["GRPO"]["history"][k][1]["success"]
                       for s in per_seed]) for k in range(3)]
        assert y == pytest.approx([start] + gains)
    assert lines["GRPO (the zero line)"][1] == [0, 0]
    bottom = figures["compare.png"].axes[1].get_lines()  # per row: accuracy, positive share
    for k, (row, metric) in enumerate([(r, m) for r in ("GRPO w/ SG", "GRPO w/ SG & GR")
                                       for m in ("guide_balanced_accuracy", "share_positive")]):
        assert list(bottom[k].get_ydata()) == pytest.approx(
            [mean([s["ReAct w/ SG"]["final"][metric] for s in per_seed])] +
            [mean([s[row]["history"][j][1][metric] for s in per_seed]) for j in range(3)])
    held_out, sampled = figures["co-evolution.png"].axes[:2]
    assert held_out.get_ylabel() == key.replace("_", " ")  # the accuracy its settings call for
    for row in ("GRPO w/ SG", "GRPO w/ SG & GR"):
        path = {line.get_label(): line for line in held_out.get_lines()}[row]
        points = [[(s["ReAct w/ SG"]["final"]["success"], s["ReAct w/ SG"]["final"][key])] +
                  [(m["success"], m[key]) for _, m in s[row]["history"]] for s in per_seed]
        assert list(path.get_xdata()) == pytest.approx([mean([p[k][0] for p in points])
                                                        for k in range(4)])
        assert list(path.get_ydata()) == pytest.approx([mean([p[k][1] for p in points])
                                                        for k in range(4)])
        trained = {line.get_label(): line for line in sampled.get_lines()}[row]
        logs = [plots.read_log(tmp_path / f"seed{seed}-{compare.slug(row)}.jsonl")
                for seed in (0, 1, 2)]
        windows = [[(mean([r["success"] for r in log[i:i + 2]]),
                     mean([r[key] for r in log[i:i + 2]])) for i in (0, 2, 4)] for log in logs]
        assert list(trained.get_xdata()) == pytest.approx(
            [mean([w[k][0] for w in windows]) for k in range(3)])
        assert list(trained.get_ydata()) == pytest.approx(
            [mean([w[k][1] for w in windows]) for k in range(3)])


def test_plot_of_a_single_run_draws_its_log_even_cut_short(tmp_path, capsys, monkeypatch):
    """curves.png: the training rollouts' success and the held-out evaluations' success, guide
    shares and balanced accuracy at their own iterations; a line cut short is left out."""
    import random
    pytest.importorskip("matplotlib", reason=MATPLOTLIB)
    figures = drawn(monkeypatch)
    rng = random.Random(1)
    keys = ("success", "share_positive", "share_neutral", "share_negative",
            "guide_balanced_accuracy")
    records = [{"iteration": i, "trust": rng.random(), **{k: rng.random() for k in keys},
                **({"eval": {k: rng.random() for k in keys}} if i % 2 == 0 else {})}
               for i in range(1, 8)]
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) +
                                        '{"iteration": 8, "tru')  # a run killed mid-line
    plots.main([str(tmp_path)])
    captured = capsys.readouterr()
    assert (tmp_path / "curves.png").stat().st_size > 10_000
    assert "line 8 is cut short" in captured.err and "Traceback" not in captured.err
    lines = labelled_lines(figures["curves.png"])
    assert lines["training rollouts (sampled)"] == (list(range(1, 8)),
                                                    [r["success"] for r in records])
    evals = [r for r in records if "eval" in r]
    assert lines["held-out (greedy)"] == ([2, 4, 6], [r["eval"]["success"] for r in evals])
    for label, key in [("balanced accuracy", "guide_balanced_accuracy"),
                       ("share positive", "share_positive"), ("share neutral", "share_neutral"),
                       ("share negative", "share_negative")]:
        assert lines[label] == ([2, 4, 6], [r["eval"][key] for r in evals])


def test_plot_of_a_real_run_draws_the_log_it_wrote(tmp_path, tiny_run, monkeypatch):
    import shutil
    pytest.importorskip("matplotlib", reason=MATPLOTLIB)
    figures = drawn(monkeypatch)
    out = shutil.copytree(tiny_run[1], tmp_path / "run")
    assert plots.main([str(out)]) == out / "curves.png"
    assert (out / "curves.png").stat().st_size > 10_000
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    lines, evals = labelled_lines(figures["curves.png"]), [r for r in log if "eval" in r]
    assert lines["training rollouts (sampled)"] == ([1, 2, 3], [r["success"] for r in log])
    assert lines["held-out (greedy)"] == ([2, 3], [r["eval"]["success"] for r in evals])
    for label, key in [("balanced accuracy", "guide_balanced_accuracy"),
                       ("share positive", "share_positive"), ("share neutral", "share_neutral"),
                       ("share negative", "share_negative")]:
        assert lines[label] == ([2, 3], [r["eval"][key] for r in evals])


def test_plot_without_matplotlib_says_how_to_get_it(tmp_path, monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    (tmp_path / "log.jsonl").write_text("")
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(SystemExit, match="the figures need matplotlib: pip install matplotlib"):
        plots.main([str(tmp_path)])


def test_plot_without_a_comparison_says_what_to_run(tmp_path):
    with pytest.raises(SystemExit, match="run experiments/compare.py or selfguide.py first"):
        plots.main([str(tmp_path)])


# --- the benchmark ---

def test_benchmark_prints_what_it_timed_and_the_ratios_of_the_times(capsys, monkeypatch):
    """The timer scripted (each work still runs once): every figure printed is its own
    time, or a ratio of two; the episodes, steps, tokens and losses replayed here."""
    timings = iter([0.5, 2.0, 0.03, 0.01, 0.25, 0.125, 0.07])  # in the order main times them

    def scripted(work, repeats=5):
        work()
        return next(timings)
    monkeypatch.setattr(benchmark, "median_seconds", scripted)
    benchmark.main(TINY_ARGS)
    text = capsys.readouterr().out
    cfg = sg.parse_config(TINY_ARGS)
    sg.seed_everything(cfg.seed)
    batch = sg.rollout(sg.make_policy(cfg).eval(), list(range(8)), True, cfg,
                       torch.Generator().manual_seed(0))
    assert (f"rollout of 8 episodes x {batch.steps.float().mean():.1f} steps "
            f"({batch.tokens.shape[1]} tokens): with the KV cache 0.50 s; its forward passes "
            f"alone, recomputed over the whole stream at each step, 2.00 s (4.0x)") in text
    assert ("training pass (forward + backward, 4 episodes): transformers' forward 30.0 ms, "
            "the last block at the scored positions only (last_block_logits) 10.0 ms, "
            "speed-up 3.0x") in text
    assert ("one GRPO iteration (sg_gr, 8 episodes): 0.250 s; alone, rollout 0.500, reference "
            "log-probs 0.125, update 0.070 (2 x 2 minibatches)") in text
    sg.seed_everything(cfg.seed)
    losses = list(sg.clone_demonstrator(sg.make_policy(cfg), *sg.demonstration_corpus(cfg), cfg,
                                        "cpu"))
    assert ("Stage 0: 16 demonstrations in" in text and f"cloning {len(losses)} updates in"
            in text and f"(loss {losses[0]:.3f} -> {losses[-1]:.3f})" in text)


# --- the results the docs cite, kept in experiments/results/ ---

def test_every_kept_comparisons_tables_are_in_the_docs_as_printed():
    """Each table results.py prints from a kept compare.json stands verbatim in the report or
    the README: no figure there can drift from the numbers kept."""
    import results
    docs = "".join((ROOT / doc).read_text() for doc in ("experiments/REPORT.md", "README.md",
                                                        "examples/README.md"))
    kept = sorted(p.parent.name for p in results.KEPT.glob("*/*.json"))
    assert kept
    for name in kept:
        result = results.load(name)
        scripts = ("python examples/trl_freetext.py " if result.get("kind") == "runs" else
                   "python experiments/")  # training runs are the example's; the rest, harnesses'
        assert all(command.startswith(scripts) for command in result["command"].splitlines()) \
            and len(result["commit"]) >= 40, name
        for table in results.tables(name):
            assert table in docs, f"{name}'s table is not in the docs as printed:\n{table}"


def test_a_kept_comparison_loads_as_compare_py_wrote_it_to_its_rounding(tmp_path, monkeypatch):
    import results
    monkeypatch.setattr(results, "KEPT", tmp_path)
    (tmp_path / "run").mkdir()
    run = {"final": {"success": 0.123456789, "guide_balanced_accuracy": None},
           "history": [(5, {"success": 0.11111111, "steps": 20.0, "not_drawn": 1.0}),
                       (10, {"success": 0.2222222})], "trust": [0.0] * 10}
    written = {"command": "python experiments/compare.py --rows core --iterations 10",
               "config": {**sg.dataclasses.asdict(tiny_config(iterations=10)), "rows": "core",
                          "controls": False, "guards": False, "seeds": 1},
               "seeds": [0], "minutes": 1.0, "per_seed": [{"GRPO w/ SG & GR": run}]}
    (tmp_path / "run" / "compare.json").write_text(json.dumps(written))
    with pytest.raises(SystemExit, match="records no commit"):
        results.save(str(tmp_path / "run"), "kept")
    results.save(str(tmp_path / "run"), "kept", commit="f" * 40)
    loaded = results.load("kept")["per_seed"][0]["GRPO w/ SG & GR"]
    assert loaded["final"] == {"success": 0.123457, "guide_balanced_accuracy": None}
    assert loaded["history"] == [(5, {"success": 0.1111, "steps": 20.0}), (10, {"success": 0.2222})]
    cfg = tiny_config(iterations=10, variant="sg_gr")
    assert loaded["trust"] == [sg.trust_at(cfg, u) for u in range(1, 11)] and max(loaded["trust"])


def test_a_prompted_models_plays_are_kept_with_their_command_and_print_their_table(tmp_path,
                                                                                 monkeypatch):
    import prompted
    import results
    monkeypatch.setattr(results, "KEPT", tmp_path / "kept")
    rows = {f"{name}, greedy": {"success": 0.5, "steps": 3.0, "unreadable": None,
                                "unparseable": 0.0, "per_maze": [1.0, 0.0]}
            for name in ("ReAct", "ReAct w/ SG")}
    rows["ReAct w/ SG, greedy"].update(unreadable=0.0, guide_balanced_accuracy=0.4,
                                       per_maze=[1.0, 1.0])
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "prompted.json").write_text(json.dumps(rows))
    (tmp_path / "run" / "prompted.md").write_text(
        "smollm2 on 2 mazes; 1 s. Command: python experiments/prompted.py --eval-tasks 2\n")
    with pytest.raises(SystemExit, match="--commit"):
        results.save(str(tmp_path / "run"), "first")
    results.save(str(tmp_path / "run"), "first", commit="a" * 40)
    kept = results.load("first")
    assert kept["command"] == "python experiments/prompted.py --eval-tasks 2"
    assert results.tables("first") == [prompted.table(rows)]
    assert "paired on 2 mazes: +0.500" in results.tables("first")[0]
    (tmp_path / "run" / "prompted.md").write_text(
        "smollm2 on 2 mazes; stopped or still playing: 2 of 4 plays done. Command: python "
        "experiments/prompted.py --eval-tasks 2\n")  # a run stopped midway: kept, marked
    results.save(str(tmp_path / "run"), "stopped", commit="a" * 40)
    assert results.tables("stopped") == [prompted.table(rows),
                                         "stopped or still playing: 2 of 4 plays done"]
    assert "partial" not in results.load("first")


def test_training_runs_are_kept_with_commands_that_make_their_settings(tmp_path, monkeypatch):
    """Free-text training runs, kept together: each run's command rebuilt from its recorded
    settings (parsed back to the same settings, derived ones not given, a float exactly), and
    a table of the flags they differ in, success before and at each evaluation, the mean of
    the last three, minutes and peak."""
    sys.path.insert(0, str(ROOT / "examples"))
    import results
    import trl_freetext
    monkeypatch.setattr(results, "KEPT", tmp_path / "kept")
    given = {"grpo": "--size 4 --min-distance 3 --max-steps 12 --variant grpo --kl-guide 0 "
                     "--iterations 8 --lr 1e-05 --bf16 --no-cue --out 'runs/a b'",
             "sg_gr": "--size 4 --min-distance 3 --max-steps 12 --kl-guide 0 --iterations 8 "
                      "--lr 1.2345678e-05 --bf16 --no-cue --out runs/b"}
    for n, (variant, command) in enumerate(given.items()):
        cfg, ft = trl_freetext.parse_config(shlex.split(command))
        assert cfg.kl_action == 0.0 and cfg.guide_temperature == 0.5  # derived, not given
        folder = tmp_path / variant
        folder.mkdir()
        (folder / "selfguide_config.json").write_text(json.dumps(
            {**sg.dataclasses.asdict(cfg), **sg.dataclasses.asdict(ft)}))
        (folder / "log.jsonl").write_text("".join(json.dumps(
            {"iteration": i, "generation_seconds": 30.0 + 30 * n, "scoring_seconds": 6.0,
             "update_seconds": 24.0, "peak_memory_gib": 1.0 + i + n,
             **({"eval": {"success": 0.1 * i + 0.05 * n}} if i % 2 == 0 else {})}) + "\n"
            for i in range(1, 9)))
        (folder / "summary.md").write_text(  # as report writes it
            "| policy | success | steps | guide bal. acc. |\n|---|---|---|---|\n"
            "| prior, no guide (ReAct) | 0.250 | 9.0 | - |\n"
            "| prior, guide (ReAct w/ SG) | 0.375 | 8.0 | 1.000 |\n")
    both = f"{tmp_path / 'grpo'},{tmp_path / 'sg_gr'}"
    with pytest.raises(SystemExit, match="--commit"):
        results.save(both, "tune")
    with pytest.raises(SystemExit, match="names 3 commits for 2 runs"):
        results.save(both, "tune", commit="a,b,c")
    results.save(both, "tune", commit=f"{'a' * 40}, {'b' * 40}")
    kept = results.load("tune")
    for command, words in zip(kept["command"].splitlines(), given.values()):
        assert command.startswith("python examples/trl_freetext.py ")
        assert sorted(shlex.split(command)[2:]) == sorted(shlex.split(words))  # no more, no less
    assert kept["commit"] == f"{'a' * 40}, {'b' * 40}"
    assert results.tables("tune") == ["\n".join([
        "| run | variant | before | iteration 2 | iteration 4 | iteration 6 | iteration 8 | "
        "mean of the last evaluations | training | peak in training |",
        "|---|---|---|---|---|---|---|---|---|---|",
        "| --lr 1e-05 | grpo | 0.250 | 0.200 | 0.400 | 0.600 | 0.800 | 0.600 | 8.0 min | 9.0 GiB |",
        "| --lr 1.2345678e-05 | sg_gr | 0.375 | 0.250 | 0.450 | 0.650 | 0.850 | 0.650 | 12.0 min "
        "| 10.0 GiB |"])]
    results.save(str(tmp_path / "grpo"), "one", commit="a" * 40)  # one run: no comma needed
    assert list(results.load("one")["runs"]) == ["grpo"]
    with pytest.raises(SystemExit, match="holds no finished trl_freetext.py run"):
        results.save(f"{tmp_path / 'grpo'},{tmp_path}", "tune", commit="a" * 40)
    with pytest.raises(SystemExit, match="two runs of one name"):
        results.save(f"{tmp_path / 'grpo'},{tmp_path / 'grpo'}", "tune", commit="a" * 40)
    config = json.loads((tmp_path / "grpo" / "selfguide_config.json").read_text())
    (tmp_path / "grpo" / "selfguide_config.json").write_text(json.dumps({**config, "old": 1}))
    with pytest.raises(SystemExit, match="grpo's settings are not this trl_freetext.py's: old"):
        results.save(str(tmp_path / "grpo"), "tune", commit="a" * 40)


def test_a_kept_runs_command_gives_a_setting_its_world_defaults_otherwise(tmp_path):
    """--world scienceworld has defaults of its own (WORLD_DEFAULTS): a setting at the maze's
    default (--eval-every 10) is then given as a flag, or the command would make another run."""
    sys.path.insert(0, str(ROOT / "examples"))
    import results
    import trl_freetext
    words = "--world scienceworld --eval-every 10 --iterations 30 --lr 0.0005"
    cfg, ft = trl_freetext.parse_config(shlex.split(words))
    config = {**sg.dataclasses.asdict(cfg), **sg.dataclasses.asdict(ft)}
    assert cfg.eval_every == 10 != trl_freetext.WORLD_DEFAULTS["scienceworld"]["eval_every"]
    command = results.freetext_command(config, tmp_path)
    assert sorted(shlex.split(command)[2:]) == sorted(shlex.split(words))


def test_the_rise_table_reads_each_runs_probe_at_two_evaluations_and_pairs_it_with_the_placebo():
    import results
    def run(at50, at150):
        return {"final": {}, "history": [(50, {"probe_guide_true_prob_stale": at50,
                                               "success": 0.5}),
                                         (150, {"probe_guide_true_prob_stale": at150})]}
    per_seed = [{"ReAct w/ SG": run(0.0, 0.0), results.HINDSIGHT_1: run(0.1, 0.5),
                 results.PLACEBO_1: run(0.0, 0.1)},
                {"ReAct w/ SG": run(0.0, 0.0), results.HINDSIGHT_1: run(0.2, 0.4),
                 results.PLACEBO_1: run(0.1, 0.1)}]
    lines = results.rise_table(per_seed).splitlines()
    assert len(lines) == 4 and "ReAct w/ SG" not in lines[2] + lines[3]
    # rises 0.4 and 0.2 against the placebo's 0.1 and 0: differences 0.3 and 0.2
    assert lines[2] == (f"| {results.HINDSIGHT_1} | 0.500 ± 0.000 | 0.150 ± 0.071 | "
                        f"0.450 ± 0.071 | 0.300 ± 0.141 | "
                        f"{compare.interval_text([0.3, 0.2])} |")
    assert lines[3].endswith("| 0.050 ± 0.071 | - |")


# --- the README's commands ---

def test_ci_runs_the_readmes_test_command_as_written():
    readme, ci = (ROOT / "README.md").read_text(), (ROOT / ".ci" / "run").read_text()
    command = next(line.split("#")[0].strip() for line in readme.splitlines()
                   if "python -m pytest" in line and line.startswith("pip install"))
    assert command in ci.splitlines()
    for folder in ("test_toy_env.py", "test_selfguide.py", "experiments/", "examples/"):
        assert folder in command  # the one command runs every test


def test_paired_pools_folders_and_compares_any_two_rows(tmp_path, capsys):
    import paired
    for name, gains in [("a", [0.1, 0.3]), ("b", [0.2])]:
        (tmp_path / name).mkdir()
        per_seed = [{"GRPO": {"final": {"success": 0.5}},
                     "  ablation: x": {"final": {"success": 0.5 + g}}} for g in gains]
        (tmp_path / name / "compare.json").write_text(json.dumps({"per_seed": per_seed}))
    line, = paired.main([f"{tmp_path / 'a'},{tmp_path / 'b'}", "success", "ablation: x|GRPO"])
    half = 4.303 * 0.1 / math.sqrt(3)  # t(2) x sd / sqrt(n): differences 0.1, 0.3, 0.2
    assert line == (f"ablation: x - GRPO, success: +0.200 [{0.2 - half:+.3f}, {0.2 + half:+.3f}]"
                    f", above on 3 of 3 seeds")
    with pytest.raises(SystemExit, match="no row 'nope'"):
        paired.main([str(tmp_path / "a"), "success", "nope|GRPO"])
    with pytest.raises(SystemExit, match="row 'ablation: x' has no 'guide_typo'; it has: success"):
        paired.main([str(tmp_path / "a"), "guide_typo", "ablation: x|GRPO"])
    with pytest.raises(SystemExit, match=r"error: no compare.json in .*unfinished"):
        paired.main([f"{tmp_path / 'a'},{tmp_path / 'unfinished'}", "success", "x|GRPO"])


def test_paired_runs_scores_each_run_as_selfguide_does(tmp_path, capsys):
    """--runs: each run's score is the mean of its last final_evals evaluations."""
    import paired
    for name, successes in [("x-0", [0.1, 0.2, 0.4]), ("y-0", [0.5, 0.1, 0.1]),
                            ("x-1", [0.3, 0.3, 0.6]), ("y-1", [0.0, 0.2, 0.2])]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "selfguide_config.json").write_text(json.dumps({"final_evals": 2}))
        (tmp_path / name / "log.jsonl").write_text("".join(
            json.dumps({"iteration": i, "eval": {"success": v, "unreadable": 1 - v}}) + "\n"
            for i, v in enumerate(successes, 1)))
    lines = paired.main(["--runs", f"{tmp_path}/x-{{seed}}|{tmp_path}/y-{{seed}}", "0,1"])
    assert lines[0].endswith(": 0.300 / 0.100, 0.450 / 0.200")  # the last 2 of each
    assert "success: +0.225 [" in lines[1] and "above on 2 of 2 seeds" in lines[1]
    lines = paired.main(["--runs", f"{tmp_path}/x-{{seed}}|{tmp_path}/y-{{seed}}", "0,1",
                         "unreadable"])  # another metric, named after the seeds
    assert lines[0].endswith(": 0.700 / 0.900, 0.550 / 0.800")
    assert "unreadable: -0.225 [" in lines[1] and "above on 0 of 2 seeds" in lines[1]
    with pytest.raises(SystemExit, match="have no 'nope'; they have: success, unreadable"):
        paired.main(["--runs", f"{tmp_path}/x-{{seed}}|{tmp_path}/y-{{seed}}", "0", "nope"])


def test_paired_plays_pairs_two_plays_maze_by_maze_then_over_mazes_and_seeds(tmp_path):
    """--plays: each seed's two plays paired maze by maze; over seeds, each maze's difference
    averaged over the seeds (an interval over mazes) and each seed's over the mazes (one over
    seeds); a kept play (results.py's form) reads as a run's."""
    import paired
    a = {"1": [1, 1, 0, 1], "2": [1, 0, 0, 1]}
    b = {"1": [0, 1, 0, 0], "2": [1, 0, 1, 0]}
    for seed in "12":
        for name, outcomes in (("sg_gr", a[seed]), ("grpo", b[seed])):
            (tmp_path / f"{name}-{seed}").mkdir()
            rows = {"ReAct w/ SG, greedy" if name == "sg_gr" else "ReAct, greedy":
                    {"success": sum(outcomes) / 4, "per_maze": outcomes}}
            kept = {"kind": "prompted", "rows": rows} if seed == "2" else rows
            (tmp_path / f"{name}-{seed}" / "prompted.json").write_text(json.dumps(kept))
    A, B = f"{tmp_path}/sg_gr-{{seed}}:ReAct w/ SG, greedy", f"{tmp_path}/grpo-{{seed}}:ReAct, greedy"
    lines = paired.main(["--plays", f"{A}|{B}", "1,2"])
    one, two = [1, 0, 0, 1], [0, 0, -1, 1]  # each seed's differences, maze by maze
    assert lines[0] == (f"sg_gr-1:ReAct w/ SG, greedy - grpo-1:ReAct, greedy, paired on 4 "
                        f"mazes: {compare.interval_text(one)}")
    assert lines[1] == (f"sg_gr-2:ReAct w/ SG, greedy - grpo-2:ReAct, greedy, paired on 4 "
                        f"mazes: {compare.interval_text(two)}")
    assert lines[2] == (f"sg_gr-{{seed}}:ReAct w/ SG, greedy - grpo-{{seed}}:ReAct, greedy, "
                        f"seeds 1,2, over the 4 mazes (each the mean of the seeds'): "
                        f"{compare.interval_text([0.5, 0, -0.5, 1])}")
    assert lines[3].endswith(f"seeds 1,2, over the seeds (each the mean of the mazes'): "
                             f"{compare.interval_text([0.5, 0])}, above on 1 of 2 seeds")
    assert len(paired.main(["--plays", f"{A}|{B}", "1"])) == 1  # one seed: over mazes only
    with pytest.raises(SystemExit, match="has no play 'ReAct, sampled'; it has: ReAct, greedy"):
        paired.main(["--plays", f"{A}|{tmp_path}/grpo-{{seed}}:ReAct, sampled", "1"])
    with pytest.raises(SystemExit, match="no prompted.json in .*sg_gr-3"):
        paired.main(["--plays", f"{A}|{B}", "1,3"])
    with pytest.raises(SystemExit, match="a seed given twice"):
        paired.main(["--plays", f"{A}|{B}", "1,1"])
    rows = json.loads((tmp_path / "grpo-2" / "prompted.json").read_text())
    rows["rows"]["ReAct, greedy"]["per_maze"] += [1]
    (tmp_path / "grpo-2" / "prompted.json").write_text(json.dumps(rows))
    with pytest.raises(SystemExit, match="seed 2: 4 mazes against 5"):
        paired.main(["--plays", f"{A}|{B}", "1,2"])
    with pytest.raises(SystemExit, match="seed 2 played 5 mazes, seed 1 4"):
        paired.main(["--plays", f"{B}|{B}", "1,2"])
    # --first N: the first N mazes of each side (grpo-2 now played 5: its first 3 and 4 are paired)
    assert paired.main(["--plays", f"{A}|{B}", "1,2", "--first", "4"]) == lines
    assert paired.main(["--plays", f"{A}|{B}", "2", "--first", "3"]) == [
        f"sg_gr-2:ReAct w/ SG, greedy - grpo-2:ReAct, greedy, paired on 3 mazes: "
        f"{compare.interval_text(two[:3])}"]
    with pytest.raises(SystemExit, match="--first 5, but seed 2's .*sg_gr-2 played 4 mazes"):
        paired.main(["--plays", f"{A}|{B}", "2", "--first", "5"])
    with pytest.raises(SystemExit, match="Paired differences that compare.md"):  # the usage
        paired.main(["--plays", f"{A}|{B}", "2", "--first", "0"])


def fake_bridge_run(folder: Path, prior: float, successes: list, failures=None):
    """A run folder as both bridges write it: summary.md (the prior's rows), log.jsonl, the
    config; free-text runs log their rollouts' unreadable and unparseable shares."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "selfguide_config.json").write_text(json.dumps({"final_evals": 2}))
    (folder / "summary.md").write_text(
        "| policy | success | steps | guide bal. acc. |\n|---|---|---|---|\n"
        f"| prior, no guide (ReAct) | {prior:.3f} | 25.0 | - |\n"
        f"| prior, guide (ReAct w/ SG) | {prior + 0.1:.3f} | 25.0 | 0.700 |\n")
    rows = []
    for i, v in enumerate(successes, 1):
        row = {"iteration": i, "success": 0.1 * i, "zero_variance_groups": 0.5,
               "eval": {"success": v, "guide_balanced_accuracy": 0.9}}
        if failures is not None:
            row.update(unreadable=failures[0] * i, unparseable=failures[1] * i)
        rows.append(json.dumps(row) + "\n")
    (folder / "log.jsonl").write_text("".join(rows))


def test_freetext_harness_runs_only_what_is_missing_and_pairs_the_seeds(tmp_path, monkeypatch,
                                                                        capsys):
    """experiments/freetext.py: the missing runs' commands (and only theirs), then each path
    and variant's means and the paired differences, hand-computed."""
    import freetext
    out = tmp_path / "ft"
    trained = {("ft", "grpo"): [0.20, 0.30], ("ft", "sg_gr"): [0.35, 0.40],
               ("trl", "grpo"): [0.40, 0.50], ("trl", "sg_gr"): [0.60, 0.60]}
    for (path, variant), finals in trained.items():
        for seed, final in zip((3, 4), finals):
            if (path, variant, seed) == ("trl", "sg_gr", 4):
                continue  # missing: the harness runs it
            fake_bridge_run(freetext.folder(out, path, variant, seed), 0.1 * seed,
                            [0.0, final, final], (0.01, 0.02) if path == "ft" else None)
    calls = []

    def run(words, stdout, stderr):  # stands in for the missing run's script
        calls.append(words)
        fake_bridge_run(freetext.folder(out, "trl", "sg_gr", 4), 0.4, [0.0, 0.6, 0.6])
        return type("Done", (), {"returncode": 0})()
    monkeypatch.setattr(freetext.subprocess, "run", run)
    assert freetext.main(["--seeds", "3,4", "--out", str(out), "--dry-run"]) is None
    assert capsys.readouterr().out.strip() == (
        f"python examples/trl_selfguide.py --seed 4 --variant sg_gr --iterations 100 "
        f"--threads 1 --out {out}/trl-sg_gr-4") and not calls
    text = freetext.main(["--seeds", "3,4", "--out", str(out)])
    assert len(calls) == 1 and calls[0][1].endswith("examples/trl_selfguide.py")
    # means over seeds 3, 4: the GRPO rows start from 0.3 / 0.4, the full method's from +0.1;
    # free text's shares over its 3 logged iterations: 0.01 * mean(1, 2, 3) = 0.02, and 0.04
    # rollouts' success over 3 logged iterations: 0.1 * mean(1, 2, 3) = 0.2
    assert ("| free text, GRPO | 0.350 | 0.250 | -0.100 | - | 0.200 | 0.500 | "
            "0.0200 / 0.0400 |") in text
    assert ("| constrained, GRPO w/ SG & GR | 0.450 | 0.600 | +0.150 | 0.700 -> 0.900 | 0.200 | 0.500 "
            "| - |") in text
    assert "free text: GRPO w/ SG & GR - GRPO, trained: +0.125 [" in text      # 0.15, 0.10
    assert "GRPO w/ SG & GR: gain, free text - constrained: -0.225 [" in text  # -.25, -.2
    assert "above on 0 of 2 seeds" in text
    with pytest.raises(SystemExit):
        freetext.parse_args(["--seeds", "1,x"])
    assert "error: --seeds takes comma-separated integers" in capsys.readouterr().err


@pytest.mark.parametrize("kept, panels", [("hindsight-house-tuning", 3),
                                          ("hindsight-default-tuning", 1)])
def test_the_hindsight_figure_draws_the_stale_panels_only_where_the_maze_has_them(
        kept, panels, tmp_path, monkeypatch):
    """hindsight.png from a kept comparison: success, and in the house the probe's two classes
    of stale moves; every line starts at the prior's figure at iteration 0."""
    import shutil
    pytest.importorskip("matplotlib", reason=MATPLOTLIB)
    figures = drawn(monkeypatch)
    shutil.copytree(Path(__file__).parent / "results" / kept, tmp_path / kept)
    plots.main([str(tmp_path / kept)])
    figure = figures["hindsight.png"]
    assert len(figure.axes) == panels
    per_seed = plots.load_comparison(tmp_path / kept)["per_seed"]
    prior = sum(seed["ReAct w/ SG"]["final"]["success"] for seed in per_seed) / len(per_seed)
    assert figure.axes[0].get_ylabel().startswith("held-out success")
    x, y = next((list(line.get_xdata()), list(line.get_ydata()))
                for line in figure.axes[0].get_lines() if line.get_label() == "hindsight at 1")
    assert x[0] == 0 and y[0] == pytest.approx(prior) and x[-1] == 150


def test_experiments_modules_import_no_circle_and_never_go_back_into_from_selfguide():
    """experiments/ imports selfguide.py and extends it, never the other way; and no module of
    experiments/ reaches itself through its imports (each import read from the source)."""
    import ast
    folder = Path(__file__).resolve().parent
    modules = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("test_")}
    graph = {}
    for name in modules:
        tree = ast.parse((folder / f"{name}.py").read_text())
        found = {alias.name.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.Import) for alias in node.names}
        found |= {node.module.split(".")[0] for node in ast.walk(tree)
                  if isinstance(node, ast.ImportFrom) and node.module}
        graph[name] = found & modules

    def reaches(start, goal, seen=()):
        return any(n == goal or (n not in seen and reaches(n, goal, seen + (n,)))
                   for n in graph[start])
    assert not [name for name in modules if reaches(name, name)]
    assert graph["research"] == set() and graph["plots"] == {"compare"}
    method = ast.parse((folder.parent / "selfguide.py").read_text())
    imported = {alias.name for node in ast.walk(method) if isinstance(node, ast.Import)
                for alias in node.names}
    assert not imported & modules


def test_the_registered_claims_are_judged_by_the_standard_and_the_predictor_by_fishers_z():
    """results.registered_table (REPORT section 14): each claim's paired interval against its
    threshold (shown, not shown, not resolved; equivalent only inside a declared margin), and
    the predictor's Pearson r with tanh(atanh r +- 1.96 / sqrt(n - 3)), by hand."""
    import results
    assert results.verdict([0.3, 0.31, 0.29], 0.1) == "shown"
    assert results.verdict([-0.3, -0.31, -0.29], 0.0, 0.1) == "not shown; not equivalent"
    assert results.verdict([0.01, -0.01, 0.0, 0.005], 0.0, 0.1) == "not resolved; equivalent"
    xs, ys = [0.1, 0.4, 0.35, 0.8, 0.6, 0.9], [0.0, 0.2, 0.1, 0.5, 0.6, 0.7]
    r, low, high = results.fisher_interval(xs, ys)
    mx, my = sum(xs) / 6, sum(ys) / 6
    by_hand = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / math.sqrt(
        sum((x - mx) ** 2 for x in xs) * sum((y - my) ** 2 for y in ys))
    assert r == pytest.approx(by_hand)
    assert (low, high) == pytest.approx((math.tanh(math.atanh(by_hand) - 1.96 / math.sqrt(3)),
                                         math.tanh(math.atanh(by_hand) + 1.96 / math.sqrt(3))))
    rows = (results.HINDSIGHT_1, results.PLACEBO_1, results.ENV_1, results.CRITIC_1, "GRPO")
    per_seed = [{row: {"final": {"success": 0.5 + 0.2 * (row == results.HINDSIGHT_1) + 0.01 * k,
                                 "probe_guide_true_prob_stale_negative":
                                     0.6 * (row == results.HINDSIGHT_1) + 0.01 * k,
                                 "early_target_coverage": xs[k]}} for row in rows}
                for k in range(6)]
    table = results.registered_table(per_seed)
    assert "| 1. hindsight - placebo, probe, truly negative stale moves | +0.1 | " \
           "+0.600 [+0.600, +0.600], 6 of 6 | shown |" in table
    assert "| 2. the same, truly positive | +0.1 | - | - |" in table  # no seed has the figure
    assert "| 7. success, hindsight - the critic | +0.0, margin +-0.1 | +0.200 [+0.200, " \
           "+0.200], 6 of 6 | shown; not equivalent |" in table
    assert "10. early target coverage predicts learning (Pearson r) | 0 | - |" in table  # flat
    assert table.endswith("Not pre-registered, claims 1 against 0 instead of the +0.1 claimed, "
                          "by the sign test (exact, the seeds at 0 dropped): 1, 6 above, 0 "
                          "below, p = 0.0312.")  # 2 / 2^6; claim 2 has no figure
    # the median seed by the learning figure (claim 1's difference here: the one defined)
    seeds = [430 + k for k in range(6)]
    for k in range(6):  # learning figures 0.5, 0.4, 0.3, 0.2, 0.1, 0.0 for 430..435
        for row, value in ((results.HINDSIGHT_1, 0.5 - 0.1 * k), (results.PLACEBO_1, 0.0)):
            per_seed[k][row]["final"]["probe_guide_true_prob_stale_negative"] = value
    assert results.registered_table(per_seed, seeds).endswith(
        "the lower of the two middle ones if the count is even: seed 433, +0.200 (of 6 seeds).")
    assert "median seed" not in results.registered_table(per_seed)  # without the seeds
    # claim 9, from a checkpoint experiment: the final guides on the prior's moves (the last
    # steering entry) minus the prior's own (the first), by seed
    steered = [{"steered": {"prior": [{"success": 0.3 + 0.01 * k}, {"success": 0.9},
                                      {"success": 0.3 + 0.01 * k + d}]}}
               for k, d in enumerate([0.1, 0.12, -0.02, 0.1, 0.11, 0.09])]
    claim, robust = results.steering_claim(steered).split("\n\n")
    assert claim.endswith(
        "| 9. the final guides on the prior's moves - the prior's guides | +0.0 | "
        f"{compare.interval_text([0.1, 0.12, -0.02, 0.1, 0.11, 0.09])}, 5 above, 1 below "
        "(of 6) | shown |")
    # beside it, not registered: the sign test 2 x 7/64; Wilcoxon's ranks 1, 2, 3.5, 3.5, 5,
    # 6, W- = 1, reached or passed by 2 of the 64 sign patterns: 2 x 2/64
    assert "| 5 above, 1 below, 0 at 0 | 0.2188 |" in robust
    assert "| W+ = 20.0 of 21.0 (6 seeds ranked) | 0.0625 |" in robust
    assert results.steering_claim(steered[:2] + [{"steered": {"prior": [
        {"success": 0.5}, {"success": 0.2}]}}]).split("\n\n")[0].endswith("not resolved |")


def test_claim_9s_robust_tests_match_hand_computed_examples():
    """results.sign_test, wilcoxon_signed_rank and bootstrap_interval (REPORT section 14's
    claim 9, zero-inflated): the exact binomial and the exact signed-rank distribution counted
    by hand on small examples, ties and zeros included; the bootstrap's interval against the
    cases it must give and against the t-interval on many normal figures."""
    import results
    # sign: 3 above, 1 below (the 0 dropped): 2 P(X <= 1), X ~ Bin(4, 1/2) = 2 x 5/16
    assert results.sign_test([1, 2, 3, -1, 0]) == (3, 1, pytest.approx(0.625))
    assert results.sign_test([0.1] * 5) == (5, 0, pytest.approx(0.0625))  # the standard's 2/2^5
    assert results.sign_test([0.1] * 11 + [-0.1] * 3 + [0.0] * 16)[2] == pytest.approx(
        2 * (1 + 14 + 91 + 364) / 2 ** 14)
    assert results.sign_test([0.0, 0.0]) == (0, 0, 1.0)
    # Wilcoxon: ranks 1-5, W+ = 11; W- = 4 or less in 7 of the 32 sign patterns ({}, {1}, {2},
    # {3}, {4}, {1,2}, {1,3}): p = 2 x 7/32
    assert results.wilcoxon_signed_rank([1, 2, 3, -4, 5]) == (11.0, 5, pytest.approx(0.4375))
    # |1| tied at mean rank 1.5, the 0 dropped: W+ = 1.5 + 3 over the sums of {1.5, 1.5, 3}
    # (0, 1.5, 1.5, 3, 3, 4.5, 4.5, 6): 4.5 or more in 3 of 8, p = 2 x 3/8
    assert results.wilcoxon_signed_rank([1, -1, 2, 0]) == (4.5, 3, pytest.approx(0.75))
    assert results.wilcoxon_signed_rank([0.3] * 10)[2] == pytest.approx(2 / 2 ** 10)
    assert results.wilcoxon_signed_rank([0.1 + 0.2 - 0.3, 0.5, -0.5])[1] == 2  # 5.6e-17 is 0
    # bootstrap: a constant; two figures (means 0, 0.5, 1 at 1/4, 1/2, 1/4); many normal ones
    assert results.bootstrap_interval([0.2] * 7) == pytest.approx((0.2, 0.2))
    assert results.bootstrap_interval([0.0, 1.0], resamples=2000) == (0.0, 1.0)
    assert results.bootstrap_interval([0.0, 1.0]) == results.bootstrap_interval([0.0, 1.0])
    figures = torch.randn(400, generator=torch.Generator().manual_seed(0)).tolist()
    mean, half = compare.paired_interval(figures)
    assert results.bootstrap_interval(figures, 2000) == pytest.approx(
        (mean - half, mean + half), abs=0.02)


def test_the_power_of_a_claim_is_the_noncentral_t_and_of_a_predictor_fishers_z():
    """results.power_above against G*Power's one-sample t (d = 0.5, n = 30: 0.7540) and, with
    power_equivalent, against a simulation of the standard's own verdicts; power_correlation
    against the table's n = 29 for r = 0.5 at 80%; needed finds where a power crosses."""
    import results
    assert results.power_above(0.5, 1.0, 30) == pytest.approx(0.7540, abs=0.001)
    assert results.power_above(0.0, 1.0, 30) == pytest.approx(0.025, abs=0.001)
    draws = torch.Generator().manual_seed(1)
    for n, true, spread in ((10, 0.3, 0.4), (30, 0.02, 0.12), (5, 0.05, 0.05)):
        samples = true + spread * torch.randn(40_000, n, generator=draws)
        mean, sd = samples.mean(1), samples.std(1)
        half = compare.t_975(n - 1) * sd / math.sqrt(n)
        shown = (mean - half > 0).double().mean().item()
        equivalent = ((mean - half > -0.1) & (mean + half < 0.1)).double().mean().item()
        assert results.power_above(true, spread, n) == pytest.approx(shown, abs=0.01)
        assert results.power_equivalent(true, spread, n) == pytest.approx(equivalent, abs=0.01)
    assert results.power_correlation(1e-9, 30) == pytest.approx(0.05, abs=1e-4)
    assert results.needed(lambda r: results.power_correlation(r, 29), high=0.999) == \
        pytest.approx(0.50, abs=0.005)
    assert results.needed(lambda x: x) == pytest.approx(0.8)
    # a claim's cells: '-' for the SD no earlier run has, a threshold of 0 read at +0.08
    cells = results.power_column([0.1, -0.1, 0.2, 0.0], [], 0.0, 0.1)
    spread = compare.mean_and_spread([0.1, -0.1, 0.2, 0.0])[1]
    assert cells[:4] == ["-", f"{spread:.3f}", "+0.08",
                         f"-; {results.power_above(0.08, spread, 4):.2f}"]
    assert cells[5] == f"-; {results.power_equivalent(0.0, spread, 4):.2f}"
    assert results.power_column([0.3, 0.5, 0.4], [0.2, 0.6], 0.1, None)[2:3] + \
        results.power_column([0.3, 0.5, 0.4], [0.2, 0.6], 0.1, None)[5:] == ["+0.20", "-", "-"]


def test_claim_9_seed_by_seed_orders_the_seeds_and_splits_them_at_the_guides_learning():
    """results.steering_seeds: each seed's claim 9 difference (exact zeros as 0), its final
    guide's p(true word) on the probe's stale moves, the prior's success with its guides minus
    without and the final policy's steering, the seeds ordered by the difference; then the
    split at 0.3 counted."""
    import results

    def seed(difference, stale, sensitivity):
        return {"steered": {"prior": [{"success": 0.4}, {"success": 0.4 + difference}],
                            "final": [{"success": 0.5}, {"success": 0.6}]},
                "probe": [{"probe_guide_true_prob_stale": 0.0},
                          {"probe_guide_true_prob_stale": stale}],
                "own": [{"success": 0.4 + sensitivity}], "unguided": [{"success": 0.4}]}
    made = [seed(0.0, 0.1, 0.0), seed(0.2, 0.8, 0.0), seed(-0.05, 0.02, 0.1),
            seed(0.0, 0.6, -0.1), seed(0.1, 0.4, 0.05)]
    table = results.steering_seeds(made, [10, 11, 12, 13, 14])
    lines = table.splitlines()
    assert lines[0] == "| seed | 11 | 14 | 13 | 10 | 12 |"
    assert lines[2] == ("| claim 9: the final guides - the prior's, on the prior's moves | "
                        "+0.200 | +0.100 | 0 | 0 | -0.050 |")
    assert lines[3].endswith("| 0.800 | 0.400 | 0.600 | 0.100 | 0.020 |")
    assert lines[4].endswith("| 0 | +0.050 | -0.100 | 0 | +0.100 |")
    assert lines[5].endswith("| +0.100 | +0.100 | +0.100 | +0.100 | +0.100 |")
    assert lines[-1] == (
        "Not pre-registered: on the 3 seeds whose final guide puts more than 0.3 on the stale "
        "moves' true word, claim 9's difference is above 0 on 2, 0 on 1, below on 0; on the "
        "other 2, above on 0, 0 on 1, below on 1. The prior's success with its guides minus "
        "without is 0 on 2 seeds, 1 of them among the 2 above 0.")


# --- ScienceWorld's table (experiments/scienceworld_table.py) ---

def made_up_rows(success, score, balanced=None):
    return {"success": success, "score": score, "valid_actions": 0.9,
            "guide_balanced_accuracy": balanced, "share_positive": None}


def test_the_scienceworld_table_pairs_every_claim_over_seeds_each_with_its_own_prior():
    """Made-up figures for three seeds, each with its own prior (its ReAct rows differ): GRPO
    above its seed's ReAct on every seed (shown), the assessment on the prior paired over the
    seeds too, the per-seed line holding the prior's rows."""
    import scienceworld_table as table
    row = made_up_rows
    per_seed = [{"ReAct": row(0.10 + r, 30.0), "ReAct w/ SG": row(0.12 + r, 31.0, 0.5),
                 "GRPO": row(0.20 + r + g, 32.0), "GRPO w/ SG": row(0.15, 35.0, 0.6),
                 "GRPO w/ SG & GR": row(0.15 + g, 35.0, 0.6 + g)}
                for r, g in [(0.0, 0.01), (0.05, -0.01), (0.02, 0.0)]]
    episodes = lambda scores: [{"score": s, "success": float(s == 100), "steps": 10}  # noqa: E731
                               for s in scores]
    result = {"seeds": [1, 2, 3], "per_seed": per_seed,
              "baselines": {"random": episodes([0, -100, 25, 0]), "gold": episodes([100] * 4)}}
    text = table.table(result)
    assert "| 2 | 0.150 / 30.0 | 0.170 / 31.0 | 0.240 / 32.0 | 0.150 / 35.0 | 0.140 / 35.0 |" in text
    lines = {line.split(":")[0].strip(): line for line in text.splitlines() if ": " in line}
    assert lines["S1 GRPO - ReAct, success"].endswith("above on 3, below on 0 of 3 seeds: shown")
    assert lines["S5 ReAct w/ SG - ReAct, success"].endswith(
        "+0.020 [+0.020, +0.020], above on 3, below on 0 of 3 seeds: shown")
    assert "M5 ReAct w/ SG - ReAct, score: +1.000" in text and "tasks" not in text


def test_the_superseded_scienceworld_tables_judge_their_claims_on_made_up_figures():
    """The first two tables, one prior for every seed, as they printed: made-up figures for
    three seeds: GRPO above ReAct on every seed (shown), the guide's reward no different (not
    resolved), the prior's two formats paired over four tasks; the rows are means over the
    seeds, the floor and the ceiling means over their episodes (a failure's -100 counted as 0)."""
    import scienceworld_table as table
    def row(success, score, balanced=None):
        return {"success": success, "score": score, "valid_actions": 0.9,
                "guide_balanced_accuracy": balanced, "share_positive": None}
    per_seed = [{"ReAct": row(0.10, 30.0), "ReAct w/ SG": row(0.12, 31.0, 0.5),
                 "GRPO": row(0.10 + g, 30.0 + 10 * g), "GRPO w/ SG": row(0.15 + g, 35.0, 0.6),
                 "GRPO w/ SG & GR": row(0.15 + g + d, 35.0, 0.6 + d)}
                for g, d in [(0.10, 0.01), (0.20, -0.01), (0.15, 0.0)]]
    episodes = lambda scores: [{"score": s, "success": float(s == 100), "steps": 10}  # noqa: E731
                               for s in scores]
    result = {"seeds": [1, 2, 3], "per_seed": per_seed,
              "baselines": {"random": episodes([0, -100, 25, 0]), "gold": episodes([100] * 4)},
              "prior_per_task": {"ReAct": {"success": [0, 1, 0, 0], "score": [0, 100, 50, 25]},
                                 "ReAct w/ SG": {"success": [1, 1, 0, 0],
                                                 "score": [100, 100, 50, 0]}}}
    text = table.superseded_table(result)
    assert "| GRPO | 0.250 ± 0.050 | 31.5 ± 0.5 |" in text  # 30 + 10 x (0.1, 0.2, 0.15)
    assert "| random valid action (the floor) | 0.000 | 6.2 | 10.0 |" in text
    assert "| gold path (the ceiling) | 1.000 | 100.0 | 10.0 |" in text
    assert "| 1 | 0.200 / 31.0 | 0.250 / 35.0 | 0.260 / 35.0 |" in text  # seed 1's rows
    lines = {line.split(":")[0].strip(): line for line in text.splitlines() if ": " in line}
    assert lines["S1 GRPO - ReAct, success"].endswith(
        "+0.150 [+0.026, +0.274], above on 3, below on 0 of 3 seeds: shown")
    assert lines["S3 GRPO w/ SG & GR - GRPO w/ SG, success"].endswith("of 3 seeds: not resolved")
    assert lines["S5 ReAct w/ SG - ReAct, success"].endswith(
        "+0.250 [-0.545, +1.046], above on 1, below on 0 of 4 tasks: not resolved")  # t(3)
    assert "M5 ReAct w/ SG - ReAct, score: +18.750" in text  # (100 + 0 + 0 - 25) / 4
    assert lines["G1 the guide's balanced accuracy, GRPO w/ SG & GR - ReAct w/ SG, "
                 "guide_balanced_accuracy"].split(": ")[1].startswith("+0.100")
    one = table.superseded_table({**result, "seeds": [1], "per_seed": per_seed[:1]})
    assert "S1 GRPO - ReAct, success: +0.100 [one pair: no interval], above on 1, below on 0 " \
           "of 1 seed: not resolved" in one and "nan" not in one


def test_the_scienceworld_units_clone_a_prior_per_seed_and_refuse_another_formats_out(
        monkeypatch, tmp_path):
    """Each seed's prior unit clones with that seed, and its three runs start from that
    seed's prior folder, each keeping a checkpoint every 10 iterations unless --run says
    otherwise; an --out whose units ran under another turn format (its priors' folders
    differ) is refused in one line, before any unit runs."""
    import scienceworld_table as table
    import science_world
    args = table.parse_args(["--seeds", "1,2", "--out", str(tmp_path / "sw")])
    found = {name: command for name, _, command, _ in table.units(args)}
    assert {"baselines", "prior-1", "prior-2", "grpo-1", "sg_gr-2"} <= set(found)
    assert found["prior-2"][found["prior-2"].index("--seed") + 1] == "2"
    priors = {seed: table.prior_model(args, seed) for seed in (1, 2)}
    assert priors[1] != priors[2]
    for seed in (1, 2):
        assert found[f"sg-{seed}"][found[f"sg-{seed}"].index("--model") + 1] == priors[seed]
    assert found["grpo-1"][found["grpo-1"].index("--save-every") + 1] == "10"  # resumable
    given = table.parse_args(["--seeds", "1", "--out", str(tmp_path / "x"), "--run",
                              "--save-every 5"])
    assert all(c.count("--save-every") == 1 for n, _, c, _ in table.units(given)
               if n.startswith(("grpo", "sg")))
    table.stamped(args, table.units(args))  # as run_units does before it starts any unit
    table.stamped(args, table.units(args))  # the same settings again: resumed
    monkeypatch.setitem(science_world.TURN, "window", "{task} {recent} {result}")
    with pytest.raises(SystemExit, match="holds units run with other settings .*prior-1"):
        table.stamped(args, table.units(args))


def test_several_runs_curves_draw_the_prior_before_training_as_a_line(
        tmp_path, monkeypatch):
    """plot_runs: each run's greedy evaluations, labelled by the setting it differs in, and the
    prior's success before training (its summary.md's row without the guide) a dashed line."""
    pytest.importorskip("matplotlib", reason=MATPLOTLIB)
    import matplotlib.axes
    drawn = []
    monkeypatch.setattr(matplotlib.axes.Axes, "axhline",
                        lambda self, y, **kw: drawn.append((y, kw.get("label"))))
    for lr in ("0.0001", "0.0002"):
        run = tmp_path / f"lr{lr}"
        run.mkdir()
        (run / "selfguide_config.json").write_text(json.dumps({"lr": float(lr), "out": str(run)}))
        (run / "log.jsonl").write_text("\n".join(json.dumps(
            {"iteration": i, "eval": {"success": 0.5, "score": 80.0}}) for i in (10, 20)))
        (run / "summary.md").write_text(  # as trl_freetext.py writes it
            "| policy | success | steps | steps / optimal | guide bal. acc. | positive guides |\n"
            "|---|---|---|---|---|---|\n| prior, no guide (ReAct) | 0.780 | 12.6 | - | - | - |\n")
    figure = plots.plot_runs([tmp_path / "lr0.0001", tmp_path / "lr0.0002"])
    assert figure == tmp_path / "runs.png" and figure.exists()
    assert drawn == [(0.78, "the prior, before training")]
