"""Tests for toy_env.py and selfguide.py, in the order the files are written.

    python -m pytest -q test_selfguide.py
"""
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
            position, goal, blocked = toy_env.parse_observation(observation)
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
        position, _, blocked = toy_env.parse_observation(observation)
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


def test_step_after_end_or_before_reset_says_call_reset():
    with pytest.raises(RuntimeError, match="reset"):
        GridWorld().step("north")
    env = GridWorld(max_steps=1)
    env.reset(seed=0)
    env.step("north")
    with pytest.raises(RuntimeError, match="reset"):
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


# --- toy_env: the demonstrator ---

def test_demonstrator_guide_uses_only_what_it_can_see():
    goal = (0, 0)
    assert toy_env.demonstrator_guide((3, 3), (3, 3), set(), goal) == "neutral"
    assert toy_env.demonstrator_guide((2, 3), (3, 3), {(2, 3)}, goal) == "negative"
    assert toy_env.demonstrator_guide((2, 3), (3, 3), set(), goal) == "positive"
    assert toy_env.demonstrator_guide((4, 3), (3, 3), set(), goal) == "negative"


def test_demonstrator_action_reacts_to_its_guide():
    import random
    rng = random.Random(0)
    # heading east, away from the goal at (0, 0): a positive guide keeps the momentum,
    # a negative one turns towards the goal
    args = dict(position=(3, 3), goal=(0, 0), blocked="", last_action="east",
                visited={(3, 3)}, rng=rng, epsilon=0.0)
    assert toy_env.demonstrator_action("positive", **args) == "east"
    assert toy_env.demonstrator_action("negative", **args) in ("north", "west")


def test_demonstrator_episode_is_well_formed_and_deterministic():
    env = GridWorld()
    steps, infos = toy_env.demonstrate(env, seed=11)
    assert steps == toy_env.demonstrate(env, seed=11)[0]
    assert len(steps) == len(infos) <= env.max_steps
    assert all(g in GUIDES and a in ACTIONS for _, g, a in steps)
    assert infos[-1]["success"] or len(steps) == env.max_steps


def test_demonstrator_is_clearly_imperfect_but_informative():
    """Measured on 1,000 seeds: success 0.433, guide agreement 0.690 (balanced 0.791).
    On 300 seeds the standard error of the success rate is about 0.03."""
    report = toy_env.demonstrator_report(GridWorld(), range(300))
    assert 0.30 <= report["success"] <= 0.55
    assert 0.60 <= report["guide_accuracy"] <= 0.80
    assert report["guide_balanced_accuracy"] > 0.5
