"""Tests for examples/trl_selfguide.py, the TRL bridge. Every test but the first needs the
optional extra trl==1.16.0 and is skipped, with the reason, without it.

    pip install trl==1.16.0 && python -m pytest -q examples/
"""
import dataclasses
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import selfguide as sg  # noqa: E402
from conftest import (TINY_ARGS, first_rollouts, launch, require_trl, same_update,  # noqa: E402
                      tiny_config, tiny_policy)


def load_bridge():
    """The bridge module, or a skip that says why (the plain test command needs no TRL)."""
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).parent / "trl_selfguide.py"
    if not path.exists():
        pytest.skip("examples/trl_selfguide.py is not here (a course handout, say)")
    spec = importlib.util.spec_from_file_location("trl_selfguide", path)
    bridge = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bridge)
    return bridge


def test_trl_bridge_says_in_one_line_when_trl_is_missing_or_another_version(monkeypatch):
    import sys
    bridge = load_bridge()
    monkeypatch.setitem(sys.modules, "trl", None)  # import trl now raises ImportError
    with pytest.raises(SystemExit, match=r"needs TRL: pip install trl==1\.16\.0"):
        bridge.check_trl()
    fake = type(sys)("trl")
    fake.__version__ = "1.13.0"
    monkeypatch.setitem(sys.modules, "trl", fake)
    with pytest.raises(SystemExit, match=r"tested with trl==1\.16\.0 \(found 1\.13\.0\)"):
        bridge.check_trl()


def trl_bridge():
    """The bridge, with TRL imported, or a skip naming what is missing."""
    bridge = load_bridge()
    require_trl(bridge.TRL_VERSION)
    bridge.check_trl()
    return bridge


def trl_trainer(tmp_path, **overrides):
    """A SelfGuideGRPOTrainer on the tiny maze, from a saved tiny policy as its prior."""
    from pathlib import Path
    bridge = trl_bridge()  # first: without TRL (and its datasets) this test is skipped
    from datasets import Dataset
    cfg = tiny_config(kl_guide=0.1, kl_action=0.1, out=str(tmp_path / "out"), **overrides)
    sg.save_policy(tiny_policy(), tmp_path / "prior")
    policy = sg.load_policy(tmp_path / "prior", cfg, "cpu")
    trainer = bridge.make_trainer_class()(
        model=policy, processing_class=sg.build_tokenizer(),
        reward_funcs=[bridge.success_reward, bridge.guide_reward],
        args=bridge.grpo_config(cfg, Path(cfg.out), torch.device("cpu")),
        train_dataset=Dataset.from_dict({"prompt": [str(s) for s in bridge.task_seeds(cfg)]}),
        rollout_func=bridge.make_rollout_func(cfg, torch.device("cpu")), selfguide_config=cfg)
    trainer.model.train()
    return bridge, cfg, trainer


@pytest.fixture(scope="module")
def built_trainer(tmp_path_factory):
    """One trainer for the tests that score a batch, take TRL's losses and gradients, or
    change a setting for a while: built once (and its prior saved once), with the weights it
    was built with, to put back before each test (moved() shifts them)."""
    folder = tmp_path_factory.mktemp("trainer")
    bridge, cfg, trainer = trl_trainer(folder, iterations=6)
    weights = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    from accelerate.state import AcceleratorState, PartialState
    states = [(kind._shared_state, dict(kind._shared_state))
              for kind in (PartialState, AcceleratorState)]
    return bridge, cfg, trainer, folder / "prior", weights, states


@pytest.fixture
def shared_trainer(built_trainer, monkeypatch):
    """(bridge, cfg, trainer, prior folder): the module's trainer as a fresh one would be: its
    weights as built, a new rollout_func (whose random streams start again, so it plays the
    first iteration's episodes), no records or TRL metrics yet, in training mode. What a test
    changes on it goes through monkeypatch, undone after the test."""
    bridge, cfg, trainer, prior, weights, states = built_trainer
    # every GRPOConfig made since (transformers' TrainingArguments) empties accelerate's
    # process state, which the trainer's accelerator reads: put back the one it was built in
    for shared, saved in states:
        if not shared:
            shared.update(saved)
    with torch.no_grad():
        for name, p in trainer.model.named_parameters():
            p.copy_(weights[name])
    trainer.model.train()
    monkeypatch.setattr(trainer, "rollout_func", bridge.make_rollout_func(cfg, torch.device("cpu")))
    monkeypatch.setattr(trainer, "records", [])
    monkeypatch.setattr(trainer, "_metrics", {"train": defaultdict(list), "eval": defaultdict(list)})
    return bridge, cfg, trainer, prior


def first_trl_batch(bridge, cfg, trainer):
    """One iteration's rollouts as TRL scores them: the first task seeds, G rollouts each."""
    seeds = bridge.task_seeds(cfg)[:cfg.tasks_per_iter]
    return trainer._generate_and_score_completions(
        [{"prompt": str(s)} for s in seeds for _ in range(cfg.group_size)])


def rows_given_to_trl(bridge, trainer) -> sg.Rollouts:
    """The iteration's episodes in the order the bridge hands them to TRL (trainer.rows: the
    order of its minibatches, a permutation of the whole batch on one process)."""
    return bridge.rows_of(trainer.episodes, trainer.rows)


def test_trl_bridge_scores_the_rollouts_own_tokens_with_the_rollouts_log_probs(shared_trainer):
    bridge, cfg, trainer, prior_folder = shared_trainer
    scored = first_trl_batch(bridge, cfg, trainer)
    batch = rows_given_to_trl(bridge, trainer)
    assert sorted(trainer.rows.tolist()) == list(range(len(trainer.episodes.tokens)))
    torch.testing.assert_close(torch.cat([scored["prompt_ids"], scored["completion_ids"]], 1),
                               batch.tokens, rtol=0, atol=0)
    generated = batch.slots[:, 2:] != sg.SLOT_CONTEXT
    assert torch.equal((scored["completion_mask"] * scored["tool_mask"]).bool(), generated)
    # constrained decoding: TRL's loss sees the log-probs the rollout sampled with
    torch.testing.assert_close(scored["old_per_token_logps"], batch.logprobs[:, 2:], atol=1e-6, rtol=0)
    prior = sg.load_policy(prior_folder, cfg, "cpu")
    torch.testing.assert_close(scored["ref_per_token_logps"],
                               sg.token_logprobs(prior, batch.tokens, batch.slots)[:, 2:],
                               atol=1e-6, rtol=0)
    lengths = generated.sum(1)
    assert lengths.min() < lengths.max()  # some episodes end early: the token means can differ


def test_trl_bridge_hands_trl_the_advantages_built_by_hand_in_its_row_order(shared_trainer,
                                                                          monkeypatch):
    """lambda > 0 from the first iteration and a composite guide advantage, so both the
    moves' and the guides' advantages carry the internal reward: TRL's advantages, row by row
    in the order the bridge hands the rows over, equal those put together by hand from the
    graded pieces over the whole batch's groups."""
    from conftest import hand_advantages
    bridge, cfg, trainer, _ = shared_trainer
    # the three settings are read by the advantages alone (through selfguide_config); neither
    # the rollout nor the GRPOConfig the trainer was built with reads them
    cfg = dataclasses.replace(cfg, schedule="immediate", guide_advantage="composite",
                              credit="trajectory")
    monkeypatch.setattr(trainer, "selfguide_config", cfg)
    scored = first_trl_batch(bridge, cfg, trainer)
    trust = sg.trust_at(cfg, 1)
    expected, _ = hand_advantages(trainer.episodes, cfg, trust)
    assert trust > 0 and expected.abs().sum() > 0
    assert not torch.equal(trainer.rows, torch.arange(len(trainer.rows)))  # really reordered
    torch.testing.assert_close(scored["advantages"], expected[trainer.rows, 2:], atol=1e-6,
                               rtol=0)
    guides = rows_given_to_trl(bridge, trainer).slots[:, 2:] == sg.SLOT_GUIDE
    assert scored["advantages"][guides].abs().sum() > 0


def test_the_bridge_leaves_trls_shuffle_to_every_other_trainer(shared_trainer):
    """The bridge turns TRL's shuffle of a generation's rows off for itself only, while it
    prepares its inputs: the module's own shuffle stays TRL's."""
    import trl.trainer.grpo_trainer as module
    from trl.trainer.utils import shuffle_sequence_dict
    bridge, cfg, trainer, _ = shared_trainer
    assert module.shuffle_sequence_dict is shuffle_sequence_dict
    seen = []
    real = type(trainer).__mro__[1]._generate_and_score_completions

    def spy(self, inputs):
        seen.append(module.shuffle_sequence_dict({"x": torch.arange(64)})["x"])
        return real(self, inputs)
    type(trainer).__mro__[1]._generate_and_score_completions, saved = spy, real
    try:
        trainer._prepare_inputs([{"prompt": str(s)} for s in bridge.task_seeds(cfg)[
            :cfg.tasks_per_iter] for _ in range(cfg.group_size)])
    finally:
        type(trainer).__mro__[1]._generate_and_score_completions = saved
    assert torch.equal(seen[0], torch.arange(64))  # the bridge's: the identity
    assert module.shuffle_sequence_dict is shuffle_sequence_dict  # and TRL's again after


def moved(trainer, seed=1, scale=0.1):
    """Move the policy away from the one that sampled, so ratios leave 1 and the clip acts."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(scale * torch.randn_like(p))


def trl_and_selfguide_losses(trainer, cfg, scored, batch, monkeypatch):
    """Per TRL minibatch (its split of the iteration's rollouts): (TRL's loss and gradients,
    grpo_loss's on the same tokens, old and reference log-probs and advantages)."""
    from trl.trainer.utils import split_tensor_dict
    params = [p for p in trainer.model.parameters()]
    # one minibatch per optimizer step, as the bridge's GRPOConfig makes it
    monkeypatch.setattr(trainer, "current_gradient_accumulation_steps", 1, raising=False)
    pad = lambda x: F.pad(x, (2, 0))  # noqa: E731  completion columns -> stream columns
    results = []
    for rows, inputs in zip(torch.arange(len(batch.tokens)).chunk(cfg.minibatches),
                            split_tensor_dict(scored, cfg.minibatches)):
        trl_loss = trainer._compute_loss(trainer.model, inputs)
        slots = batch.slots[rows]
        new = sg.token_logprobs(trainer.model, batch.tokens[rows], slots)
        ours, _ = sg.grpo_loss(new, pad(inputs["old_per_token_logps"]), pad(inputs["advantages"]),
                               slots, cfg.clip, pad(inputs["ref_per_token_logps"]),
                               torch.full(slots.shape, cfg.kl_guide))
        results.append(((trl_loss, torch.autograd.grad(trl_loss, params)),
                        (ours, torch.autograd.grad(ours, params))))
    return results


F = torch.nn.functional


def test_trl_loss_and_gradients_equal_the_hand_rolled_loss_where_they_should_agree(
        shared_trainer, monkeypatch):
    """loss_type="bnpo", epsilon = clip, beta = the KL weight, use_bias_correction_kl=False:
    TRL's loss is the one selfguide writes by hand, value and gradient, per minibatch."""
    bridge, cfg, trainer, _ = shared_trainer
    scored = first_trl_batch(bridge, cfg, trainer)
    moved(trainer)
    for (trl_loss, trl_grads), (ours, our_grads) in trl_and_selfguide_losses(
            trainer, cfg, scored, rows_given_to_trl(bridge, trainer), monkeypatch):
        torch.testing.assert_close(trl_loss, ours, atol=1e-6, rtol=1e-5)
        for a, b in zip(trl_grads, our_grads):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    clipped = sum(trainer._metrics["train"]["clip_ratio/region_mean"][-cfg.minibatches:])
    assert clipped > 0  # the clip acted in some minibatch, so it was compared too


@pytest.mark.parametrize("setting, value", [
    ("loss_type", "grpo"), ("loss_type", "dapo"), ("loss_type", "dr_grpo"),
    ("loss_type", "cispo"), ("loss_type", "sapo"), ("loss_type", "vespo"), ("loss_type", "luspo"),
    ("use_bias_correction_kl", True), ("delta", 1.1), ("epsilon_high", 0.28)])
def test_trl_settings_that_are_not_selfguides_loss_give_another_loss(shared_trainer, monkeypatch,
                                                                   setting, value):
    bridge, cfg, trainer, _ = shared_trainer
    scored = first_trl_batch(bridge, cfg, trainer)
    moved(trainer)
    monkeypatch.setattr(trainer if setting in ("loss_type", "epsilon_high") else trainer.args,
                        setting, value)
    differences = [max([abs(trl_loss - ours).item()] +
                       [(a - b).abs().max().item() for a, b in zip(trl_grads, our_grads)])
                   for (trl_loss, trl_grads), (ours, our_grads)
                   in trl_and_selfguide_losses(trainer, cfg, scored,
                                               rows_given_to_trl(bridge, trainer), monkeypatch)]
    assert max(differences) > 1e-4, (setting, differences)


def test_the_rescale_to_the_whole_minibatch_follows_the_loss_trl_computes(shared_trainer,
                                                                          monkeypatch):
    """TRL's loss reads the trainer's own loss_type (copied from args when it is built): the
    bnpo rescale is applied exactly when that copy is bnpo, whatever args say."""
    from trl import GRPOTrainer
    bridge, _, trainer, _ = shared_trainer
    rescaled = []
    monkeypatch.setattr(GRPOTrainer, "compute_loss", lambda *args, **kwargs: torch.tensor(2.0))
    monkeypatch.setattr(bridge, "whole_minibatch_loss",
                        lambda loss, inputs, accelerator: rescaled.append(loss) or loss)
    for loss_type, expected in [("dr_grpo", []), ("bnpo", [torch.tensor(2.0)])]:
        rescaled.clear()
        monkeypatch.setattr(trainer, "loss_type", loss_type)  # args.loss_type stays bnpo
        trainer.compute_loss(trainer.model, {})
        assert rescaled == expected, loss_type


# what selfguide.py's record of an iteration holds and the bridge's does not: its update's
# figures (approx_kl, clip_fraction, kl_ref: TRL logs its own, trl/kl, trl/clip_ratio/...);
# and a figure the bridge does not compute (the groups whose R_env is all alike)
NOT_IN_THE_BRIDGES_RECORD = {"approx_kl", "clip_fraction", "kl_ref", "env_zero_variance_groups"}


def test_trl_bridge_trains_with_selfguides_schedule_tasks_and_sampling(tmp_path, capsys):
    """The bridge's first iteration plays exactly the episodes selfguide.py plays (same tasks,
    same sampler, same prior): every figure of the episodes that both records hold is equal;
    lambda(u) follows the trapezoid to 0 at the last iteration."""
    bridge = trl_bridge()
    args = TINY_ARGS + ["--iterations", "8", "--eval-every", "4", "--prior-cache",
                        str(tmp_path / "p"), "--out", str(tmp_path / "trl")]
    rows = bridge.main(args)
    text = capsys.readouterr().out
    assert "trained on TRL (sg_gr), mean of the last 3 evaluations" in text
    records = [json.loads(line) for line in (tmp_path / "trl" / "log.jsonl").read_text().splitlines()]
    assert [r["trust"] for r in records] == [sg.trust_schedule(u, 8) for u in range(1, 9)]
    assert records[-1]["trust"] == 0.0 and max(r["trust"] for r in records) == 1.0
    assert [r["iteration"] for r in records if "eval" in r] == [4, 8]
    assert rows[-2][1] == records[-1]["eval"]
    cfg = sg.parse_config(args + ["--kl-action", "0.1"])
    sg.seed_everything(cfg.seed)
    prior = sg.load_or_train_prior(cfg, "cpu")
    policy = sg.copy.deepcopy(prior)  # trained by an optimizer that holds its own parameters
    first = sg.grpo_iteration(policy, prior, cfg, sg.new_train_state(policy, cfg))
    # named, not intersected: a figure the bridge stopped logging fails here, not drops out
    assert set(first) - set(records[0]) == NOT_IN_THE_BRIDGES_RECORD
    shared = set(first) - NOT_IN_THE_BRIDGES_RECORD
    assert {"revisits", "share_neutral", "looping_episodes", "guide_balanced_accuracy",
            "zero_variance_groups"} <= shared  # the episodes' figures, not only their outcome
    assert {k: records[0][k] for k in shared} == {k: first[k] for k in shared}
    # the returns, as TRL's reward columns (its float32 means of the per-episode values): R_env
    # (in {0, 1}: its mean is the success), and the mean g(z_t) of the same episodes, replayed
    assert records[0]["trl/rewards/success_reward/mean"] == pytest.approx(first["success"])
    batch = first_rollouts(prior, cfg)[0]
    guide_return = sg.step_rewards(batch.guides).sum(1) / batch.steps
    assert records[0]["trl/rewards/guide_reward/mean"] == pytest.approx(
        guide_return.mean().item(), rel=1e-6)
    from transformers import AutoModelForCausalLM
    saved = AutoModelForCausalLM.from_pretrained(tmp_path / "trl")  # the trained policy, whole:
    assert sg.evaluate(saved, cfg, True) == records[-1]["eval"]   # it scores its last evaluation


@pytest.mark.parametrize("argv, message", [
    (["--kl-action", "0.05"], "beta weighs every generated token alike"),
    (["--eval-only"], "--eval-only is not run by the TRL bridge"),
    (["--guide-advantage", "hindsight"], "invalid choice: 'hindsight'"),  # research.py's
    (["--minibatches", "3"], "does not divide them")])
def test_trl_bridge_refuses_what_trl_cannot_run_in_one_line(argv, message, capsys):
    bridge = trl_bridge()
    with pytest.raises(SystemExit) as refused:
        bridge.parse_config(TINY_ARGS + argv)
    assert message in str(refused.value) + capsys.readouterr().err
    assert bridge.parse_config(TINY_ARGS).kl_action == 0.1  # beta: the guide's KL on every token


def test_trl_own_group_advantage_is_besseled_and_its_environment_factory_refuses_our_tokenizer(
        shared_trainer, tmp_path):
    """What the bridge replaces, and why: TRL's scale_rewards="group" divides by the
    Bessel-corrected group std (+ 1e-4), so its advantage is sqrt((G - 1) / G) of
    group_advantages'; and environment_factory needs a tool-calling chat template."""
    bridge, cfg, trainer, _ = shared_trainer  # skips without TRL
    from trl import GRPOConfig, GRPOTrainer
    seeds = bridge.task_seeds(cfg)[:cfg.tasks_per_iter]
    scored = GRPOTrainer._generate_and_score_completions(   # TRL's own, advantages not replaced
        trainer, [{"prompt": str(s)} for s in seeds for _ in range(cfg.group_size)])
    assert trainer.scale_rewards == "group"
    given = rows_given_to_trl(bridge, trainer).env_return  # TRL groups G consecutive rows of these
    ours = sg.group_advantages(given.view(-1, cfg.group_size)).flatten()
    g = cfg.group_size
    torch.testing.assert_close(scored["advantages"], ours * math.sqrt((g - 1) / g),
                               atol=2e-3, rtol=2e-3)
    assert (ours != 0).any()

    class MazeEnv:
        def reset(self, **kwargs):
            return "at:0,0 goal:1,1 walls:none"

        def move(self, direction: str) -> str:
            """Move one cell.

            Args:
                direction: north, east, south or west
            """
            return "moved"

    from datasets import Dataset
    with pytest.raises(ValueError, match="does not support tool calling"):
        GRPOTrainer(model=trainer.model, processing_class=sg.build_tokenizer(),
                    reward_funcs=[bridge.success_reward], environment_factory=MazeEnv,
                    args=GRPOConfig(output_dir=str(tmp_path / "env"), use_cpu=True, bf16=False,
                                    report_to="none", per_device_train_batch_size=4,
                                    num_generations=4),
                    train_dataset=Dataset.from_dict({"prompt": [[{"role": "user",
                                                                  "content": "go"}]] * 8}))


# --- the bridge on two processes (accelerate launch, gloo on CPU): the same experiment ---

MULTI_ARGS = TINY_ARGS + ["--iterations", "2", "--tasks-per-iter", "4", "--eval-every", "1",
                          "--prior-episodes", "64", "--schedule", "immediate", "--lr", "3e-3",
                          "--threads", "1"]


@pytest.fixture(scope="module")
def one_and_two(tmp_path_factory):
    """The same short run on one process and on two, from one prior."""
    trl_bridge()
    tmp_path = tmp_path_factory.mktemp("multi")
    return (launch(tmp_path, 1, "one", MULTI_ARGS), launch(tmp_path, 2, "two", MULTI_ARGS),
            tmp_path)


def test_two_processes_make_the_same_updates_as_one(one_and_two):
    """The trained weights after two iterations (2 x 2 passes x 2 minibatches), as updates
    from the prior: equal to a relative 1e-4. The update, not the gradient, because it is
    what a run keeps; not to the bit, because the all-reduce sums the two halves of each
    minibatch's gradient in another order than one process does."""
    (_, one), (_, two), tmp_path = one_and_two
    prior = next((tmp_path / "priors").glob("prior-*/model.safetensors"))
    for x, y in same_update(prior, one, two):  # the same episodes, iteration by iteration
        for key in ("success", "steps", "share_positive", "guide_balanced_accuracy", "trust"):
            assert x[key] == y[key], key
        assert x["eval"]["success"] == y["eval"]["success"]
        assert y["trl/loss"] == pytest.approx(x["trl/loss"], rel=1e-4, abs=1e-6)


def test_two_processes_print_and_write_once_and_report_that_their_weights_agree(one_and_two):
    """The main process alone prints and writes. "whose weights agree" is printed only after
    weights_spread found the two processes' copies equal (its test below sees copies that
    drifted apart); the weights themselves, against one process's run, are compared by
    test_two_processes_make_the_same_updates_as_one (only the main process saves them)."""
    (text_one, one), (text_two, two), _ = one_and_two
    for text in (text_one, text_two):
        assert text.count("| policy | success") == 1  # one summary table
        assert text.count("held-out success") == 2   # one line per evaluation, not per process
    assert "on 2 processes, whose weights agree" in text_two
    assert len((two / "log.jsonl").read_text().splitlines()) == 2
    assert sorted(p.name for p in two.iterdir()) == sorted(p.name for p in one.iterdir())


def test_the_logged_success_is_trls_gathered_reward_mean(one_and_two):
    """selfguide's figures are over the whole iteration, as TRL's gathered ones are."""
    (_, _), (_, two), _ = one_and_two
    for record in map(json.loads, (two / "log.jsonl").read_text().splitlines()):
        assert record["success"] == pytest.approx(record["trl/rewards/success_reward/mean"])


def test_weights_spread_sees_processes_that_drifted_apart():
    """Three processes' max all-reduce, simulated: this process's weights, a copy with one
    weight 0.25 higher, and a copy with that weight 0.1 lower and another 0.3 lower. The
    spread is the largest (highest - lowest) over the weights: 0.35 at the first weight; a
    spread seen from this process's copy alone, highest - mine or mine - lowest, is 0.25 or
    0.3. Each weight tensor is reduced on its own, in order; one process reduces nothing."""
    bridge = trl_bridge()

    class Group:  # accelerate's reduce(tensor, "max") over the three processes
        num_processes = 3

        def __init__(self, mine):
            up, down = torch.zeros_like(mine), torch.zeros_like(mine)
            up[0], down[0], down[3] = 0.25, 0.1, 0.3
            self.copies, self.offset, self.sizes = [mine, mine + up, mine - down], 0, []

        def reduce(self, tensor, reduction):  # each tensor twice, as weights and as -weights
            assert reduction == "max"
            part = slice(self.offset, self.offset + tensor.numel())
            sign = 1 if torch.equal(tensor, self.copies[0][part]) else -1
            assert torch.equal(tensor, sign * self.copies[0][part])  # one tensor, in order
            self.sizes.append(tensor.numel())
            if len(self.sizes) % 2 == 0:  # both reductions of this tensor done: the next one
                self.offset += tensor.numel()
            return torch.stack([sign * copy[part] for copy in self.copies]).max(0).values

    policy = torch.nn.Linear(2, 2)
    with torch.no_grad():  # weights all different, so the order of the flattening is checked
        policy.weight.copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
        policy.bias.copy_(torch.tensor([5.0, 6.0]))
    group = Group(torch.arange(1.0, 7.0))  # the weight row by row, then the bias
    assert bridge.weights_spread(policy, group) == pytest.approx(0.35)
    assert group.sizes == [4, 4, 2, 2]
    group.num_processes = 1
    assert bridge.weights_spread(policy, group) == 0.0 and group.sizes == [4, 4, 2, 2]


def test_a_batch_that_the_processes_cannot_split_is_refused_before_any_work(monkeypatch):
    bridge = trl_bridge()
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.raises(SystemExit, match=r"--minibatches x processes equal parts; 2 x 3"):
        bridge.parse_config(TINY_ARGS)
