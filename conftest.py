"""What every test file shares (test_toy_env.py, test_selfguide.py, experiments/ and
examples/): the tiny settings and helpers, the bridges' launcher, the session's fixtures, each
made once (the Stage 0 cache, one tiny run of `python selfguide.py`), and each test's start on
the session's thread count.

    from conftest import TINY_ARGS, fake_episodes, tiny_config, tiny_policy
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import selfguide as sg

# --- the tiny settings and the helpers the tests share ---

TINY = dict(size=5, wall_prob=0.2, min_distance=4, max_steps=8, n_layer=1, n_embd=32, n_head=2,
            prior_episodes=64, prior_epochs=1, prior_batch=32, iterations=4, tasks_per_iter=4,
            group_size=4, eval_tasks=16, eval_every=2, minibatches=2, cue=False,
            guide_temperature=1.0)
TINY_ARGS = ["--size", "5", "--wall-prob", "0.2", "--min-distance", "4", "--max-steps", "8",
             "--n-embd", "32", "--n-head", "2", "--prior-episodes", "16", "--prior-epochs", "1",
             "--iterations", "3", "--tasks-per-iter", "2", "--group-size", "4",
             "--eval-tasks", "8", "--eval-every", "2", "--minibatches", "2", "--no-cue",
             "--guide-temperature", "1"]  # a run of a few seconds, on the command line


def tiny_config(**overrides) -> sg.Config:
    return sg.Config(**{**TINY, **overrides})


def tiny_policy(seed=0, **overrides):
    torch.manual_seed(seed)
    return sg.make_policy(tiny_config(**overrides)).eval()


def same_weights(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))


def fingerprint(policy) -> str:
    """The exact sum of a policy's weights, as a hex float: equal weights, equal strings."""
    return float(sum(p.detach().double().sum() for p in policy.parameters())).hex()


def two_hand_built_episodes() -> sg.Rollouts:
    """Two episodes of three and two steps: the first a success whose last judged move goes
    back to its start; guides, truths and cells as the metrics' tests read them."""
    long = torch.zeros(2, 1, dtype=torch.long)
    return sg.Rollouts(
        tokens=long, slots=long, logprobs=torch.zeros(2, 1),
        guides=torch.tensor([[1, 0, 2], [0, 0, -1]]),   # positive=0, neutral=1, negative=2
        truths=torch.tensor([[-1, 0, 0], [-1, 2, -1]]),
        cells=torch.tensor([[0, 1, 0], [0, 1, -1]]),  # episode 0's last judged move loops
        env_return=torch.tensor([1.0, 0.0]), steps=torch.tensor([3, 2]),
        optimal=torch.tensor([2, 2]))


def fake_episodes(freetext, count: int, guided: bool, successes=None):
    """What examples/trl_freetext.py's play returns, for the tests that stand in for it (its
    module passed as `freetext`): a tiny policy's greedy play of `count` episodes of two moves
    at most, R_env `successes` if given; no reply unreadable, unparseable or cut."""
    batch = sg.rollout(tiny_policy(), [0] * count, guided, tiny_config(max_steps=2), greedy=True)
    if successes is not None:
        batch.env_return = torch.tensor(successes)
    none = torch.zeros(count, 2, dtype=torch.bool)
    return freetext.Episodes([], [], none, none, batch, none)


def first_rollouts(policy, cfg: sg.Config):
    """The training rollouts of a run's first iteration from `policy`, replayed: the tasks and
    draws grpo_iteration makes from a new train state. Returns (rollouts, the replay's train
    state), on which research.Config.advantages keeps what it carries as the iteration's would."""
    replay = sg.new_train_state(policy, cfg)  # its optimizer is never stepped
    seeds = [replay.tasks.randrange(sg.TRAIN_SEED_RANGE) for _ in range(cfg.tasks_per_iter)]
    return sg.rollout(policy, [s for s in seeds for _ in range(cfg.group_size)], cfg.guided, cfg,
                      replay.sampler), replay


def hand_advantages(batch: sg.Rollouts, cfg: sg.Config, trust: float, rewards=None):
    """iteration_advantages put together by hand from the graded functions (step_rewards,
    length_neutral, composite_return, group_advantages, step_credit, per_token): the
    per-token advantages (N, L) and the composite returns (N,). rewards (N, T): r_t, by
    default the guides' g(z_t), as iteration_advantages takes them."""
    G, horizon = cfg.group_size, batch.guides.shape[1]
    scale = cfg.advantage == "grpo"
    rewards = sg.step_rewards(batch.guides) if rewards is None else rewards
    if cfg.internal_return == "mean":
        rewards = sg.length_neutral(rewards, batch.steps)
    returns, _ = sg.composite_return(batch.env_return, rewards, trust)
    env = sg.group_advantages(batch.env_return.view(-1, G), scale=scale).flatten()
    if cfg.credit == "step":
        action = sg.step_credit(env, rewards, trust, G, scale)
        guide = sg.step_credit(env, rewards, trust, G, scale, own=True)
    else:
        joint = sg.group_advantages(returns.view(-1, G), scale=scale).flatten()
        action = guide = joint[:, None].expand(-1, horizon)
    if cfg.guide_advantage == "env":
        guide = env[:, None].expand(-1, horizon)
    elif cfg.guide_advantage == "none":
        guide = torch.zeros(len(env), horizon)
    elif cfg.guide_advantage == "outcome":  # A_env,i x g(z_t) / 0.1, written out word by word
        sign = {0: 1.0, 1: 0.0, 2: -1.0, -1: 0.0}  # positive, neutral, negative, none
        guide = torch.tensor([[env[i].item() * sign[g] for g in row]
                              for i, row in enumerate(batch.guides.tolist())])
    elif cfg.guide_advantage == "truth":
        guide = torch.tensor([[0.0 if g < 0 or t < 0 else 1.0 if g == t else -1.0
                               for g, t in zip(gs, ts)]
                              for gs, ts in zip(batch.guides.tolist(), batch.truths.tolist())])
    return sg.per_token(batch.slots, action, guide), returns


# --- the TRL bridges of examples/ (an optional extra) ---

def require_trl(version: str):
    """TRL at the version the bridges are tested with, or a skip that names what is missing."""
    trl = pytest.importorskip("trl", reason="TRL is an optional extra: pip install trl==1.16.0")
    if trl.__version__ != version:
        pytest.skip(f"the bridges are tested with trl=={version}, found {trl.__version__}")


def launch(tmp_path, processes: int, name: str, args, extra=(), script="trl_selfguide.py"):
    """Run a bridge of examples/ with `args` (then `extra`) on `processes` processes (accelerate
    launch --multi_gpu, as on CPU it must be); returns (stdout, the run's folder)."""
    script = str(Path(__file__).parent / "examples" / script)
    launcher = ([sys.executable, script] if processes == 1 else
                [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
                 "--num_processes", str(processes), "--num_machines", "1",
                 "--mixed_precision", "no", "--dynamo_backend", "no", script])
    out = tmp_path / name
    run = subprocess.run(launcher + list(args) + list(extra) + [
        "--prior-cache", str(tmp_path / "priors"), "--out", str(out)],
        capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout, out


def same_update(prior: Path, one: Path, two: Path) -> list:
    """Assert that runs `one` and `two` moved the weights of `prior` by the same update, to a
    relative 1e-4; returns their log.jsonl records, paired iteration by iteration."""
    from safetensors.torch import load_file
    start = load_file(prior)
    a, b = load_file(one / "model.safetensors"), load_file(two / "model.safetensors")
    update = sum(((a[k] - start[k]) ** 2).sum() for k in a).sqrt()
    apart = sum(((a[k] - b[k]) ** 2).sum() for k in a).sqrt()
    assert update > 1e-3 and apart / update < 1e-4
    records = [[json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
               for run in (one, two)]
    assert len(records[0]) == len(records[1])
    return list(zip(*records))


# --- fixtures ---

SESSION_THREADS = torch.get_num_threads()  # before any test (or session fixture) sets its own


@pytest.fixture(autouse=True)
def thread_count_restored():
    """Each test runs on the session's thread count: a run that sets its own (--threads, or
    the one thread each seed of compare.py and checkpoints.py runs on) keeps it after it ends,
    in a test or in a session fixture made for one."""
    torch.set_num_threads(SESSION_THREADS)
    yield
    torch.set_num_threads(SESSION_THREADS)


@pytest.fixture(scope="session")
def prior_cache(tmp_path_factory):
    """The session's Stage 0 cache (keyed by settings, safe across processes): tests that only
    read a prior clone each one once. The tests of the cache itself keep caches of their own."""
    return tmp_path_factory.getbasetemp() / "priors"


@pytest.fixture(scope="session")
def tiny_run(prior_cache, tmp_path_factory):
    """`python selfguide.py` with TINY_ARGS: (its summary rows, its folder), read by the tests
    of main and of the figures."""
    out = tmp_path_factory.getbasetemp() / "tiny-run"
    rows = sg.main(TINY_ARGS + ["--out", str(out), "--prior-cache", str(prior_cache)])
    return rows, out
