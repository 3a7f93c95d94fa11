"""Tests for selfguide.py, in the order the file is written; toy_env's are in
test_toy_env.py, the fixtures and helpers every test file shares in conftest.py.

    python -m pytest -q test_selfguide.py
"""
import json
import math

import pytest
import torch

import selfguide as sg
import toy_env
from conftest import (TINY, TINY_ARGS, fingerprint, hand_advantages, same_weights,
                      tiny_config, tiny_policy, two_hand_built_episodes)
from toy_env import ACTIONS, GUIDES, GridWorld


# --- selfguide: config and command line ---

def test_help_lists_every_setting(capsys):
    import re
    with pytest.raises(SystemExit):
        sg.parse_config(["--help"])
    listed = set(re.findall(r"(?<![\w-])--([a-z][a-z-]*)", capsys.readouterr().out))
    for f in sg.dataclasses.fields(sg.Config):
        assert f.name.replace("_", "-") in listed, f.name


@pytest.mark.parametrize("argv, message", [
    (["--group-size", "0"], "group-size"), (["--n-embd", "30", "--n-head", "4"], "divisible"),
    (["--variant", "ppo"], "invalid choice"), (["--min-distance", "40"], "impossible"),
    (["--iterations", "many"], "invalid int"), (["--lr", "nan"], "--lr must be a finite number"),
    (["--guide-temperature", "nan"], "--guide-temperature must be a finite number"),
    (["--kl-guide", "inf"], "--kl-guide must be a finite number"),
    (["--group-size", "1"], "a group of one rollout has no baseline"),
    (["--max-grad-norm", "0"], "must be positive"), (["--show", "-1"], "count of episodes")])
def test_bad_arguments_give_a_usage_error_not_a_traceback(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        sg.parse_config(argv)
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


def test_the_method_file_names_no_research_variant_and_stays_within_its_size():
    """The report's variants and controls live in experiments/ (research.py composes them
    through Config's seams): no line of selfguide.py's code or strings names one, one comment
    may point there; and the file stays readable in one sitting, the method above its banner
    in at most 780 lines."""
    import io
    import re
    import tokenize
    source = sg.Path(sg.__file__).read_text()
    words = re.compile(r"hindsight|placebo|house|stale|\bdist\b|cue_misjudge|prior_guide_target|"
                       r"kl_guide_exact|per_slot|token_mean|oracle|\binternal_reward\b", re.I)
    named = [(token.start[0], token.string) for token in tokenize.generate_tokens(
        io.StringIO(source).readline) if token.type != tokenize.COMMENT
        and words.search(token.string)]
    assert named == []
    lines = source.splitlines()
    assert len(lines) <= 1100
    assert next(i for i, line in enumerate(lines) if "The method ends here" in line) < 780


def test_the_method_file_reads_in_the_order_an_iteration_runs():
    """Top to bottom: the settings and their checks, the paper's equations, the rollout, the
    advantages, the log-probs, the loss and the update, the iteration; then the banner, and
    below it what one run needs around the method: Stage 0 with its cache first."""
    source = sg.Path(sg.__file__).read_text()
    lines = source.splitlines()
    at = {name: next(i for i, line in enumerate(lines) if line.startswith(f"{kind} {name}(")
                     or line == f"{kind} {name}:")
          for kind, name in [("class", "Config"), ("def", "check_config"),
                             ("def", "guide_to_reward"), ("def", "trust_schedule"),
                             ("def", "composite_return"), ("def", "rollout"),
                             ("def", "group_advantages"), ("def", "step_credit"),
                             ("def", "per_token"), ("def", "iteration_advantages"),
                             ("def", "token_logprobs"), ("def", "grpo_loss"),
                             ("def", "grpo_update"), ("def", "grpo_iteration"),
                             ("def", "train_prior"), ("def", "load_or_train_prior"),
                             ("def", "save_policy"), ("def", "load_policy"), ("def", "train"),
                             ("def", "parse_config"), ("def", "main")]}
    assert list(at.values()) == sorted(at.values())
    banner = next(i for i, line in enumerate(lines) if "The method ends here" in line)
    assert at["grpo_iteration"] < banner < at["train_prior"]


def test_a_setting_outside_its_choices_is_refused_in_python_too():
    """argparse refuses a bad choice on the command line; Config(...) in Python does the same
    (the report's variants are experiments/research.py's Config, not this one's)."""
    with pytest.raises(ValueError, match="--guide-advantage is one of composite, env"):
        sg.Config(guide_advantage="truth")
    with pytest.raises(ValueError, match="--variant is one of grpo, sg, sg_gr"):
        tiny_config(variant="ppo")


def test_paper_faithful_switches_every_guard_off():
    default = sg.parse_config([])
    assert (default.kl_guide, default.internal_return, default.guide_advantage) == (0.1, "mean", "env")
    faithful = sg.parse_config(["--paper-faithful"])
    assert (faithful.kl_guide, faithful.internal_return, faithful.guide_advantage) == \
        (0.0, "sum", "composite")
    assert (default.credit, faithful.credit) == ("step", "trajectory")
    assert (default.guide_temperature, faithful.guide_temperature) == (0.1, 1.0)  # departure 7
    # its settings are the defaults: a flag given beside it still wins
    both = sg.parse_config(["--paper-faithful", "--kl-guide", "0.2", "--credit", "step"])
    assert (both.kl_guide, both.credit, both.internal_return) == (0.2, "step", "sum")
    # a preset, not a setting: in Python the same objective is Config(**PAPER_FAITHFUL)
    assert faithful == sg.Config(**sg.PAPER_FAITHFUL)
    assert "paper_faithful" not in {f.name for f in sg.dataclasses.fields(sg.Config)}


def test_defaults_are_the_familiar_maze_where_the_papers_ordering_shows():
    # experiments/REPORT.md, section 0: chosen on tuning seeds, confirmed on ten fresh ones
    default = sg.parse_config([])
    assert (default.size, default.min_distance, default.max_steps) == (12, 18, 26)
    assert default.cue and default.guide_temperature == 0.1
    assert sg.parse_config(["--no-cue"]).cue is False  # the unfamiliar maze, one flag away


# --- selfguide: tokenizer and policy ---

def test_tokenizer_maps_observations_word_for_word():
    tokenizer = sg.build_tokenizer()
    observation, _ = GridWorld().reset(seed=3)
    ids = tokenizer(observation + " positive north", add_special_tokens=False)["input_ids"]
    assert ids == [sg.WORD_ID[w] for w in observation.split()] + [sg.WORD_ID["positive"],
                                                                   sg.WORD_ID["north"]]
    assert tokenizer.convert_tokens_to_ids("<unk>") == sg.WORD_ID["<unk>"]


def test_policy_is_tiny_dropout_free_and_quiet(capsys):
    policy = tiny_policy()
    config = policy.config
    assert config.resid_pdrop == config.embd_pdrop == config.attn_pdrop == 0.0
    assert 0 <= config.bos_token_id < config.vocab_size and 0 <= config.eos_token_id < config.vocab_size
    default = sg.make_policy(sg.Config())
    assert 5e4 < sum(p.numel() for p in default.parameters()) < 1e6
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_save_pretrained_round_trip_with_auto_classes(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    policy = tiny_policy()
    sg.save_policy(policy, tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    assert tokenizer.get_vocab() == sg.WORD_ID
    tokens = torch.tensor([tokenizer("<bos> <guided> at:1,1 goal:3,3 walls:N neutral east")["input_ids"]])
    assert torch.equal(policy(tokens).logits, loaded(tokens).logits)


def test_load_policy_rejects_a_folder_without_a_model(tmp_path):
    with pytest.raises(SystemExit, match="no saved policy"):
        sg.load_policy(str(tmp_path), tiny_config(), "cpu")


# --- selfguide: Stage 0 prior ---

def test_encoded_demonstration_has_one_slot_per_guide_and_action():
    steps, _ = toy_env.demonstrate(GridWorld(), seed=5)
    for guided in (True, False):
        tokens, slots = sg.encode_episode(steps, guided)
        assert len(tokens) == len(slots) == 2 + len(steps) * (3 + 1 + guided)
        assert slots.count(sg.SLOT_ACTION) == len(steps)
        assert slots.count(sg.SLOT_GUIDE) == (len(steps) if guided else 0)
        assert [sg.WORDS[t] for t, s in zip(tokens, slots) if s == sg.SLOT_ACTION] == \
            [a for _, _, a in steps]
        assert all(sg.WORDS[t] in toy_env.VOCAB or t in (sg.BOS, sg.GUIDED, sg.UNGUIDED)
                   for t, s in zip(tokens, slots) if s == sg.SLOT_CONTEXT)


def test_a_few_cloning_updates_lower_the_loss():
    cfg = tiny_config(prior_episodes=32, prior_epochs=8, prior_batch=16, prior_lr=3e-3)
    tokens, slots = sg.demonstration_corpus(cfg)
    assert tokens.shape == (64, sg.episode_length(cfg))
    losses = list(sg.clone_demonstrator(tiny_policy(), tokens, slots, cfg, "cpu"))
    assert sum(losses[-4:]) / 4 < 0.8 * sum(losses[:4]) / 4
    assert len(losses) == 8 * 4  # every update of every epoch


def test_prior_is_cached_by_its_settings(tmp_path, monkeypatch):
    cfg = tiny_config(prior_cache=str(tmp_path), prior_episodes=8)
    first = sg.load_or_train_prior(cfg, "cpu")
    assert len(list(tmp_path.iterdir())) == 1
    monkeypatch.setattr(sg, "train_prior", lambda *args: pytest.fail("cloned again"))
    again = sg.load_or_train_prior(cfg, "cpu")  # from the cache
    for a, b in zip(first.parameters(), again.parameters()):
        assert torch.equal(a, b)
    assert sg.prior_key(cfg) != sg.prior_key(tiny_config(prior_cache=str(tmp_path), seed=1))


def test_a_cached_prior_cut_short_is_cloned_again_not_a_traceback(tmp_path, capsys):
    """A cache entry renamed into place whole can still be cut (a full disk, a copy, a crash
    before the data reached the disk): the next run says so in one line and clones it again."""
    cfg = tiny_config(prior_cache=str(tmp_path), prior_episodes=8)
    first = sg.load_or_train_prior(cfg, "cpu")
    weights = tmp_path / f"prior-{sg.prior_key(cfg)}" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:weights.stat().st_size // 2])
    again = sg.load_or_train_prior(cfg, "cpu")
    assert "cannot be read" in capsys.readouterr().out
    assert same_weights(first, again)  # the same settings clone the same prior
    assert same_weights(sg.load_policy(weights.parent, cfg, "cpu"), first)  # whole again
    (weights.parent / "config.json").write_text("{")  # a cut config: the same
    assert same_weights(sg.load_or_train_prior(cfg, "cpu"), first)


def test_a_kill_between_writing_and_renaming_leaves_no_half_written_prior(tmp_path, monkeypatch):
    cfg = tiny_config(prior_cache=str(tmp_path), prior_episodes=8)
    folder = tmp_path / f"prior-{sg.prior_key(cfg)}"

    def killed(*args):
        raise KeyboardInterrupt  # the moment between writing the files and renaming them

    monkeypatch.setattr(sg.os, "rename", killed)
    with pytest.raises(KeyboardInterrupt):
        sg.load_or_train_prior(cfg, "cpu")
    assert not folder.exists() and list(tmp_path.iterdir()) == []  # nothing that looks complete
    monkeypatch.undo()
    sg.load_or_train_prior(cfg, "cpu")
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder.name]
    sg.load_policy(folder, cfg, "cpu")


def test_a_kill_while_saving_into_a_run_folder_leaves_every_file_whole(tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM
    old, new = tiny_policy(seed=0), tiny_policy(seed=1)
    sg.save_policy(old, tmp_path)
    real_replace, moved = sg.os.replace, []

    def killed_after_two(source, target):
        if len(moved) == 2:
            raise KeyboardInterrupt
        moved.append(target)
        real_replace(source, target)

    monkeypatch.setattr(sg.os, "replace", killed_after_two)
    with pytest.raises(KeyboardInterrupt):
        sg.save_policy(new, tmp_path)
    monkeypatch.undo()
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())
    assert same_weights(AutoModelForCausalLM.from_pretrained(tmp_path), old)  # weights go last
    sg.save_policy(new, tmp_path)
    assert same_weights(AutoModelForCausalLM.from_pretrained(tmp_path), new)


def test_a_prior_another_process_cached_meanwhile_stays_whole(tmp_path, monkeypatch):
    """Two runs clone one prior at once: the first to finish publishes it; the other keeps
    using its own copy (the same settings clone the same prior) and leaves the cache whole."""
    cfg = tiny_config(prior_cache=str(tmp_path), prior_episodes=8)
    folder = tmp_path / f"prior-{sg.prior_key(cfg)}"
    other = tiny_policy(seed=7)
    real_clone = sg.clone_demonstrator

    def other_process_publishes_meanwhile(*args, **kwargs):
        sg.save_policy(other, folder, whole=True)
        return real_clone(*args, **kwargs)

    monkeypatch.setattr(sg, "clone_demonstrator", other_process_publishes_meanwhile)
    mine = sg.load_or_train_prior(cfg, "cpu")
    assert not same_weights(mine, other)
    assert same_weights(sg.load_policy(folder, cfg, "cpu"), other)
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder.name]


def test_two_processes_cloning_the_same_prior_at_once_leave_one_whole_copy(tmp_path):
    """Two `--eval-only` runs clone one prior at the same moment (each waits at a barrier for
    the other to finish cloning before publishing), each its own copy (its weights moved by
    noise seeded by its pid, so the copies differ): both finish, and the cache holds one
    whole copy, the one of the run that published first."""
    import subprocess
    import sys
    cache, barrier = tmp_path / "priors", tmp_path / "barrier"
    barrier.mkdir()
    code = f"""
import os, time, torch
from pathlib import Path
import selfguide as sg
from conftest import fingerprint
real_train, real_load = sg.train_prior, sg.load_or_train_prior

def train_prior(cfg, device):
    policy, losses = real_train(cfg, device)
    with torch.no_grad():  # this process's own copy
        noise = torch.Generator().manual_seed(os.getpid())
        for weight in policy.parameters():
            weight.add_(0.01 * torch.randn(weight.shape, generator=noise))
    (Path({str(barrier)!r}) / str(os.getpid())).touch()
    deadline = time.time() + 60
    while len(list(Path({str(barrier)!r}).iterdir())) < 2 and time.time() < deadline:
        time.sleep(0.05)
    return policy, losses

def load_or_train_prior(cfg, device):
    prior = real_load(cfg, device)
    print("evaluated", fingerprint(prior))
    return prior

sg.train_prior, sg.load_or_train_prior = train_prior, load_or_train_prior
sg.main(['--eval-only', '--prior-cache', {str(cache)!r}] + {TINY_ARGS!r})
"""
    runs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=sg.Path(__file__).parent)
            for _ in range(2)]
    results = [run.communicate(timeout=180) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], results
    assert len(list(barrier.iterdir())) == 2  # both cloned a copy of their own
    cfg = sg.parse_config(TINY_ARGS + ["--prior-cache", str(cache)])
    assert [p.name for p in cache.iterdir()] == [f"prior-{sg.prior_key(cfg)}"]  # one, whole:
    published = fingerprint(sg.load_policy(cache / f"prior-{sg.prior_key(cfg)}", cfg, "cpu"))
    used = [line.split()[1] for out, _ in results for line in out.splitlines()
            if line.startswith("evaluated")]
    assert len(used) == 2 and published in used


# --- selfguide: rollout ---

def test_slot_vocab_mask_lets_each_slot_write_only_its_words():
    mask = sg.slot_vocab_mask("cpu")
    assert mask.shape == (3, len(sg.WRITABLE_IDS)) and mask.dtype == torch.bool
    writable = [sg.WORDS[i] for i in sg.WRITABLE_IDS]
    assert [w for w, ok in zip(writable, mask[sg.SLOT_GUIDE]) if ok] == list(GUIDES)
    assert [w for w, ok in zip(writable, mask[sg.SLOT_ACTION]) if ok] == list(ACTIONS)
    assert mask[sg.SLOT_CONTEXT].all()
    assert sg.slot_vocab_mask("meta").device.type == "meta"  # made where the logits are


@pytest.mark.parametrize("guided", [True, False])
def test_cached_rollout_logprobs_equal_a_full_forward_pass(guided):
    cfg = tiny_config()
    policy = tiny_policy()
    batch = sg.rollout(policy, list(range(12)), guided, cfg, torch.Generator().manual_seed(0))
    policy.train()  # as an update might: with dropout 0 the training pass scores the same
    with torch.no_grad():
        full = sg.token_logprobs(policy, batch.tokens, batch.slots, cfg.temperature)
    assert torch.allclose(full, batch.logprobs, atol=1e-5)
    assert (batch.logprobs[batch.slots != sg.SLOT_CONTEXT] < 0).all()


@pytest.mark.parametrize("guided", [True, False])
def test_slots_hold_only_their_words_and_cover_exactly_guides_and_actions(guided):
    cfg = tiny_config(max_steps=12)
    batch = sg.rollout(tiny_policy(max_steps=12), list(range(16)), guided, cfg,
                       torch.Generator().manual_seed(2))
    guide_tokens = batch.tokens[batch.slots == sg.SLOT_GUIDE]
    action_tokens = batch.tokens[batch.slots == sg.SLOT_ACTION]
    assert set(guide_tokens.tolist()) <= set(sg.GUIDE_IDS)
    assert set(action_tokens.tolist()) <= set(sg.ACTION_IDS)
    per_episode = (batch.slots != sg.SLOT_CONTEXT).sum(1)
    assert torch.equal(per_episode, batch.steps * (2 if guided else 1))
    # every observation word of every step is context, never trained
    observation_ids = {sg.WORD_ID[w] for w in toy_env.VOCAB}
    is_observation = torch.isin(batch.tokens, torch.tensor(sorted(observation_ids)))
    assert (batch.slots[is_observation] == sg.SLOT_CONTEXT).all()
    assert is_observation.sum(1).tolist() == (batch.steps * 3).tolist()


def test_rollout_replays_in_the_environment():
    """The actions in the token stream, replayed in a fresh env, give the recorded outcome,
    and each guide's truth is the true progress of the move before it."""
    cfg = tiny_config(max_steps=10)
    seeds = list(range(24))
    batch = sg.rollout(tiny_policy(max_steps=10), seeds, True, cfg, torch.Generator().manual_seed(3))
    assert batch.steps.min() < batch.steps.max()  # some end early: the columns past the end
    for i, seed in enumerate(seeds):
        env = cfg.make_env()
        positions = [env.reset(seed=seed)[1]["position"]]
        actions = [sg.WORDS[t] for t, s in zip(batch.tokens[i].tolist(), batch.slots[i].tolist())
                   if s == sg.SLOT_ACTION]
        truths, revisits, reward = [-1], [False], 0.0
        for action in actions:
            _, r, _, _, info = env.step(action)
            reward += r
            truths.append(GUIDES.index(toy_env.true_polarity(info["progress"])))
            moved_to = info["position"]
            revisits.append(moved_to != positions[-1] and moved_to in positions)
            positions.append(moved_to)
        steps = len(actions)
        assert steps == batch.steps[i] and reward == batch.env_return[i]
        assert batch.truths[i, :steps].tolist() == truths[:steps]
        assert sg.revisit_moves(batch.cells)[i].tolist() == revisits[:steps] + [False] * (
            batch.cells.shape[1] - steps)  # the loops, read off the cells
        assert (batch.truths[i, steps:] == -1).all()
        assert (batch.guides[i, steps:] == -1).all() and (batch.guides[i, :steps] >= 0).all()
        # the cell each observation names, as row x MAX_SIZE + column
        cells = [r * toy_env.MAX_SIZE + c for r, c in positions[:steps]]
        assert batch.cells[i, :steps].tolist() == cells and (batch.cells[i, steps:] == -1).all()


@pytest.mark.parametrize("guided", [True, False])
def test_each_stream_opens_with_its_format_word_and_an_unguided_one_holds_no_guide(guided):
    cfg = tiny_config()
    batch = sg.rollout(tiny_policy(), list(range(6)), guided, cfg, torch.Generator().manual_seed(0))
    opening = [sg.BOS, sg.GUIDED if guided else sg.UNGUIDED]
    assert batch.tokens[:, :2].tolist() == [opening] * 6
    written = batch.guides >= 0
    assert written.any() == guided
    steps = torch.arange(batch.guides.shape[1])[None] < batch.steps[:, None]  # (N, T) played
    assert torch.equal(written, steps & guided)  # a guide at every step played, and only there


def test_columns_after_the_last_step_played_hold_no_guide_truth_or_cell(monkeypatch):
    """Every episode ends after 3 moves (the environment's limit) in a horizon of 8: the
    rollout stops there, and the 5 columns it never reached read "none" (-1, False)."""
    cfg = tiny_config(max_steps=8)
    monkeypatch.setattr(sg.Config, "make_env", lambda c: toy_env.GridWorld(
        c.size, c.wall_prob, c.min_distance, max_steps=3, cue=c.cue))
    batch = sg.rollout(tiny_policy(max_steps=8), list(range(6)), True, cfg,
                       torch.Generator().manual_seed(0))
    assert batch.steps.tolist() == [3] * 6 and batch.guides.shape == (6, 8)
    assert (batch.guides[:, :3] >= 0).all() and (batch.guides[:, 3:] == -1).all()
    assert (batch.truths[:, 1:3] >= 0).all() and (batch.truths[:, 3:] == -1).all()
    assert (batch.cells[:, :3] >= 0).all() and (batch.cells[:, 3:] == -1).all()


def test_every_tensor_the_method_makes_is_on_the_policys_device(monkeypatch):
    """A CPU stand-in for a CUDA run: with PyTorch's default device set to "meta" (tensors
    without data), a tensor made without naming the policy's device lands on meta and the
    first operation mixing it with the policy's fails. A guided rollout, an evaluation, its
    advantages and a GRPO iteration with both KL terms all run, and give their results on the
    policy's device (the CPU)."""
    cfg = tiny_config(variant="sg_gr", schedule="immediate", kl_guide=0.1, kl_action=0.1)
    policy, reference = tiny_policy(), tiny_policy()
    state = sg.new_train_state(policy, cfg)
    torch.set_default_device("meta")
    try:
        batch = sg.rollout(policy, list(range(8)), True, cfg, torch.Generator().manual_seed(0))
        metrics = sg.evaluate(policy, cfg, True, greedy=False)
        advantages = [sg.iteration_advantages(batch, cfg, 0.5)]
        record = sg.grpo_iteration(policy, reference, cfg, state)
    finally:
        torch.set_default_device(None)
    assert {t.device.type for t in vars(batch).values()} == {"cpu"}
    assert {t.device.type for pair in advantages for t in pair} == {"cpu"}
    assert 0 <= metrics["success"] <= 1 and math.isfinite(record["kl_ref"])


def test_same_seed_gives_identical_rollouts_and_greedy_ignores_the_generator():
    cfg = tiny_config()
    policy = tiny_policy()
    runs = [sg.rollout(policy, list(range(8)), True, cfg, torch.Generator().manual_seed(s))
            for s in (4, 4, 5)]
    assert torch.equal(runs[0].tokens, runs[1].tokens)
    assert not torch.equal(runs[0].tokens, runs[2].tokens)
    greedy = [sg.rollout(policy, list(range(8)), True, cfg, torch.Generator().manual_seed(s),
                         greedy=True) for s in (4, 5)]
    assert torch.equal(greedy[0].tokens, greedy[1].tokens)


# --- selfguide: Self-Guide pieces (guide -> reward, trust schedule, composite return) ---

@pytest.mark.parametrize("guide, reward", [
    ("positive", 0.1), ("neutral", 0.0), ("negative", -0.1), ("unsure", 0.0), ("", 0.0),
    (None, 0.0)])
def test_guide_to_reward(guide, reward):
    assert sg.guide_to_reward(guide) == reward


@pytest.mark.parametrize("kind, corners", [
    # the paper's 80 iterations: 0-40 warm-up, 40-50 up, 50-70 full, 70-80 down
    ("trapezoid", {1: 0.0, 40: 0.0, 45: 0.5, 50: 1.0, 60: 1.0, 70: 1.0, 75: 0.5, 80: 0.0}),
    ("no_anneal", {1: 0.0, 40: 0.0, 45: 0.5, 50: 1.0, 70: 1.0, 80: 1.0}),
    ("immediate", {1: 1.0, 40: 1.0, 80: 1.0}),
    ("never", {1: 0.0, 50: 0.0, 80: 0.0})])
def test_trust_schedule_corners(kind, corners):
    for iteration, trust in corners.items():
        assert sg.trust_schedule(iteration, 80, kind) == pytest.approx(trust)
        if kind == "trapezoid":  # the default kind is the paper's trapezoid
            assert sg.trust_schedule(iteration, 80) == pytest.approx(trust)


def test_lambda_follows_the_schedule_only_where_an_internal_reward_is_paid():
    """trust_at: the full method follows --schedule; GRPO w/ SG, and GRPO, keep lambda = 0 on
    every iteration, whatever the schedule (GRPO with a control: experiments/test_research)."""
    for variant, paid in [("sg_gr", True), ("sg", False), ("grpo", False)]:
        for schedule in ("trapezoid", "immediate", "no_anneal"):
            cfg = tiny_config(variant=variant, schedule=schedule, iterations=8)
            trust = [sg.trust_at(cfg, u) for u in range(1, 9)]
            assert (max(trust) > 0) == paid and (paid or trust == [0.0] * 8), (variant, schedule)


def test_a_run_of_guidance_only_logs_lambda_zero_at_every_iteration():
    """GRPO w/ SG trains with lambda = 0 whatever --schedule says (trust_at, not the bare
    schedule): its log's trust is 0 on every iteration of the trapezoid, the full method's not."""
    cfg = tiny_config(variant="sg", iterations=8, eval_every=8)
    records = sg.train(tiny_policy(), tiny_policy(seed=1), cfg)
    assert [r["trust"] for r in records] == [0.0] * 8
    full, policy = sg.dataclasses.replace(cfg, variant="sg_gr"), tiny_policy()
    state = sg.new_train_state(policy, full)
    state.iteration = 5  # iteration 6 of 8: lambda 1 on the trapezoid
    assert sg.grpo_iteration(policy, tiny_policy(seed=1), full, state)["trust"] == 1.0


def test_trust_schedule_enter_at_moves_the_rise_and_rejects_unknown_kinds():
    # the paper's "reward enters at iteration 15" of 80
    assert sg.trust_schedule(15, 80, "trapezoid", enter_at=15 / 80) == 0.0
    assert sg.trust_schedule(20, 80, "trapezoid", enter_at=15 / 80) == pytest.approx(0.5)
    assert sg.trust_schedule(25, 80, "trapezoid", enter_at=15 / 80) == 1.0
    with pytest.raises(ValueError, match="trapezoid"):
        sg.trust_schedule(1, 80, "cosine")


def test_step_rewards_read_each_written_guide():
    guides = torch.tensor([[0, 1, 2, -1], [2, 2, -1, -1]])  # positive, neutral, negative, none
    assert torch.allclose(sg.step_rewards(guides),
                          torch.tensor([[0.1, 0.0, -0.1, 0.0], [-0.1, -0.1, 0.0, 0.0]]))


def test_step_rewards_stay_on_the_device_of_the_guides():
    guides = torch.tensor([[0, 2, -1]], device="meta")  # a device without data: shapes only
    assert sg.step_rewards(guides).device.type == "meta"


def test_composite_return_and_the_length_neutral_mean():
    env_return = torch.tensor([1.0, 0.0])
    rewards = torch.tensor([[0.1, 0.1, -0.1, 0.0], [0.1, 0.1, 0.1, 0.1]])
    steps = torch.tensor([3, 4])
    total, internal = sg.composite_return(env_return, rewards, trust=0.5)
    assert torch.allclose(internal, torch.tensor([0.1, 0.4]))
    assert torch.allclose(total, torch.tensor([1.05, 0.2]))
    total, internal = sg.composite_return(env_return, sg.length_neutral(rewards, steps), 1.0)
    assert torch.allclose(internal, torch.tensor([0.1 / 3, 0.1]))
    assert torch.allclose(total, torch.tensor([1 + 0.1 / 3, 0.1]))
    empty = sg.length_neutral(torch.tensor([[0.0, 0.0]]), torch.tensor([0]))  # no step: no NaN
    assert torch.equal(empty, torch.zeros(1, 2))
    one = sg.length_neutral(torch.tensor([[0.1, 0.0]]), torch.tensor([1]))  # one step: as is
    assert torch.equal(one, torch.tensor([[0.1, 0.0]]))


# --- selfguide: GRPO advantages and loss ---

# The module docstring's objective, written out as plain Python with none of selfguide's
# helpers: each token's advantage, the KL's weight and the sampling temperatures, for the
# default run and for --paper-faithful.

G_OF = {0: 0.1, 1: 0.0, 2: -0.1}  # g(z): positive, neutral, negative
DOCSTRING_OBJECTIVE = """\
Iteration u of U = 150; rollout i of a group of G = 8 on one task, T_i moves, R_env_i in {0, 1}:

    lambda(u) = 0 for u <= U/2 (the first half is GRPO w/ SG), rising linearly to 1 at 5U/8,
                1 until 7U/8, falling linearly to 0 at U                (the trapezoid)
    r_i,t     = g(z_i,t) / T_i                          (each reward over the episode's length)
    A_env_i   = (R_env_i - mean_G R_env) / (std_G R_env + eps), 0 where the group's are equal
    action a_i,t: A_env_i + lambda(u) (S_i,t - mean_G S_.,t) / (std_G I + eps)
                  S_i,t = r_i,t+1 + r_i,t+2 + ... (0 past the end), I_j = sum_t r_j,t (z_1's
                  too); the second term 0 where the group's I are equal
    guide z_i,t:  A_env_i
    loss, per minibatch (8 optimiser steps an iteration: 2 passes of 4 minibatches): the mean
          over its written tokens w of -min(rho_w A_w, clip(rho_w, 0.8, 1.2) A_w)
          + beta_w (e^x - x - 1), rho_w = pi(w) / pi_old(w), x = log pi_prior(w) - log pi(w),
          each pi at w's sampling temperature (guides 0.1, actions 1); beta 0.1 on guides, 0
          on actions.
"""
DOCSTRING_PAPER = """\
    r_i,t = g(z_i,t),  R_i = R_env_i + lambda(u) sum_t r_i,t
    every token of rollout i, guide and action: (R_i - mean_G R) / (std_G R + eps), 0 where
    the group's R are equal; beta 0; guides sampled at temperature 1.
"""  # the formulas the docstring writes, which the functions below implement on their own


def docstring_lambda(u, total):
    """0 for u <= U/2, linear to 1 at 5U/8, 1 until 7U/8, linear to 0 at U."""
    f = u / total
    return min(max((f - 0.5) / 0.125, 0.0), 1.0, max((1.0 - f) / 0.125, 0.0))


def mean(values):
    return sum(values) / len(values)


def std(values):  # the population std
    m = mean(values)
    return (sum((v - m) ** 2 for v in values) / len(values)) ** 0.5


def docstring_advantages(batch, G, lam, paper_faithful=False, eps=1e-6):
    """{(i, "guide" | "action", t): advantage} as the docstring writes it."""
    n, horizon = batch.guides.shape
    steps, success = batch.steps.tolist(), batch.env_return.tolist()
    guides = batch.guides.tolist()
    out = {}
    for first in range(0, n, G):
        group = range(first, first + G)
        if paper_faithful:  # R_i = R_env_i + lambda sum_t g(z_i,t), on every token
            R = {i: success[i] + lam * sum(G_OF[z] for z in guides[i] if z >= 0) for i in group}
            flat = len(set(R.values())) == 1
            for i in group:
                a = 0.0 if flat else (R[i] - mean(list(R.values()))) / (std(list(R.values())) + eps)
                for t in range(steps[i]):
                    out[(i, "guide", t)] = out[(i, "action", t)] = a
            continue
        r = {i: [G_OF[z] / steps[i] if z >= 0 else 0.0 for z in guides[i]] for i in group}
        envs = [success[i] for i in group]
        I = [sum(r[i]) for i in group]
        for i in group:
            a_env = 0.0 if len(set(envs)) == 1 else (success[i] - mean(envs)) / (std(envs) + eps)
            for t in range(steps[i]):
                S = {j: sum(r[j][t + 1:]) for j in group}
                internal = 0.0 if len(set(I)) == 1 else \
                    (S[i] - mean(list(S.values()))) / (std(I) + eps)
                out[(i, "action", t)] = a_env + lam * internal
                out[(i, "guide", t)] = a_env
    return out


def token_advantages_by_step(tokens_advantages, slots):
    """{(i, "guide" | "action", t): the advantage on that token} read off a stream."""
    out = {}
    for i, row in enumerate(slots.tolist()):
        t = 0
        for position, slot in enumerate(row):
            if slot == sg.SLOT_GUIDE:
                out[(i, "guide", t)] = tokens_advantages[i, position].item()
            elif slot == sg.SLOT_ACTION:
                out[(i, "action", t)] = tokens_advantages[i, position].item()
                t += 1
    return out


def docstring_iteration(monkeypatch, cfg, iteration):
    """One grpo_iteration of `cfg` at `iteration` from a policy and a prior that differ: its
    rollouts, what it handed the update, and its first minibatch's loss and the policy's
    weights then (the first minibatch's token_logprobs and grpo_loss calls)."""
    seen = {"logprob_calls": []}
    real_rollout, real_update, real_loss = sg.rollout, sg.grpo_update, sg.grpo_loss
    real_logprobs = sg.token_logprobs

    def rollout(*args, **kwargs):  # the first is the training rollouts (not the evaluation's)
        batch = real_rollout(*args, **kwargs)
        seen.setdefault("batch", batch)
        return batch

    def update(policy, optimizer, rollouts, token_advantages, reference, kl_weights, cfg, *rest):
        seen.update(advantages=token_advantages, kl_weights=kl_weights, cfg=cfg)
        return real_update(policy, optimizer, rollouts, token_advantages, reference, kl_weights,
                           cfg, *rest)
    def logprobs(model, tokens, slots, *args):  # each call, with the weights it saw
        seen["logprob_calls"].append((sg.copy.deepcopy(model), tokens, slots))
        return real_logprobs(model, tokens, slots, *args)

    def loss(*args):
        result = real_loss(*args)
        seen.setdefault("loss", (args, result[0].item()))
        seen.setdefault("minibatches", []).append(len(args[0]))
        return result
    monkeypatch.setattr(sg, "rollout", rollout)
    monkeypatch.setattr(sg, "grpo_update", update)
    monkeypatch.setattr(sg, "token_logprobs", logprobs)
    monkeypatch.setattr(sg, "grpo_loss", loss)
    torch.manual_seed(0)
    policy, prior = sg.make_policy(cfg), sg.make_policy(cfg)
    state = sg.new_train_state(policy, cfg)
    state.iteration = iteration - 1
    record = sg.grpo_iteration(policy, prior, cfg, state)
    return seen, record


def docstring_logprobs(model, tokens, slots, guide_temperature, action_temperature):
    """log pi(w) of each written token by a full forward, over the slot's words at its
    sampling temperature: (N, L), 0 in context."""
    with torch.no_grad():
        logits = model(tokens).logits[..., sg.WRITABLE_IDS]                     # (N, L, W)
    out = torch.zeros(tokens.shape)
    for i, p in (slots != sg.SLOT_CONTEXT).nonzero().tolist():
        slot = slots[i, p].item()
        words = range(3) if slot == sg.SLOT_GUIDE else range(3, 7)
        temperature = guide_temperature if slot == sg.SLOT_GUIDE else action_temperature
        logp = torch.log_softmax(logits[i, p - 1, list(words)] / temperature, -1)
        out[i, p] = logp[sg.WRITABLE_IDS.index(tokens[i, p].item()) - words[0]]
    return out


@pytest.mark.parametrize("iteration", [60, 75, 80, 100, 140, 150])
@pytest.mark.parametrize("paper_faithful", [False, True])
def test_the_docstrings_objective_is_what_an_iteration_trains(monkeypatch, iteration,
                                                              paper_faithful):
    """The default Config (and Config(**PAPER_FAITHFUL)) at iterations on every phase of the
    trapezoid: lambda, each token's advantage, the KL weights and the sampling temperatures
    an iteration hands its update are the docstring's."""
    objective = sg.PAPER_FAITHFUL if paper_faithful else {}  # the rest a small maze, so that
    cfg = sg.Config(size=5, wall_prob=0.2, min_distance=4, max_steps=8, tasks_per_iter=6,
                    eval_every=1000, **objective)  # a random policy succeeds now and then
    text = " ".join(sg.__doc__.split())  # the docstring's formulas are the ones written here
    assert " ".join(DOCSTRING_OBJECTIVE.split()) in text
    assert " ".join(DOCSTRING_PAPER.split()) in text
    seen, record = docstring_iteration(monkeypatch, cfg, iteration)
    lam = docstring_lambda(iteration, 150)
    assert record["trust"] == pytest.approx(lam, abs=1e-12)
    assert lam == pytest.approx({60: 0, 75: 0, 80: 4 / 15, 100: 1, 140: 8 / 15, 150: 0}[iteration])
    expected = docstring_advantages(seen["batch"], 8, lam, paper_faithful)
    got = token_advantages_by_step(seen["advantages"], seen["batch"].slots)
    assert got.keys() == expected.keys()
    assert max(abs(got[k] - expected[k]) for k in got) < 1e-4
    assert len({round(v, 6) for v in got.values()}) > 3  # advantages that differ, not all 0
    if lam > 0:  # the internal term moves some token's advantage: the comparison reads it
        without = docstring_advantages(seen["batch"], 8, 0.0, paper_faithful)
        assert max(abs(expected[k] - without[k]) for k in expected) > 1e-2
    # the loss line, on the first minibatch, as the docstring computes it: each pi at its
    # token's sampling temperature (guides 0.1, actions 1; 1 and 1 paper-faithful), the KL's
    # x against the prior, beta 0.1 on guides and 0 on actions (0 paper-faithful)
    guide_t, beta_guide = (1.0, 0.0) if paper_faithful else (0.1, 0.1)
    (new, old, advantages, slots, clip, reference, weights), loss = seen["loss"]
    model, tokens, _ = seen["logprob_calls"][0 if paper_faithful else 1]  # the update's first
    written = slots != sg.SLOT_CONTEXT
    pi = docstring_logprobs(model, tokens, slots, guide_t, 1.0)
    assert torch.allclose(torch.where(written, new, 0.0), pi, atol=1e-4)
    assert torch.allclose(torch.where(written, old, 0.0), pi, atol=1e-4)  # ratio 1 at first
    rho = torch.exp(pi - old)
    per_token = -torch.min(rho * advantages, rho.clamp(0.8, 1.2) * advantages)
    if not paper_faithful:
        prior = seen["logprob_calls"][0][0]  # step 3: the prior's log-probs
        x = docstring_logprobs(prior, tokens, slots, guide_t, 1.0) - pi
        beta = torch.where(slots == sg.SLOT_GUIDE, beta_guide, 0.0)
        per_token = per_token + beta * (x.exp() - x - 1)
        assert torch.allclose(torch.where(written, reference, 0.0), x + pi, atol=1e-4)
    else:
        assert reference is None and weights is None and seen["kl_weights"] is None
    assert loss == pytest.approx(per_token[written].mean().item(), rel=1e-4, abs=1e-6)
    assert clip == 0.2 and seen["cfg"].group_size == 8 and cfg.iterations == 150
    assert seen["minibatches"] == [len(seen["batch"].tokens) // 4] * 8  # the 8 steps' means


def test_group_advantages_hand_computed():
    returns = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.5, 0.5], [2.0, 0.0, 1.0, 1.0]])
    advantages = sg.group_advantages(returns, eps=0.0)
    std0 = math.sqrt(3 / 16)  # population std of (1, 0, 0, 0)
    assert torch.allclose(advantages[0], torch.tensor([0.75, -0.25, -0.25, -0.25]) / std0)
    assert torch.equal(advantages[1], torch.zeros(4))  # zero variance: exactly zero, no NaN
    assert torch.allclose(advantages[2], torch.tensor([1.0, -1.0, 0.0, 0.0]) / math.sqrt(0.5))
    assert torch.allclose(sg.group_advantages(returns, scale=False)[2],
                          torch.tensor([1.0, -1.0, 0.0, 0.0]))  # Dr. GRPO: mean only


def test_group_advantages_zero_variance_with_rounding_and_small_groups():
    tenth = torch.full((1, 8), 0.1) * 3  # equal values whose mean rounds differently
    assert torch.equal(sg.group_advantages(tenth), torch.zeros(1, 8))
    assert torch.allclose(sg.group_advantages(torch.tensor([[1.0, 0.0]])),
                          torch.tensor([[1.0, -1.0]]), atol=1e-5)
    assert torch.equal(sg.group_advantages(torch.tensor([[3.0]])), torch.zeros(1, 1))
    assert not torch.isnan(sg.group_advantages(torch.zeros(4, 8))).any()
    # returns a hair apart: eps keeps the advantages finite, below the unit size, signed right
    near = sg.group_advantages(torch.tensor([[1e-7, -1e-7]]))
    assert (near.abs() < 1).all() and near[0, 0] > 0 > near[0, 1]


def test_step_credit_hand_computed():
    """Two rollouts, three steps, lambda 1. A_env = (1, -1); internal returns (0.1, -0.1),
    std 0.1. The actions' rewards-to-go (0, -0.1, 0) and (-0.1, 0, 0) minus their per-step
    mean (-0.05, -0.05, 0), over 0.1, are (0.5, -0.5, 0) and (-0.5, 0.5, 0)."""
    env_advantages = torch.tensor([1.0, -1.0])  # R_env = (1, 0): mean 0.5, std 0.5
    rewards = torch.tensor([[0.1, 0.1, -0.1], [0.0, -0.1, 0.0]])
    action = sg.step_credit(env_advantages, rewards, 1.0, 2, eps=0.0)
    guide = sg.step_credit(env_advantages, rewards, 1.0, 2, eps=0.0, own=True)
    torch.testing.assert_close(action, torch.tensor([[1.5, 0.5, 1.0], [-1.5, -0.5, -1.0]]))
    # a guide z_t is credited from its own reward on: to-go (0.1, 0, -0.1) and (-0.1, -0.1, 0)
    torch.testing.assert_close(guide, torch.tensor([[2.0, 1.5, 0.5], [-2.0, -1.5, -0.5]]))
    # Dr. GRPO: no division; lambda weighs the internal part
    action = sg.step_credit(torch.tensor([0.5, -0.5]), rewards, 0.5, 2, scale=False)
    torch.testing.assert_close(action, torch.tensor([[0.525, 0.475, 0.5], [-0.525, -0.475, -0.5]]))


def test_step_credit_equals_reward_to_go_with_a_per_step_baseline():
    """Against a loop over groups and steps written from the definition in the docstring."""
    g = torch.Generator().manual_seed(0)
    group_size, horizon = 4, 6
    env_advantages = torch.randn(12, generator=g)  # whatever the environment's advantages are
    rewards = 0.1 * torch.randint(-1, 2, (12, horizon), generator=g).float()
    rewards[3, 4:] = 0.0  # an episode that ended after four steps
    trust = 0.7
    action = sg.step_credit(env_advantages, rewards, trust, group_size)
    guide = sg.step_credit(env_advantages, rewards, trust, group_size, own=True)
    for first in range(0, 12, group_size):
        members = range(first, first + group_size)
        std = rewards[first:first + group_size].sum(1).std(unbiased=False).item()
        for t in range(horizon):
            to_go = {i: rewards[i, t + 1:].sum().item() for i in members}   # judges a_t on
            own_on = {i: rewards[i, t:].sum().item() for i in members}      # z_t's own on
            for i in members:
                expected = env_advantages[i].item() + trust * (
                    to_go[i] - sum(to_go.values()) / group_size) / (std + 1e-6)
                assert action[i, t].item() == pytest.approx(expected, abs=1e-4)
                expected = env_advantages[i].item() + trust * (
                    own_on[i] - sum(own_on.values()) / group_size) / (std + 1e-6)
                assert guide[i, t].item() == pytest.approx(expected, abs=1e-4)


def test_step_credit_is_exactly_the_env_advantage_at_lambda_zero_or_for_a_constant_guide():
    g = torch.Generator().manual_seed(1)
    env_advantages = torch.randn(8, generator=g)
    rewards = 0.1 * torch.randint(-1, 2, (8, 5), generator=g).float()
    action = sg.step_credit(env_advantages, rewards, 0.0, 4)
    guide = sg.step_credit(env_advantages, rewards, 0.0, 4, own=True)
    assert torch.equal(action, env_advantages[:, None].expand(-1, 5))
    assert torch.equal(guide, env_advantages[:, None].expand(-1, 5))
    # internal returns a hair apart: eps keeps the internal part finite and signed right
    tiny = torch.tensor([[0.0, 1e-7], [0.0, 0.0]])  # r_1, which judges a_0
    action = sg.step_credit(torch.zeros(2), tiny, 1.0, 2)
    assert (action.abs() < 1).all() and action[0, 0] > 0 > action[1, 0]
    # a guide that says the same every step of every rollout: no internal signal at all
    action = sg.step_credit(env_advantages, torch.full((8, 5), 0.1), 1.0, 4)
    assert torch.equal(action, env_advantages[:, None].expand(-1, 5))


def test_per_token_reads_each_tokens_step_off_the_slots():
    C, G, A = sg.SLOT_CONTEXT, sg.SLOT_GUIDE, sg.SLOT_ACTION
    slots = torch.tensor([[C, C, C, C, C, G, A, C, C, C, G, A, C, C, C, G, A],
                          [C, C, C, C, A, C, C, C, A, C, C, C, C, C, C, C, C]])  # unguided, 2 steps
    action = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    guide = -action
    tokens = sg.per_token(slots, action, guide)
    assert tokens[0, [5, 6, 10, 11, 15, 16]].tolist() == [-1.0, 1.0, -2.0, 2.0, -3.0, 3.0]
    padded = torch.cat([slots, torch.zeros(2, 4, dtype=torch.long)], 1)  # context after a full row
    assert torch.equal(sg.per_token(padded, action, guide)[:, :17], tokens)
    assert tokens[1, [4, 8]].tolist() == [4.0, 5.0]
    assert (tokens[slots == C] == 0).all()


def loss_inputs(seed=0):
    """slots (context, guide or action at random), old log-probs, per-rollout advantages."""
    g = torch.Generator().manual_seed(seed)
    slots = torch.randint(0, 3, (3, 7), generator=g)
    old = -torch.rand(3, 7, generator=g)
    advantages = torch.randn(3, 1, generator=g).expand(3, 7).clone()
    return slots, old, advantages


def test_grpo_loss_at_ratio_one_is_minus_the_mean_token_advantage():
    slots, old, advantages = loss_inputs()
    generated = slots != sg.SLOT_CONTEXT
    loss, stats = sg.grpo_loss(old.clone(), old, advantages, slots, clip=0.2)
    assert loss.item() == pytest.approx(-advantages[generated].mean().item(), abs=1e-6)
    assert stats["clip_fraction"] == 0.0 and stats["approx_kl"] == pytest.approx(0.0, abs=1e-7)
    # a ratio of exactly 1 is never clipped, even by a clip range of 0
    assert sg.grpo_loss(old.clone(), old, advantages, slots, clip=0.0)[1]["clip_fraction"] == 0.0


def test_grpo_loss_value_is_the_clipped_surrogate_plus_the_weighted_kl():
    slots = torch.full((1, 4), sg.SLOT_ACTION)
    old = torch.zeros(1, 4)
    ratios = torch.tensor([[1.1, 0.9, 1.5, 0.5]])  # two inside the trust region, two outside
    advantages = torch.tensor([[1.0, 1.0, 1.0, -1.0]])
    # -min(rho A, clip(rho) A) per token: -1.1, -0.9, -1.2 (clipped), +0.8 (clipped)
    loss, _ = sg.grpo_loss(ratios.log(), old, advantages, slots, 0.2)
    assert loss.item() == pytest.approx((-1.1 - 0.9 - 1.2 + 0.8) / 4)
    reference = torch.full((1, 4), -0.5)  # log pi_ref
    weights = torch.tensor([[0.1, 0.2, 0.0, 0.3]])
    with_kl, _ = sg.grpo_loss(ratios.log(), old, advantages, slots, 0.2, reference, weights)
    log_ref_ratio = reference - ratios.log()
    kl = log_ref_ratio.exp() - log_ref_ratio - 1
    assert with_kl.item() == pytest.approx(loss.item() + (weights * kl).mean().item())
    # the logged diagnostics: clipped share and the approximate KL to the rollout policy
    _, stats = sg.grpo_loss(ratios.log(), old, advantages, slots, 0.2)
    assert stats["clip_fraction"] == 0.5
    assert stats["approx_kl"] == pytest.approx((ratios - 1 - ratios.log()).mean().item())


def test_grpo_loss_means_over_what_is_there():
    """One generated token: its own loss; two: their mean, the context left out."""
    C, A = sg.SLOT_CONTEXT, sg.SLOT_ACTION
    zeros = torch.zeros(1, 3)
    loss, _ = sg.grpo_loss(zeros, zeros, torch.tensor([[0.0, 0.7, 0.0]]), torch.tensor([[C, A, C]]), 0.2)
    assert loss.item() == pytest.approx(-0.7)
    loss, _ = sg.grpo_loss(zeros, zeros, torch.tensor([[0.5, 0.7, 0.9]]),
                           torch.tensor([[A, A, C]]), 0.2)
    assert loss.item() == pytest.approx(-0.6)


def test_grpo_loss_kl_stays_finite_when_an_update_buries_a_sampled_token():
    # Seen under --dist at guide temperature 0.1: a guide sampled at log-prob -0.01 fell to
    # -45 within one iteration's updates; e^45 as a loss overflows the gradient norm.
    slots = torch.tensor([[0, 1, 2, 1, 2]])
    old = torch.tensor([[0.0, -0.01, -0.5, -0.2, -0.3]])
    new = torch.tensor([[0.0, -45.0, -0.5, -0.2, -0.3]], requires_grad=True)
    reference, advantages = old.clone(), torch.ones(1, 5)
    loss, stats = sg.grpo_loss(new, old, advantages, slots, 0.2, reference, torch.ones(1, 5))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(new.grad).all()
    x = sg.KL_LOG_RATIO_MAX  # the buried token's k3 is the clamp's, with no KL gradient:
    assert stats["kl_ref"] == pytest.approx((math.exp(x) - x - 1) / 4, rel=1e-5)
    # its gradient is the surrogate's alone, -rho A / 4 with rho = e^(-44.99), 4 tokens
    assert new.grad[0, 1].item() == pytest.approx(-math.exp(-44.99) / 4, rel=1e-3, abs=0)
    # below the clamp the KL is the formula's, to the last bit, and its gradient flows:
    # d/dnew of (e^(ref - new) - (ref - new) - 1) / 4 is -(e^(ref - new) - 1) / 4
    near = torch.tensor([[0.0, -19.0, -0.5, -0.2, -0.3]], requires_grad=True)
    loss, stats = sg.grpo_loss(near, old, advantages, slots, 0.2, reference, torch.ones(1, 5))
    loss.backward()
    assert stats["kl_ref"] == pytest.approx((math.exp(18.99) - 18.99 - 1) / 4, rel=1e-5)
    assert near.grad[0, 1].item() == pytest.approx(-(math.exp(18.99) - 1) / 4, rel=1e-3)


def test_a_non_finite_gradient_stops_training_in_one_line_instead_of_poisoning_the_policy(
        monkeypatch):
    real = sg.grpo_loss

    def overflowing(*args, **kwargs):  # a loss that overflowed, as k3 did before its clamp
        loss, stats = real(*args, **kwargs)
        return loss * math.inf, stats

    monkeypatch.setattr(sg, "grpo_loss", overflowing)
    cfg = tiny_config()
    policy, prior = tiny_policy(), tiny_policy()
    before = [p.detach().clone() for p in policy.parameters()]
    with pytest.raises(FloatingPointError, match="gradient is not finite.*Lower --lr"):
        sg.grpo_iteration(policy, prior, cfg, sg.new_train_state(policy, cfg))
    assert all(torch.equal(a, b) for a, b in zip(before, policy.parameters()))


def test_grpo_loss_clipped_side_has_zero_gradient():
    generated = torch.full((1, 4), sg.SLOT_ACTION)
    old = torch.zeros(1, 4)
    # ratios 1.5 and 0.5 with the advantage's sign pushing further out: clipped, no gradient;
    # the same ratios with the opposite sign: min() keeps the unclipped term, gradient flows
    new = torch.log(torch.tensor([[1.5, 0.5, 1.5, 0.5]])).requires_grad_()
    advantages = torch.tensor([[1.0, -1.0, -1.0, 1.0]])
    loss, stats = sg.grpo_loss(new, old, advantages, generated, clip=0.2)
    loss.backward()
    assert new.grad[0, 0] == 0 and new.grad[0, 1] == 0
    assert new.grad[0, 2] != 0 and new.grad[0, 3] != 0
    assert stats["clip_fraction"] == 1.0


def test_grpo_loss_kl_is_zero_against_an_identical_reference_and_positive_otherwise():
    slots, old, advantages = loss_inputs(1)
    weights = torch.full(old.shape, 0.5)
    _, stats = sg.grpo_loss(old, old, advantages, slots, 0.2, old.clone(), weights)
    assert stats["kl_ref"] == pytest.approx(0.0, abs=1e-7)
    _, stats = sg.grpo_loss(old, old, advantages, slots, 0.2, old - 0.3, weights)
    assert stats["kl_ref"] == pytest.approx(math.exp(-0.3) + 0.3 - 1, rel=1e-5)


def test_grpo_loss_gives_observation_tokens_zero_gradient():
    slots, old, advantages = loss_inputs(2)
    generated = slots != sg.SLOT_CONTEXT
    new = (old + torch.randn(old.shape) * 0.1).requires_grad_()
    loss, _ = sg.grpo_loss(new, old, advantages, slots, 0.2, old + 5.0,
                           torch.full(old.shape, 1.0))
    loss.backward()
    assert (new.grad[~generated] == 0).all() and (new.grad[generated] != 0).any()


def test_observation_tokens_get_zero_gradient_through_the_model(monkeypatch):
    """Only guide and action predictions are trained: the training pass computes logits only
    at the positions that predict a guide or an action in some row, and the gradient of the
    GRPO loss w.r.t. them is exactly zero in the rows where that position predicts context
    (a finished episode's padding)."""
    cfg = tiny_config()
    policy = tiny_policy()
    batch = sg.rollout(policy, list(range(40)), True, cfg, torch.Generator().manual_seed(0))
    assert (batch.steps != batch.steps.max()).any()  # some episodes end early: padded rows
    captured = {}
    real_logits = sg.last_block_logits

    def keep_logits(policy, tokens, positions):
        output = real_logits(policy, tokens, positions)
        output.retain_grad()
        captured.update(logits=output, positions=positions)
        return output

    monkeypatch.setattr(sg, "last_block_logits", keep_logits)
    new = sg.token_logprobs(policy, batch.tokens, batch.slots)
    advantages = torch.randn(40, 1).expand_as(new)
    loss, _ = sg.grpo_loss(new, batch.logprobs, advantages, batch.slots, 0.2)
    loss.backward()
    positions, grad = captured["positions"], captured["logits"].grad  # grad (N, Q, W)
    generated_anywhere = (batch.slots[:, 1:] != sg.SLOT_CONTEXT).any(0)  # position p predicts p+1
    assert positions.tolist() == generated_anywhere.nonzero().squeeze(-1).tolist()
    predicts_context = batch.slots[:, positions + 1] == sg.SLOT_CONTEXT  # (N, Q)
    assert predicts_context.any()
    assert (grad[predicts_context] == 0).all()
    assert (grad[~predicts_context].abs().sum(-1) > 0).all()


@pytest.mark.parametrize("n_layer", [1, 2])
def test_last_block_logits_equal_the_transformers_forward_pass(n_layer):
    """The training pass's forward (last_block_logits: the last block at the scored positions
    only) is the same function as GPT2LMHeadModel's, values and gradients, to rounding, and so
    is transformers' forward with logits_to_keep at those positions."""
    cfg = tiny_config(n_layer=n_layer)
    torch.manual_seed(0)
    policy = sg.make_policy(cfg)
    batch = sg.rollout(policy, list(range(6)), True, cfg, torch.Generator().manual_seed(0))
    positions = torch.tensor([0, 3, 4, 9, batch.tokens.shape[1] - 2])
    weights = torch.randn(6, len(positions), len(sg.WRITABLE_IDS))
    gradients = []
    for logits in (lambda: sg.writable_logits(policy, batch.tokens)[:, positions],
                   lambda: policy(batch.tokens, logits_to_keep=positions).logits[
                       ..., sg.WRITABLE_IDS],
                   lambda: sg.last_block_logits(policy, batch.tokens, positions)):
        policy.zero_grad()
        output = logits()
        (output * weights).sum().backward()
        gradients.append((output.detach(), [p.grad.clone() for p in policy.parameters()]))
    (full, full_grads), *others = gradients
    for scored, scored_grads in others:
        assert torch.allclose(full, scored, atol=1e-6)
        for a, b in zip(full_grads, scored_grads):
            assert torch.allclose(a, b, atol=1e-5)
        assert any(g.abs().sum() > 0 for g in scored_grads)


def test_guides_are_tempered_by_the_guide_temperature_in_the_rollout_and_the_update():
    """Departure 7: guides sampled at --guide-temperature, moves at --temperature. The rollout's
    stored log-probs are those of the tempered constrained distribution (and not the
    untempered one at the guides); the first update's ratio is 1 and its KL to an identical
    reference 0, so every pass tempers the guides alike."""
    cfg = tiny_config(guide_temperature=0.3, temperature=1.0, kl_guide=0.1, update_epochs=1,
                      minibatches=1)
    policy = tiny_policy()
    batch = sg.rollout(policy, list(range(16)), True, cfg, torch.Generator().manual_seed(0))
    is_guide, is_action = batch.slots == sg.SLOT_GUIDE, batch.slots == sg.SLOT_ACTION
    with torch.no_grad():
        tempered = sg.token_logprobs(policy, batch.tokens, batch.slots, 1.0, 0.3)
        untempered = sg.token_logprobs(policy, batch.tokens, batch.slots, 1.0)
    assert torch.allclose(batch.logprobs, tempered, atol=1e-5)
    assert not torch.allclose(batch.logprobs[is_guide], untempered[is_guide], atol=1e-2)
    assert torch.allclose(batch.logprobs[is_action], untempered[is_action], atol=1e-5)
    reference = sg.copy.deepcopy(policy)
    state = sg.new_train_state(policy, cfg)
    record = sg.grpo_iteration(policy, reference, cfg, state)
    assert record["approx_kl"] == pytest.approx(0.0, abs=1e-6)
    assert record["kl_ref"] == pytest.approx(0.0, abs=1e-6)
    assert record["clip_fraction"] == 0.0


def test_iteration_advantages_for_every_setting_from_the_graded_pieces():
    """lambda > 0, every combination of --internal-return, --credit, --guide-advantage and
    --advantage, against the advantages put together by hand from the graded functions."""
    import itertools
    G, horizon = 2, 3
    slots = torch.tensor([[0, 0, 1, 2, 0, 1, 2, 0, 1, 2]] * 3 + [[0, 0, 1, 2, 0, 1, 2, 0, 0, 0]])
    batch = sg.Rollouts(
        tokens=torch.zeros(4, 10, dtype=torch.long), slots=slots, logprobs=torch.zeros(4, 10),
        guides=torch.tensor([[1, 0, 0], [1, 2, 0], [0, 0, 2], [1, 2, -1]]),
        truths=torch.tensor([[-1, 0, 0], [-1, 2, 2], [-1, 0, 0], [-1, 2, -1]]),
        cells=torch.zeros(4, horizon, dtype=torch.long),
        env_return=torch.tensor([1.0, 0.0, 0.0, 0.0]), steps=torch.tensor([3, 3, 3, 2]),
        optimal=torch.tensor([2, 2, 2, 2]))
    trust = 0.5
    for internal, credit, guide_adv, advantage in itertools.product(
            ["sum", "mean"], ["trajectory", "step"],
            ["composite", "env"],
            ["grpo", "drgrpo"]):
        cfg = tiny_config(variant="sg_gr", internal_return=internal, credit=credit,
                          guide_advantage=guide_adv, advantage=advantage, group_size=G)
        expected, returns = hand_advantages(batch, cfg, trust)
        got, got_returns = sg.iteration_advantages(batch, cfg, trust)
        setting = (internal, credit, guide_adv, advantage)
        assert torch.allclose(got, expected, atol=1e-6), setting
        assert torch.allclose(got_returns, returns), setting
        assert got[slots == sg.SLOT_GUIDE].abs().sum() > 0, setting
    # the settings matter: the mean guard and step credit change the advantages
    base = dict(variant="sg_gr", group_size=G)
    runs = {k: sg.iteration_advantages(batch, tiny_config(**base, **{k: v}), trust)[0]
            for k, v in [("internal_return", "sum"), ("credit", "trajectory"),
                         ("advantage", "drgrpo")]}
    default = sg.iteration_advantages(batch, tiny_config(**base), trust)[0]
    for name, other in runs.items():
        assert not torch.allclose(default, other), name


# --- selfguide: evaluation ---

class ScriptedPolicy(torch.nn.Module):
    """Always writes the same guide and the same move, whatever it sees: a constant hidden
    state of 1 and an LM head that gives its two favourite words a logit of 20."""

    def __init__(self, guide: str, action: str):
        super().__init__()
        from transformers import GPT2Config
        self.config = GPT2Config(vocab_size=len(sg.WORDS), n_embd=8, n_layer=1, n_head=1,
                                 bos_token_id=sg.BOS, eos_token_id=sg.EOS)
        self.lm_head = torch.nn.Linear(1, len(sg.WORDS), bias=False)
        torch.nn.init.zeros_(self.lm_head.weight)
        with torch.no_grad():
            self.lm_head.weight[[sg.WORD_ID[guide], sg.WORD_ID[action]]] = 20.0

    def forward(self, input_ids, cache=None, use_cache=None):
        hidden = torch.ones(*input_ids.shape, 1)
        return sg.dataclasses.make_dataclass("Out", ["logits"])(self.lm_head(hidden))


def test_evaluation_plays_the_held_out_tasks_once_greedily_unless_told():
    """By default one greedy pass over the held-out seeds (whatever the run's seed); sampled,
    one pass from a generator seeded by the run."""
    cfg = tiny_config(eval_tasks=12)
    policy = tiny_policy()
    seeds = [sg.EVAL_SEED_BASE + i for i in range(12)]

    def played(**kwargs):
        return sg.episode_metrics(sg.rollout(policy, seeds, True, cfg,
                                             torch.Generator().manual_seed(cfg.seed), **kwargs))
    greedy = sg.evaluate(policy, cfg, True)
    assert greedy == played(greedy=True)
    assert sg.evaluate(policy, tiny_config(eval_tasks=12, seed=7), True) == greedy
    assert sg.evaluate(policy, cfg, True, batch_size=5) == greedy
    sampled = sg.evaluate(policy, cfg, True, greedy=False)
    assert sampled == played(greedy=False) != greedy
    assert sg.evaluate(policy, cfg, True, greedy=False, passes=2) != sampled
    others = [sg.evaluate(policy, tiny_config(eval_tasks=12, seed=s), True, greedy=False)
              for s in (1, 2, 3)]  # another run's seed draws other episodes
    assert any(other != sampled for other in others)


def test_evaluation_of_a_scripted_policy_matches_a_hand_replay():
    cfg = sg.Config(eval_tasks=40)
    metrics = sg.evaluate(ScriptedPolicy("positive", "north"), cfg, guided=True)
    successes, steps, truths = 0, [], []
    for i in range(cfg.eval_tasks):
        env = cfg.make_env()
        env.reset(seed=sg.EVAL_SEED_BASE + i)
        done, n = False, 0
        while not done:
            _, reward, terminated, truncated, info = env.step("north")
            n += 1
            done = terminated or truncated
            if not done:  # the guide written after this move judges it
                truths.append(toy_env.true_polarity(info["progress"]))
        successes += reward > 0
        steps.append(n)
    assert metrics["success"] == successes / cfg.eval_tasks
    assert metrics["steps"] == pytest.approx(sum(steps) / len(steps))
    assert metrics["share_positive"] == 1.0 and metrics["share_negative"] == 0.0
    # an always-positive guide recalls every positive step and nothing else
    assert metrics["guide_balanced_accuracy"] == pytest.approx(1 / len(set(truths)))


def test_episode_metrics_on_hand_built_rollouts():
    rollouts = two_hand_built_episodes()
    metrics = sg.episode_metrics(rollouts)
    assert metrics["success"] == 0.5 and metrics["steps"] == 2.5
    assert metrics["steps_over_optimal"] == 1.5
    assert metrics["share_positive"] == pytest.approx(3 / 5)
    assert metrics["share_neutral"] == pytest.approx(1 / 5)
    # judged: (guide 0, truth 0) right, (2, 0) wrong, (0, 2) wrong
    assert metrics["guide_balanced_accuracy"] == pytest.approx((1 / 2 + 0) / 2)
    assert metrics["looping_episodes"] == 0.5 and metrics["revisits"] == 0.5  # one, in episode 0
    one_bump = sg.dataclasses.replace(rollouts, truths=torch.tensor([[-1, 0, 0], [-1, 1, -1]]))
    metrics = sg.episode_metrics(one_bump)  # the bump (truth neutral, guide positive) is wrong:
    assert metrics["guide_balanced_accuracy"] == pytest.approx((1 / 2 + 0) / 2)  # its recall 0


def test_episode_metrics_say_none_where_a_figure_is_undefined():
    """Nothing succeeded, nothing judged, nothing revisited: None (JSON null), never NaN."""
    long = torch.zeros(2, 1, dtype=torch.long)
    unjudged = sg.Rollouts(
        tokens=long, slots=long, logprobs=torch.zeros(2, 1),
        guides=torch.tensor([[0, -1], [2, -1]]), truths=torch.tensor([[-1, -1], [-1, -1]]),
        cells=torch.tensor([[0, -1], [0, -1]]), env_return=torch.zeros(2),
        steps=torch.tensor([1, 1]), optimal=torch.tensor([4, 4]))
    metrics = sg.episode_metrics(unjudged)
    for key in ("steps_over_optimal", "guide_balanced_accuracy"):
        assert metrics[key] is None, key
    assert (metrics["share_positive"], metrics["share_negative"]) == (0.5, 0.5)
    assert (metrics["looping_episodes"], metrics["revisits"]) == (0.0, 0.0)
    judged_no_revisit = sg.dataclasses.replace(unjudged, truths=torch.tensor([[0, -1], [0, -1]]))
    metrics = sg.episode_metrics(judged_no_revisit)
    assert metrics["guide_balanced_accuracy"] == 0.5  # only "positive" moves: its recall alone
    unguided = sg.dataclasses.replace(unjudged, guides=torch.full((2, 2), -1))
    assert "share_positive" not in sg.episode_metrics(unguided)
    assert not any(isinstance(v, float) and math.isnan(v)
                   for m in (metrics, sg.episode_metrics(unguided)) for v in m.values())


def test_final_score_is_the_mean_of_the_last_evaluations():
    records = [{"iteration": i, "eval": {"success": s, "steps_over_optimal": o}}
               for i, s, o in [(10, 0.1, 1.0), (20, 0.2, None), (30, 0.4, 1.2), (40, 0.6, 1.4)]]
    records.insert(2, {"iteration": 25})  # no evaluation at this iteration
    final = sg.final_metrics(records, 3)
    assert final["success"] == pytest.approx(0.4)
    assert final["steps_over_optimal"] == pytest.approx(1.3)  # undefined values are skipped


# --- selfguide: training end to end ---

def run_tiny_training(tmp_path, prior_cache, **overrides):
    cfg = tiny_config(prior_cache=str(prior_cache), **overrides)
    sg.seed_everything(cfg.seed)
    prior = sg.load_or_train_prior(cfg, "cpu")
    policy = sg.copy.deepcopy(prior)
    log = tmp_path / f"log-{cfg.variant}.jsonl"
    with open(log, "w") as handle:
        sg.train(policy, prior, cfg, handle)
    return policy, [json.loads(line) for line in log.read_text().splitlines()]


def all_numbers_finite(record):
    """Every float in a log record (nested too) is finite: NaN and inf fail."""
    for key, value in record.items():
        if isinstance(value, dict):
            all_numbers_finite(value)
        elif isinstance(value, list):
            all_numbers_finite(dict(enumerate(value)))
        elif isinstance(value, float):
            assert math.isfinite(value), key


@pytest.mark.parametrize("overrides, twice", [
    ({"variant": "sg_gr", "schedule": "immediate", "kl_guide": 0.1, "kl_action": 0.05,
      "internal_return": "mean", "guide_advantage": "env"}, True),
    ({"variant": "grpo"}, False), ({"variant": "sg", "advantage": "drgrpo"}, False)])
def test_training_runs_logs_finite_numbers_and_is_deterministic(tmp_path, prior_cache,
                                                                 overrides, twice):
    """Every setting logs finite numbers; the one that uses every term of the loss (both KL
    terms, the internal reward) is run twice, for the same numbers and the same weights."""
    policy_a, log_a = run_tiny_training(tmp_path, prior_cache, **overrides)
    assert len(log_a) == TINY["iterations"]
    for record in log_a:
        all_numbers_finite(record)
    if twice:
        policy_b, log_b = run_tiny_training(tmp_path, prior_cache, **overrides)
        assert log_a == log_b
        assert same_weights(policy_a, policy_b)
    assert "eval" in log_a[-1]
    if overrides["variant"] == "grpo":
        assert "share_positive" not in log_a[-1]


def test_policy_gradient_raises_success_on_a_trivial_task():
    """Open 3x3 grid, goal two moves away, three moves allowed: a random policy mostly fails;
    a few GRPO iterations from a random policy should raise success clearly. (Over seeds
    0-11 these settings raised sampled success from about 0.1 to between 0.68 and 0.87.)"""
    cfg = sg.Config(size=3, wall_prob=0.0, min_distance=2, max_steps=3, n_layer=1, n_embd=32,
                    n_head=2, variant="grpo", iterations=40, tasks_per_iter=16, group_size=8,
                    lr=3e-3, minibatches=2, eval_tasks=128, eval_every=1000)
    sg.seed_everything(0)
    policy = sg.make_policy(cfg).eval()
    sampled = lambda: sg.evaluate(policy, cfg, guided=False, greedy=False, passes=2)["success"]  # noqa: E731
    before = sampled()
    sg.train(policy, policy, cfg)
    after = sampled()
    assert after > before + 0.4, (before, after)


# --- the README's exercises, where they have a checkable answer ---

def test_exercise_2_group_std_makes_lambda_irrelevant_in_an_all_failed_group():
    """In a group where every rollout failed, R = lambda * internal return: dividing by the
    group's std cancels lambda (a small reward pushes at full strength); Dr. GRPO keeps it."""
    internal = torch.tensor([[0.3, 0.1, -0.2, 0.0]])
    strong, weak = (sg.group_advantages(trust * internal) for trust in (1.0, 0.01))
    torch.testing.assert_close(strong, weak, rtol=2e-3, atol=2e-3)  # equal up to the eps of the std
    assert strong.pow(2).mean().sqrt().item() == pytest.approx(1.0, abs=1e-3)
    strong, weak = (sg.group_advantages(trust * internal, scale=False) for trust in (1.0, 0.01))
    torch.testing.assert_close(weak, 0.01 * strong)


def test_exercise_5_summed_oracle_rewards_telescope_to_the_distance_covered():
    """With r_t from the true progress of the move z_t judges (the oracle control's r_t: each
    truth read as if it were the guide), sum_t r_t = 0.1 (d_0 - d_{T-1}):
    a shaping by the potential -0.1 d that stalling cannot farm. It stops at d_{T-1}, not d_T,
    because the guide z_t judges move t-1 and no guide is written after the last move."""
    cfg = tiny_config(max_steps=10)
    seeds = list(range(16))
    batch = sg.rollout(tiny_policy(max_steps=10), seeds, True, cfg, torch.Generator().manual_seed(4))
    rewards = sg.step_rewards(batch.truths)
    for i, seed in enumerate(seeds):
        env = cfg.make_env()
        _, info = env.reset(seed=seed)
        distances = [info["distance"]]
        for token, slot in zip(batch.tokens[i].tolist(), batch.slots[i].tolist()):
            if slot == sg.SLOT_ACTION:
                distances.append(env.step(sg.WORDS[token])[4]["distance"])
        last = batch.steps[i].item()
        assert rewards[i].sum().item() == pytest.approx(0.1 * (distances[0] - distances[last - 1]))


# --- selfguide: main ---

def test_main_saves_a_loadable_policy_config_and_log(tiny_run, prior_cache):
    from transformers import AutoModelForCausalLM
    rows, out = tiny_run
    assert [name for name, _ in rows][2] == "trained (sg_gr), final policy"
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in log] == [1, 2, 3] and log[-1]["eval"] == rows[2][1]
    args = TINY_ARGS + ["--out", str(out), "--prior-cache", str(prior_cache)]
    assert json.loads((out / "selfguide_config.json").read_text()) == \
        json.loads(json.dumps(sg.dataclasses.asdict(sg.parse_config(args))))
    AutoModelForCausalLM.from_pretrained(out)
    again = sg.main(TINY_ARGS + ["--eval-only", "--init-from", str(out),
                                 "--prior-cache", str(prior_cache)])
    assert again[1][1] == rows[2][1]  # greedy, with guide slot: the trained policy's numbers


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_saves_what_was_trained(tmp_path, prior_cache, monkeypatch, capsys,
                                                  stop):
    import os
    import signal
    real_iteration = sg.grpo_iteration

    def interrupted(policy, reference, cfg, state):
        if state.iteration == 2 and stop == "ctrl-c":
            raise KeyboardInterrupt
        if state.iteration == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before this returns
        return real_iteration(policy, reference, cfg, state)

    monkeypatch.setattr(sg, "grpo_iteration", interrupted)
    out = tmp_path / "run"
    args = TINY_ARGS + ["--out", str(out), "--prior-cache", str(prior_cache)]
    before = signal.getsignal(signal.SIGTERM)  # a test runner may have its own handler
    assert sg.main(args) is None
    assert "stopped by Ctrl-C or SIGTERM" in capsys.readouterr().out
    assert signal.getsignal(signal.SIGTERM) is before  # main's handler is put back
    # what was saved is the policy of the two iterations trained, replayed here on their own
    # (the run is deterministic); after the first the tiny policy still equals its prior
    cfg = sg.parse_config(args)
    sg.seed_everything(cfg.seed)
    prior = sg.load_or_train_prior(cfg, "cpu")
    policy = sg.copy.deepcopy(prior)
    state = sg.new_train_state(policy, cfg)
    for _ in range(2):
        real_iteration(policy, prior, cfg, state)
    state.records[-1]["eval"] = sg.evaluate(policy, cfg, cfg.guided)  # train's (--eval-every 2)
    saved = sg.load_policy(out, cfg, "cpu")
    assert same_weights(saved, policy) and not same_weights(saved, prior)
    assert [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()] == \
        json.loads(json.dumps(state.records))


def replay(seed, cfg, moves):
    """The moves replayed in an environment of our own: each move's true polarity, the cells
    walked (the start first) and the last step's info."""
    env = cfg.make_env()
    _, info = env.reset(seed=seed)
    truths, path = [], [info["position"]]
    for move in moves:
        info = env.step(move)[4]
        truths.append(toy_env.true_polarity(info["progress"]))
        path.append(info["position"])
    return truths, path, info


def check_shown_episode(episode: str, seed: int, cfg) -> list:
    """An episode --show printed, checked against its moves replayed: what each move truly
    did, the path drawn on the map, the outcome. Returns each step's printed (guide, verdict
    words, move)."""
    words = cfg.make_env().observation_length  # step, observation, guide, ..., move
    steps = [(w[1 + words], w[2 + words:-1], w[-1]) for w in
             (line.split() for line in episode.splitlines()[1:] if line[:3].strip().isdigit())]
    moves = [move for _, _, move in steps]
    truths, path, info = replay(seed, cfg, moves)
    assert len(moves) == info["steps"] > 0
    assert steps[0][1] == ["(no", "move", "yet)"]
    for (_, verdict, _), truth in zip(steps[1:], truths):  # the guide at t judges move t-1
        assert verdict[0].rstrip(":") == toy_env.MOVE_TRUTH[truth]
    lines = episode.splitlines()
    top = next(i for i, line in enumerate(lines) if "(S start, * path, A agent)" in line) + 1
    drawn = [line[2 + cfg.size + 4:] for line in lines[top:top + cfg.size]]
    marked = {(r, c) for r, row in enumerate(drawn) for c, cell in enumerate(row) if cell in "S*"}
    assert marked == set(path) - {path[-1]} and drawn[path[-1][0]][path[-1][1]] == "A"
    if info["success"]:
        assert f"reached the goal in {len(moves)} moves (shortest {info['optimal_steps']})" \
            in episode
    else:
        assert f"did not reach the goal in {len(moves)} moves; it ended {info['distance']} " \
            f"moves away" in episode
    return steps


def greedy_play(policy, cfg, count: int, guided: bool) -> list:
    """The first `count` held-out episodes of `policy`, greedy, as [(guides, moves)]."""
    batch = sg.rollout(policy, [sg.EVAL_SEED_BASE + k for k in range(count)], guided, cfg,
                       greedy=True)
    return [([GUIDES[g] if g >= 0 else "-" for g in batch.guides[k, :batch.steps[k]].tolist()],
             [sg.WORDS[t] for t, s in zip(batch.tokens[k].tolist(), batch.slots[k].tolist())
              if s == sg.SLOT_ACTION]) for k in range(count)]


def test_show_prints_each_step_with_the_guide_against_the_truth_in_80_columns(prior_cache,
                                                                              capsys):
    args = TINY_ARGS + ["--eval-only", "--show", "12", "--prior-cache", str(prior_cache)]
    rows = sg.main(args)
    text = capsys.readouterr().out
    assert rows is not None and text.count("held-out maze ") == 12
    episodes = text[text.index("held-out maze "):text.index("| policy")]
    assert max(len(line) for line in episodes.splitlines()) <= 80
    cfg = sg.parse_config(args)
    prior = sg.load_policy(prior_cache / f"prior-{sg.prior_key(cfg)}", cfg, "cpu")
    played = greedy_play(prior, cfg, 12, guided=True)  # the prior's greedy episodes
    cfg = tiny_config()
    outcomes = set()
    for k, episode in enumerate(episodes.split("held-out maze ")[1:]):
        steps = check_shown_episode(episode, sg.EVAL_SEED_BASE + k, cfg)
        assert ([g for g, _, _ in steps], [m for _, _, m in steps]) == played[k]
        truths = replay(sg.EVAL_SEED_BASE + k, cfg, [move for _, _, move in steps])[0]
        for (guide, verdict, _), truth in zip(steps[1:], truths):
            assert verdict[1] == ("right" if guide == truth else "WRONG")
        judged, right = len(steps) - 1, sum(guide == truth for (guide, _, _), truth
                                            in zip(steps[1:], truths))
        assert f"right about {right} of the {judged} moves" in episode
        outcomes.add("reached the goal" in episode)
    assert outcomes == {True, False}  # both outcomes drawn and checked


def test_show_after_a_training_run_and_without_a_guide_slot(tmp_path, prior_cache, capsys):
    args = TINY_ARGS + ["--variant", "grpo", "--show", "1", "--out", str(tmp_path / "run"),
                        "--prior-cache", str(prior_cache)]
    sg.main(args)
    text = capsys.readouterr().out
    assert text.index("| policy") < text.index("held-out maze 0")  # after the run's table
    episode = text[text.index("held-out maze 0"):]
    steps = check_shown_episode(episode, sg.EVAL_SEED_BASE, tiny_config())
    assert {guide for guide, _, _ in steps} == {"-"}  # no guide slot: no guide written
    assert "guide was right" not in episode  # and nothing judged
    # the moves are the trained policy's greedy ones, which here differ from its prior's
    cfg = sg.parse_config(args)
    trained = greedy_play(sg.load_policy(tmp_path / "run", cfg, "cpu"), cfg, 1, guided=False)
    prior = greedy_play(sg.load_policy(prior_cache / f"prior-{sg.prior_key(cfg)}", cfg, "cpu"),
                        cfg, 1, guided=False)
    assert [m for _, _, m in steps] == trained[0][1] != prior[0][1]


def test_unavailable_device_is_a_clear_error():
    with pytest.raises(SystemExit, match="unknown --device"):
        sg.pick_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="no CUDA device"):
            sg.pick_device("cuda")


# --- selfguide: errors before any work ---

def test_a_seed_whose_demonstrations_are_held_out_mazes_is_refused_in_one_line(capsys):
    """Demonstrations are tasks 10^8 + seed x 10^6 + i: seed 900's reach the held-out mazes
    (10^9 on); its neighbours clone elsewhere."""
    with pytest.raises(SystemExit):
        sg.parse_config(["--seed", "900"])
    assert "--seed 900 would clone its prior on the held-out mazes" in capsys.readouterr().err
    assert sg.parse_config(["--seed", "901"]).seed == 901
    demonstrations = sg.PRIOR_SEED_BASE + 899 * 10**6 + sg.Config().prior_episodes
    assert demonstrations <= sg.EVAL_SEED_BASE and sg.parse_config(["--seed", "899"]).seed == 899


def test_transformers_too_old_to_take_cache_fails_before_any_work(monkeypatch, tmp_path):
    """Before 5.24 transformers silently ignores cache= (the rollout would lose its context)."""
    for fine in ["5.24.0", "5.30.1", "6.0.0.dev0"]:
        sg.check_transformers(fine)
    with pytest.raises(SystemExit, match=r"needs transformers>=5.24 \(found 5.17.0\)"):
        sg.check_transformers("5.17.0")
    monkeypatch.setattr(sg.transformers, "__version__", "5.23.0")
    cache = tmp_path / "priors"
    with pytest.raises(SystemExit, match="found 5.23.0"):
        sg.main(TINY_ARGS + ["--prior-cache", str(cache), "--out", str(tmp_path / "run")])
    assert not cache.exists()


def test_missing_init_from_fails_before_any_work(tmp_path):
    """No prior is cloned (the cache stays empty) and the error names the folder."""
    import time
    cache = tmp_path / "priors"
    start = time.perf_counter()
    with pytest.raises(SystemExit, match="'/nonexistent' holds no saved policy"):
        sg.main(["--eval-only", "--init-from", "/nonexistent", "--prior-cache", str(cache)])
    with pytest.raises(SystemExit, match="holds no saved policy"):
        sg.main(["--init-from", str(tmp_path), "--prior-cache", str(cache)])
    assert not cache.exists() and time.perf_counter() - start < 5


def test_incompatible_init_from_is_named(tmp_path):
    policy = tiny_policy()
    sg.save_policy(policy, tmp_path / "small")
    with pytest.raises(SystemExit, match="trained for other settings .321 words, 42 positions; "
                                         "these need 321 and 158"):
        sg.main(["--eval-only", "--init-from", str(tmp_path / "small")])
    config = json.loads((tmp_path / "small" / "config.json").read_text())
    config["vocab_size"] = 10
    (tmp_path / "small" / "config.json").write_text(json.dumps(config))
    with pytest.raises(SystemExit, match="trained for other settings .10 words"):
        sg.main(["--eval-only", "--init-from", str(tmp_path / "small")] + TINY_ARGS)


@pytest.mark.parametrize("flag", ["--out", "--prior-cache"])
def test_unwritable_folders_fail_before_any_work(tmp_path, flag):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    other = "--prior-cache" if flag == "--out" else "--out"
    with pytest.raises(SystemExit, match=f"{flag} .* cannot be written .File exists"):
        sg.main(TINY_ARGS + [flag, str(a_file), other, str(tmp_path / "x")])
    with pytest.raises(SystemExit, match=f"{flag} .* cannot be written"):
        sg.main(TINY_ARGS + [flag, str(a_file / "below"), other, str(tmp_path / "y")])
