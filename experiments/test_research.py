"""Tests for experiments/research.py: the report's variants composed through the method's
seams (the world, the demonstrator, the prior's stop, the guides' pay, the critic).

    python -m pytest -q experiments/test_research.py
"""
import math
import sys
from pathlib import Path

import pytest
import torch

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]

import research as rs  # noqa: E402
import selfguide as sg  # noqa: E402
import toy_env  # noqa: E402
from conftest import (TINY, TINY_ARGS, first_rollouts, hand_advantages, same_weights,  # noqa: E402
                      tiny_config, two_hand_built_episodes)
from toy_env import GUIDES  # noqa: E402


def research_config(**overrides) -> rs.Config:
    return rs.Config(**{**TINY, **overrides})


def research_policy(seed=0, **overrides):
    torch.manual_seed(seed)
    return sg.make_policy(research_config(**overrides)).eval()


def test_a_misjudged_revisit_needs_the_cue_or_the_distance_it_misreads():
    with pytest.raises(SystemExit):
        rs.parse_args(["--cue-misjudge", "revisit", "--no-cue"])  # the cue reader's


def test_dist_words_extend_the_vocabulary_only_under_dist(tmp_path, capsys):
    # Every other setting keeps the vocabulary, the prior keys and the weights it always had.
    plain, dist = research_config(), research_config(dist=True)
    assert sg.vocab_size(plain) == len(sg.WORDS) - len(toy_env.DIST_VOCAB) == 321
    today = dict(size=9, min_distance=12, max_steps=24, cue=False)  # keys before --dist existed
    assert sg.prior_key(sg.Config(**today)) == "e3c802d7da8e"
    assert sg.prior_key(sg.Config(**{**today, "cue": True})) == "b47886d687b8"
    assert sg.make_policy(dist).config.vocab_size == len(sg.WORDS)
    assert sg.episode_length(dist) == sg.episode_length(research_config(cue=True))
    batch = sg.rollout(research_policy(dist=True), [3, 4], True, dist, greedy=True)
    dist_ids = {sg.WORD_ID[w] for w in toy_env.DIST_VOCAB}
    assert any(int(t) in dist_ids for t in batch.tokens.flatten())
    sg.save_policy(research_policy(dist=True), tmp_path / "d")
    with pytest.raises(SystemExit, match="trained for other settings"):
        sg.load_policy(tmp_path / "d", plain, "cpu")
    assert sg.load_policy(tmp_path / "d", dist, "cpu").config.vocab_size == len(sg.WORDS)
    with pytest.raises(SystemExit):
        rs.parse_args(["--dist"])
    assert "add --no-cue" in capsys.readouterr().err
    assert rs.parse_args(["--dist", "--no-cue", "--cue-misjudge", "revisit"]).dist


def test_a_guide_target_stops_cloning_at_the_first_check_that_reaches_it(monkeypatch):
    cfg = research_config(prior_episodes=32, prior_epochs=8, prior_batch=16, prior_check=3,
                          prior_guide_target=0.75)
    updates, checked, clone = [0], [], sg.clone_demonstrator

    def counted(*args):  # cloning as it is, counting its updates
        for loss in clone(*args):
            updates[0] += 1
            yield loss

    def scripted(accuracies):  # a check that notes the update it ran after
        return lambda policy, c: checked.append(updates[0]) or next(accuracies)
    monkeypatch.setattr(sg, "clone_demonstrator", counted)
    monkeypatch.setattr(rs, "calibration_accuracy", scripted(iter([0.5, 0.74, 0.75, 0.9])))
    prior, losses = sg.train_prior(cfg, "cpu")  # reached at the third check, at exactly 0.75
    assert checked == [3, 6, 9] and len(losses) == 9
    assert (prior.config.stage0, prior.config.calibration_accuracy) == ({"updates": 9}, 0.75)
    updates[0], checked[:] = 0, []  # never reached: the cap, --prior-epochs, a check every 3
    monkeypatch.setattr(rs, "calibration_accuracy", scripted(iter([0.1] * 100)))
    prior, losses = sg.train_prior(cfg, "cpu")
    assert len(losses) == 32 and checked == list(range(3, 32, 3))
    assert (prior.config.stage0, prior.config.calibration_accuracy) == ({"updates": 32}, 0.1)
    cfg = sg.dataclasses.replace(cfg, prior_guide_target=0.0)  # no target: no check
    checked.clear()
    prior = sg.train_prior(cfg, "cpu")[0]
    assert prior.config.stage0 == {"updates": 32} and checked == []
    assert not hasattr(prior.config, "calibration_accuracy")


def test_a_guide_target_reads_only_its_calibration_mazes_and_repeats(tmp_path, monkeypatch):
    cfg = research_config(prior_cache=str(tmp_path), prior_episodes=16, prior_epochs=4,
                          prior_batch=8, prior_check=2, prior_guide_target=0.99)
    seen = []
    real_reset = toy_env.GridWorld.reset
    monkeypatch.setattr(toy_env.GridWorld, "reset", lambda env, seed=None, **kw:
                        seen.append(seed) or real_reset(env, seed=seed, **kw))
    prior = sg.load_or_train_prior(cfg, "cpu")
    calibration = [s for s in seen if s >= rs.CALIBRATION_SEED_BASE]
    demonstrations = [s for s in seen if s < rs.CALIBRATION_SEED_BASE]
    assert sorted(set(calibration)) == [rs.CALIBRATION_SEED_BASE + i for i in range(200)]
    assert all(sg.PRIOR_SEED_BASE <= s < sg.PRIOR_SEED_BASE + 10**6 for s in demonstrations)
    record = prior.config.stage0  # never reached 0.99 here: the cap, and its last check
    assert record["updates"] == 4 * 4 and len(calibration) == 8 * 200
    reached = prior.config.calibration_accuracy
    # the record, the final check's figure, tallied by hand: the greedy guide's recall of
    # "positive" and of "negative" (the moves that changed the distance), averaged
    batch = sg.rollout(prior, [rs.CALIBRATION_SEED_BASE + i for i in range(200)], True, cfg,
                       greedy=True)
    pairs = [(g, t) for g, t in zip(batch.guides.flatten().tolist(), batch.truths.flatten().tolist())
             if g >= 0 and t in (GUIDES.index("positive"), GUIDES.index("negative"))]
    recalls = [sum(g == t for g, t in pairs if t == c) / n for c in {t for _, t in pairs}
               if (n := sum(t == c for _, t in pairs))]
    assert 0 < sum(recalls) / len(recalls) < 1
    assert reached == pytest.approx(sum(recalls) / len(recalls))
    again = sg.train_prior(cfg, "cpu")[0]  # the same seed clones the same prior
    assert same_weights(prior, again) and again.config.calibration_accuracy == reached
    cached = sg.load_or_train_prior(cfg, "cpu")  # the record is saved with the prior
    assert (cached.config.stage0, cached.config.calibration_accuracy) == (record, reached)
    variant = lambda **kw: sg.dataclasses.replace(cfg, **kw)  # noqa: E731
    keys = {sg.prior_key(c) for c in (cfg, variant(prior_guide_target=0.0),
                                      variant(prior_check=3), variant(prior_guide_target=0.9))}
    assert len(keys) == 4  # the target and its check are in the key; at their defaults, the
    assert sg.prior_key(research_config()) == sg.prior_key(tiny_config())  # method's key


def test_a_houses_tasks_are_played_in_one_maze_and_maze_of_names_the_environments():
    for house in (True, False):
        cfg = research_config(size=12, min_distance=8, max_steps=6, house=house, seed=5)
        for task in (3, 9, 10**9):  # held-out tasks too
            env = cfg.make_env()
            env.reset(seed=task)
            assert rs.maze_of(cfg, task) == env.maze == (5 if house else task)


def test_guide_accuracies_on_hand_built_rollouts():
    """The accuracy over the judged moves; the progress accuracy, the mean recall of the moves
    that got closer and of those that led away (a bump's recall left out); None where
    undefined, nothing without a guide."""
    rollouts = two_hand_built_episodes()
    # judged: (guide 0, truth 0) right, (2, 0) wrong, (0, 2) wrong
    assert rs.guide_accuracies(rollouts) == {"guide_accuracy": pytest.approx(1 / 3),
                                             "guide_progress_accuracy": (1 / 2 + 0) / 2}
    one_bump = sg.dataclasses.replace(rollouts, truths=torch.tensor([[-1, 0, 0], [-1, 1, -1]]))
    assert rs.guide_accuracies(one_bump)["guide_progress_accuracy"] == 0.5  # the closer moves'
    unjudged = sg.dataclasses.replace(rollouts, truths=torch.full((2, 3), -1))
    assert rs.guide_accuracies(unjudged) == {"guide_accuracy": None,
                                             "guide_progress_accuracy": None}
    assert rs.guide_accuracies(sg.dataclasses.replace(rollouts, guides=torch.full((2, 3), -1))) == {}


def guide_advantages_of(guides, truths, env_return, guide_advantage, steps=None):
    """Per (rollout, step) guide advantages of iteration_advantages for hand-built episodes
    of one guide and one action per step: (N, T), read back off the token stream."""
    n, horizon = guides.shape
    steps = (guides >= 0).sum(1) if steps is None else steps
    slots = torch.tensor([[0, 0] + [0, 1, 2] * k + [0, 0, 0] * (horizon - k)
                          for k in steps.tolist()])
    batch = sg.Rollouts(
        tokens=torch.zeros_like(slots), slots=slots, logprobs=torch.zeros(slots.shape),
        guides=guides, truths=truths, cells=torch.zeros(n, horizon, dtype=torch.long),
        env_return=env_return, steps=steps, optimal=torch.full((n,), 2))
    cfg = research_config(variant="sg_gr", guide_advantage=guide_advantage, group_size=n)
    tokens = rs.iteration_advantages(batch, cfg, 1.0, 1)[0]
    return torch.stack([torch.cat([tokens[i][slots[i] == sg.SLOT_GUIDE],
                                   torch.zeros(horizon - steps[i])]) for i in range(n)])


def test_the_outcome_guard_pays_a_guide_for_calling_the_outcome_never_for_praise():
    """--guide-advantage outcome: each guide token gets A_env,i x g(z_t) / 0.1. One group of
    four, the first rollout a success: A_env = (3, -1, -1, -1) / sqrt(3)."""
    success = torch.tensor([1.0, 0.0, 0.0, 0.0])
    a_env = torch.tensor([3.0, -1.0, -1.0, -1.0]) / math.sqrt(3)
    truths = torch.full((4, 3), -1)
    praise = torch.zeros(4, 3, dtype=torch.long)  # "positive" on every step
    paid = guide_advantages_of(praise, truths, success, "outcome")
    assert torch.allclose(paid, a_env[:, None].expand(4, 3), atol=1e-5)
    assert paid[:, 0].sum().abs() < 1e-5  # a constant word: sum_i A_env,i = 0 over the group
    called = torch.tensor([[0, 0, 0], [2, 2, 2], [2, 1, 2], [2, 2, 2]])  # the outcome, called
    paid = guide_advantages_of(called, truths, success, "outcome")
    assert (paid[0] > 0).all() and (paid[[1, 3]] > 0).all() and paid[2, 1] == 0
    assert paid[2, 0] == pytest.approx(1 / math.sqrt(3), abs=1e-5)
    # stalling: a failed rollout's three extra "positive" steps change no other token's pay
    stalled = torch.cat([praise, torch.full((4, 3), -1)], 1)
    stalled[1, 3:] = 0
    steps = torch.tensor([3, 6, 3, 3])
    longer = guide_advantages_of(stalled, torch.full((4, 6), -1), success, "outcome", steps)
    assert torch.allclose(longer[:, :3], a_env[:, None].expand(4, 3), atol=1e-5)
    assert torch.allclose(longer[1, 3:], a_env[1].expand(3), atol=1e-5)
    # summed over the group, constant praise earns 0 where all four play and less after
    assert longer[:, :3].sum().abs() < 1e-5 and longer[:, 3:].sum() < -1
    # a group that all failed carries no outcome to call: nothing is paid
    assert (guide_advantages_of(called, truths, torch.zeros(4), "outcome") == 0).all()


def test_the_truth_control_pays_plus_one_for_the_true_word_minus_one_for_another():
    guides = torch.tensor([[1, 0, 2], [0, 0, -1]])
    truths = torch.tensor([[-1, 0, 0], [-1, 2, -1]])  # step 0 judges no move
    paid = guide_advantages_of(guides, truths, torch.tensor([1.0, 0.0]), "truth")
    assert paid.tolist() == [[0.0, 1.0, -1.0], [0.0, -1.0, 0.0]]
    # the outcome does not enter: the same pay whether the episode succeeded or not
    assert torch.equal(paid, guide_advantages_of(guides, truths, torch.zeros(2), "truth"))


def hindsight_batch(cells, steps, success, mazes=None):
    """Episodes holding what hindsight_targets reads: cells (N, T), steps, R_env, mazes."""
    n = len(cells)
    return rs.Episodes(
        tokens=torch.zeros(n, 1, dtype=torch.long), slots=torch.zeros(n, 1, dtype=torch.long),
        logprobs=torch.zeros(n, 1), guides=torch.full((n, len(cells[0])), -1),
        truths=torch.full((n, len(cells[0])), -1),
        env_return=torch.tensor(success, dtype=torch.float), steps=torch.tensor(steps),
        optimal=torch.ones(n, dtype=torch.long), cells=torch.tensor(cells),
        mazes=torch.tensor(mazes or [7] * n))


def replayed_targets(batches, discount=0.95, memory=0.9):
    """hindsight_targets written from its definition, for a run of iterations: V_{-i}(s) is
    the weighted mean, over every visit of s by another rollout of this iteration (weight 1)
    or by any rollout of an iteration k back (weight memory^k), of discount^(moves left) x
    R_env; the target of z_t is the sign of V_{-i}(s_t) - V_{-i}(s_{t-1}), neutral for a
    bump, none where a V is undefined or the two are equal."""
    history, out = [], []  # history: (iteration, maze, cell, value) for every visit
    for u, batch in enumerate(batches):
        visits = []  # (rollout, maze, cell, value)
        for i in range(len(batch.steps)):
            n = batch.steps[i].item()
            for t in range(n):
                visits.append((i, batch.mazes[i].item(), batch.cells[i, t].item(),
                               discount ** (n - t) * batch.env_return[i].item()))
        targets = torch.full(batch.cells.shape, -1)
        for i in range(len(batch.steps)):
            def value(cell):
                pairs = [(v, 1.0) for j, m, c, v in visits
                         if j != i and (m, c) == (batch.mazes[i].item(), cell)]
                pairs += [(v, memory ** (u - k)) for k, m, c, v in history
                          if (m, c) == (batch.mazes[i].item(), cell)]
                weight = sum(w for _, w in pairs)
                return sum(v * w for v, w in pairs) / weight if weight else None
            for t in range(1, batch.steps[i].item()):
                before, after = batch.cells[i, t - 1].item(), batch.cells[i, t].item()
                if before == after:
                    targets[i, t] = 1
                    continue
                a, b = value(after), value(before)
                if a is not None and b is not None and abs(a - b) > 1e-9:
                    targets[i, t] = 0 if a > b else 2
        history += [(u, m, c, v) for _, m, c, v in visits]
        out.append(targets)
    return out


def test_hindsight_targets_by_hand():
    """Three rollouts of one maze, the first and the last successes. g = 0.95."""
    g = 0.95
    batch = hindsight_batch(cells=[[0, 1, 2, 2], [0, 1, 3, -1], [0, 3, 1, -1]],
                            steps=[4, 3, 3], success=[1, 0, 1])
    targets = rs.hindsight_targets(batch, {})
    # rollout 0: 0 -> 1, V(1) = (0 + g) / 2 > V(0) = (0 + g^3) / 2: positive; 1 -> 2, no one
    # else reached 2: none; 2 -> 2, a bump: neutral
    # rollout 1: 0 -> 1: (g^3 + g) / 2 > (g^4 + g^3) / 2, positive; 1 -> 3: g^2 < (g^3 + g) / 2
    # rollout 2: 0 -> 3: 0 < g^4 / 2, negative; 3 -> 1: g^3 / 2 > 0, positive
    assert g ** 2 < (g ** 3 + g) / 2
    assert targets.tolist() == [[-1, 0, -1, 1], [-1, 0, 2, -1], [-1, 2, 0, -1]]


def test_hindsight_targets_equal_their_definition_over_iterations_and_mazes():
    """Random walks in two mazes over three iterations, against replayed_targets: the carried
    table, the leave-one-out and the mazes kept apart."""
    generator, values, batches, got = torch.Generator().manual_seed(0), {}, [], []
    for _ in range(3):
        steps = torch.randint(2, 7, (12,), generator=generator)
        cells = torch.randint(0, 5, (12, 6), generator=generator)
        cells[:, 1::3] = cells[:, 0::3][:, :cells[:, 1::3].shape[1]]  # some bumps
        cells = torch.where(torch.arange(6) < steps[:, None], cells, -1)
        success = (torch.rand(12, generator=generator) < 0.4).float()
        batch = hindsight_batch(cells.tolist(), steps.tolist(), success.tolist(),
                                mazes=[3] * 6 + [4] * 6)
        batches.append(batch)
        got.append(rs.hindsight_targets(batch, values))
    for mine, theirs in zip(got, replayed_targets(batches)):
        assert torch.equal(mine, theirs)
    assert {maze for maze, _ in values} == {3, 4}
    assert sum((t >= 0).sum().item() for t in got) > 20  # most moves judged, some not
    assert sum(((t == 0) | (t == 2)).sum().item() for t in got) > 10


def test_hindsight_in_the_house_pays_iteration_two_from_what_iteration_one_saw():
    """The training loop carries V on its state: in the house every task is one maze, so the
    targets of iteration 2 are hindsight_targets of its rollouts with iteration 1's visits
    carried (replayed here from each iteration's episodes), not those of its batch alone."""
    cfg = research_config(size=6, min_distance=2, house=True, seed=5, variant="sg_gr",
                          guide_advantage="hindsight", iterations=2, eval_every=5)
    policy, reference = research_policy(size=6), research_policy(seed=1, size=6)
    state, seen = sg.new_train_state(policy, cfg), []
    for _ in range(2):
        sg.grpo_iteration(policy, reference, cfg, state)
        batch, _, targets = rs.carried(state, cfg).last
        seen.append((batch, targets))
    carried = {}
    for batch, targets in seen:
        assert torch.equal(rs.hindsight_targets(batch, carried), targets)
    assert carried == rs.carried(state, cfg).values and {maze for maze, _ in carried} == {5}
    second, targets = seen[1]
    assert sum(batch.env_return.sum() for batch, _ in seen) > 0  # a success: V is not all 0
    assert not torch.equal(rs.hindsight_targets(second, {}), targets)  # iteration 1 counted


def test_hindsight_without_its_targets_is_one_clear_error():
    cfg = research_config(variant="sg_gr", guide_advantage="hindsight")
    batch = sg.rollout(research_policy(), [0] * 4, True, cfg, torch.Generator().manual_seed(0))
    for advantage in ("hindsight", "placebo"):
        with pytest.raises(ValueError, match=f"--guide-advantage {advantage} needs targets"):
            rs.iteration_advantages(batch, sg.dataclasses.replace(
                cfg, guide_advantage=advantage), 1.0, 1)


def test_hindsights_critic_pays_each_move_the_targets_word_as_r_t_and_the_guides_env_only():
    """The critic without the guide (--internal-reward hindsight): r_t is 0.1 x the hindsight
    target's polarity, whatever guide was written, credited to the moves by step credit; the
    guides keep the env guard's advantage (here 0: both rollouts failed). By hand, sum_t r_t:
    r = [0, +0.1, -0.1] and [0, -0.1, 0]; I = [0, -0.1], population std 0.05; a_t's reward-to-go
    from t + 1 on: [0, -0.1, 0] and [-0.1, 0, 0], step means [-0.05, -0.05, 0]; so
    A = [+1, -1, 0] and [-1, +1, 0] at trust 1."""
    slots = torch.tensor([[0, 0, 1, 2, 0, 1, 2, 0, 1, 2]] * 2)
    batch = sg.Rollouts(
        tokens=torch.zeros(2, 10, dtype=torch.long), slots=slots, logprobs=torch.zeros(2, 10),
        guides=torch.zeros(2, 3, dtype=torch.long),  # "positive" everywhere: a constant guide
        truths=torch.tensor([[-1, 2, 2], [-1, 2, 2]]), cells=torch.zeros(2, 3, dtype=torch.long),
        env_return=torch.tensor([0.0, 0.0]), steps=torch.tensor([3, 3]),
        optimal=torch.tensor([2, 2]))
    targets = torch.tensor([[-1, 0, 2], [-1, 2, -1]])
    cfg = research_config(variant="sg_gr", internal_reward="hindsight", internal_return="sum",
                          guide_temperature=1.0, group_size=2)
    tokens = rs.iteration_advantages(batch, cfg, 1.0, 3, targets)[0]
    actions = tokens[slots == sg.SLOT_ACTION].view(2, 3)
    assert torch.allclose(actions, torch.tensor([[1.0, -1.0, 0.0], [-1.0, 1.0, 0.0]]), atol=1e-4)
    assert torch.equal(tokens[slots == sg.SLOT_GUIDE], torch.zeros(6))
    # the paper's r_t = g(z_t) reads the constant guide instead: no internal signal at all
    guide = rs.iteration_advantages(batch, sg.dataclasses.replace(cfg, internal_reward="guide"),
                                    1.0, 3)[0]
    assert torch.equal(guide, torch.zeros_like(guide))
    # the critic pays from its targets only: without them, one clear error
    with pytest.raises(ValueError, match="--internal-reward hindsight needs targets"):
        rs.iteration_advantages(batch, cfg, 1.0, 3)


def first_episodes(cfg):
    """A run's first rollouts, replayed, each with the maze of its task: the task seed (the
    tasks drawn as grpo_iteration draws them from a new train state)."""
    batch, replay = first_rollouts(research_policy(), cfg)
    tasks = sg.random.Random(cfg.seed)
    seeds = [tasks.randrange(sg.TRAIN_SEED_RANGE) for _ in range(cfg.tasks_per_iter)]
    return rs.Episodes(**vars(batch), mazes=torch.tensor([s for s in seeds
                                                          for _ in range(cfg.group_size)]))


def first_iteration(monkeypatch, cfg):
    """A run's first iteration, and its replay: (the token advantages it handed the update,
    its train state, the replayed episodes, their hindsight targets from a table of its own)."""
    policy, advantages = research_policy(), []
    state = sg.new_train_state(policy, cfg)
    real_update = sg.grpo_update
    monkeypatch.setattr(sg, "grpo_update", lambda *args, **kw: advantages.append(args[3])
                        or real_update(*args, **kw))
    sg.grpo_iteration(policy, research_policy(seed=1), cfg, state)
    batch, values = first_episodes(cfg), {}
    return advantages[0], state, batch, rs.hindsight_targets(batch, values), values


def test_the_advantages_know_each_rollouts_maze_from_the_task_draws_they_keep_in_step():
    """Config.advantages draws the iteration's tasks again from a stream of its own, checked
    against the run's: the episodes it keeps hold each task's maze, iteration after iteration
    (and after a snapshot's copy); a stream out of step is one clear error."""
    cfg = research_config(variant="sg_gr", iterations=2, eval_every=5)
    policy = research_policy()
    state = sg.new_train_state(policy, cfg)
    sg.grpo_iteration(policy, research_policy(seed=1), cfg, state)
    assert torch.equal(rs.carried(state, cfg).last[0].mazes, first_episodes(cfg).mazes)
    sg.grpo_iteration(policy, research_policy(seed=1), cfg, state)
    tasks = sg.random.Random(cfg.seed)
    seeds = [tasks.randrange(sg.TRAIN_SEED_RANGE) for _ in range(2 * cfg.tasks_per_iter)]
    assert rs.carried(state, cfg).last[0].mazes.tolist() == [
        s for s in seeds[cfg.tasks_per_iter:] for _ in range(cfg.group_size)]
    state.tasks.random()  # a draw the advantages did not see
    with pytest.raises(RuntimeError, match="out of step"):
        sg.grpo_iteration(policy, research_policy(seed=1), cfg, state)


def test_a_critic_iteration_pays_the_moves_from_the_targets_of_its_rollouts_and_carries_v(
        monkeypatch):
    """One iteration of the critic, replayed: its targets from the carried table, its token
    advantages those iteration_advantages gives with them, the table carried the replay's."""
    cfg = research_config(variant="sg_gr", internal_reward="hindsight", schedule="immediate",
                          iterations=2, eval_every=5)
    advantages, state, batch, targets, values = first_iteration(monkeypatch, cfg)
    assert rs.carried(state, cfg).values == values and (targets >= 0).sum() > 0
    expected = rs.iteration_advantages(batch, cfg, 1.0, 1, targets)[0]
    assert torch.equal(advantages, expected)
    guide = rs.iteration_advantages(batch, sg.dataclasses.replace(cfg, internal_reward="guide"),
                                    1.0, 1)[0]
    assert not torch.equal(expected, guide)  # the targets, not the guides, paid the moves


def test_hindsight_forgets_what_it_has_not_seen_for_long_and_needs_another_visitor():
    values = {(7, 0): [0.5, 0.011], (7, 9): [0.9, 1.0]}
    lonely = hindsight_batch(cells=[[0, 1, -1]], steps=[2], success=[1])
    # rollout 0's own visits are left out: cell 1 has no other visitor, so no target
    assert rs.hindsight_targets(lonely, values).tolist() == [[-1, -1, -1]]
    assert (7, 9) in values and values[(7, 9)] == pytest.approx([0.81, 0.9])
    # 0.011 decayed to 0.0099 is forgotten, then this visit counts alone
    assert values[(7, 0)] == pytest.approx([0.95 ** 2, 1.0])
    rs.hindsight_targets(hindsight_batch(cells=[[2]], steps=[1], success=[0]), values)
    assert (7, 1) in values and values[(7, 1)][1] == pytest.approx(0.9)
    values[(7, 1)][1], values[(7, 8)] = 0.0105, [0.0, 0.0112]
    rs.hindsight_targets(hindsight_batch(cells=[[2]], steps=[1], success=[0]), values)
    assert (7, 1) not in values  # 0.0105 x 0.9 < 0.01: forgotten
    assert values[(7, 8)][1] == pytest.approx(0.01008)  # 0.0112 x 0.9 >= 0.01: not yet


def test_the_placebo_keeps_hindsights_coverage_and_bumps_and_draws_each_moves_word_by_a_coin():
    targets = torch.tensor([[-1, 0, 2, 1, -1] * 400])
    placebo = rs.placebo_targets(targets, torch.Generator().manual_seed(0))
    assert torch.equal(placebo[targets == -1], targets[targets == -1])
    assert (placebo[targets == 1] == 1).all()  # a bump is neutral
    moves = placebo[(targets == 0) | (targets == 2)]
    assert set(moves.tolist()) == {0, 2} and abs((moves == 0).float().mean() - 0.5) < 0.04
    # no information: the coin does not read the word hindsight put there
    flipped = torch.where(targets == 0, 2, torch.where(targets == 2, 0, targets))
    assert torch.equal(rs.placebo_targets(flipped, torch.Generator().manual_seed(0)), placebo)


def test_hindsight_and_the_placebo_pay_plus_one_for_their_targets_word_minus_one_for_another():
    G, horizon = 2, 3
    slots = torch.tensor([[0, 0, 1, 2, 0, 1, 2, 0, 1, 2]] * 4)
    batch = sg.Rollouts(
        tokens=torch.zeros(4, 10, dtype=torch.long), slots=slots, logprobs=torch.zeros(4, 10),
        guides=torch.tensor([[1, 0, 0], [1, 2, 0], [0, 0, 2], [1, 2, 1]]),
        truths=torch.tensor([[-1, 2, 2], [-1, 2, 2], [-1, 2, 2], [-1, 2, 2]]),
        cells=torch.zeros(4, horizon, dtype=torch.long),
        env_return=torch.tensor([1.0, 0.0, 0.0, 1.0]), steps=torch.tensor([3, 3, 3, 3]),
        optimal=torch.tensor([2, 2, 2, 2]))
    targets = torch.tensor([[-1, 0, -1], [-1, 0, 2], [-1, 2, 2], [-1, 1, 0]])
    expected = [[0, 1, 0], [0, -1, -1], [0, -1, 1], [0, -1, -1]]  # the truths never enter
    cfg = research_config(variant="sg_gr", guide_advantage="hindsight", group_size=G, seed=2)
    tokens = rs.iteration_advantages(batch, cfg, 0.5, 4, targets)[0]
    assert tokens[slots == sg.SLOT_GUIDE].view(4, 3).tolist() == expected
    placebo = sg.dataclasses.replace(cfg, guide_advantage="placebo")
    coined = rs.placebo_targets(targets, torch.Generator().manual_seed(2 * 10**6 + 4))
    tokens = rs.iteration_advantages(batch, placebo, 0.5, 4, targets)[0]
    paid = torch.where(batch.guides == coined, 1.0, -1.0) * (coined >= 0)
    assert torch.equal(tokens[slots == sg.SLOT_GUIDE].view(4, 3), paid)
    # the actions' advantages are the default's: only the guides' pay changes
    default = rs.iteration_advantages(batch, sg.dataclasses.replace(cfg, guide_advantage="env"),
                                      0.5, 4)[0]
    actions = slots == sg.SLOT_ACTION
    assert torch.equal(tokens[actions], default[actions])


def test_a_hindsight_iteration_pays_against_the_targets_of_its_own_rollouts_and_carries_v(
        monkeypatch):
    """One iteration, replayed: its rollouts, their hindsight targets from the carried table,
    and the guide advantages paid against them; the table it carries is the replay's."""
    cfg = research_config(variant="sg_gr", guide_advantage="hindsight", iterations=2, eval_every=5)
    advantages, state, batch, targets, values = first_iteration(monkeypatch, cfg)
    assert rs.carried(state, cfg).values == values and len(values) > 3
    paid = torch.where(batch.guides == targets, 1.0, -1.0) * (targets >= 0)   # (N, T)
    guides = batch.slots == sg.SLOT_GUIDE
    assert torch.equal(advantages[guides], paid[batch.guides >= 0])
    assert (targets >= 0).sum() > 0


def test_a_stale_door_needs_no_cue_and_a_house_is_in_the_priors_key(capsys):
    with pytest.raises(SystemExit):
        rs.parse_args(["--stale-door"])  # the cue is on by default
    assert "--stale-door's demonstrator judges by its stale map" in capsys.readouterr().err
    keys = {sg.prior_key(rs.parse_args(argv)) for argv in (
        ["--no-cue"], ["--no-cue", "--house"], ["--no-cue", "--stale-door"],
        ["--no-cue", "--house", "--stale-door"])}
    assert len(keys) == 4


def test_iteration_advantages_for_every_research_guide_advantage_from_the_graded_pieces():
    """lambda > 0, the research settings of --guide-advantage under every --internal-return,
    --credit and --advantage, against the advantages put together by hand (conftest)."""
    import itertools
    slots = torch.tensor([[0, 0, 1, 2, 0, 1, 2, 0, 1, 2]] * 3 + [[0, 0, 1, 2, 0, 1, 2, 0, 0, 0]])
    batch = sg.Rollouts(
        tokens=torch.zeros(4, 10, dtype=torch.long), slots=slots, logprobs=torch.zeros(4, 10),
        guides=torch.tensor([[1, 0, 0], [1, 2, 0], [0, 0, 2], [1, 2, -1]]),
        truths=torch.tensor([[-1, 0, 0], [-1, 2, 2], [-1, 0, 0], [-1, 2, -1]]),
        cells=torch.zeros(4, 3, dtype=torch.long),
        env_return=torch.tensor([1.0, 0.0, 0.0, 0.0]), steps=torch.tensor([3, 3, 3, 2]),
        optimal=torch.tensor([2, 2, 2, 2]))
    for internal, credit, guide_adv, advantage in itertools.product(
            ["sum", "mean"], ["trajectory", "step"], ["composite", "env", "outcome", "none",
                                                      "truth"], ["grpo", "drgrpo"]):
        cfg = research_config(variant="sg_gr", internal_return=internal, credit=credit,
                              guide_advantage=guide_adv, advantage=advantage, group_size=2)
        expected, returns = hand_advantages(batch, cfg, 0.5)
        got, got_returns = rs.iteration_advantages(batch, cfg, 0.5, 1)
        setting = (internal, credit, guide_adv, advantage)
        assert torch.allclose(got, expected, atol=1e-6), setting
        assert torch.allclose(got_returns, returns), setting
        assert got[slots == sg.SLOT_GUIDE].abs().sum() > 0 or guide_adv == "none", setting
        if guide_adv in ("composite", "env"):  # the method's own, unchanged
            method = sg.iteration_advantages(batch, tiny_config(
                variant="sg_gr", internal_return=internal, credit=credit,
                guide_advantage=guide_adv, advantage=advantage, group_size=2), 0.5)[0]
            assert torch.equal(got, method), setting


def control_rewards(guides, truths, source, seed=0, iteration=1):
    """internal_rewards of --internal-reward `source` for these guides and truths (N, T)."""
    batch = sg.dataclasses.replace(two_hand_built_episodes(), guides=guides, truths=truths)
    return rs.internal_rewards(batch, research_config(variant="sg_gr", internal_reward=source,
                                                      seed=seed), iteration)


def test_the_oracle_is_a_tenth_of_the_true_progress_of_the_judged_move():
    guides = torch.tensor([[0, 0, 0, 0], [2, 2, -1, -1]])    # what the guides say is ignored
    truths = torch.tensor([[-1, 2, 0, 1], [-1, 0, -1, -1]])  # closer=0, bumped=1, farther=2
    progress = torch.tensor([[0, -1, 1, 0], [0, 1, 0, 0]])   # the same truths as +1 / 0 / -1
    oracle = control_rewards(guides, truths, "oracle")
    assert torch.allclose(oracle, 0.1 * progress)
    no_slot = control_rewards(torch.full_like(guides, -1), truths, "oracle")
    assert torch.equal(oracle, no_slot)  # the oracle needs no guide slot


def test_the_random_control_draws_from_the_run_and_the_iteration_only():
    guides = torch.randint(0, 3, (20, 10), generator=torch.Generator().manual_seed(0))
    draws = []
    for global_seed in (0, 1):  # the global RNG must not matter
        torch.manual_seed(global_seed)
        draws.append(control_rewards(guides, guides, "random", seed=3, iteration=7))
    assert torch.equal(draws[0], draws[1])
    for other in (dict(seed=4, iteration=7), dict(seed=3, iteration=8)):
        assert not torch.equal(draws[0], control_rewards(guides, guides, "random", **other))


def test_the_random_control_keeps_the_guides_shares_and_ignores_the_moves():
    g = torch.Generator().manual_seed(0)
    truths = torch.randint(0, 3, (400, 50), generator=g)
    guides = torch.where(torch.rand(400, 50, generator=g) < 0.8, truths, 0)  # an informed guide
    guides[:, 45:] = -1                                                      # no guide written
    drawn = control_rewards(guides, truths, "random", seed=1)
    written = guides >= 0
    assert (drawn[~written] == 0).all()
    for polarity, reward in enumerate((0.1, 0.0, -0.1)):
        share = (guides[written] == polarity).float().mean()
        assert abs((drawn[written] == reward).float().mean() - share) < 0.01
    informed = control_rewards(guides, truths, "guide")[written]
    progress = 0.1 * (1 - truths[written]).float()
    correlation = lambda a, b: torch.corrcoef(torch.stack([a, b]))[0, 1]  # noqa: E731
    assert correlation(informed, progress) > 0.5
    assert abs(correlation(drawn[written], progress)) < 0.02


def test_a_controls_advantages_are_the_methods_on_its_rewards():
    """The controls change r_t only: the method's advantages, by hand, on the control's r_t,
    and not the guide's."""
    batch = sg.rollout(research_policy(), [0, 0, 1, 1], True, research_config(),
                       torch.Generator().manual_seed(0))
    for source in ("oracle", "random"):
        cfg = research_config(variant="sg_gr", internal_reward=source, group_size=2, seed=3)
        rewards = rs.internal_rewards(batch, cfg, 2)
        got = rs.iteration_advantages(batch, cfg, 0.5, 2)[0]
        assert torch.allclose(got, hand_advantages(batch, cfg, 0.5, rewards)[0], atol=1e-6)
        assert not torch.allclose(got, hand_advantages(batch, cfg, 0.5)[0]), source


def test_a_control_needs_lambda_and_the_random_one_a_guide_slot(capsys):
    for argv, message in [(["--variant", "sg", "--internal-reward", "oracle"],
                           "--variant sg pays no internal reward"),
                          (["--variant", "grpo", "--internal-reward", "random"],
                           "it needs a guide slot")]:
        with pytest.raises(SystemExit):
            rs.parse_args(argv)
        assert message in capsys.readouterr().err


def test_lambda_follows_the_schedule_for_grpo_with_the_oracle_or_the_critic():
    for reward in ("oracle", "hindsight"):
        for schedule in ("trapezoid", "immediate", "no_anneal"):
            cfg = research_config(variant="grpo", internal_reward=reward, schedule=schedule,
                                  iterations=8)
            assert max(sg.trust_at(cfg, u) for u in range(1, 9)) > 0, (reward, schedule)
    assert max(sg.trust_at(research_config(variant="grpo", iterations=8), u)
               for u in range(1, 9)) == 0  # plain GRPO pays none


def test_hindsight_the_placebo_the_critic_and_the_controls_stay_on_the_policys_device():
    """As the method's own test: with PyTorch's default device "meta", a tensor made without
    naming the policy's device fails the first operation that mixes it with the CPU's."""
    cfg = research_config(variant="sg_gr", schedule="immediate", kl_guide=0.1, kl_action=0.1)
    policy, reference = research_policy(), research_policy()
    state = sg.new_train_state(policy, cfg)
    torch.set_default_device("meta")
    try:
        records = [sg.grpo_iteration(policy, reference, sg.dataclasses.replace(cfg, **kind), state)
                   for kind in ({"guide_advantage": "hindsight"}, {"guide_advantage": "placebo"},
                                {"internal_reward": "hindsight"}, {"internal_reward": "oracle"},
                                {"internal_reward": "random"}, {"guide_advantage": "outcome"})]
    finally:
        torch.set_default_device(None)
    assert all(math.isfinite(r["kl_ref"]) for r in records)


def test_a_seed_whose_demonstrations_are_calibration_mazes_is_refused_in_one_line(capsys):
    """Demonstrations are tasks 10^8 + seed x 10^6 + i: seed 1900's reach the calibration
    mazes (2 x 10^9 on), which only research.Config's checks use."""
    with pytest.raises(SystemExit):
        rs.parse_args(["--seed", "1900"])
    assert "--seed 1900 would clone its prior on the calibration mazes" in capsys.readouterr().err
    assert sg.parse_config(["--seed", "1900"]).seed == 1900  # the method has no such mazes


def test_the_research_command_runs_one_run_as_selfguide_py_does(tmp_path, prior_cache, capsys):
    """python experiments/research.py: selfguide.py's main with the research settings."""
    args = ["--out", str(tmp_path / "run"), "--prior-cache", str(prior_cache), "--iterations",
            "2", "--eval-every", "1"]
    rows = rs.main(TINY_ARGS + args + ["--guide-advantage", "hindsight"])
    assert len(rows) == 4 and (tmp_path / "run" / "log.jsonl").exists()
    # then the prior's fingerprint: its tensors' hash, which any changed weight changes
    fingerprint = rs.prior_fingerprint(rs.parse_args(TINY_ARGS + args))
    assert f"the prior's fingerprint: {fingerprint} " in capsys.readouterr().out
    from safetensors.torch import load_file, save_file
    cfg = rs.parse_args(TINY_ARGS + args)
    weights = load_file(prior_cache / f"prior-{sg.prior_key(cfg)}" / "model.safetensors")
    name = sorted(weights)[0]
    for moved in (0.0, 1e-3):  # the same weights, then one weight moved
        copy = tmp_path / f"copy-{moved}" / f"prior-{sg.prior_key(cfg)}"
        copy.mkdir(parents=True)
        save_file({**weights, name: weights[name] + moved}, copy / "model.safetensors")
        again = rs.prior_fingerprint(sg.dataclasses.replace(cfg, prior_cache=str(copy.parent)))
        assert (again == fingerprint) == (moved == 0.0)
    assert rs.prior_fingerprint(sg.dataclasses.replace(cfg, prior_cache=str(tmp_path))) is None
    with pytest.raises(SystemExit):
        sg.main(TINY_ARGS + args + ["--guide-advantage", "hindsight"])  # not the method's
    assert "invalid choice: 'hindsight'" in capsys.readouterr().err
