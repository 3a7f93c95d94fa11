"""Self-Guide on TRL: the method of selfguide.py trained by TRL's GRPOTrainer.

The same tiny GPT-2, cloned into the same Stage 0 prior, on the same maze and the same task
seeds as `python selfguide.py`; the episodes come from selfguide's own `rollout` (constrained
decoding, one token stream per episode), the internal reward, the trust schedule, step credit
and the guards from selfguide's `iteration_advantages`. TRL does the rest: the data loader and
its repeat sampler (one group of G rollouts per task), the passes over each batch of
rollouts, the clipped surrogate and its token-level mean (`loss_type="bnpo"`), the KL to the
prior (`beta`), the optimizer, gradient clipping and the training loop.

    pip install -r requirements.txt trl==1.16.0
    python examples/trl_selfguide.py               # = python selfguide.py --kl-action 0.1, on TRL
    python examples/trl_selfguide.py --variant grpo --seed 1
    accelerate launch --multi_gpu --num_processes 2 examples/trl_selfguide.py   # 2 processes
    python examples/trl_selfguide.py --help        # selfguide.py's settings; see below for which

What TRL 1.16.0 needs beyond its public settings (a subclass, SelfGuideGRPOTrainer):
1. `_get_per_token_logps_and_entropies` (private) is overridden. TRL scores a completion over
   the whole vocabulary, but the rollout samples a guide among the three guide words and a
   move among the four moves; the override returns the log-probs of that constrained,
   tempered distribution (selfguide's `constrained_logprobs`), so the ratio and the KL in TRL's loss
   are those of the policy that sampled.
2. `_generate_and_score_completions` (private) is extended: after TRL has scored a batch, its
   one-advantage-per-completion is replaced by selfguide's per-token advantages (TRL's loss
   takes (B, T) advantages). TRL cannot otherwise give step credit, give guide tokens the
   advantage of R_env alone (--guide-advantage env), or normalise as selfguide does: its
   group std is Bessel-corrected with eps 1e-4, and its aggregation cannot weigh lambda(u)
   against R_env per step. TRL's reward columns (success, the guide's reward) are still
   computed and logged.
3. `compute_loss` is wrapped so that the loss is normalised by the token count of the whole
   minibatch across processes (see below).
The episode goes in through the public `rollout_func`, with `env_mask` 0 on observation tokens.

On P processes (accelerate launch or torchrun; gloo on CPU, NCCL on GPUs) it runs the same
experiment as on one, to rounding:
- each iteration's T tasks x G rollouts are split across the processes (per-device batch
  T G / (P x --minibatches)), in the order one process would play them;
- every process plays the iteration's whole batch of episodes from the same random stream,
  as one process would, and trains on its own rows (TRL's `process_slice`): so no episode's
  random draws depend on which process plays it, and the advantages are computed over whole
  groups, whichever process holds their rows. (TRL's vLLM server mode generates the batch in
  one place too; here it is replicated, which costs the toy less than sending it around);
- the loss of a minibatch is its token sum over the token count of the whole minibatch
  across processes: TRL's `bnpo` divides by the local count, so DDP's average would be the
  mean of per-process means;
- the constrained log-probs are computed from a forward of the wrapped (DDP) model, so its
  gradients are all-reduced;
- the prior is cloned once (the main process first, the others then load it); the main
  process alone evaluates, prints and writes, and at the end checks that every process
  holds the same weights.
A batch that P and --minibatches do not divide is refused in one line before any work.
`accelerate launch --cpu` starts a single process (accelerate's simple launcher), whatever
--num_processes says; on CPU, two real processes take `--multi_gpu` (or `torchrun
--nproc-per-node 2`).

Settings TRL cannot express are refused in one line: a KL on the guide tokens only (`beta`
weighs every generated token, so --kl-action is set to --kl-guide: the default run matches
`python selfguide.py --kl-action 0.1`).
"""
from __future__ import annotations

import dataclasses
import gc
import json
import os
import random
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # selfguide.py, toy_env.py

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

import selfguide as sg  # noqa: E402

TRL_VERSION = "1.16.0"  # the version this bridge is tested with (CI installs it)
REFUSED = {  # settings of selfguide.py that this bridge does not run, and what to do instead
    "eval_only": "evaluate the saved policy with python selfguide.py --eval-only --init-from <folder>",
    "init_from": "the bridge always starts from the Stage 0 prior",
}


def check_trl():
    """TRL is an optional extra: one clear line if it is missing or another version."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental: said above
    try:
        import trl
    except ImportError:
        raise SystemExit(f"error: examples/trl_selfguide.py needs TRL: "
                         f"pip install trl=={TRL_VERSION}") from None
    if trl.__version__ != TRL_VERSION:
        raise SystemExit(f"error: examples/trl_selfguide.py is written for and tested with "
                         f"trl=={TRL_VERSION} (found {trl.__version__}): it overrides private "
                         f"methods of GRPOTrainer; pip install trl=={TRL_VERSION}")


def process_count() -> int:
    """The processes this run is launched on (accelerate launch or torchrun set WORLD_SIZE)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def parse_config(argv=None) -> sg.Config:
    """selfguide.py's command line, with the settings TRL cannot run refused in one line."""
    return check_config(sg.parse_config(argv))


def check_config(cfg: sg.Config) -> sg.Config:
    """The settings TRL cannot run refused in one line; the KL as TRL's beta runs it."""
    for name, instead in REFUSED.items():
        if getattr(cfg, name) not in (False, ""):
            raise SystemExit(f"error: --{name.replace('_', '-')} is not run by the TRL bridge; "
                             f"{instead}")
    if cfg.kl_action not in (0.0, cfg.kl_guide):
        raise SystemExit(f"error: TRL's beta weighs every generated token alike, so the KL of "
                         f"the guide and action tokens is one weight (--kl-guide {cfg.kl_guide}); "
                         f"--kl-action {cfg.kl_action} cannot be run")
    rollouts, processes = cfg.tasks_per_iter * cfg.group_size, process_count()
    if rollouts % (cfg.minibatches * processes):
        raise SystemExit(f"error: TRL splits the {rollouts} rollouts of an iteration into "
                         f"--minibatches x processes equal parts; {cfg.minibatches} x "
                         f"{processes} does not divide them")
    return dataclasses.replace(cfg, kl_action=cfg.kl_guide)  # what beta does


# --- The episode: selfguide's rollout, handed to TRL as prompt + completion ---

def episode_slots(cfg: sg.Config, length: int) -> torch.Tensor:
    """(length,) the slot of each position of an episode's token stream. Every episode is a
    prefix of the longest one, whose layout is fixed ([<bos>, <mode>], then per step the
    observation's words, the guide, the action), so the slots follow from positions alone."""
    shown = " cue:start" if cfg.cue else ""
    step = ("at:0,0 goal:0,0 walls:none" + shown, "neutral", "north")
    _, slots = sg.encode_episode([step] * cfg.max_steps, cfg.guided)
    return torch.tensor(slots[:length])


def task_seeds(cfg: sg.Config) -> list:
    """The training tasks in the order selfguide.py draws them (its TrainState.tasks)."""
    tasks = random.Random(cfg.seed)
    return [tasks.randrange(sg.TRAIN_SEED_RANGE) for _ in range(cfg.iterations * cfg.tasks_per_iter)]


def rows_of(batch: sg.Rollouts, rows: torch.Tensor) -> sg.Rollouts:
    """The episodes `rows` of a batch, in that order."""
    return sg.Rollouts(*(getattr(batch, f.name)[rows] for f in dataclasses.fields(sg.Rollouts)))


def make_rollout_func(cfg: sg.Config, device):
    """TRL's rollout_func: each prompt is a task seed; the episodes are played by selfguide's
    rollout. Prompt = [<bos>, <mode>], completion = the rest of the stream; env_mask is 1 on
    the guide and action tokens the policy wrote, 0 on the observations.

    Every process plays the iteration's whole batch (the prompts of all processes, gathered
    in process order) from the same random stream, and returns its own rows: for minibatch k
    of the iteration (a random permutation of the rows, cut into --minibatches parts, as one
    process would cut it) the k-th part of its rows is this process's share of it. The
    advantages are computed over the whole batch (below)."""
    sampler = torch.Generator(device=device).manual_seed(cfg.seed)  # as selfguide's TrainState
    shuffler = torch.Generator().manual_seed(cfg.seed)               # orders the minibatches

    def rollout_func(prompts, trainer):
        from accelerate.utils import gather_object
        everyone = [int(p) for p in gather_object(list(prompts))]   # one process: its prompts
        batch = sg.rollout(trainer.model, everyone, cfg.guided, cfg, sampler)
        rank, processes = trainer.accelerator.process_index, trainer.accelerator.num_processes
        order = torch.randperm(len(everyone), generator=shuffler).view(cfg.minibatches, -1)
        share = order.shape[1] // processes                           # rows of a minibatch here
        trainer.rows = order[:, rank * share:(rank + 1) * share].flatten().to(device)
        trainer.episodes = batch  # all of them: the advantages need whole groups
        mine = rows_of(batch, trainer.rows)
        ends = [row.nonzero().max().item() + 1 for row in mine.slots != sg.SLOT_CONTEXT]
        guide_rewards = sg.step_rewards(mine.guides)                              # (n, T)
        return {"prompt_ids": [row[:2].tolist() for row in mine.tokens],
                "completion_ids": [row[2:end].tolist() for row, end in zip(mine.tokens, ends)],
                "logprobs": [row[2:end].tolist() for row, end in zip(mine.logprobs, ends)],
                "env_mask": [(row[2:end] != sg.SLOT_CONTEXT).long().tolist()
                             for row, end in zip(mine.slots, ends)],
                "success": mine.env_return.tolist(),
                "guide_return": (guide_rewards.sum(1) / mine.steps).tolist()}
    return rollout_func


def success_reward(completions, success, **_):
    """R_env, as TRL's first reward column (logged)."""
    return success


def guide_reward(completions, guide_return, **_):
    """The mean g(z_t) of an episode, as TRL's second reward column (logged, weight 0)."""
    return guide_return


def trainer_base_class():
    """GRPOTrainer with what the bridges share: the episodes of an iteration kept whole,
    selfguide's per-token advantages in place of TRL's, lambda(u) per iteration, the loss
    over the whole minibatch's tokens, and an iteration's record for log.jsonl. A subclass
    says where the steps are (`steps()`, an sg.Rollouts) and how a step's advantages reach
    its rows' tokens (`token_advantages`)."""
    from trl import GRPOTrainer
    from trl.trainer import grpo_trainer as grpo_trainer_module

    class SelfGuideTrainerBase(GRPOTrainer):
        def __init__(self, *args, selfguide_config: sg.Config, **kwargs):
            self.selfguide_config = selfguide_config
            self.records, self.episodes, self.rows = [], None, None
            super().__init__(*args, **kwargs)

        def _prepare_inputs(self, generation_batch):
            """TRL's, without its shuffle of each process's rows of a generation (a
            torch.randperm of the local batch), which on P processes would make other
            minibatches than on one: rollout_func orders the rows itself. The shuffle is put
            back after, so other GRPOTrainers in the process keep TRL's."""
            shuffle = grpo_trainer_module.shuffle_sequence_dict
            grpo_trainer_module.shuffle_sequence_dict = lambda batch: batch
            try:
                return super()._prepare_inputs(generation_batch)
            finally:
                grpo_trainer_module.shuffle_sequence_dict = shuffle

        @property
        def updates_per_iteration(self) -> int:
            return self.args.steps_per_generation * self.num_iterations

        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            if not self.model.training:  # TRL's own evaluation loop: not used by the bridges
                return output
            cfg, steps = self.selfguide_config, self.steps()
            # lambda(u) of the iteration these rollouts start: global_step counts optimizer
            # steps, several per iteration, and is u - 1 iterations' worth when u begins
            iteration = self.state.global_step // self.updates_per_iteration + 1
            trust = sg.trust_at(cfg, iteration)
            advantages, returns = sg.iteration_advantages(steps, cfg, trust)
            output["advantages"] = self.token_advantages(advantages,
                                                         output["completion_ids"].shape[1])
            self.records.append({"iteration": iteration, "trust": trust,
                                 **sg.episode_metrics(steps), **self.episode_extras(),
                                 "zero_variance_groups": sg.zero_variance(
                                     returns.view(-1, cfg.group_size)).float().mean().item()})
            return output

        def episode_extras(self) -> dict:
            return {}

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            # TRL's own copy of the setting, the one its loss reads; dr_grpo divides by a
            # constant, the same on every process: DDP's average is the one-process loss
            if self.loss_type != "bnpo":
                return loss
            return whole_minibatch_loss(loss, inputs, self.accelerator)

    return SelfGuideTrainerBase


def make_trainer_class():
    class SelfGuideGRPOTrainer(trainer_base_class()):
        """GRPOTrainer with constrained log-probs and selfguide's per-token advantages."""

        def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask,
                                               logits_to_keep, batch_size=None,
                                               compute_entropy=False, **unused):
            """Log-probs of the completion tokens (B, logits_to_keep) under the constrained,
            tempered distribution the rollout sampled from, and that distribution's entropy.
            (batch_size, TRL's chunking against memory peaks, is not needed at this size.)"""
            cfg = self.selfguide_config
            slots = episode_slots(cfg, input_ids.shape[1]).to(input_ids.device)
            slots = torch.where(attention_mask.bool(), slots, sg.SLOT_CONTEXT)       # (B, L)
            targets = sg.scored_positions(slots)                                     # (Q,)
            # a forward of `model` itself, which on P processes is the DDP wrapper: its
            # backward all-reduces the gradients (selfguide's last_block_logits would bypass it)
            logits = model(input_ids=input_ids, logits_to_keep=targets - 1,
                           use_cache=False).logits[..., sg.WRITABLE_IDS]             # (B, Q, W)
            logp = sg.constrained_logprobs(logits, slots[:, targets], cfg.temperature,
                                           cfg.guide_temperature)                    # (B, Q, W)
            column = sg.writable_column(input_ids.device)[input_ids[:, targets]]     # (B, Q)
            chosen = logp.gather(-1, column[..., None]).squeeze(-1)
            entropy = -torch.where(logp.isinf(), 0.0, logp.exp() * logp).sum(-1)    # (B, Q)
            generated = slots[:, targets] != sg.SLOT_CONTEXT

            def spread(values):  # (B, Q) -> (B, logits_to_keep), 0 off the generated tokens
                values = torch.where(generated, values, 0.0)
                full = torch.zeros(input_ids.shape, device=input_ids.device)
                return full.index_copy(1, targets, values)[:, -logits_to_keep:]
            return spread(chosen), spread(entropy) if compute_entropy else None, None

        def steps(self) -> sg.Rollouts:
            return self.episodes

        def token_advantages(self, advantages, width: int) -> torch.Tensor:
            """(N, L) over the episode streams -> this process's rows, after the prompt."""
            advantages = advantages[self.rows]                   # this process's rows (n, L)
            return F.pad(advantages[:, 2:], (0, width - advantages.shape[1] + 2))

    return SelfGuideGRPOTrainer


def whole_minibatch_loss(loss, inputs, accelerator):
    """TRL's bnpo loss is this process's token sum over its own token count; DDP then
    averages the P gradients. Rescaled here to the token sum over the token count of the
    whole minibatch across processes (times P, which DDP's average divides out), the loss of
    one process holding the whole minibatch. On one process the factor is exactly 1. (Only
    for bnpo: TRL's dr_grpo divides each process's sum by its rows x GRPOConfig's
    max_completion_length, a fixed setting, and the rows are equal on every process, so DDP's
    average is already the one-process loss.)"""
    mask = inputs["completion_mask"]
    if "tool_mask" in inputs:
        mask = mask * inputs["tool_mask"]
    local = mask.sum().float()
    total = accelerator.reduce(local.clone(), reduction="sum")
    return loss * local.clamp(min=1.0) * accelerator.num_processes / total.clamp(min=1.0)


def grpo_config(cfg: sg.Config, out: Path, device, **settings):
    """GRPOConfig with selfguide's settings, named where TRL names them; `settings`, TRL's own,
    override them (in the constructor: GRPOConfig derives its precision and batch sizes
    there, so a setting changed on the object afterwards is not seen)."""
    from trl import GRPOConfig
    rollouts = cfg.tasks_per_iter * cfg.group_size
    return GRPOConfig(**{**dict(
        output_dir=str(out), seed=cfg.seed, use_cpu=device.type == "cpu", bf16=False,
        num_generations=cfg.group_size,                  # G rollouts per task
        per_device_train_batch_size=rollouts // (cfg.minibatches * process_count()),
        steps_per_generation=cfg.minibatches,            # so a generation is one iteration
        num_iterations=cfg.update_epochs,                # passes over each iteration's rollouts
        max_steps=cfg.iterations * cfg.minibatches * cfg.update_epochs,
        shuffle_dataset=False,                           # the tasks in selfguide's order
        learning_rate=cfg.lr, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0,
        max_grad_norm=cfg.max_grad_norm,
        epsilon=cfg.clip,                                # epsilon_high defaults to it
        loss_type="bnpo",                                # one token mean over the minibatch
        beta=cfg.kl_guide, use_bias_correction_kl=False,  # k3 KL, not multiplied by the ratio
        temperature=cfg.temperature,
        max_completion_length=sg.episode_length(cfg) - 2,
        reward_weights=[1.0, 0.0],                       # logged; the advantages are replaced
        logging_steps=cfg.minibatches * cfg.update_epochs,  # once per iteration, into log.jsonl
        activation_checkpointing=False,                  # TRL's default is on; nothing to save here
        ddp_find_unused_parameters=False,                # every weight is used
        save_strategy="no", report_to="none", disable_tqdm=False), **settings})


# --- Training and evaluation ---

def selfguide_callbacks(trainer, cfg: sg.Config, evaluate=None, describe=sg.format_metrics,
                        name: str = "TRL", mazes: str = "held-out") -> list:
    """Callbacks that make TRL's loop report as selfguide.py does: evaluations every
    --eval-every iterations into the trainer's records (the final score is the mean of the
    last --final-evals), one line each, TRL's own metrics (KL, clip ratios, entropy, ...)
    into the same records instead of a dict printed under the progress bar. evaluate(model)
    gives the metrics (default: selfguide's evaluate) on the `mazes`, describe(metrics) their
    line."""
    evaluate = evaluate or (lambda model: sg.evaluate(model, cfg, cfg.guided))
    from transformers import TrainerCallback
    from transformers.trainer_callback import ProgressCallback

    class Evaluations(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step % trainer.updates_per_iteration:
                return
            iteration = state.global_step // trainer.updates_per_iteration
            if not trainer.accelerator.is_main_process:
                return  # the main process alone evaluates and prints
            if iteration % cfg.eval_every == 0 or iteration == cfg.iterations:
                start = time.perf_counter()
                record = trainer.records[-1]
                record["eval"] = evaluate(trainer.model)
                record["eval_seconds"] = time.perf_counter() - start
                tqdm.write(f"{name} {cfg.variant} seed {cfg.seed} iter {iteration:4d}  lambda "
                           f"{record['trust']:.2f}  {mazes} {describe(record['eval'])}")

        def on_log(self, args, state, control, logs=None, **kwargs):
            # TRL's share of zero-std groups reads G consecutive rows as a group, which the
            # rows in minibatch order are not: selfguide's zero_variance_groups is the figure
            trainer.records[-1].update({f"trl/{k}": v for k, v in (logs or {}).items()
                                        if k != "frac_reward_zero_std"})

    class QuietProgress(ProgressCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            pass  # the metrics are in log.jsonl; the evaluation line is printed above

    trainer.remove_callback(ProgressCallback)
    return [Evaluations(), QuietProgress()]


def weights_spread(model, accelerator) -> float:
    """The largest difference between the processes' copies of any weight (0.0 on one),
    compared a weight tensor at a time: all of a real model's weights in one flat copy, and
    the reductions' copies of it, would set the run's memory peak."""
    if accelerator.num_processes == 1:
        return 0.0
    spread = 0.0
    for parameter in model.parameters():
        weights = parameter.detach().flatten()
        highest = accelerator.reduce(weights, reduction="max")  # accelerate has no min:
        lowest = -accelerator.reduce(-weights, reduction="max")  # the lowest is -max(-w)
        spread = max(spread, (highest - lowest).max().item())
    return spread


def start_processes(cfg: sg.Config):
    """accelerate's process state (one process, or those the launcher started: each its own
    GPU), and this process's device; then the libraries' notices quietened."""
    from accelerate import PartialState
    from transformers.utils import logging as transformers_logging
    state = PartialState(cpu=sg.pick_device(cfg.device).type == "cpu")  # starts the group
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    transformers_logging.set_verbosity_error()  # the Trainer's notices about a tiny model
    # TRL gives the model a pad token, after which transformers warns that the rollout passes
    # no attention mask; the rollout pads only episodes that have ended, whose tokens nothing
    # later reads
    warnings.filterwarnings("ignore", message=".*passing in an `attention_mask`")
    # TRL 1.16 still calls transformers' old gradient-checkpointing names: nothing a user can change
    warnings.filterwarnings("ignore", message=".*gradient_checkpointing.* is deprecated",
                            category=FutureWarning)
    return state, state.device


def train_and_report(make_trainer, state, report, save, resume: str | None = None):
    """Build the trainer, train (from the checkpoint folder `resume`, if given), check that
    every process ends with the same weights, and let the main process report
    (report(trainer, minutes) -> its rows). Ctrl-C saves what is trained (save(model)). The
    trainer is built here so that this function holds its only reference, which it drops
    before the processes' group is closed."""
    trainer = make_trainer()
    start = time.perf_counter()
    try:
        trainer.train(resume_from_checkpoint=resume)
    except KeyboardInterrupt:
        if state.is_main_process:
            save(trainer.model)
        return None
    minutes = (time.perf_counter() - start) / 60
    spread = weights_spread(trainer.model, trainer.accelerator)
    if spread > 0:  # DDP keeps the copies equal to the bit; anything else is a fault
        raise SystemExit(f"error: the {state.num_processes} processes ended with different "
                         f"weights (largest difference {spread:.3g})")
    if state.num_processes == 1:
        return report(trainer, minutes)
    with state.main_process_first():  # the others wait for the main process's report
        rows = report(trainer, minutes) if state.is_main_process else None
    # then every process frees the DDP model and its process group before it exits: gloo's
    # threads, left to the interpreter's exit, abort the process now and then
    del trainer
    gc.collect()
    torch.distributed.destroy_process_group()
    return rows


def main(argv=None):
    check_trl()
    cfg = parse_config(argv)
    sg.check_transformers(sg.transformers.__version__)
    state, device = start_processes(cfg)
    out = Path(cfg.out or f"runs/trl-{cfg.variant}-seed{cfg.seed}")
    sg.checked_folder(cfg.prior_cache, "--prior-cache")
    sg.checked_folder(out, "--out")
    from datasets import Dataset
    sg.seed_everything(cfg.seed)
    with state.main_process_first():  # the main process clones the prior, the others load it
        sg.load_or_train_prior(cfg, device)
    prior_folder = Path(cfg.prior_cache) / f"prior-{sg.prior_key(cfg)}"
    policy = sg.load_policy(prior_folder, cfg, device)  # TRL builds its reference from this path
    before = []
    if state.is_main_process:
        before = [("prior, no guide (ReAct)", sg.evaluate(policy, cfg, guided=False)),
                  ("prior, guide (ReAct w/ SG)", sg.evaluate(policy, cfg, guided=True))]
        for name, metrics in before:
            tqdm.write(f"{name}: {sg.format_metrics(metrics)}")

    def make_trainer():
        trainer = make_trainer_class()(
            model=policy, processing_class=sg.build_tokenizer(),
            reward_funcs=[success_reward, guide_reward], args=grpo_config(cfg, out, device),
            train_dataset=Dataset.from_dict({"prompt": [str(s) for s in task_seeds(cfg)]}),
            rollout_func=make_rollout_func(cfg, device), selfguide_config=cfg)
        for callback in selfguide_callbacks(trainer, cfg):
            trainer.add_callback(callback)
        return trainer

    def save(model):
        sg.save_policy(model, out)
        print(f"\nstopped by Ctrl-C; the policy trained so far is saved in {out}")
    return train_and_report(make_trainer, state,
                            lambda trainer, minutes: report(trainer, cfg, out, before, minutes),
                            save)


def report(trainer, cfg: sg.Config, out: Path, before: list, minutes: float) -> list:
    """The main process's files and summary table, as selfguide.py's."""
    processes = trainer.accelerator.num_processes
    sg.save_policy(trainer.model, out)
    sg.write_atomic(out / "log.jsonl", "".join(json.dumps(r) + "\n" for r in trainer.records))
    sg.write_atomic(out / "selfguide_config.json", json.dumps(dataclasses.asdict(cfg), indent=2))
    rows = before + [
        (f"trained on TRL ({cfg.variant}), final policy", trainer.records[-1]["eval"]),
        (f"trained on TRL ({cfg.variant}), mean of the last {cfg.final_evals} evaluations",
         sg.final_metrics(trainer.records, cfg.final_evals))]
    table = sg.summary_table(rows)
    sg.write_atomic(out / "summary.md", table + "\n")
    on = f" on {processes} processes, whose weights agree" if processes > 1 else ""
    print(f"\n{table}\n\ngreedy, {cfg.eval_tasks} held-out tasks; TRL {TRL_VERSION}{on}, "
          f"{minutes:.1f} min of training; policy, config and log.jsonl in {out}")
    if cfg.show:
        print("\n" + sg.show_episodes(trainer.model, cfg, cfg.show, cfg.guided))
    return rows


if __name__ == "__main__":
    main()
