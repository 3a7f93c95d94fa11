"""Tests of ScienceWorld as a text world (examples/science_world.py) and of the free-text path
playing it. The simulator is an optional extra (a jar in the pip package, run by Java); these
tests are skipped, with the reason, without it:

    pip install scienceworld==1.2.3 && python -m pytest -q examples/test_science_world.py
"""
import random
import shutil
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import science_world as sw  # noqa: E402
from toy_env import GUIDES  # noqa: E402

try:
    sw.check_installed()
except SystemExit as missing:
    pytest.skip(str(missing).removeprefix("error: "), allow_module_level=True)

POSITIVE, NEUTRAL, NEGATIVE = (GUIDES.index(g) for g in ("positive", "neutral", "negative"))
TEST, DEV = sw.HELD_OUT, sw.TUNING  # the first test and dev variations' task seeds


@pytest.fixture(scope="module")
def world():
    return sw.ScienceWorld(sw.simulators(1)[0])


# --- The world: splits, steps, truths ---

def test_the_splits_are_the_simulators_own_and_seeds_reach_only_their_split():
    simulator = sw.simulators(1)[0]
    for split, listed in [("train", simulator.get_variations_train),
                          ("dev", simulator.get_variations_dev),
                          ("test", simulator.get_variations_test)]:
        pairs = sw.task_pairs(split)
        assert len(pairs) == sw.VARIATIONS[split]
        for task in sw.FIND_TASKS:
            simulator.load(task, 0, "")
            assert sorted(v for t, v in pairs if t == task) == sorted(listed())
    assert sw.pair_of(TEST + 5)[:2] == sw.task_pairs("test")[5]
    assert sw.pair_of(DEV + 7)[:2] == sw.task_pairs("dev")[7]
    with pytest.raises(ValueError, match="300 test variations"):
        sw.pair_of(TEST + 300)


def test_a_batch_reset_side_by_side_grows_the_pool_once_and_lists_the_splits_apart(monkeypatch):
    """The first batch of a process: its episodes, reset in threads, ask for the pool and the
    splits at once; one simulator joins the pool (not one per thread), and the splits are
    listed on a simulator of their own, not on the pool's first, whose episode it would
    interleave with (a simulator's output depends on its history)."""
    pool, started = [], []
    monkeypatch.setattr(sw, "_POOL", pool)
    monkeypatch.setattr(sw, "_PAIRS", {})
    fresh = sw.fresh_simulator
    monkeypatch.setattr(sw, "fresh_simulator", lambda: started.append(fresh()) or started[-1])
    try:
        firsts = sw.side_by_side(lambda i: (sw.simulators(1)[0], sw.pair_of(TEST + i)),
                                 list(range(4)))
        assert len(pool) == 1 and {id(simulator) for simulator, _ in firsts} == {id(pool[0])}
        assert len(started) == 2 and sum(simulator is pool[0] for simulator in started) == 1
        assert [pair for _, pair in firsts] == [(*sw.task_pairs("test")[i], i) for i in range(4)]
    finally:  # the pool's only: task_pairs closed its own, and the package's close() is not
        for simulator in pool:  # safe twice (it writes to the JVM's stdin: a BrokenPipeError)
            simulator.close()


def test_no_test_or_dev_variation_reaches_a_training_batch_or_a_demonstration():
    """Every task seed a run trains on (TRL's prompts, as trl_selfguide.task_seeds draws them)
    and every demonstration seed plays a train variation; the evaluation's seeds the test
    variations."""
    import selfguide as sg
    import trl_freetext as freetext
    import trl_selfguide as bridge
    cfg, ft = freetext.parse_config(["--world", "scienceworld", "--iterations", "60"])
    train = set(sw.task_pairs("train"))
    held_out = set(sw.task_pairs("test")) | set(sw.task_pairs("dev"))
    assert not train & held_out  # the simulator's splits share no (task, variation)
    trained = {sw.pair_of(seed)[:2] for seed in bridge.task_seeds(cfg)}
    fixed = freetext.parse_config(["--world", "scienceworld", "--train-tasks", "0,5,61,7",
                                   "--mazes", "training"])
    assert {sw.pair_of(seed)[:2] for seed in freetext.task_seeds(*fixed)} \
        == {sw.pair_of(seed)[:2] for seed in freetext.evaluated_seeds(*fixed)} \
        == {sw.task_pairs("train")[k] for k in (0, 5, 61, 7)}  # the loop's first check
    demonstrated = {sw.pair_of(seed)[:2] for seed in range(cfg.prior_episodes)}
    assert trained <= train and demonstrated <= train
    assert len(demonstrated) == len(train)  # every train variation is demonstrated
    evaluated = {sw.pair_of(seed)[:2] for seed in freetext.maze_seeds(ft.mazes, cfg.eval_tasks)}
    assert evaluated == set(sw.task_pairs("test"))
    assert sg.TRAIN_SEED_RANGE <= sw.HELD_OUT == freetext.MAZES["held-out"]


def test_a_gold_path_replayed_reaches_100_and_each_rise_is_positive():
    """The gold path: each step valid, its truth the score's change; R_env 1 either way (the
    score's rises / 100 add up to it; success pays it on the last step alone)."""
    for reward in ("score", "clamped", "success"):
        world = sw.ScienceWorld(sw.simulators(1)[0], reward=reward)
        observation, info = world.reset(TEST, gold=True)
        assert "(task: find a(n) animal. First, focus" in observation
        assert observation.endswith(")")
        score, truths, rewards = 0, [], []
        for action in info["gold"]:
            observation, reward_paid, done, step = world.step(action)
            assert step["valid"]
            truths.append(step["truth"])
            rewards.append(reward_paid)
            assert step["truth"] == (POSITIVE if step["score"] > score else NEUTRAL)
            assert reward_paid == pytest.approx((step["score"] - score) / 100 if reward != "success"
                                                else float(step["score"] == 100))
            score = step["score"]
        assert (score, done, sum(rewards)) == (100, True, pytest.approx(1.0))
        assert POSITIVE in truths and NEUTRAL in truths


def test_an_unknown_action_changes_nothing_and_is_counted(world):
    world.reset(TEST + 1)
    look = world.server.freeActionLook()
    for action in ["jump around", "opn door to kitchen", None]:
        observation, reward, done, step = world.step(action)
        assert observation.startswith("No known action matches that input.")
        assert (reward, done, step["valid"], step["truth"], step["score"]) == \
            (0.0, False, False, NEUTRAL, 0)
    assert world.server.freeActionLook() == look


def test_an_ambiguous_action_is_cancelled_and_changes_nothing(world):
    _, info = world.reset(TEST + 3, gold=True)  # find-plant: to the greenhouse's flower pots
    for action in info["gold"][:[a.startswith("focus on") for a in info["gold"]].index(True)]:
        world.step(action)
    observation, _, done, step = world.step("pick up flower pot")
    assert observation.startswith("Ambiguous request, cancelled") and not step["valid"]
    observation, _, _, step = world.step("look around")  # the simulator waits for no number
    assert observation.startswith("This room is called the greenhouse") and step["valid"]


def test_focusing_on_a_wrong_thing_ends_the_episode_at_minus_100():
    for reward, paid in (("score", -1.0), ("clamped", 0.0), ("success", 0.0)):
        world = sw.ScienceWorld(sw.simulators(1)[0], reward=reward)
        world.reset(TEST)
        observation, reward_paid, done, step = world.step("focus on air")
        assert (reward_paid, done, step["score"], step["truth"]) == (paid, True, -100, NEGATIVE)


def test_read_action_takes_the_text_as_written():
    read = sw.ScienceWorld.read_action
    assert read("Assessment: positive\nAction: open door to kitchen")[1] == "open door to kitchen"
    assert read("**Action:** go to the  hallway  \nmore")[1] == "go to the  hallway"
    assert read("Assessment: neutral") == (None, None) and read("Action:   ") == (None, None)
    import trl_freetext as freetext  # the assessment ends where the action starts, on one line
    text = "Assessment: positive Action: go to kitchen"
    assessment, _, action = freetext.parse_reply(text, sw.ScienceWorld)
    assert (text[slice(*assessment)], action) == ("positive", "go to kitchen")
    text = "Assessment: x\naction: Move Apple to red box"
    span, action = read(text)
    assert text[slice(*span)] == action == "Move Apple to red box"  # case as written


# --- The demonstrator ---

def test_the_demonstrator_recovers_from_its_detours_and_judges_from_the_score(world):
    """Demonstrations of train variations: each finishes (100); a misspelt action is judged
    negative at the next step and followed by the action meant; a walk into a wrong room is
    judged negative and followed by the way back; other judgements follow the score's change
    but for the misjudged ones (about MISJUDGE of them)."""
    recoveries, judged, misjudged = set(), 0, 0
    for seed in range(16):
        rng = random.Random(f"demonstration-{seed}")
        steps, score, gold, detour = sw.demonstrate(world, seed, rng)
        if score < 100:  # a detour outran a stage-bound referent: drawn plain
            steps, score, gold, detour = sw.demonstrate(world, seed, rng, plain=True)
        assert score == 100
        actions = [a for _, _, a in steps]
        assert detour == (len(actions) > len(sw.simpler_gold(gold)))  # a detour adds steps
        for t in range(1, len(steps)):
            parts, guide, action = steps[t]
            observation = parts["result"]
            before = actions[t - 1]
            if observation.startswith("No known action"):
                assert action == sw.simpler_gold(gold)[0] or action.split()[0] in before or \
                    len(action) == len(before) + 1
                recoveries.add("misspelt")
            if before.startswith("go to ") and action.startswith("go to ") and \
                    actions[t - 2].startswith("open door to "):
                recoveries.add("wrong room")
            judged += 1
            misjudged += guide == "positive" and observation.startswith("No known action")
    assert recoveries == {"misspelt", "wrong room"}
    assert misjudged <= 2 and judged > 100


def test_a_demonstration_is_its_seeds_alone_whatever_was_drawn_before_or_beside_it():
    """Under JAVA_OPTIONS' constant identity hashes one variation loads the same again and
    again in one simulator (under the JVM's default ones, four loads gave two to four rooms
    and gold paths): a corpus is the same drawn by one worker on one simulator or by two
    side by side, a seed's draw the same after whichever others its simulator drew."""
    simulator = sw.fresh_simulator()
    loads = set()
    for _ in range(4):
        simulator.load("find-living-thing", 1, "", generateGoldPath=True)
        simulator.reset()
        loads.add((simulator.look(), tuple(simulator.get_gold_action_sequence())))
    simulator.close()
    assert len(loads) == 1
    alone, beside = sw.demonstrations([0, 1, 2], workers=1), sw.demonstrations([2, 0, 1], workers=2)
    assert [d["steps"] for d in alone] == [beside[[d["seed"] for d in beside].index(s)]["steps"]
                                           for s in (0, 1, 2)]


def test_the_corpus_is_kept_in_a_cache_folder_made_for_it(monkeypatch, tmp_path):
    """From nothing: --freetext-cache need not exist (the corpus, minutes of drawing, is
    written there whole), and a second call reads it back without drawing."""
    import trl_freetext as freetext
    parts = {"result": "look", "room": "hallway", "inventory": "an orange"}
    drawn = [{"seed": i, "index": i, "task": "find a(n) animal.", "detour": False,
              "steps": [(parts, "neutral", "open door")]} for i in range(3)]
    calls = []
    monkeypatch.setattr(sw, "demonstrations",
                        lambda seeds: calls.append(seeds) or drawn[:len(seeds)])
    cfg, ft = freetext.parse_config(["--world", "scienceworld", "--prior-episodes", "3",
                                     "--freetext-cache", str(tmp_path / "not" / "yet")])
    first = sw.ScienceWorld.prior_demonstrations(cfg, ft)
    again = sw.ScienceWorld.prior_demonstrations(cfg, ft)
    assert first == again and calls == [[0, 1, 2]]
    assert len(first) == 6 and first[0][1][0][1].endswith("\nAction: open door")


def test_a_simulator_plans_the_same_gold_path_in_every_new_jvm():
    """With the JVM's default identity hashes, the same loads in a new simulator planned a gold
    path to another animal in about one run in four (variation 12 of the test split, after 0,
    4 and 8); JAVA_OPTIONS holds the hashes constant, and every new simulator agrees."""
    planned = []
    for _ in range(3):
        simulator = sw.fresh_simulator()
        try:
            world = sw.ScienceWorld(simulator)
            planned.append([sw.gold_path(world, TEST + i)["target"] for i in (0, 4, 8, 12)])
        finally:
            simulator.close()
    assert "-XX:hashCode=2" in sw.os.environ["JAVA_TOOL_OPTIONS"]
    assert planned[0] == planned[1] == planned[2]


def test_simpler_gold_names_what_was_picked_up_and_drops_a_plants_stage():
    assert sw.simpler_gold(["focus on adult pea plant", "pick up flower pot 3",
                            "move flower pot 3 containing pea plant and soil in inventory to "
                            "red box"]) == ["focus on pea plant", "pick up flower pot 3",
                                            "move flower pot 3 to red box"]
    assert sw.simpler_gold(["focus on drawer in counter", "move drawer in counter to red box"]) \
        == ["focus on drawer in counter", "move drawer in counter to red box"]


# --- The free-text path playing it ---

def test_the_free_text_path_plays_scienceworld_and_counts_the_valid_actions(monkeypatch):
    """Scripted replies through trl_freetext.play: the gold path of a test variation written
    as replies (one misspelt, one without an action, one unreadable assessment) reaches 100;
    the invalid replies are counted, a step's truth is the score's change, R_env is 1."""
    import trl_freetext as freetext
    from test_trl_freetext import Scripted
    cfg, ft = freetext.parse_config(["--world", "scienceworld"])
    _, info = sw.ScienceWorld(sw.simulators(1)[0]).reset(TEST, gold=True)
    replies = ([f"Assessment: neutral\nAction: {info['gold'][0]}x", "Assessment: hmm\nno action"]
               + [f"Assessment: positive\nAction: {a}" for a in info["gold"]])
    texts = [sw.ScienceWorld.system_prompt(True), *replies, "No known action matches that "
             "input. (task: find a(n) animal; room: hallway; inventory: an orange) This room is "
             "called the"]
    tokenizer = freetext.build_tokenizer("bpe", texts * 3, vocab=400)
    monkeypatch.setattr(freetext, "generate_replies", Scripted(tokenizer, [replies]))
    batch = freetext.play(None, tokenizer, [TEST], True, cfg, ft, 0)
    steps = len(replies)
    assert batch.steps.steps.tolist() == [steps]
    assert batch.steps.env_return.tolist() == [pytest.approx(1.0)] and batch.scores.tolist() == [100]
    assert batch.invalid[0, :steps].tolist() == [True, True] + [False] * (steps - 2)
    assert batch.unparseable[0, :steps].tolist() == [False, True] + [False] * (steps - 2)
    assert batch.unreadable[0, :steps].tolist() == [False, True] + [False] * (steps - 2)
    shares = freetext.shares(batch)
    assert shares["valid_actions"] == pytest.approx(1 - 2 / steps)
    assert shares["score"] == 100 and shares["failed"] == 0 and shares["success"] == 1
    # the truth z_t judges is the previous step's score change: none at the start, neutral
    # after the two invalid replies, then the gold path's
    assert batch.steps.truths[0, :3].tolist() == [-1, NEUTRAL, NEUTRAL]
    assert batch.steps.truths[0, 3].item() in (POSITIVE, NEUTRAL)


def played_turns(monkeypatch, seed: int, actions: list, *argv) -> tuple:
    """The turns play shows (the observations it hands the tokenizer) and the batch, for
    scripted replies that write `actions` on task seed `seed`."""
    import trl_freetext as freetext
    from test_trl_freetext import Scripted
    cfg, ft = freetext.parse_config(["--world", "scienceworld", "--max-steps",
                                     str(len(actions)), *argv])
    replies = [f"Assessment: neutral\nAction: {a}" for a in actions]
    texts = [sw.ScienceWorld.system_prompt(True), *replies]
    tokenizer = freetext.build_tokenizer("bpe", texts * 3, vocab=300)
    monkeypatch.setattr(freetext, "generate_replies", Scripted(tokenizer, [replies]))
    turns, cached = [], freetext.cached_turn
    monkeypatch.setattr(freetext, "cached_turn", lambda tokenizer, observation, *rest:
                        turns.append(observation) or cached(tokenizer, observation, *rest))
    return turns, freetext.play(None, tokenizer, [seed], True, cfg, ft, 0)


@pytest.mark.parametrize("window", ["4", "0"])
def test_every_turn_shows_the_whole_task_in_the_users_text(monkeypatch, window):
    """What ScienceWorld's own agents read every step: the whole task, the box and its room
    included, in every turn; in the user's text, so the prompt (the system turn) is the same
    for every task. With --window K each turn also lists the last K actions, and the player
    reads it alone after the prompt."""
    simulator = sw.simulators(1)[0]
    tasks = []
    for seed in (TEST, TEST + 2):
        _, info = sw.ScienceWorld(simulator).reset(seed, gold=True)
        task = simulator.get_task_description().removeprefix("Your task is to ")
        actions = info["gold"][:6]
        turns, batch = played_turns(monkeypatch, seed, actions, "--window", window)
        assert "box in the" in task and len(turns) == len(actions)
        assert all(task in turn for turn in turns)
        assert all(task not in text for text in [sw.ScienceWorld.system_prompt(g)
                                                 for g in (True, False)])
        if window == "4":
            assert [turn.split("\n")[1] for turn in turns] == [
                "Recent actions: " + ("; ".join(actions[max(0, t - 4):t]) or "none yet")
                for t in range(len(actions))]
            assert batch.transcripts[0].tokens.count(batch.prompt[0]) == 0  # no prompt inside
        tasks.append(task)
    assert tasks[0] != tasks[1]  # two tasks, two boxes or rooms: the same prompt


def test_a_demonstration_is_cloned_on_the_turns_play_shows(monkeypatch):
    """A demonstration's steps, kept as parts and rendered for the corpus (`shown`), are the
    turns play shows when the player writes the demonstrator's actions: the prior is cloned
    on what it will read, in either format."""
    world = sw.ScienceWorld(sw.simulators(1)[0])
    steps, score, _, detour = sw.demonstrate(world, 3, random.Random("demonstration-3"))
    demonstration = {"task": world.task, "steps": steps}
    actions = [a for _, _, a in steps]
    assert score == 100 and detour  # its detour's step shown too
    for window in ("4", "0"):
        turns, _ = played_turns(monkeypatch, 3, actions, "--window", window)
        assert [o for o, _, _ in sw.shown(demonstration, int(window), 20)] == turns


def test_a_new_turn_format_is_a_new_prior_and_renders_the_same_corpus(monkeypatch, tmp_path):
    """The prior's key holds what a turn shows (the TURN text, --window, --corpus): a change
    to any is a new prior; the corpus is kept as parts, its key free of the format and the
    step cap, so every format renders from one draw."""
    import trl_freetext as freetext
    parts = {"result": "You move to the kitchen.", "room": "kitchen", "inventory": "an orange"}
    drawn = [{"seed": i, "index": i, "task": "find a(n) animal. Then, move it to the red box "
              "in the kitchen.", "detour": i == 1,
              "steps": [(parts, "neutral", "go to kitchen")] * 3} for i in range(3)]
    calls = []
    monkeypatch.setattr(sw, "demonstrations", lambda seeds: calls.append(seeds) or drawn)
    base = ["--world", "scienceworld", "--prior-episodes", "3", "--freetext-cache", str(tmp_path)]
    folders, rendered = set(), []
    for argv, turn in [([], None), (["--window", "1"], None), (["--corpus", "gold"], None),
                       (["--max-steps", "2"], None), ([], "Task: {task} | {recent} | {result} "
                                                         "| {room} | {inventory}")]:
        if turn:
            monkeypatch.setitem(sw.TURN, "window", turn)
        cfg, ft = freetext.parse_config(base + argv)
        folders.add(freetext.prior_folder(cfg, ft))
        rendered.append(sw.ScienceWorld.prior_demonstrations(cfg, ft))
    assert len(folders) == 5 and calls == [[0, 1, 2]]  # five priors, one draw
    assert len(list(tmp_path.glob("scienceworld-demonstrations-*.json"))) == 1
    assert rendered[0][0][1][2][0] != rendered[1][0][1][2][0]  # the window's recent actions
    assert len(rendered[2]) == 4 and len(rendered[3][0][1]) == 2  # no detour; two steps
    assert rendered[4][0][1][0][0].startswith("Task: find a(n) animal. Then") and \
        " | none yet | " in rendered[4][0][1][0][0]


def test_the_floor_and_ceilings_out_is_made_before_any_play(monkeypatch, tmp_path, capsys):
    """--out in a folder not made yet: made before the minutes of play, the file written
    whole; a folder that cannot be made is refused in one line before any play."""
    played = []
    fake = {"random": [{"score": 0, "success": 0.0, "steps": 20}],
            "gold": [{"score": 100, "success": 1.0, "steps": 9, "target": "dove"}]}
    monkeypatch.setattr(sw, "baselines", lambda *args, **kwargs: played.append(1) or fake)
    monkeypatch.setattr(sw, "baselines_targets", lambda split: [{"target": "dove"}])
    out = tmp_path / "runs" / "sw" / "baselines.json"
    sw.main(["--out", str(out)])
    assert sw.json.loads(out.read_text()) == fake and played == [1]
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit, match="--out's folder .* cannot be written"):
        sw.main(["--out", str(tmp_path / "file" / "baselines.json")])
    assert played == [1]


def test_scienceworld_is_refused_in_one_line_without_java(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(SystemExit, match="needs Java.*apt-get install -y default-jre-headless"):
        sw.check_installed()


def test_the_free_text_path_refuses_what_scienceworld_cannot_run(capsys):
    import trl_freetext as freetext
    for argv, message in [(["--example"], "--example is the maze's"),
                          (["--eval-tasks", "301"], "300 test (and dev) variations")]:
        with pytest.raises(SystemExit):
            freetext.parse_config(["--world", "scienceworld", *argv])
        assert message in capsys.readouterr().err


def test_scienceworlds_defaults_apply_only_to_it():
    import trl_freetext as freetext
    cfg, ft = freetext.parse_config(["--world", "scienceworld"])
    assert (cfg.max_steps, cfg.eval_tasks, ft.vocab) == (20, 300, 1024)
    cfg, ft = freetext.parse_config(["--world", "scienceworld", "--max-steps", "12"])
    assert cfg.max_steps == 12
    cfg, ft = freetext.parse_config([])
    assert (cfg.max_steps, cfg.eval_tasks, ft.vocab, ft.world) == (26, 500, 512, "maze")
    assert torch.get_num_threads() >= 1
