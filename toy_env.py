"""A small text gridworld for language agents, with ground truth the agent never sees.

The agent walks a random maze towards a goal and is paid 1.0 only when it arrives: a sparse,
delayed reward, the setting Self-Guide (arXiv 2604.03098) was made for. Everything it sees is
three words a step, for example

    at:3,5 goal:7,1 walls:NW

(its cell, the goal's cell, and which of the four neighbours are blocked by a wall or the
edge). Because the maze is known to us, every step can be scored against the truth: the
shortest-path (BFS) distance to the goal before and after it. `info` carries that truth so
that the agent's own self-assessments can be measured, never shown to the agent.

With `cue=True` the agent is also shown a hot/cold cue, a fourth word saying whether its last
move brought the goal closer through the maze (`cue:warmer`), farther (`cue:colder`) or
neither (`cue:same`, a bump; `cue:start` before the first move), so it *can* judge its last
move from what it sees, the way a pretrained LLM can judge its progress in a familiar task:

    at:3,5 goal:7,1 walls:NW cue:warmer

With `dist=True` the fourth word is instead the maze distance to the goal (`dist:K`, the BFS
steps left). The move's effect is still in what the agent sees, but judging it now takes a
thought: comparing this step's K with the last step's, six tokens back, rather than reading
one word:

    at:3,5 goal:7,1 walls:NW dist:9

With `house=h` every task is the same maze, the agent's house: one layout and one goal, drawn
from h, and a task draws only its start (training tasks on half the far cells, the held-out
tasks on the other half). With `stale_door` the maze has a door that a stale map still shows
open, the wall whose opening would shorten the paths to the goal most, since bricked up; the
demonstrator plans and judges on that map, so its judgements are wrong exactly where the map
is, and `info["stale"]` marks those moves.

The module also holds the imperfect demonstrator that gives a tiny model its "pretrained"
prior (selfguide.py's Stage 0, departure 1): it judges its own last step from what it can see
and remember, says so in one word, and lets that judgement steer its next move. Without the cue
it judges by a Manhattan-distance heuristic; with the cue (or dist:K, which it compares with
the last step's) it reads the truth but misjudges a share of its moves.

`episode_text` replays an agent's episode for a reader: each guide against what its move truly
did, and the path drawn on the map (selfguide.py --show).

    python toy_env.py            # print a maze, and the demonstrator's figures on 1,000 seeds

The API follows gymnasium's (reset / step / render) without depending on it.
"""
from __future__ import annotations

import functools
import random
import time
from collections import deque

# --- Vocabulary: every word an observation, guide or action can contain ---

ACTIONS = ("north", "east", "south", "west")
GUIDES = ("positive", "neutral", "negative")
MOVES = {"north": (-1, 0), "east": (0, 1), "south": (1, 0), "west": (0, -1)}
MAX_SIZE = 12  # the vocabulary names every cell of grids up to this size


def _cell_word(kind: str, row: int, col: int) -> str:
    return f"{kind}:{row},{col}"


def _walls_word(blocked: str) -> str:
    return "walls:" + (blocked or "none")


def _all_wall_words() -> list[str]:
    letters = "NESW"
    words = []
    for mask in range(16):
        words.append(_walls_word("".join(c for i, c in enumerate(letters) if mask >> i & 1)))
    return words


CUES = ("start", "warmer", "colder", "same")
"""The hot/cold cue words (cue=True): no move yet, the last move brought the goal closer
through the maze, led away from it, or bumped (progress +1 / -1 / 0)."""
CUE_OF_PROGRESS = {1: "warmer", -1: "colder", 0: "same"}
CUE_NOISE = 0.1
"""Share of its moves the cue-reading demonstrator misjudges (the default of --cue-noise)."""

VOCAB: tuple[str, ...] = tuple(
    [_cell_word("at", r, c) for r in range(MAX_SIZE) for c in range(MAX_SIZE)]
    + [_cell_word("goal", r, c) for r in range(MAX_SIZE) for c in range(MAX_SIZE)]
    + _all_wall_words()
    + [f"cue:{word}" for word in CUES]
)
"""Every observation word, for any grid up to MAX_SIZE x MAX_SIZE (but dist:K). Guides and
actions are separate (`GUIDES`, `ACTIONS`) because the agent writes them rather than reads them."""

DIST_VOCAB: tuple[str, ...] = tuple(f"dist:{k}" for k in range(MAX_SIZE * MAX_SIZE))
"""The distance words (dist=True): no maze path is longer than its cells. Kept apart from
VOCAB so that the vocabulary of every other setting stays as it was."""
OBSERVATION_VOCAB = VOCAB + DIST_VOCAB
"""Every word an observation can hold; a maze shows the first `GridWorld.words` of them."""


def observation_words(cue: bool, dist: bool = False) -> int:
    """Words per observation: position, goal, wall mask, and the cue or the distance if shown."""
    return 4 if cue or dist else 3


def true_polarity(progress: int) -> str:
    """The guide a perfectly informed agent would write for a step with this true progress.

    A grid is bipartite, so a move between two open cells changes the BFS distance by exactly
    one: progress is +1 (closer), -1 (farther) or 0 (bumped into a wall and stayed)."""
    return {1: "positive", 0: "neutral", -1: "negative"}[progress]


def bfs_distances(open_cells: set, goal: tuple) -> dict:
    """Shortest-path distance from every open cell that can reach `goal` to the goal."""
    distance = {goal: 0}
    frontier = deque([goal])
    while frontier:
        cell = frontier.popleft()
        r, c = cell
        step = distance[cell] + 1
        for nxt in ((r - 1, c), (r, c + 1), (r + 1, c), (r, c - 1)):  # N, E, S, W
            if nxt in open_cells and nxt not in distance:
                distance[nxt] = step
                frontier.append(nxt)
    return distance


# --- The environment ---

def generate_layout(size: int, wall_prob: float, min_distance: int, rng: random.Random,
                    max_tries: int):
    """(open cells, start, goal, BFS distances to the goal, wall letters of every open cell),
    all drawn from `rng`; RuntimeError after `max_tries` layouts without a start far enough."""
    cells = [(r, c) for r in range(size) for c in range(size)]
    for _ in range(max_tries):
        open_list = [cell for cell in cells if rng.random() >= wall_prob]  # sorted, as cells
        if len(open_list) < 2:
            continue
        open_cells = frozenset(open_list)
        goal = rng.choice(open_list)
        distance = bfs_distances(open_cells, goal)
        starts = sorted(cell for cell, d in distance.items() if d >= min_distance)
        if starts:
            walls = {(r, c): ("N" if (r - 1, c) not in open_cells else "")
                     + ("E" if (r, c + 1) not in open_cells else "")
                     + ("S" if (r + 1, c) not in open_cells else "")
                     + ("W" if (r, c - 1) not in open_cells else "") for r, c in open_list}
            return open_cells, rng.choice(starts), goal, distance, walls
    raise RuntimeError(
        f"no {size}x{size} maze with wall_prob={wall_prob} had a start {min_distance} steps "
        f"from the goal in {max_tries} tries; lower wall_prob or min_distance")


@functools.lru_cache(maxsize=4096)
def seeded_layout(size: int, wall_prob: float, min_distance: int, seed: int, max_tries: int):
    """The layout of task `seed` and the state its RNG is left in. Memoised because a GRPO
    group resets G environments to the same task; the layout is never mutated."""
    rng = random.Random(seed)
    return generate_layout(size, wall_prob, min_distance, rng, max_tries), rng.getstate()


def bricked_door(open_cells, goal: tuple, distance: dict, size: int):
    """(the wall whose opening would shorten the paths to the goal most, summed over the open
    cells, and how many steps it shortens them by on average): the door a stale map remembers
    open. (None, 0.0) if no wall between two open cells shortens any path."""
    best, best_gain = None, 0
    for r in range(size):
        for c in range(size):
            if (r, c) in open_cells:
                continue
            around = [n for n in ((r - 1, c), (r, c + 1), (r + 1, c), (r, c - 1)) if n in distance]
            if len(around) < 2:
                continue
            opened = bfs_distances(open_cells | {(r, c)}, goal)
            gain = sum(d - opened[cell] for cell, d in distance.items())
            if gain > best_gain:
                best, best_gain = (r, c), gain
    return best, best_gain / len(distance)


HELD_OUT_TASKS = 10**9
"""In a house, the tasks from this seed on start on its held-out cells, the others on its
training cells (selfguide.py's held-out tasks are the seeds from 10^9 on)."""
SHORTCUT = 1.0
"""With a stale door, a maze is drawn again until its bricked door shortens the paths to the
goal by at least this many steps on average: the stale map is wrong where the agent walks."""


@functools.lru_cache(maxsize=4096)
def seeded_stale_layout(size: int, wall_prob: float, min_distance: int, seed, max_tries: int):
    """(layout, door, believed distances, RNG state) of the first maze random.Random(seed)
    draws whose bricked door shortens paths by SHORTCUT steps on average; the believed
    distances are the maze's with the door open (the stale map's)."""
    rng = random.Random(seed)
    for _ in range(max_tries):
        layout = generate_layout(size, wall_prob, min_distance, rng, max_tries)
        door, shortcut = bricked_door(layout[0], layout[2], layout[3], size)
        if shortcut >= SHORTCUT:
            return layout, door, bfs_distances(layout[0] | {door}, layout[2]), rng.getstate()
    raise RuntimeError(f"no {size}x{size} maze had a door shortening its paths by {SHORTCUT} "
                       f"steps in {max_tries} tries")


@functools.lru_cache(maxsize=64)
def house_starts(size: int, wall_prob: float, min_distance: int, house: int, max_tries: int):
    """The cells a task may start on in house `house` (at least min_distance from its goal),
    split into (training cells, held-out cells): a fixed shuffle of them, every other held out."""
    layout = seeded_stale_layout(size, wall_prob, min_distance, f"house-{house}", max_tries)[0]
    starts = sorted(cell for cell, d in layout[3].items() if d >= min_distance)
    random.Random(f"house-{house}-starts").shuffle(starts)
    return sorted(starts[1::2]), sorted(starts[::2])


class GridWorld:
    """A random maze with a start at least `min_distance` BFS steps from the goal.

    Each `reset(seed=k)` draws the same layout for the same k, so a GRPO group of G rollouts
    of "task k" shares one maze. Reward is 1.0 on reaching the goal (terminated), else 0;
    the episode is truncated after `max_steps` moves.

    With `house=h`, every task is the one maze of house h, with its one goal: a task draws only
    its start, among the house's training cells (or, from seed HELD_OUT_TASKS on, its held-out
    cells). With `stale_door`, the maze has a door since bricked up that a stale map still
    shows open (bricked_door): `info["stale"]` says whether that map misjudges the move, and
    the demonstrator plans and judges on it.
    """

    MAX_TRIES = 2000  # layouts drawn per reset before giving up with a clear error

    def __init__(self, size: int = 9, wall_prob: float = 0.3, min_distance: int = 12,
                 max_steps: int = 24, seed: int | None = None, cue: bool = False,
                 dist: bool = False, house: int | None = None, stale_door: bool = False,
                 cue_misjudge: str = "none"):
        if not isinstance(size, int) or not 2 <= size <= MAX_SIZE:
            raise ValueError(f"size must be an integer in [2, {MAX_SIZE}], got {size!r}")
        if not 0.0 <= wall_prob < 1.0:
            raise ValueError(f"wall_prob must lie in [0, 1), got {wall_prob!r}")
        if not isinstance(min_distance, int) or min_distance < 1:
            raise ValueError(f"min_distance must be a positive integer, got {min_distance!r}")
        if min_distance > 2 * (size - 1):
            raise ValueError(
                f"min_distance={min_distance} is impossible on a {size}x{size} grid: its two "
                f"farthest cells are 2*(size-1) = {2 * (size - 1)} steps apart")
        if not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}")
        if cue and dist:
            raise ValueError("show the hot/cold cue or the distance (dist:K), not both")
        self.size, self.wall_prob = size, wall_prob
        self.min_distance, self.max_steps, self.cue = min_distance, max_steps, cue
        if cue_misjudge not in MISJUDGED:
            raise ValueError(f"cue_misjudge must be one of {MISJUDGED}, got {cue_misjudge!r}")
        self.dist, self.house, self.stale_door = dist, house, stale_door
        self.cue_misjudge = cue_misjudge  # what this world's demonstrator misjudges (demonstrate)
        self._rng = random.Random(seed)
        self._done = True
        self._position = None
        self.maze = None

    def reset(self, seed: int | None = None, options: dict | None = None):
        """Draw a new task; the same `seed` always gives the same maze, start and goal."""
        if options:
            raise ValueError(f"GridWorld.reset takes no options, got {sorted(options)}")
        settings = (self.size, self.wall_prob, self.min_distance)
        self._believed = None
        if self.house is not None:  # the house's maze; the task draws its start
            layout, _, self._believed, _ = seeded_stale_layout(
                *settings, f"house-{self.house}", self.MAX_TRIES)
            training, held_out = house_starts(*settings, self.house, self.MAX_TRIES)
            if seed is not None:
                self._rng.seed(seed)
            starts = held_out if seed is not None and seed >= HELD_OUT_TASKS else training
            layout = (layout[0], self._rng.choice(starts), *layout[2:])
        elif self.stale_door:  # a maze of its own per task, and its stale map
            if seed is None:
                seed = self._rng.getrandbits(64)
            layout, _, self._believed, state = seeded_stale_layout(*settings, seed,
                                                                   self.MAX_TRIES)
            self._rng.setstate(state)
        elif seed is None:  # continue this environment's own RNG
            layout = generate_layout(*settings, self._rng, self.MAX_TRIES)
        else:  # the same layout and RNG state as drawing it from random.Random(seed)
            layout, state = seeded_layout(*settings, seed, self.MAX_TRIES)
            self._rng.setstate(state)
        if not self.stale_door:
            self._believed = None  # a house without the stale map is just the house
        # the maze this task is played in: a house's number, else the task's seed (None for a
        # layout drawn from the environment's own RNG); tasks with one maze share every cell
        self.maze = self.house if self.house is not None else seed
        self._open, self._position, self._goal, self._distance, self._walls = layout
        self._optimal_steps = self._distance[self._position]
        self._visited = {self._position}
        self._cue = "start"
        self._steps = 0
        self._done = False
        info = self._info(progress=0, bumped=False, revisited=False, stale=False)
        return self._observe(), info

    def step(self, action: str | None):
        """Move one cell; a wall or the edge leaves the agent where it was (`info['bumped']`),
        and so does None: a turn that names no move (a free-text reply without one)."""
        if action is not None and action not in MOVES:
            raise ValueError(f"unknown action {action!r}; valid actions are {', '.join(ACTIONS)}")
        if self._done:
            raise RuntimeError("the episode has ended (or never started): call reset() first")
        before = self._distance[self._position]
        dr, dc = MOVES.get(action, (0, 0))
        target = (self._position[0] + dr, self._position[1] + dc)
        bumped = action is None or target not in self._open
        if not bumped:
            self._position = target
        revisited = not bumped and target in self._visited
        self._visited.add(self._position)
        progress = before - self._distance[self._position]
        stale = self._believed is not None and progress != self.believed_progress(
            self._position if bumped else (self._position[0] - dr, self._position[1] - dc))
        self._cue = CUE_OF_PROGRESS[progress]
        self._steps += 1
        terminated = self._position == self._goal
        truncated = not terminated and self._steps >= self.max_steps
        self._done = terminated or truncated
        info = self._info(progress=progress, bumped=bumped, revisited=revisited, stale=stale)
        return self._observe(), float(terminated), terminated, truncated, info

    @property
    def words(self) -> int:
        """How many words of OBSERVATION_VOCAB this maze can show (dist:K's only with dist)."""
        return len(VOCAB) + (len(DIST_VOCAB) if self.dist else 0)

    @property
    def observation_length(self) -> int:
        """Words per observation."""
        return observation_words(self.cue, self.dist)

    @property
    def believed(self) -> dict:
        """The stale map's distance to the goal of every cell it can reach (stale_door)."""
        return self._believed

    def believed_progress(self, previous: tuple) -> int:
        """How much closer the stale map believes the move from `previous` to the agent's cell
        brought it (+1, 0 or -1): the sign of the change in believed distance."""
        before, after = self._believed[previous], self._believed[self._position]
        return (before > after) - (before < after)

    def _observe(self) -> str:
        words = [_cell_word("at", *self._position), _cell_word("goal", *self._goal),
                 _walls_word(self._walls[self._position])]
        if self.cue:
            words.append(f"cue:{self._cue}")
        if self.dist:
            words.append(f"dist:{self._distance[self._position]}")
        return " ".join(words)

    def _info(self, progress: int, bumped: bool, revisited: bool, stale: bool) -> dict:
        return {"distance": self._distance[self._position],
                "optimal_steps": self._optimal_steps,
                "progress": progress, "bumped": bumped, "revisited": revisited, "stale": stale,
                "success": self._position == self._goal, "steps": self._steps,
                "position": self._position, "goal": self._goal}

    def render(self) -> str:
        """The map, one row per line: '#' wall, '.' floor, 'A' agent, 'G' goal."""
        if self._position is None:
            raise RuntimeError("nothing to render yet: call reset() first")
        rows = []
        for r in range(self.size):
            row = ""
            for c in range(self.size):
                cell = (r, c)
                row += ("A" if cell == self._position else "G" if cell == self._goal
                        else "." if cell in self._open else "#")
            rows.append(row)
        return "\n".join(rows)


MOVE_TRUTH = {"positive": "closer", "neutral": "bumped", "negative": "farther"}  # by true polarity


def episode_text(env: GridWorld, seed: int, guides, moves, title: str) -> str:
    """An episode replayed in `env` from task `seed`, for a reader, in 80 columns: per step the
    observation, the guide written (guides[t], None where there is none), what the move it
    judges truly did and whether the guide was right, the move; then the maze with the path
    walked, and the outcome. The truth comes from the replay, never from the agent."""
    observation, info = env.reset(seed=seed)
    start, start_map = info["position"], env.render().splitlines()
    rows, path, truth, right, judged = [], [start], None, 0, 0
    for t, move in enumerate(moves):
        guide = guides[t] if t < len(guides) else None
        verdict = MOVE_TRUTH[truth] if truth else "(no move yet)"
        if truth and guide:
            right, judged = right + (guide == truth), judged + 1
            verdict += ": right" if guide == truth else ": WRONG"
        rows.append((t + 1, observation, guide or "-", verdict, move))
        observation, _, _, _, info = env.step(move)
        truth = true_polarity(info["progress"])  # what the next guide judges
        path.append(info["position"])
    width = max(len(o) for _, o, *_ in rows)
    lines = [f"{title}: the shortest path is {info['optimal_steps']} moves",
             f"  t  {'observation':<{width}}  guide     last move        action"]
    lines += [f"{t:>3}  {o:<{width}}  {g:<8}  {v:<15}  {m}" for t, o, g, v, m in rows]
    walked = [list(row) for row in env.render().splitlines()]
    for r, c in path:
        if (r, c) != path[-1]:  # the agent's cell keeps its A
            walked[r][c] = "S" if (r, c) == start else "*"
    lines += ["", f"  {'start':<{env.size + 4}}after {len(moves)} moves (S start, * path, A agent)"]
    lines += [f"  {a:<{env.size + 4}}{''.join(b)}" for a, b in zip(start_map, walked)]
    outcome = (f"reached the goal in {len(moves)} moves (shortest {info['optimal_steps']})"
               if info["success"] else
               f"did not reach the goal in {len(moves)} moves; it ended {info['distance']} "
               f"moves away")
    guide_line = ([f"its guide was right about {right} of the {judged} moves it judged"]
                  if judged else [])
    return "\n".join(lines + ["", outcome] + guide_line)


@functools.lru_cache(maxsize=2**16)  # a maze repeats its observations
def parse_observation(observation: str):
    """(position, goal, blocked letters, cue) from an observation string, the cue one of CUES,
    the distance K (an int) for dist:K, or None when neither is shown; ValueError if malformed."""
    words = observation.split()
    try:
        at, goal, walls, *extra = words
        position = tuple(int(v) for v in at.removeprefix("at:").split(","))
        target = tuple(int(v) for v in goal.removeprefix("goal:").split(","))
        cue = extra[0].removeprefix("cue:") if extra else None
        if extra and extra[0].startswith("dist:"):
            cue = int(extra[0].removeprefix("dist:"))
        if not (at.startswith("at:") and goal.startswith("goal:") and walls.startswith("walls:")
                and len(extra) <= 1 and (cue is None or cue in CUES or isinstance(cue, int))):
            raise ValueError
    except ValueError:
        raise ValueError(f"malformed observation {observation!r}; expected 'at:R,C goal:R,C "
                         f"walls:LETTERS' and optionally 'cue:WORD' or 'dist:K'") from None
    blocked = walls.removeprefix("walls:")
    return position, target, "" if blocked == "none" else blocked, cue


# --- The imperfect demonstrator (the Stage 0 prior's teacher) ---

def demonstrator_guide(position, previous, visited, goal) -> str:
    """Self-assessment of the last step from what the agent can see and remember.

    Stayed put (bumped) -> neutral; stepped back onto a cell seen before -> negative (it
    reads backtracking as a loop, which is often wrong: leaving a dead end is real progress);
    a new cell -> positive if it is closer to the goal by Manhattan distance, else negative.
    Never uses the BFS ground truth."""
    if position == previous:
        return "neutral"
    if position in visited:
        return "negative"
    manhattan = lambda cell: abs(cell[0] - goal[0]) + abs(cell[1] - goal[1])  # noqa: E731
    return "positive" if manhattan(position) < manhattan(previous) else "negative"


MISJUDGED = ("none", "revisit")
"""Kinds of move the cue-reading demonstrator can misjudge every time (cue_misjudge): none, or
every move back onto a cell it has visited, which it calls "negative" whatever the cue says,
the way the plain demonstrator reads backtracking as a loop (a systematic error, like a
pretrained model's, rather than a random share of moves)."""


def cue_guide(cue: str, rng: random.Random, noise: float, revisited: bool = False,
              misjudge: str = "none") -> str:
    """Self-assessment of the last step read off the hot/cold cue, misjudged at a rate.

    No move yet or a bump (cue start or same) -> neutral, which is plain to see; warmer ->
    positive, colder -> negative, but with probability `noise` the reading is flipped: the
    demonstrations are then informed yet wrong in places. With misjudge "revisit", a move
    back onto a visited cell is "negative" every time: wrong whenever it was warmer."""
    if cue in ("start", "same"):
        return "neutral"
    if misjudge == "revisit" and revisited:
        return "negative"
    closer = cue == "warmer"
    if rng.random() < noise:
        closer = not closer
    return "positive" if closer else "negative"


OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east"}


def demonstrator_action(guide, position, goal, blocked, last_action, visited, rng,
                        epsilon: float, backtrack: bool = False, believed=None) -> str:
    """The next move, reacting to the demonstrator's own guide.

    Without the cue (backtrack False): positive keeps going the same way if that way is open
    and new (momentum). With the cue (backtrack True): negative steps back the way it came.
    Otherwise: prefer open, unvisited neighbours, closest to the goal first: by Manhattan
    distance, or by the `believed` distances of a stale map. With probability `epsilon`, a
    random move."""
    if rng.random() < epsilon:
        return rng.choice(ACTIONS)
    if backtrack and guide == "negative" and last_action is not None:
        return OPPOSITE[last_action]
    if backtrack:
        last_action = None  # the cue-reader has no momentum: the cue tells it more
    open_moves = [a for a, letter in zip(ACTIONS, "NESW") if letter not in blocked]
    neighbour = {a: (position[0] + MOVES[a][0], position[1] + MOVES[a][1]) for a in open_moves}
    fresh = [a for a in open_moves if neighbour[a] not in visited]
    if guide == "positive" and last_action in fresh:
        return last_action
    if not fresh:
        return rng.choice(open_moves) if open_moves else rng.choice(ACTIONS)

    def distance(a):  # the neighbour's distance to the goal: walls ignored, or as believed
        if believed is not None:
            return believed[neighbour[a]]
        return abs(neighbour[a][0] - goal[0]) + abs(neighbour[a][1] - goal[1])
    best = min(distance(a) for a in fresh)
    return rng.choice([a for a in fresh if distance(a) == best])


def demonstrate(env: GridWorld, seed: int, epsilon: float = 0.15,
                cue_noise: float = CUE_NOISE, cue_misjudge: str | None = None):
    """Play one episode of task `seed` with the demonstrator (the cue-reading one if the
    environment shows the cue, misjudging a share `cue_noise` of its moves and every move of
    the kind `cue_misjudge`; with dist:K it compares K with the last step's, which tells it
    what the cue would, and reads that the same way; with a stale door it judges each move by
    the stale map's distances, steps back when they say it led away, and heads for the cell
    the stale map puts closest, so it is wrong exactly where that map is).

    Returns (steps, infos): steps is a list of (observation, guide, action), where the guide
    judges the step that led to the observation (the first guide has nothing to judge and is
    "neutral"); infos[i] is the environment's truth after action i."""
    cue_misjudge = env.cue_misjudge if cue_misjudge is None else cue_misjudge
    rng = random.Random(f"demonstrator-{seed}")
    observation, _ = env.reset(seed=seed)
    position, goal, blocked, shown = parse_observation(observation)  # shown: cue word or K
    previous, last_action, visited = position, None, set()
    steps, infos, done, last_distance = [], [], False, None
    while not done:
        cue = shown
        if env.dist:  # the comparison the agent has to make: this K against the last step's
            cue = ("start" if last_distance is None
                   else CUE_OF_PROGRESS[(last_distance > shown) - (last_distance < shown)])
            last_distance = shown
        if env.stale_door:  # the sign of the believed distance's change
            guide = true_polarity(env.believed_progress(previous))
        elif env.cue or env.dist:
            guide = cue_guide(cue, rng, cue_noise, position in visited, cue_misjudge)
        else:
            guide = demonstrator_guide(position, previous, visited, goal)
        visited.add(position)
        action = demonstrator_action(guide, position, goal, blocked, last_action, visited, rng,
                                     epsilon, backtrack=env.cue or env.dist or env.stale_door,
                                     believed=env.believed if env.stale_door else None)
        steps.append((observation, guide, action))
        observation, _, terminated, truncated, info = env.step(action)
        infos.append(info)
        done = terminated or truncated
        previous, last_action = position, action
        position, goal, blocked, shown = parse_observation(observation)
    return steps, infos


def demonstrator_report(env: GridWorld, seeds, cue_noise: float = CUE_NOISE,
                        cue_misjudge: str = "none") -> dict:
    """Success rate, and how well the demonstrator's guide agrees with true progress:
    accuracy, balanced accuracy (mean recall over the three polarities, because about two
    thirds of steps are truly positive and few are neutral), and accuracy on the moves back
    onto a visited cell apart from the others."""
    successes = 0
    confusion = {(truth, guide): 0 for truth in GUIDES for guide in GUIDES}
    by_kind = {True: [0, 0], False: [0, 0]}  # revisited: [right, judged]
    for seed in seeds:
        steps, infos = demonstrate(env, seed, cue_noise=cue_noise, cue_misjudge=cue_misjudge)
        successes += infos[-1]["success"]
        # guide i+1 judges action i, whose truth is infos[i]
        for (_, guide, _), info in zip(steps[1:], infos):
            truth = true_polarity(info["progress"])
            confusion[(truth, guide)] += 1
            by_kind[info["revisited"]][0] += truth == guide
            by_kind[info["revisited"]][1] += 1
    judged = sum(confusion.values())
    recalls = [confusion[(c, c)] / n for c in GUIDES
               if (n := sum(confusion[(c, g)] for g in GUIDES))]
    return {"success": successes / len(seeds),
            "guide_accuracy": sum(confusion[(c, c)] for c in GUIDES) / max(judged, 1),
            "guide_balanced_accuracy": sum(recalls) / max(len(recalls), 1),
            "revisit_share": by_kind[True][1] / max(judged, 1),
            "guide_accuracy_revisit": by_kind[True][0] / max(by_kind[True][1], 1),
            "guide_accuracy_other": by_kind[False][0] / max(by_kind[False][1], 1)}


if __name__ == "__main__":
    world = GridWorld(cue=True)
    print(world.reset(seed=0)[0])
    print(world.render(), "\n")
    mazes = {"9x9 maze (>= 12, 24 moves)": {}, "sparse maze (12x12, >= 18, 26 moves)":
             {"size": 12, "min_distance": 18, "max_steps": 26}}
    for name, settings in mazes.items():
        for shown, reads in ({}, ""), ({"cue": True}, " reading the cue"), \
                ({"dist": True}, " comparing dist:K"):
            start = time.perf_counter()
            report = demonstrator_report(GridWorld(**shown, **settings), range(1000))
            print(f"{name}, demonstrator{reads}, 1,000 seeds: "
                  f"success {report['success']:.3f}; its guide agrees with true progress "
                  f"{report['guide_accuracy']:.3f} (balanced "
                  f"{report['guide_balanced_accuracy']:.3f}); {time.perf_counter() - start:.2f} s")
