"""Where the time of selfguide.py goes: the rollout with and without its KV cache, a training
pass at every position against the scored positions only, one GRPO iteration by part, and
Stage 0.

    python experiments/benchmark.py                     # the default settings, on this machine
    python experiments/benchmark.py --device cuda       # on a GPU
    python experiments/benchmark.py --variant grpo      # any of selfguide.py's settings

Each figure is the median of a few repeats after a warm-up, on an untrained policy (its
episodes run to full length, the worst case). Nothing here is part of the method: it calls the
method's own functions and times them from outside.
"""
from __future__ import annotations

import copy
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # selfguide.py, toy_env.py

import torch  # noqa: E402
import transformers  # noqa: E402

import selfguide as sg  # noqa: E402


def median_seconds(work, repeats: int = 5) -> float:
    """The median wall time of `work()` over `repeats` calls, after one warm-up call."""
    work()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        seconds.append(time.perf_counter() - start)
    return sorted(seconds)[len(seconds) // 2]


def recomputed_forwards(policy, batch: sg.Rollouts):
    """The forward passes a rollout without a KV cache would make: at every step, the whole
    stream so far, for the guide and for the action. (Decoding needs the last position only;
    a cache-free rollout pays for every earlier one again.)"""
    with torch.no_grad():
        for end in sg.scored_positions(batch.slots).tolist():
            sg.writable_logits(policy, batch.tokens[:, :end])[:, -1]


def parse_args(argv=None) -> sg.Config:
    """selfguide.py's settings: the benchmark times the iteration they describe."""
    return sg.parse_config(argv)


def main(argv=None):
    cfg = parse_args(argv)
    sg.check_transformers(transformers.__version__)
    device = sg.pick_device(cfg.device)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    sg.seed_everything(cfg.seed)
    policy = sg.make_policy(cfg).to(device).eval()
    seeds = list(range(cfg.tasks_per_iter * cfg.group_size))
    sampler = torch.Generator(device=device)

    def play():
        return sg.rollout(policy, seeds, True, cfg, sampler.manual_seed(0))

    batch = play()
    cached = median_seconds(play, repeats=3)
    recomputed = median_seconds(lambda: recomputed_forwards(policy, batch), repeats=1)
    print(f"rollout of {len(seeds)} episodes x {batch.steps.float().mean():.1f} steps "
          f"({batch.tokens.shape[1]} tokens): with the KV cache {cached:.2f} s; its forward "
          f"passes alone, recomputed over the whole stream at each step, {recomputed:.2f} s "
          f"({recomputed / cached:.1f}x)")
    # a training pass: transformers' forward at every position vs the scored positions only
    size = len(seeds) // cfg.minibatches
    tokens, targets = batch.tokens[:size], sg.scored_positions(batch.slots[:size])
    every = median_seconds(
        lambda: sg.writable_logits(policy, tokens)[:, targets - 1].sum().backward())
    scored = median_seconds(
        lambda: sg.last_block_logits(policy, tokens, targets - 1).sum().backward())
    policy.zero_grad(set_to_none=True)
    print(f"training pass (forward + backward, {size} episodes): transformers' forward "
          f"{every * 1000:.1f} ms, the last block at the scored positions only "
          f"(last_block_logits) {scored * 1000:.1f} ms, speed-up {every / scored:.1f}x")
    # one GRPO iteration, and its parts timed alone on the same batch
    state, reference = sg.new_train_state(policy, cfg), copy.deepcopy(policy)
    whole = median_seconds(lambda: sg.grpo_iteration(policy, reference, cfg, state), repeats=3)
    advantages, _ = sg.iteration_advantages(batch, cfg, 1.0, 1)
    with torch.no_grad():
        reference_logprobs = sg.token_logprobs(reference, batch.tokens, batch.slots,
                                               cfg.temperature, cfg.guide_temperature)
    weights = torch.where(batch.slots == sg.SLOT_GUIDE, cfg.kl_guide, cfg.kl_action)
    parts = {
        "rollout": cached,
        "reference log-probs": median_seconds(lambda: sg.token_logprobs(
            reference, batch.tokens, batch.slots, cfg.temperature, cfg.guide_temperature),
            repeats=3),
        "update": median_seconds(lambda: sg.grpo_update(
            policy, state.optimizer, batch, advantages, reference_logprobs, weights, cfg,
            state.shuffler), repeats=3)}
    print(f"one GRPO iteration ({cfg.variant}, {len(seeds)} episodes): {whole:.3f} s; alone, "
          + ", ".join(f"{name} {seconds:.3f}" for name, seconds in parts.items())
          + f" ({cfg.update_epochs} x {cfg.minibatches} minibatches)")
    sg.seed_everything(cfg.seed)
    start = time.perf_counter()
    corpus = sg.demonstration_corpus(cfg)
    corpus_seconds = time.perf_counter() - start
    losses = list(sg.clone_demonstrator(sg.make_policy(cfg).to(device), *corpus, cfg, device))
    print(f"Stage 0: {cfg.prior_episodes} demonstrations in {corpus_seconds:.1f} s, cloning "
          f"{len(losses)} updates in {time.perf_counter() - start - corpus_seconds:.1f} s "
          f"(loss {losses[0]:.3f} -> {losses[-1]:.3f}), total {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
