"""ScienceWorld (Wang et al., 2022), the paper's own benchmark, as a text world
(textworld.TextWorld) for the free-text path, with the demonstrator a tiny player is cloned
from and the floor and ceiling every figure sits between.

    pip install scienceworld==1.2.3             # the simulator: a jar, run by Java over py4j
    apt-get install -y default-jre-headless     # Java, where it is missing (17 on this machine kind)
    python examples/science_world.py             # the floor and the ceiling on the test variations
    python examples/trl_freetext.py --world scienceworld             # clone a player, train it

- Tasks: the four `find-*` tasks (find an animal, a living thing, a non-living thing, a
  plant; focus on it, then move it to the box the task names), each with its own train / dev /
  test variations (150 / 75 / 75). A task seed picks a (task, variation) pair by selfguide's
  ranges: training and demonstration seeds (below 10^9) the train variations, held-out seeds
  (10^9 on) the test variations, tuning seeds (2 x 10^9 on) the dev variations, the four tasks
  in turn. Nothing trains on a dev or test variation.
- A turn shows the whole task on every turn, as ScienceWorld's own agents read it ("find a(n)
  animal. First, focus on the thing. Then, move it to the red box in the kitchen."), with the
  step's observation, the room (from `look`'s first line) and the inventory. With --window K
  (the default, 4) the player reads the system turn and this turn alone, which also lists its
  last K actions; with --window 0 it reads the whole chat. Demonstrations are kept as each
  step's parts (PARTS), so a new format or step cap renders from one draw.
- An action is the reply's text as written, no matching: text the simulator does not know
  ("No known action matches that input.") or that names several things (an ambiguous
  request, cancelled) changes nothing; the step counts, and the share of valid actions is
  reported.
- R_env: 1 when the score reaches 100, the task done (`reward="success"`, the paper's R_env,
  the default), the final score / 100 (`"score"`, partial credit, -1 for a wrong focus), or
  the same with a wrong focus 0 (`"clamped"`); success is the task done either way.
  Focusing on a wrong thing ends the episode at -100 (a mean score counts it as 0). A step's
  truth is the sign of the score's change: rose, positive; unchanged, neutral; fell or
  failed, negative.
- Each episode of a batch has its own simulator (a JVM of about 250 MB), kept in a pool for
  the process and reused; their steps run side by side in threads.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))         # textworld.py
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # toy_env (GUIDES)

import textworld  # noqa: E402
from toy_env import GUIDES  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

FIND_TASKS = ("find-animal", "find-living-thing", "find-non-living-thing", "find-plant")
INSTALL = ("pip install scienceworld==1.2.3, and a Java runtime (apt-get install -y "
           "default-jre-headless)")
# a small heap: a simulator in about 250 MB of memory, started in a second or two (listing a
# task's variations needs more than 96 MB of heap); and every object's identity hash the same
# (-XX:hashCode=2): ScienceWorld 1.2.3 plans a gold path over hash sets, whose order with the
# JVM's default hashes changes from one JVM to the next (the same loads in a new simulator
# focused a gold path on another animal in about one run in four)
JAVA_OPTIONS = ("-Xmx160m -Xss512k -XX:+UseSerialGC -XX:+UnlockExperimentalVMOptions "
                "-XX:hashCode=2")
UNKNOWN = ("No known action matches that input.", "Unknown action.")
AMBIGUOUS = "Ambiguous request"
HELD_OUT, TUNING = 10**9, 2 * 10**9  # selfguide's held-out and tuning seed bases
SPLITS = {"train": 0, "test": HELD_OUT, "dev": TUNING}  # each split's first seed
VARIATIONS = {"train": 600, "dev": 300, "test": 300}  # the find-* tasks' pairs (a test checks)
THREADS = 8  # simulators stepped side by side (each a process of its own)

SYSTEM = ("You are an agent in a house, doing a science task. Each turn shows the task, what "
          "your last action did, the room you are in and what you carry, and may list your "
          "recent actions.")
ASK_GUIDED = (" Reply with two lines: Assessment: how your last action went, positive, neutral "
              "or negative, and why; then Action: one action, such as open door to kitchen, go "
              "to kitchen, look around, focus on apple, pick up apple, move apple to red box.")
ASK_UNGUIDED = (" Reply with one line: Action: one action, such as open door to kitchen, go to "
                "kitchen, look around, focus on apple, pick up apple, move apple to red box.")
PHRASES = {  # the demonstrator's judgements as short phrases; the guide word is what is read
    "positive": ["positive, that was progress", "positive, a step toward the task"],
    "neutral": ["neutral, nothing gained yet", "neutral, no progress"],
    "negative": ["negative, that went wrong", "negative, a wasted step"]}
DETOUR = 0.5     # share of the demonstrations with a misspelt action (then the right one); the
# others, half of them, at each gold `open door to` step (with probability 1/2, where another
# door exists) walk into a wrong room and back, at most once: 853 of the first 1,200 take one
MISJUDGE = 0.1   # share of the demonstrator's judgements replaced by another polarity
PARTS = ("result", "room", "inventory")  # what a demonstration keeps of each step
# in the caches' keys: how the corpus is drawn
DRAW = ("a simulator per worker", JAVA_OPTIONS, "things named as look lists them")


def check_installed():
    """One line naming the install if the package or Java is missing, before any work."""
    try:
        import scienceworld  # noqa: F401
    except ImportError:
        raise SystemExit(f"error: ScienceWorld is not installed: {INSTALL}")
    if not shutil.which("java"):
        raise SystemExit(f"error: ScienceWorld's simulator needs Java, which is not on PATH: "
                         f"{INSTALL}")


# --- The simulators: one per episode played side by side, started once per process ---

_POOL: list = []
# The pool grows, and the splits are listed, by one thread at a time: the episodes of a batch,
# reset side by side, would otherwise each start a simulator for the pool, or load tasks on
# the pool's first simulator in the middle of that simulator's own episode
_LOCK = threading.Lock()


def simulators(count: int) -> list:
    """`count` simulators, started where the pool has fewer (about a second each)."""
    with _LOCK:
        missing = count - len(_POOL)
        if missing > 0:
            with ThreadPoolExecutor(THREADS) as threads:
                _POOL.extend(threads.map(lambda _: fresh_simulator(), range(missing)))
        return _POOL[:count]


def fresh_simulator():
    """A simulator of its own, with JAVA_OPTIONS' constant identity hashes: under the JVM's
    default ones ScienceWorld 1.2.3 lists a room and plans a gold path differently on each
    load of one variation and in each new JVM (under constant ones six loads agree, and a
    demonstration is the same drawn on a new simulator or after others on one)."""
    check_installed()
    from scienceworld import ScienceWorldEnv
    options = os.environ.get("JAVA_TOOL_OPTIONS", "")
    if JAVA_OPTIONS not in options:  # after a user's own options: the JVM reads the last
        os.environ["JAVA_TOOL_OPTIONS"] = f"{options} {JAVA_OPTIONS}".strip()
    return ScienceWorldEnv("", envStepLimit=10**6)


def side_by_side(function, items) -> list:
    """function over items in threads (each call talks to its own simulator's process)."""
    if len(items) <= 1:
        return [function(item) for item in items]
    with ThreadPoolExecutor(min(THREADS, len(items))) as threads:
        return list(threads.map(function, items))


_PAIRS: dict = {}


def task_pairs(split: str, tasks=FIND_TASKS) -> list:
    """The (task, variation) pairs of a split, the tasks in turn: [(task, variation)]."""
    key = (split, tuple(tasks))
    with _LOCK:  # listed once, on a simulator of its own: no episode's history holds it
        if key not in _PAIRS:
            simulator, lists = fresh_simulator(), []
            try:
                for task in tasks:
                    simulator.load(task, 0, "")
                    lists.append({"train": simulator.get_variations_train,
                                  "dev": simulator.get_variations_dev,
                                  "test": simulator.get_variations_test}[split]())
            finally:
                simulator.close()
            _PAIRS[key] = [(task, variations[k]) for k in range(max(map(len, lists)))
                           for task, variations in zip(tasks, lists) if k < len(variations)]
        return _PAIRS[key]


def split_of(seed: int) -> str:
    return "dev" if seed >= TUNING else "test" if seed >= HELD_OUT else "train"


def pair_of(seed: int, tasks=FIND_TASKS) -> tuple:
    """(task, variation, index): what a task seed plays, the index-th pair of its split: a
    train pair for any seed below 10^9 (by its remainder), the (seed - base)-th test or dev
    pair above (past the last: a ValueError)."""
    split = split_of(seed)
    pairs = task_pairs(split, tasks)
    index = seed % len(pairs) if split == "train" else seed - SPLITS[split]
    if index >= len(pairs):
        raise ValueError(f"ScienceWorld has {len(pairs)} {split} variations of these tasks; "
                         f"seed {seed} asks for number {index + 1}")
    return (*pairs[index], index)


# --- The world: one episode in one simulator ---

def room_of(look: str) -> str:
    found = re.search(r"called the ([^.]+)\.", look)
    return found.group(1) if found else "unknown"


def items_of(inventory: str) -> str:
    items = [line.strip() for line in inventory.splitlines()[1:] if line.strip()]
    return ", ".join(items) or "nothing"


# What a turn shows, rendered from a step's parts (the caches' keys hold this text: a new
# format is a new corpus rendering and a new prior). {recent}: the last --window actions
TURN = {"window": "Task: {task}\nRecent actions: {recent}\nObservation: {result}\n"
                  "Room: {room}. Inventory: {inventory}.",
        "chat": "{result}\n(task: {task} Room: {room}. Inventory: {inventory}.)"}


def turn_text(parts: dict, task: str, actions: list, window: int) -> str:
    """The turn of a step from its parts ({"result", "room", "inventory"}), the episode's
    whole task and the actions taken so far: with window K > 0 the turn the player reads
    alone, with its last K actions; with 0 a turn of the whole chat."""
    recent = "; ".join(actions[-window:]) if window and actions else "none yet"
    return TURN["window" if window else "chat"].format(task=task, recent=recent, **parts)


def shown(demonstration: dict, window: int, steps: int) -> list:
    """A demonstration's first `steps` steps as play shows them: [(turn, guide, action)]."""
    return [(turn_text(parts, demonstration["task"], [a for _, _, a in
                                                       demonstration["steps"][:t]], window),
             guide, action)
            for t, (parts, guide, action) in enumerate(demonstration["steps"][:steps])]


class ScienceWorld:
    """One episode of a find-* task in its own simulator (textworld.TextWorld)."""
    label = "Action"
    reply = textworld.assessment_pattern(label)
    task_sets = {"held-out": "test variations", "tuning": "dev variations",
                 "training": "train variations"}
    phrases = PHRASES
    side_by_side = staticmethod(side_by_side)  # in threads: each simulator its own process

    @staticmethod
    def system_prompt(guided: bool) -> str:
        return SYSTEM + (ASK_GUIDED if guided else ASK_UNGUIDED)

    @staticmethod
    def prior_key(ft) -> list:
        """What the prior's cache key holds besides the settings: how the corpus is drawn and
        what a turn shows."""
        return ["scienceworld", DETOUR, MISJUDGE, DRAW, TURN, ft.window, ft.corpus]

    @staticmethod
    def reads_one_turn(ft) -> bool:
        """Does the player read the system turn and the latest turn alone (--window > 0)?"""
        return ft.window > 0

    @classmethod
    def batch(cls, cfg, ft, count: int) -> list:
        """A simulator each, from the pool, R_env as --env-reward says."""
        return [cls(simulator, reward=ft.env_reward, window=ft.window)
                for simulator in simulators(count)]

    @classmethod
    def prior_demonstrations(cls, cfg, ft, probe: int = 0) -> list:
        """The demonstrator's episodes (`demonstrate`), each in both formats, rendered in
        --window's turns and cut at --max-steps: --prior-episodes of them over the train
        variations (--corpus gold: those without a detour), or `probe` on dev variations.
        Drawn once (they take the simulators minutes) and kept as parts in --freetext-cache,
        for any format, cap or seed; a seed draws the phrases."""
        seeds = [TUNING + i for i in range(probe)] if probe else list(range(cfg.prior_episodes))
        drawn = corpus(seeds, ft.freetext_cache)
        if ft.corpus == "gold" and not probe:
            drawn = [d for d in drawn if not d["detour"]]
        phrases = random.Random(f"phrases-{cfg.seed}" + ("-probe" if probe else ""))
        return [(guided, [(o, textworld.reply_text(g, a, guided, phrases, cls))
                          for o, g, a in shown(d, ft.window, cfg.max_steps)])
                for d in drawn for guided in (True, False)]

    def __init__(self, simulator, tasks=FIND_TASKS, reward: str = "success", window: int = 0):
        self.simulator, self.server, self.tasks = simulator, simulator.server, tasks
        self.score, self.task, self.reward, self.window = 0, "", reward, window
        self.parts, self.actions = {}, []

    def reset(self, seed: int, gold: bool = False) -> tuple[str, dict]:
        task, variation, index = pair_of(seed, self.tasks)
        self.simulator.load(task, variation, "", generateGoldPath=gold)  # a fresh start
        self.score, self.actions = 0, []
        description = self.server.freeActionTaskDesc().replace("Task Description:", "").strip()
        self.task = description.removeprefix("Your task is to ")  # the whole task
        info = {"task": index, "name": task, "variation": variation, "optimal": -1}
        if gold:
            info["gold"] = list(self.simulator.get_gold_action_sequence())
            info["optimal"] = len(info["gold"])
        look = self.server.freeActionLook().strip()
        self.parts = self.observed(look, look)
        return self.turn(), info

    def observed(self, result: str, look: str) -> dict:
        """A step's parts: what the action did, the room and the inventory."""
        return {"result": result, "room": room_of(look),
                "inventory": items_of(self.server.freeActionInventory())}

    def turn(self) -> str:
        return turn_text(self.parts, self.task, self.actions, self.window)

    def step(self, action: str | None) -> tuple[str, float, bool, dict]:
        if action is None:  # a reply that names no action: the step changes nothing
            result = UNKNOWN[0]
        else:
            result = self.server.step(action).strip()
            if result.startswith(AMBIGUOUS):  # cancelled (the simulator waits for a number)
                self.server.step("")
                options = [line.split("\t", 1)[-1] for line in result.splitlines()[1:]]
                result = "Ambiguous request, cancelled: it could be " + "; ".join(options) + "."
        valid = action is not None and not result.startswith(UNKNOWN + ("Ambiguous",))
        score = round(100 * self.server.getScore()) if valid else self.score
        truth = "positive" if score > self.score else "negative" if score < self.score \
            else "neutral"
        done = score < 0 or score >= 100 or bool(self.server.getCompleted())
        reward = {"success": float(score >= 100), "score": (score - self.score) / 100,
                  "clamped": (max(score, 0) - max(self.score, 0)) / 100}[self.reward]
        self.score = score
        self.actions.append(action if action is not None else "(no action)")
        self.parts = self.observed(result, self.server.freeActionLook())
        info = {"truth": GUIDES.index(truth), "valid": valid, "score": score}
        return self.turn(), reward, done, info

    @staticmethod
    def read_action(text: str):
        """The text after "Action:" on its line (markdown bold and the edges' spaces off)."""
        found = ACTION.search(text)
        raw = found.group("action") if found else ""
        action = raw.strip().strip("*").strip()
        if not action:
            return None, None
        start = found.start("action") + raw.index(action)
        return (start, start + len(action)), action


ACTION = re.compile(r"(?i)\**action\**[ \t]*:\**[ \t]*(?P<action>[^\n]*)")


# --- The demonstrator: the gold paths with detours, judged from the score's change ---

DOOR = re.compile(r"A door to the ([^(\n]+?) \(that is (open|closed)\)")


STAGES = ("adult ", "reproducing ", "seedling ", "seed ")  # a plant's stage, which time moves


def simpler_gold(gold: list) -> list:
    """The gold path said as the player can read it off its turns: a plant focused on without
    its stage (which changes as steps pass: "focus on adult pea plant" -> "focus on pea
    plant"), and the last action "move <what it picked up (or focused on)> to <box>" for the
    simulator's own phrasing ("move egg butterfly egg in inventory to red box" -> "move
    butterfly to red box")."""
    gold = [next((f"focus on {a[9 + len(s):]}" for s in STAGES if a.startswith(f"focus on {s}")),
                 a) for a in gold]
    last, picked = gold[-1], [a.removeprefix("pick up ") for a in gold if a.startswith("pick up ")]
    focused = [a.removeprefix("focus on ") for a in gold if a.startswith("focus on ")]
    box = re.search(r" to (\S+ box)$", last)
    if not last.startswith("move ") or not box or not (picked or focused):
        return gold
    return gold[:-1] + [f"move {(picked or focused)[-1]} to {box.group(1)}"]


# a thing as `look` lists it: "a parrot egg", "a flower pot 7 (containing ...)", "a substance
# called soap" (its name: soap)
LISTED = re.compile(r"\b(?:a|an) (?:substance called )?([a-z][a-z0-9 ]*?)"
                    r"(?= \(|,|\.|\n|$| in the | on the )")


def listed_name(referent: str, look: str) -> str:
    """The name the room's `look` lists for the simulator's referent of a thing: the referent
    itself where it is listed so, else the one listed name holding all its words ("egg
    parrot" -> "parrot egg", "butterfly" -> "butterfly egg"); the referent where none or
    several do."""
    names = LISTED.findall(look)
    holding = [n for n in names if set(referent.split()) <= set(n.split())]
    return referent if referent in names or len(holding) != 1 else holding[0]


def misspelt(action: str, rng: random.Random) -> str:
    """An action the simulator does not know: a letter of its longest word dropped."""
    words = action.split()
    k = max(range(len(words)), key=lambda i: (len(words[i]), rng.random()))
    cut = rng.randrange(len(words[k]))
    words[k] = words[k][:cut] + words[k][cut + 1:]
    return " ".join(words)


def demonstrate(world: ScienceWorld, seed: int, rng: random.Random, plain: bool = False):
    """One demonstration of the task of `seed`: the gold path (its last action simpler_gold's,
    the thing it focuses on named as the room lists it, `listed_name`, from there on),
    with probability DETOUR a misspelt action, then the right one, else (for half of the
    others) at a gold `open door to` step, with probability 1/2 each where another door exists,
    a door to a wrong room opened and walked through, then the way back (at most one detour),
    each step judged before its action: the score's change since the last action (rose:
    positive; fell: negative), its own detour's wrong step negative, else neutral; MISJUDGE of
    them replaced by another word.
    `plain`: the gold path as the simulator gives it, without a detour. Returns
    ([(the step's parts, guide, action)], the final score, the gold path, whether it took a
    detour)."""
    _, info = world.reset(seed, gold=True)
    gold = info["gold"]
    plan = [(a, False) for a in (gold if plain else simpler_gold(gold))]
    if not plain and rng.random() < DETOUR:
        at = rng.randrange(len(plan))
        plan[at:at] = [(misspelt(plan[at][0], rng), True)]
    wrong_room = not plain and rng.random() < 0.5 and not any(wrong for _, wrong in plan)
    steps, last_score, mistake, score, detour = [], 0, False, 0, False
    while plan:
        action, wrong = plan.pop(0)
        detour = detour or wrong
        if not plain and not wrong and action.startswith("focus on "):  # the name it reads
            referent = action.removeprefix("focus on ")
            name = listed_name(referent, world.server.freeActionLook())
            plan = [(re.sub(rf"^(pick up|move) {re.escape(referent)}\b", rf"\1 {name}", a), w)
                    for a, w in plan]
            action = f"focus on {name}"
        if wrong_room and action.startswith("open door to ") and rng.random() < 0.5:
            here = room_of(world.server.freeActionLook())
            doors = [d for d, _ in DOOR.findall(world.server.freeActionLook())
                     if d != action.removeprefix("open door to ")]
            if doors:  # through a wrong door and back, then the planned action
                other, wrong_room = rng.choice(doors), False
                plan[:0] = [(f"go to {other}", True), (f"go to {here}", False), (action, wrong)]
                action, wrong, detour = f"open door to {other}", False, True
        judged = "positive" if score > last_score else "negative" if score < last_score \
            or mistake else "neutral"
        if steps and rng.random() < MISJUDGE:
            judged = rng.choice([g for g in GUIDES if g != judged])
        steps.append((world.parts, judged if steps else "neutral", action))
        last_score = score
        _, _, done, info = world.step(action)
        score, mistake = info["score"], wrong
        if done:
            break
    return steps, score, gold, detour


def demonstrations(seeds: list, tasks=FIND_TASKS, workers: int = 4) -> list:
    """The demonstrations of these task seeds (the i-th drawn from its own stream), `workers`
    side by side, each on a simulator of its own (fresh_simulator: under its constant hashes
    the same seed draws the same demonstration whatever was drawn before it or beside it,
    tested; a new simulator for each took five times as long); only those that finish the task
    (score 100) are kept (one that does not, its stage-bound referents outrun by a detour, is
    drawn again plain): [{"seed", "index", "task" (the whole task), "detour" (whether it
    took one), "steps": [(the step's parts, guide, action)]}], in the seeds' order."""
    bar = tqdm(total=len(seeds), desc="ScienceWorld demonstrations", leave=False)

    def draw(worker: int) -> list:
        kept, simulator = [], fresh_simulator()
        try:  # its JVM closed whatever happens
            world = ScienceWorld(simulator, tasks)
            for i in range(worker, len(seeds), workers):
                bar.update()
                rng = random.Random(f"demonstration-{seeds[i]}")
                steps, score, _, detour = demonstrate(world, seeds[i], rng)
                if score < 100:
                    steps, score, _, detour = demonstrate(world, seeds[i], rng, plain=True)
                if score >= 100:
                    kept.append({"seed": seeds[i], "index": i, "task": world.task,
                                 "detour": detour, "steps": steps})
        finally:
            simulator.close()
        return kept
    kept = [d for part in side_by_side(draw, list(range(workers))) for d in part]
    bar.close()
    return sorted(kept, key=lambda d: d["index"])


def corpus(seeds: list, folder) -> list:
    """`demonstrations` of these seeds, drawn once and kept in `folder` as JSON (their steps'
    parts, so any turn format or step cap renders from one draw), keyed by how they are
    drawn."""
    key = json.dumps([seeds, FIND_TASKS, DETOUR, MISJUDGE, DRAW, PARTS])
    path = Path(folder) / (f"scienceworld-demonstrations-"
                           f"{hashlib.sha256(key.encode()).hexdigest()[:12]}.json")
    if not path.exists():
        from selfguide import write_atomic
        path.parent.mkdir(parents=True, exist_ok=True)  # before the minutes of drawing
        write_atomic(path, json.dumps(demonstrations(seeds)))
    return json.loads(path.read_text())


# --- The floor and the ceiling: a random valid action, and the gold path ---

def random_valid(world: ScienceWorld, seed: int, horizon: int, rng: random.Random) -> dict:
    """An episode of uniformly random valid actions (the simulator's own list each step)."""
    world.reset(seed)
    for step in range(1, horizon + 1):
        action = rng.choice(sorted(world.simulator.get_valid_action_object_combinations()))
        _, _, done, info = world.step(action)
        if done:
            break
    return {"score": info["score"], "success": float(info["score"] >= 100), "steps": step}


def gold_path(world: ScienceWorld, seed: int) -> dict:
    """The simulator's gold path, replayed as written: the ceiling (100 by construction)."""
    _, info = world.reset(seed, gold=True)
    for action in info["gold"]:
        _, _, done, last = world.step(action)
    return {"score": last["score"], "success": float(last["score"] >= 100),
            "steps": len(info["gold"]),
            "target": next((a[9:] for a in info["gold"] if a.startswith("focus on ")), None)}


def baselines(split: str = "test", horizon: int = 20, workers: int = 4, seed: int = 0) -> dict:
    """The floor and the ceiling on every variation of a split, side by side: per episode
    {"score", "success", "steps"} of the random valid action and of the gold path, and the
    gold path's focus target (what the task asks to find)."""
    seeds = [SPLITS[split] + i for i in range(VARIATIONS[split])]
    worlds = [ScienceWorld(s) for s in simulators(workers)]
    bar = tqdm(total=len(seeds), desc=f"floor and ceiling, {split} variations", leave=False)

    def play(worker: int) -> list:
        played = []
        for i in range(worker, len(seeds), workers):
            played.append((i, random_valid(worlds[worker], seeds[i], horizon,
                                           random.Random(f"random-{seed}-{seeds[i]}")),
                           gold_path(worlds[worker], seeds[i])))
            bar.update()
        return played
    played = sorted(r for part in side_by_side(play, list(range(workers))) for r in part)
    bar.close()
    return {"random": [r for _, r, _ in played], "gold": [g for _, _, g in played]}


def mean_row(name: str, episodes: list) -> str:
    score = sum(max(e["score"], 0) for e in episodes) / len(episodes)
    success = sum(e["success"] for e in episodes) / len(episodes)
    steps = sum(e["steps"] for e in episodes) / len(episodes)
    return f"| {name} | {success:.3f} | {score:.1f} | {steps:.1f} |"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="ScienceWorld's floor (a random valid action) "
                                     "and ceiling (the gold path) on a split of the find-* tasks")
    parser.add_argument("--split", default="test", choices=["test", "dev"])
    parser.add_argument("--max-steps", type=int, default=20, help="the random walk's horizon")
    parser.add_argument("--seed", type=int, default=0, help="the random walk's draws")
    parser.add_argument("--out", default="", help="write the episodes here as JSON")
    args = parser.parse_args(argv)
    if args.max_steps < 1:
        parser.error("--max-steps must be at least 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    check_installed()
    if args.out:  # its folder made (or refused in one line) before the minutes of play
        from selfguide import checked_folder
        checked_folder(Path(args.out).resolve().parent, "--out's folder")
    played = baselines(args.split, args.max_steps, seed=args.seed)
    trained = {g["target"] for g in baselines_targets("train")}
    met = sum(g["target"] in trained for g in played["gold"])
    print(f"{args.split} variations of {', '.join(FIND_TASKS)}, each played once:\n\n"
          f"| policy | success | mean score | steps |\n|---|---|---|---|\n"
          f"{mean_row('random valid action (the floor)', played['random'])}\n"
          f"{mean_row('gold path (the ceiling)', played['gold'])}\n\n"
          f"{met} of {len(played['gold'])} {args.split} variations' gold paths focus on a thing "
          f"some train variation's focuses on too (the task asks for a kind: any of it "
          f"counts); never a train target: "
          f"{', '.join(sorted({g['target'] for g in played['gold']} - trained))}")
    if args.out:
        from selfguide import write_atomic
        write_atomic(Path(args.out), json.dumps(played))
    return played


def baselines_targets(split: str, workers: int = 4) -> list:
    """The gold path's focus target of every variation of a split: [{"target"}]."""
    seeds = [SPLITS[split] + i for i in range(VARIATIONS[split])]
    worlds = [ScienceWorld(s) for s in simulators(workers)]

    def targets(worker: int) -> list:
        found = []
        for i in range(worker, len(seeds), workers):
            _, info = worlds[worker].reset(seeds[i], gold=True)
            found.append((i, {"target": next((a[9:] for a in info["gold"]
                                               if a.startswith("focus on ")), None)}))
        return found
    return [t for _, t in sorted(r for part in side_by_side(targets, list(range(workers)))
                                 for r in part)]


if __name__ == "__main__":
    main()
