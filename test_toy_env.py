"""Tests for toy_env.py, in the order the file is written: the gridworld against an
independent BFS, bad input, the house and its stale map, the demonstrator.

    python -m pytest -q test_toy_env.py
"""
import random
from collections import deque

import pytest

import toy_env
from toy_env import ACTIONS, GUIDES, GridWorld


# --- toy_env: the gridworld ---

def bfs_over_render(text: str) -> dict:
    """Distances to 'G' over the rendered map: an implementation independent of toy_env's."""
    grid = text.splitlines()
    goal = next((r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch == "G")
    distance, frontier = {goal: 0}, deque([goal])
    while frontier:
        r, c = frontier.popleft()
        for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if (0 <= nr < len(grid) and 0 <= nc < len(grid[0]) and grid[nr][nc] != "#"
                    and (nr, nc) not in distance):
                distance[(nr, nc)] = distance[(r, c)] + 1
                frontier.append((nr, nc))
    return distance


def agent_cell(text: str):
    return next((r, c) for r, row in enumerate(text.splitlines())
                for c, ch in enumerate(row) if ch == "A")


def test_same_seed_gives_same_task_and_trajectory():
    a, b = GridWorld(), GridWorld()
    assert a.reset(seed=7)[0] == b.reset(seed=7)[0]
    assert a.render() == b.render()
    for action in ["north", "east", "east", "south", "west"] * 3:
        assert a.step(action)[:4] == b.step(action)[:4]
    assert len({_render(seed) for seed in range(20)}) == 20  # different seeds, different mazes


def _render(seed, **kwargs):
    env = GridWorld(**kwargs)
    env.reset(seed=seed)
    return env.render()


def test_reset_without_seed_continues_the_constructor_rng():
    a, b = GridWorld(seed=3), GridWorld(seed=3)
    tasks_a = [a.reset()[0] for _ in range(5)]
    tasks_b = [b.reset()[0] for _ in range(5)]
    assert tasks_a == tasks_b and len(set(tasks_a)) > 1


@pytest.mark.parametrize("kwargs", [{}, {"size": 6, "wall_prob": 0.4, "min_distance": 5},
                                    {"size": 12, "wall_prob": 0.2, "min_distance": 20}])
def test_every_layout_is_solvable_and_start_far_enough(kwargs):
    env = GridWorld(**kwargs)
    for seed in range(200):
        _, info = env.reset(seed=seed)
        distance = bfs_over_render(env.render())
        start = agent_cell(env.render())
        assert start in distance, f"seed {seed}: goal unreachable"
        assert distance[start] >= env.min_distance
        assert info["distance"] == info["optimal_steps"] == distance[start]


def test_render_marks_walls_floor_agent_and_goal():
    env = GridWorld()
    env.reset(seed=1)
    text = env.render()
    rows = text.splitlines()
    assert len(rows) == env.size and all(len(row) == env.size for row in rows)
    assert set(text) <= set("#.AG\n")
    assert text.count("A") == 1 and text.count("G") == 1


def test_observation_agrees_with_the_map():
    env = GridWorld()
    for seed in range(30):
        observation, _ = env.reset(seed=seed)
        for step in range(10):
            grid = env.render().splitlines()
            position, goal, blocked, _ = toy_env.parse_observation(observation)
            assert grid[position[0]][position[1]] == "A"
            assert grid[goal[0]][goal[1]] == "G"
            for letter, (dr, dc) in zip("NESW", toy_env.MOVES.values()):
                r, c = position[0] + dr, position[1] + dc
                walled = not (0 <= r < env.size and 0 <= c < env.size) or grid[r][c] == "#"
                assert (letter in blocked) == walled
            assert all(word in toy_env.VOCAB for word in observation.split())
            observation, _, terminated, truncated, _ = env.step(ACTIONS[(seed + step) % 4])
            if terminated or truncated:
                break


def test_walls_and_edges_block_and_say_so():
    env = GridWorld()
    checked_edge = checked_wall = False
    for seed in range(50):
        observation, _ = env.reset(seed=seed)
        position, _, blocked, _ = toy_env.parse_observation(observation)
        for action, letter in zip(ACTIONS, "NESW"):
            if letter in blocked:
                before = env.render()
                new_observation, reward, terminated, _, info = env.step(action)
                assert info["bumped"] and info["progress"] == 0 and reward == 0.0
                assert toy_env.parse_observation(new_observation)[0] == position
                assert env.render() == before
                dr, dc = toy_env.MOVES[action]
                r, c = position[0] + dr, position[1] + dc
                if 0 <= r < env.size and 0 <= c < env.size:
                    checked_wall = True
                else:
                    checked_edge = True
                break
    assert checked_edge and checked_wall


def test_info_ground_truth_matches_independent_bfs():
    env = GridWorld()
    for seed in range(40):
        env.reset(seed=seed)
        distance = bfs_over_render(env.render())
        visited = {agent_cell(env.render())}
        done = False
        step = 0
        while not done:
            before = agent_cell(env.render())
            _, _, terminated, truncated, info = env.step(ACTIONS[(seed * 7 + step * 3) % 4])
            step += 1
            done = terminated or truncated
            if terminated:
                after = info["goal"]
            else:
                after = agent_cell(env.render())
            assert info["distance"] == distance[after]
            assert info["progress"] == distance[before] - distance[after]
            assert info["progress"] in (-1, 0, 1)
            assert info["bumped"] == (before == after)
            assert info["revisited"] == (not info["bumped"] and after in visited)
            visited.add(after)
            assert info["success"] == (after == info["goal"])


def test_reward_terminated_and_truncated_semantics():
    env = GridWorld()
    env.reset(seed=4)
    # walk the BFS-optimal path: success in exactly optimal_steps steps
    _, info = env.reset(seed=4)
    for _ in range(info["optimal_steps"]):
        distance = bfs_over_render(env.render())
        r, c = agent_cell(env.render())
        action = next(a for a, (dr, dc) in toy_env.MOVES.items()
                      if distance.get((r + dr, c + dc), 10**9) == distance[(r, c)] - 1)
        _, reward, terminated, truncated, info = env.step(action)
    assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)
    assert info["steps"] == info["optimal_steps"] and info["position"] == info["goal"]
    # a walk that never arrives is truncated after max_steps, with reward 0 throughout
    env = GridWorld(max_steps=5)
    env.reset(seed=4)
    outcomes = [env.step("north" if i % 2 else "south") for i in range(5)]
    assert all(o[1] == 0.0 and not o[2] for o in outcomes)
    assert [o[3] for o in outcomes] == [False] * 4 + [True]


# --- toy_env: bad input ---

def test_unknown_action_names_valid_ones_and_changes_nothing():
    env = GridWorld()
    env.reset(seed=0)
    before = env.render()
    with pytest.raises(ValueError, match="north, east, south, west"):
        env.step("up")
    assert env.render() == before
    env.step("north")  # the episode is still usable


def test_a_turn_without_a_move_is_a_bump_that_counts_as_a_step():
    """step(None), a free-text reply that names no move: the agent stays, the cue says same."""
    env = GridWorld(cue=True, max_steps=2)
    _, start = env.reset(seed=3)
    observation, reward, terminated, truncated, info = env.step(None)
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["position"] == start["position"] and info["bumped"] and info["progress"] == 0
    assert info["steps"] == 1 and observation.endswith("cue:same")
    assert env.step(None)[3]  # truncated after max_steps turns, moves or not


def test_step_after_end_or_before_reset_says_call_reset():
    with pytest.raises(RuntimeError, match="reset"):
        GridWorld().step("north")
    env = GridWorld(max_steps=1)
    env.reset(seed=0)
    env.step("north")
    with pytest.raises(RuntimeError, match=r"^the episode has ended \(or never started\): "
                                           r"call reset\(\) first$"):
        env.step("north")


@pytest.mark.parametrize("kwargs, message", [
    ({"size": 4, "min_distance": 7}, "impossible"),
    ({"wall_prob": 1.0}, r"\[0, 1\)"),
    ({"wall_prob": -0.1}, r"\[0, 1\)"),
    ({"size": 1}, "size"),
    ({"size": toy_env.MAX_SIZE + 1}, "size"),
    ({"max_steps": 0}, "max_steps"),
    ({"min_distance": 0}, "min_distance"),
])
def test_impossible_settings_raise_value_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GridWorld(**kwargs)


def test_unlikely_settings_fail_fast_instead_of_looping():
    env = GridWorld(size=6, wall_prob=0.95, min_distance=10)
    env.MAX_TRIES = 50
    with pytest.raises(RuntimeError, match="lower wall_prob or min_distance"):
        env.reset(seed=0)


def test_malformed_observation_is_a_clear_error():
    with pytest.raises(ValueError, match="malformed observation"):
        toy_env.parse_observation("at:1,2 walls:N")
    with pytest.raises(ValueError, match="malformed observation"):  # one extra word at most
        toy_env.parse_observation("at:1,2 goal:0,0 walls:N cue:warmer dist:3")


def test_parse_observation_reads_back_every_word():
    parse = toy_env.parse_observation
    assert parse("at:1,2 goal:0,3 walls:NE") == ((1, 2), (0, 3), "NE", None)
    assert parse("at:1,2 goal:0,3 walls:none cue:warmer") == ((1, 2), (0, 3), "", "warmer")
    assert parse("at:4,0 goal:0,3 walls:S dist:7") == ((4, 0), (0, 3), "S", 7)


def test_reset_reports_no_move_yet_and_refuses_options():
    env = GridWorld(size=5, wall_prob=0.2, min_distance=4)
    _, info = env.reset(seed=3)
    assert info["progress"] == 0 and info["steps"] == 0
    assert info["bumped"] is False and info["revisited"] is False and info["success"] is False
    with pytest.raises(ValueError, match=r"^GridWorld.reset takes no options, got \['a', 'b'\]$"):
        env.reset(seed=3, options={"b": 1, "a": 2})


def test_layouts_keep_two_cell_mazes_redraw_too_walled_ones_and_start_at_the_minimum():
    """A maze of two open cells is a maze (min_distance 1); a draw of fewer is redrawn, not
    the end of the search; a start exactly min_distance steps away is allowed."""
    layouts = [toy_env.generate_layout(2, 0.5, 1, random.Random(seed), 2000)
               for seed in range(40)]
    assert any(len(open_cells) == 2 for open_cells, *_ in layouts)
    class Counting:  # the layout's random stream, its draws counted (4 per 2x2 layout)
        def __init__(self, seed):
            self.rng, self.calls = random.Random(seed), 0

        def random(self):
            self.calls += 1
            return self.rng.random()

        def choice(self, cells):
            return self.rng.choice(cells)
    draws = []
    for seed in range(30):  # walls at 0.7: most 2x2 draws leave fewer than two open cells
        rng = Counting(seed)
        open_cells, *_ = toy_env.generate_layout(2, 0.7, 1, rng, 2000)
        assert len(open_cells) >= 2  # none fails
        draws.append(rng.calls // 4)
    assert sum(d - 1 for d in draws) > sum(draws) / 2  # most draws were redrawn
    env = GridWorld(size=5, wall_prob=0.2, min_distance=4)
    assert min(env.reset(seed=seed)[1]["optimal_steps"] for seed in range(50)) == 4


# --- toy_env: the house and its stale map ---

def test_the_bricked_door_is_the_wall_whose_opening_shortens_paths_most():
    """Checked against an independent BFS over the rendered map, every wall opened in turn."""
    env = GridWorld(size=12, min_distance=8, max_steps=26, house=3, stale_door=True)
    env.reset(seed=0)
    grid = [list(row) for row in env.render().replace("A", ".").splitlines()]
    base = bfs_over_render("\n".join("".join(row) for row in grid))
    gains = {}
    for r, c in [(r, c) for r in range(12) for c in range(12) if grid[r][c] == "#"]:
        grid[r][c] = "."
        opened = bfs_over_render("\n".join("".join(row) for row in grid))
        grid[r][c] = "#"
        gains[(r, c)] = sum(d - opened[cell] for cell, d in base.items())
    door, shortcut = toy_env.bricked_door(env._open, env._goal, env._distance, 12)
    assert gains[door] == max(gains.values()) and shortcut == gains[door] / len(base)
    assert shortcut >= toy_env.SHORTCUT
    grid[door[0]][door[1]] = "."
    believed = bfs_over_render("\n".join("".join(row) for row in grid))
    assert all(env.believed[cell] == believed[cell] for cell in base)


def test_a_house_is_one_maze_whose_tasks_start_on_training_or_held_out_cells():
    env = GridWorld(size=12, min_distance=8, max_steps=26, house=3)
    training, held_out = toy_env.house_starts(12, 0.3, 8, 3, GridWorld.MAX_TRIES)
    assert training and held_out and not set(training) & set(held_out)
    maps, starts = set(), {True: set(), False: set()}
    for seed in list(range(200)) + [toy_env.HELD_OUT_TASKS + i for i in range(200)]:
        _, info = env.reset(seed=seed)
        maps.add((env.render().replace("A", "."), info["goal"]))
        starts[seed >= toy_env.HELD_OUT_TASKS].add(info["position"])
        assert info["optimal_steps"] >= 8
    assert len(maps) == 1  # one house, one goal
    assert starts[False] == set(training) and starts[True] == set(held_out)
    assert env.reset(seed=5)[0] == env.reset(seed=5)[0]
    assert {GridWorld(size=12, min_distance=8, house=h).reset(seed=0)[0] for h in range(4)} \
        .__len__() == 4  # another house, another maze


def test_the_stale_flag_is_where_the_believed_and_the_true_progress_differ():
    """Replayed with the stale map's distances by hand (bricked_door's cell opened); the
    demonstrator's guide, the sign of the believed change, is wrong exactly there."""
    env = GridWorld(size=12, min_distance=8, max_steps=26, house=3, stale_door=True)
    flagged = 0
    for seed in range(40):
        steps, infos = toy_env.demonstrate(env, seed=seed)
        previous = env.reset(seed=seed)[1]["position"]
        for (_, guide, _), info in zip(steps[1:], infos):
            believed = env.believed[previous] - env.believed[info["position"]]
            assert guide == toy_env.true_polarity(believed)  # the stale map's judgement
            assert info["stale"] == (believed != info["progress"])
            assert (guide == toy_env.true_polarity(info["progress"])) == (not info["stale"])
            flagged += info["stale"]
            previous = info["position"]
    assert flagged > 40  # the demonstrator walks where its map is wrong, often
    plain = GridWorld(size=12, min_distance=8, max_steps=26, house=3)
    assert not any(info["stale"] for info in toy_env.demonstrate(plain, seed=1)[1])


def test_a_stale_door_without_a_house_gives_every_task_its_own_maze_and_door():
    env = GridWorld(size=12, min_distance=8, max_steps=26, stale_door=True)
    doors = set()
    for seed in range(6):
        env.reset(seed=seed)
        door, shortcut = toy_env.bricked_door(env._open, env._goal, env._distance, 12)
        assert shortcut >= toy_env.SHORTCUT and env.believed == toy_env.bfs_distances(
            env._open | {door}, env._goal)
        doors.add((door, env.render()))
    assert len(doors) == 6


# --- toy_env: the demonstrator ---

def test_demonstrator_guide_uses_only_what_it_can_see():
    goal = (0, 0)
    assert toy_env.demonstrator_guide((3, 3), (3, 3), set(), goal) == "neutral"
    assert toy_env.demonstrator_guide((2, 3), (3, 3), {(2, 3)}, goal) == "negative"
    assert toy_env.demonstrator_guide((2, 3), (3, 3), set(), goal) == "positive"
    assert toy_env.demonstrator_guide((4, 3), (3, 3), set(), goal) == "negative"


def test_demonstrators_measure_the_manhattan_distance_by_row_and_by_column():
    """The goal at (0, 4), a row apart from its column: from (2, 2) north and east bring it
    closer (3 steps left), south and west take it away (5)."""
    goal = (0, 4)
    assert toy_env.demonstrator_guide((1, 2), (2, 2), set(), goal) == "positive"
    assert toy_env.demonstrator_guide((3, 2), (2, 2), set(), goal) == "negative"
    picks = {toy_env.demonstrator_action("neutral", (2, 2), goal, "", None, {(2, 2)},
                                         random.Random(seed), epsilon=0.0) for seed in range(20)}
    assert picks == {"north", "east"}


def test_cue_reading_guide_calls_the_start_and_a_bump_neutral_and_needs_no_revisit_flag():
    rng = random.Random(0)
    for cue in ("start", "same"):
        assert toy_env.cue_guide(cue, rng, noise=0.0, revisited=True,
                                 misjudge="revisit") == "neutral"
    assert toy_env.cue_guide("warmer", rng, noise=0.0, misjudge="revisit") == "positive"
    assert toy_env.cue_guide("colder", rng, noise=0.0) == "negative"


@pytest.mark.parametrize("kind", ["plain", "cue", "dist"])
def test_demonstrated_moves_follow_their_guides(kind):
    """Played without random moves (epsilon 0): after a positive guide the plain demonstrator
    keeps going wherever the way on is open and new; after a negative one the cue and dist
    readers step back the way they came."""
    settings = dict(size=7, wall_prob=0.2, min_distance=6, max_steps=14)
    env = GridWorld(**settings, cue=kind == "cue", dist=kind == "dist")
    checked = 0
    for seed in range(12):
        steps, _ = toy_env.demonstrate(env, seed, epsilon=0.0)
        visited, last_action = set(), None
        for t, (observation, guide, action) in enumerate(steps):
            (r, c), _, blocked, _ = toy_env.parse_observation(observation)
            visited.add((r, c))
            if last_action is not None and kind == "plain" and guide == "positive":
                dr, dc = toy_env.MOVES[last_action]
                letter = "NESW"[toy_env.ACTIONS.index(last_action)]
                if letter not in blocked and (r + dr, c + dc) not in visited:  # open and new
                    assert action == last_action, (seed, t)
                    checked += 1
            if last_action is not None and kind != "plain" and guide == "negative":
                assert action == toy_env.OPPOSITE[last_action], (seed, t)
                checked += 1
            last_action = action
    assert checked > 5


def test_demonstrator_action_reacts_to_its_guide():
    rng = random.Random(0)
    # heading east, away from the goal at (0, 0): a positive guide keeps the momentum,
    # a negative one turns towards the goal
    args = dict(position=(3, 3), goal=(0, 0), blocked="", last_action="east",
                visited={(3, 3)}, rng=rng, epsilon=0.0)
    assert toy_env.demonstrator_action("positive", **args) == "east"
    assert toy_env.demonstrator_action("negative", **args) in ("north", "west")
    # with the cell to the west visited, the cue reader's "negative" steps back there, the
    # other demonstrators' turns to the goal's unvisited side
    args["visited"] = {(3, 3), (3, 2)}
    assert toy_env.demonstrator_action("negative", backtrack=True, **args) == "west"
    assert toy_env.demonstrator_action("negative", **args) == "north"


def test_demonstrator_episode_is_well_formed_and_deterministic():
    env = GridWorld()
    steps, infos = toy_env.demonstrate(env, seed=11)
    assert steps == toy_env.demonstrate(env, seed=11)[0]
    assert len(steps) == len(infos) <= env.max_steps
    assert all(g in GUIDES and a in ACTIONS for _, g, a in steps)
    assert infos[-1]["success"] or len(steps) == env.max_steps


def test_demonstrator_is_clearly_imperfect_but_informative():
    """toy_env's docstring figures, on its 1,000 seeds: success 0.433, guide agreement 0.690
    (balanced 0.791); the demonstrator is deterministic, so these are exact."""
    report = toy_env.demonstrator_report(GridWorld(), range(1000))
    assert report["success"] == 0.433
    assert report["guide_accuracy"] == pytest.approx(0.690, abs=5e-4)
    assert report["guide_balanced_accuracy"] == pytest.approx(0.791, abs=5e-4)


@pytest.mark.parametrize("kwargs", [{}, {"size": 12, "min_distance": 18, "max_steps": 26}])
def test_cue_tells_whether_the_last_move_brought_the_goal_closer(kwargs):
    env = GridWorld(cue=True, **kwargs)
    for seed in range(20):
        observation, info = env.reset(seed=seed)
        assert toy_env.parse_observation(observation)[3] == "start"
        for step in range(8):
            observation, _, terminated, truncated, info = env.step(ACTIONS[(seed + step) % 4])
            assert len(observation.split()) == toy_env.observation_words(cue=True) == 4
            assert all(word in toy_env.VOCAB for word in observation.split())
            expected = {1: "warmer", -1: "colder", 0: "same"}[info["progress"]]
            assert toy_env.parse_observation(observation)[3] == expected
            if terminated or truncated:
                break
    assert toy_env.parse_observation(GridWorld().reset(seed=0)[0])[3] is None  # no cue shown
    with pytest.raises(ValueError, match="malformed"):
        toy_env.parse_observation("at:1,2 goal:3,4 walls:N cue:lukewarm")


def cue_demonstrator_moves(noise, seeds=range(200)):
    """(guide, true polarity) of every judged move of the cue-reading demonstrator."""
    env, pairs = GridWorld(cue=True), []
    for seed in seeds:
        steps, infos = toy_env.demonstrate(env, seed, cue_noise=noise)
        pairs += [(guide, toy_env.true_polarity(info["progress"]))
                  for (_, guide, _), info in zip(steps[1:], infos)]
    return pairs


def test_cue_reading_demonstrator_misjudges_the_share_of_moves_it_is_told_to():
    assert all(guide == truth for guide, truth in cue_demonstrator_moves(0.0))
    moves = [(g, t) for g, t in cue_demonstrator_moves(0.2) if t != "neutral"]
    wrong = sum(g != t for g, t in moves) / len(moves)
    assert 0.17 < wrong < 0.23, wrong  # 0.2 +- about 3 standard errors
    assert all(g == "neutral" for g, t in cue_demonstrator_moves(0.2) if t == "neutral")


def test_cue_demonstrator_misjudging_revisits_is_wrong_there_every_time_and_right_elsewhere(
        capsys):
    env = GridWorld(cue=True)
    revisit_truths = []
    for seed in range(100):
        steps, infos = toy_env.demonstrate(env, seed, cue_noise=0.0, cue_misjudge="revisit")
        for (_, guide, _), info in zip(steps[1:], infos):  # guide i+1 judges move i
            truth = toy_env.true_polarity(info["progress"])
            if info["revisited"]:
                assert guide == "negative"
                revisit_truths.append(truth)
            else:
                assert guide == truth
    assert "positive" in revisit_truths and "negative" in revisit_truths  # wrong on some only
    report = toy_env.demonstrator_report(env, range(100), cue_noise=0.0, cue_misjudge="revisit")
    assert report["guide_accuracy_other"] == 1.0
    assert report["guide_accuracy_revisit"] == pytest.approx(revisit_truths.count("negative")
                                                             / len(revisit_truths))
    # a world made with cue_misjudge gives its demonstrator the same misjudgement
    misjudging = GridWorld(cue=True, cue_misjudge="revisit")
    assert all(toy_env.demonstrate(misjudging, seed, cue_noise=0.0) ==
               toy_env.demonstrate(env, seed, cue_noise=0.0, cue_misjudge="revisit")
               for seed in range(20))
    assert toy_env.demonstrate(misjudging, 3) != toy_env.demonstrate(env, 3)  # env's own: none
    with pytest.raises(ValueError, match="cue_misjudge must be one of"):
        GridWorld(cue_misjudge="all")


def test_dist_word_is_the_maze_distance_and_its_demonstrator_compares_it_with_the_last():
    plain = GridWorld(size=5, min_distance=3)
    assert len(plain.reset(seed=0)[0].split()) == toy_env.observation_words(cue=False) == 3
    env = GridWorld(dist=True, size=12, min_distance=18, max_steps=26)
    for seed in range(10):
        observation, info = env.reset(seed=seed)
        for step in range(8):
            words = observation.split()
            assert len(words) == toy_env.observation_words(cue=False, dist=True) == 4
            assert words[3] in toy_env.DIST_VOCAB and words[3] not in toy_env.VOCAB
            assert toy_env.parse_observation(observation)[3] == info["distance"]
            observation, _, terminated, truncated, info = env.step(ACTIONS[(seed + step) % 4])
            if terminated or truncated:
                break
    # Comparing K with the last step's K tells the demonstrator what the cue would: the same
    # guides and moves, misjudged on the same draws; only the fourth word differs.
    cue_env = GridWorld(cue=True, size=12, min_distance=18, max_steps=26)
    for seed in range(30):
        with_dist, _ = toy_env.demonstrate(env, seed, cue_misjudge="revisit")
        with_cue, _ = toy_env.demonstrate(cue_env, seed, cue_misjudge="revisit")
        assert [s[1:] for s in with_dist] == [s[1:] for s in with_cue]
        assert [s[0].split()[:3] for s in with_dist] == [s[0].split()[:3] for s in with_cue]
    with pytest.raises(ValueError, match="not both"):
        GridWorld(cue=True, dist=True)
    with pytest.raises(ValueError, match="malformed"):
        toy_env.parse_observation("at:1,2 goal:3,4 walls:N dist:far")


def test_a_cornered_demonstrator_takes_an_open_move_even_onto_visited_cells():
    """Every open neighbour visited (a dead end): the move is one of the open ones, never a
    wall, whatever the guide and the random draw; with no open move at all, any move."""
    position = (3, 3)
    visited = {position, (3, 2), (2, 3)}  # west and north are open but visited
    for seed in range(50):
        for guide in GUIDES:
            for backtrack in (False, True):
                move = toy_env.demonstrator_action(
                    guide, position, (0, 0), "ES", None, visited, random.Random(seed),
                    epsilon=0.0, backtrack=backtrack)
                assert move in ("north", "west"), (seed, guide, backtrack)
    boxed = {toy_env.demonstrator_action("neutral", position, (0, 0), "NESW", None, visited,
                                         random.Random(seed), epsilon=0.0) for seed in range(50)}
    assert boxed == set(ACTIONS)
