"""Tests for examples/trl_freetext.py, the free-text path on TRL. The format's tests need
only transformers; those that train need the optional extra trl==1.16.0 and are skipped,
with the reason, without it.

    pip install trl==1.16.0 && python -m pytest -q examples/
"""
import contextlib
import json
import re
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import selfguide as sg  # noqa: E402
from conftest import (TINY_ARGS, fake_episodes, launch, require_trl, same_update,  # noqa: E402
                      tiny_config)

if not (Path(__file__).resolve().parent / "trl_freetext.py").exists():
    pytest.skip("examples/trl_freetext.py is not here", allow_module_level=True)
import trl_freetext as freetext  # noqa: E402  (an import error fails, never skips)

REPLIES = ["Assessment: positive, that got me closer\nMove: east",
           "Assessment: a negative step, wrong way\nMove: north",
           "Assessment: neutral, no progress\nMove: south",
           "Move: west"]
OBSERVATIONS = ["at:1,0 goal:3,4 walls:W", "at:1,1 goal:3,4 walls:none",
                "at:2,1 goal:3,4 walls:NE"]


def corpus():
    texts = [freetext.Maze.system_prompt(True), freetext.Maze.system_prompt(False),
             "at:0123456789, goal: walls:NESW none cue:start warmer colder same up"]
    return (texts + REPLIES + OBSERVATIONS) * 3


def tokenizers():
    """The two kinds built in code: one token per word, and subword BPEs: a small one whose
    pieces cut words apart, and a larger one whose pieces straddle the assessment's end
    ('closer\\nMove:' is one piece)."""
    return {"words": freetext.build_tokenizer("words", corpus()),
            "bpe": freetext.build_tokenizer("bpe", corpus(), vocab=150),
            "bpe-merged": freetext.build_tokenizer("bpe", corpus(), vocab=300)}


# --- The format: reading a reply, spans, the environment's turns ---

@pytest.mark.parametrize("text, guide", [
    ("positive, that got me closer", 0), ("a negative step", 2), ("neutral, no progress", 1),
    ("Neutral. then positive", 1), ("  POSITIVE, heading the right way", 0),
    ("negative, not positive", 2), ("neutral.positive", 1), ("I am not sure", -1), ("", -1),
    (None, -1)])
def test_read_guide_reads_the_first_guide_word_and_knows_unreadable_from_neutral(text, guide):
    assert freetext.read_guide(text) == guide
    reward = sg.step_rewards(torch.tensor([[guide]])).item()
    assert reward == pytest.approx([0.1, 0.0, -0.1, 0.0][guide])  # unreadable: neutral's 0


@pytest.mark.parametrize("text, assessment, move", [
    ("Assessment: positive, closer\nMove: east", "positive, closer", "east"),
    ("Assessment:negative Move: West", "negative", "west"),
    ("Move: up", None, None),
    ("Assessment: unsure", "unsure", None),
    ("blah", None, None),
    # what a fair reader accepts: any case, markdown bold, the word on the next line
    ("assessment: neutral\nmove: south", "neutral", "south"),
    ("MOVE: SOUTH", None, "south"),
    ("**Assessment:** negative, a wall\n**Move:** south", "negative, a wall", "south"),
    ("**Assessment**: positive\n**Move**: **north**", "positive", "north"),
    ("Assessment: positive\nMove:\nsouth", "positive", "south"),
    ("I go south", None, None), ("Move:\n\nsouth", None, None)])
def test_parse_reply_finds_the_assessment_and_the_move(text, assessment, move):
    found, _, word = freetext.parse_reply(text)
    assert (text[slice(*found)] if found else None) == assessment
    assert word == move


@pytest.mark.parametrize("kind", ["words", "bpe", "bpe-merged"])
def test_spans_are_the_tokens_of_the_assessment_and_of_the_move(kind):
    tokenizer, straddled = tokenizers()[kind], False
    for reply in REPLIES[:3]:
        ids = tokenizer.encode(reply, add_special_tokens=False) + [tokenizer.eos_token_id]
        text, guide, move, judged_end, judged, moved = freetext.read_reply(tokenizer, ids, True)
        assessment = reply[len("Assessment: "):reply.index("\n")]
        pieces = tokenizer.convert_ids_to_tokens(ids)
        # the move's span: exactly the move word's tokens
        assert tokenizer.decode(ids[slice(*moved)]).strip() == reply.split()[-1]
        # the assessment's span covers the assessment, and nothing before "Assessment:"'s end
        covered = tokenizer.decode(ids[slice(*judged)], skip_special_tokens=True)
        assert assessment.replace(" ", "") in covered.replace(" ", "")
        assert "Assessment" not in covered and judged_end == judged[1]
        assert freetext.GUIDES[guide] in assessment and ids[-1] == tokenizer.eos_token_id
        assert judged[1] <= moved[0] and moved[1] <= len(ids) - 1, pieces
        straddled |= "Move" in pieces[judged[1] - 1]  # the piece that ends the assessment
    assert straddled == (kind == "bpe-merged")


def test_spans_hold_for_token_sequences_the_tokenizer_would_not_make():
    """Sampled replies need not be the tokenizer's own encoding of their text."""
    tokenizer = tokenizers()["bpe"]
    ids = []
    for character in REPLIES[0]:  # one piece per character where the vocabulary has it
        ids += tokenizer.encode(character, add_special_tokens=False)
    text, guide, move, _, judged, moved = freetext.read_reply(tokenizer, ids, True)
    assert text == REPLIES[0] and guide == 0 and move == "east"
    assert tokenizer.decode(ids[slice(*moved)]) == "east"


@pytest.mark.parametrize("kind", ["words", "bpe"])
def test_environment_turns_are_what_the_template_puts_between_replies(kind):
    tokenizer = tokenizers()[kind]
    messages = [{"role": "system", "content": freetext.Maze.system_prompt(True)}]
    stream = freetext.prompt_ids(tokenizer, True)
    for t, (observation, reply) in enumerate(zip(OBSERVATIONS, REPLIES)):
        messages += [{"role": "user", "content": observation},
                     {"role": "assistant", "content": reply}]
        stream += freetext.environment_turn(tokenizer, observation, True, t == 0)
        stream += tokenizer.encode(reply, add_special_tokens=False) + [tokenizer.eos_token_id]
    assert stream == freetext.render(tokenizer, messages)  # token for token, specials included


def test_single_turns_are_each_step_as_a_chat_of_its_own_without_system_turn_or_history():
    """The tiny prior's first cloning: each (observation, reply) is the template's rendering of
    that user turn and that assistant turn alone, the reply and its end of turn written."""
    tokenizer = tokenizers()["bpe"]
    steps = list(zip(OBSERVATIONS, REPLIES))
    turns = freetext.turn_sequences(tokenizer, [(True, steps), (False, steps[:1])])
    assert len(turns) == len(steps) + 1
    for (ids, written), (observation, reply) in zip(turns, steps + steps[:1]):
        chat = [{"role": "user", "content": observation}, {"role": "assistant", "content": reply}]
        assert ids == freetext.render(tokenizer, chat)
        assert tokenizer.decode([i for i, w in zip(ids, written) if w]) == reply + "<|end|>"
        assert written == sorted(written)  # the reply is the turn's end


def test_the_example_walk_stays_inside_the_smallest_maze_and_shows_every_judgement():
    """--example's walk (a small model copies it): every cell of it exists in a 4x4 maze, the
    smallest one the real model plays; each of its moves leads where its next observation
    is; its judgements are all three polarities, its moves three directions, and with the cue
    each judgement is the cue's."""
    walk = freetext.EXAMPLE_WALK
    for observation, *_ in walk:
        position, goal, _, _ = sg.toy_env.parse_observation(observation)
        assert max(position + goal) < 4 and min(position + goal) >= 0
    for (before, *_, move), (after, *_) in zip(walk, walk[1:]):
        (r, c), (dr, dc) = sg.toy_env.parse_observation(before)[0], sg.toy_env.MOVES[move]
        assert sg.toy_env.parse_observation(after)[0] == (r + dr, c + dc)
    cue_words = {"start": "neutral", "warmer": "positive", "colder": "negative"}
    for cue in (True, False):
        replies = [m["content"] for m in freetext.opening(True, example=True, cue=cue)[2::2]]
        guides = {freetext.GUIDES[freetext.read_guide(r.split("\n")[0])] for r in replies}
        assert guides == set(freetext.GUIDES)
        assert len({freetext.parse_reply(r)[2] for r in replies}) == 3
    for (observation, with_cue, *_), in zip(walk):
        assert with_cue.endswith(cue_words[observation.split("cue:")[1]])


def test_a_move_into_a_wall_is_said_so_in_the_next_turn_with_example(monkeypatch):
    """With --example, after a move into a wall the next turn's observation carries
    `blocked:<move>` (else it would repeat the last one but for its cue); the other moves, and
    every turn without --example, show the observation as it is."""
    tokenizer = freetext.build_tokenizer("bpe", corpus() + ["blocked:south blocked:east"] * 3,
                                         vocab=150)  # a vocabulary that spells the note
    script = [["Assessment: positive\nMove: south", "Assessment: positive\nMove: south",
               "Assessment: neutral\nMove: east"]]
    cfg = tiny_config(max_steps=4, cue=True)
    env = cfg.make_env()
    env.reset(seed=3)
    expected = []
    for move in ("south", "south", "east"):
        observation, *_, info = env.step(move)
        expected.append(f"{observation} blocked:{move}" if info["bumped"] else observation)
    assert any(e.endswith("blocked:south") for e in expected)  # task 3 runs into a wall
    for example in (True, False):
        monkeypatch.setattr(freetext, "generate_replies", Scripted(tokenizer, script))
        batch = freetext.play(None, tokenizer, [3], True, cfg, freetext.FreeText(example=example), 0)
        shown = observations_of(tokenizer, batch, 0)[1:4]
        assert shown == (expected if example else [e.split(" blocked:")[0] for e in expected])


def test_a_runs_evaluation_plays_the_mazes_asked_for_greedy_in_batches(monkeypatch, capsys):
    """--mazes tuning: the run's evaluations play selfguide's calibration mazes (settings are
    chosen on them without seeing a held-out maze), --eval-batch at a time, greedily."""
    played = []

    def fake_play(model, tokenizer, seeds, guided, cfg, ft, seed, greedy=False):
        played.append((list(seeds), guided, greedy))
        return fake_episodes(freetext, len(seeds), guided)
    monkeypatch.setattr(freetext, "play", fake_play)
    cfg = tiny_config(eval_tasks=5)
    for mazes, first in [("tuning", freetext.MAZES["tuning"]), ("held-out", sg.EVAL_SEED_BASE)]:
        played.clear()
        metrics = freetext.evaluate(None, None, cfg, freetext.FreeText(mazes=mazes, eval_batch=2),
                                    True)
        assert played == [([first + i for i in range(k, min(k + 2, 5))], True, True)
                          for k in (0, 2, 4)]
        assert {"success", "unreadable", "unparseable"} <= set(metrics)
    with pytest.raises(SystemExit):
        freetext.parse_config(["--mazes", "others"])
    assert "argument --mazes: invalid choice: 'others'" in capsys.readouterr().err


def test_a_reply_cut_at_the_cap_has_its_turn_closed_and_is_counted(monkeypatch):
    """A reply that reaches --reply-tokens before its end of turn: the environment's next turn
    starts with the end-of-turn token (not written by the model, never trained), so the chat
    stays well formed; the share of cut replies is counted."""
    tokenizer = tokenizers()["bpe"]
    eos = tokenizer.eos_token_id

    class Cut(Scripted):  # the second turn's reply of episode 0 ends without its end of turn
        def __call__(self, *args):
            turn, replies = self.turn, super().__call__(*args)
            return [r[:-1] if (row, turn) == (0, 1) else r for row, r in enumerate(replies)]

    script = [["Assessment: positive\nMove: east"] * 3, ["Assessment: negative\nMove: west"] * 3]
    monkeypatch.setattr(freetext, "generate_replies", Cut(tokenizer, script))
    batch = freetext.play(None, tokenizer, [7, 7], True, tiny_config(max_steps=3),
                          freetext.FreeText(), 0)
    assert batch.capped.tolist() == [[False, True, False], [False, False, False]]
    assert freetext.shares(batch)["capped"] == pytest.approx(1 / 6)
    tokens, written = batch.transcripts[0].tokens, batch.transcripts[0].written
    starts = [k for k in range(1, len(tokens)) if written[k - 1] and not written[k]]
    assert [tokens[k] == eos for k in starts] == [False, True]  # the cut reply's turn, closed
    assert sum(t == eos and w for t, w in zip(tokens, written)) == 2  # its own two ends only


def test_the_free_text_grpo_config_takes_bf16_where_precision_is_decided(tmp_path):
    """--bf16 reaches GRPOConfig's constructor, where mixed precision is derived (set on the
    object afterwards, it never would be)."""
    pytest.importorskip("trl", reason="the GRPOConfig test needs the optional trl==1.16.0")
    cfg = sg.Config(**{**sg.dataclasses.asdict(tiny_config()), "guide_temperature": 1.0})
    for bf16, precision in [(True, "bf16"), (False, "no")]:
        args = freetext.grpo_config(cfg, freetext.FreeText(bf16=bf16), tmp_path, torch.device("cpu"),
                                    64)
        assert (args.bf16, args.mixed_precision, args.max_completion_length) == (bf16, precision, 64)
        assert args.loss_type == "bnpo"
    # --loss dr_grpo: TRL divides the batch's summed token losses by its rollouts x
    # max_completion_length (grpo_trainer.py's _compute_loss), here the most tokens an episode's
    # replies hold, so every written token weighs the same whatever its reply's length
    args = freetext.grpo_config(cfg, freetext.FreeText(loss="dr_grpo", reply_tokens=20), tmp_path,
                                torch.device("cpu"), 64)
    assert (args.loss_type, args.max_completion_length) == ("dr_grpo", cfg.max_steps * 20)


def test_the_warm_start_trains_one_conversation_at_a_time_and_recomputes_activations(tmp_path):
    """--prior-batch conversations an update, one a pass (the same loss, a quarter of four's
    activations); activations recomputed in the backward unless blocks are frozen."""
    pytest.importorskip("trl", reason="the warm start needs the optional trl==1.16.0")
    import warm_start
    cfg = tiny_config(prior_batch=8)
    for layers, recomputed in [(0, True), (2, False)]:
        args = warm_start.sft_config(cfg, freetext.FreeText(train_layers=layers), tmp_path,
                                     torch.device("cpu"))
        assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (1, 8)
        assert args.activation_checkpointing == recomputed


def test_the_warm_starts_own_head_is_where_trls_projects_every_position(monkeypatch):
    """Where TRL's fused head already projects only the trained positions (Triton's devices)
    the warm start's loss is TRL's own, untouched; elsewhere, and on a CPU, the trained
    tokens' head, but TRL's wherever outputs are asked for (an evaluation)."""
    pytest.importorskip("trl", reason="the warm start needs the optional trl==1.16.0")
    import transformers.utils
    import warm_start
    from types import SimpleNamespace
    from trl import SFTTrainer
    monkeypatch.setattr(SFTTrainer, "compute_loss", lambda self, *args, **kwargs: "TRL's")
    cls = warm_start.trainer_class()
    trainer = object.__new__(cls)  # no weights needed: the device picks the loss

    class Called(Exception):
        pass

    def model(**kwargs):  # the own head's pass reaches the model; TRL's (stubbed) does not
        raise Called
    inputs = {"labels": torch.tensor([[-100, 5, 6]]), "input_ids": torch.tensor([[1, 5, 6]]),
              "attention_mask": torch.ones(1, 3, dtype=torch.long)}
    for device, triton, outputs, own in [("cuda", True, False, False),
                                         ("xpu", True, False, False),
                                         ("cuda", False, False, True),  # TRL scores all
                                         ("mps", True, False, True),
                                         ("cpu", True, False, True),
                                         ("cpu", False, True, False)]:
        monkeypatch.setattr(transformers.utils, "is_triton_available", lambda: triton)
        trainer.accelerator = SimpleNamespace(device=torch.device(device))
        try:
            loss = cls.compute_loss(trainer, model, dict(inputs), return_outputs=outputs)
        except Called:
            loss = "own"
        assert loss == ("own" if own else "TRL's"), (device, triton, outputs)


# --- The episode, played with scripted replies ---

class Scripted:
    """Stands in for generate_replies: the replies of each episode, turn by turn."""

    def __init__(self, tokenizer, script):
        self.tokenizer, self.script, self.turn = tokenizer, script, 0

    def __call__(self, model, tokenizer, chats, ft, temperature, greedy, seed):
        replies = [self.tokenizer.encode(texts[min(self.turn, len(texts) - 1)],
                                         add_special_tokens=False) + [tokenizer.eos_token_id]
                   for texts in self.script[:len(chats.rows)]]
        self.turn += 1
        return replies


def scripted_play(monkeypatch, script, kind="bpe", guided=True, **overrides):
    tokenizer = tokenizers()[kind]
    monkeypatch.setattr(freetext, "generate_replies", Scripted(tokenizer, script))
    cfg = tiny_config(max_steps=3, **overrides)
    batch = freetext.play(None, tokenizer, [7] * len(script), guided, cfg, freetext.FreeText(), 0)
    return tokenizer, cfg, batch


def test_the_mask_covers_exactly_the_tokens_the_model_wrote(monkeypatch):
    script = [["Assessment: positive, that got me closer\nMove: east"],
              ["Assessment: I am unsure\nMove: up"]]  # unreadable, no move
    tokenizer, cfg, batch = scripted_play(monkeypatch, script)
    for row, texts in enumerate(script):
        reply = tokenizer.encode(texts[0], add_special_tokens=False) + [tokenizer.eos_token_id]
        transcript = batch.transcripts[row]
        written = [token for token, w in zip(transcript.tokens, transcript.written) if w]
        assert written == reply * 3  # three turns, each reply with its end of turn, nothing else
        # what it did not write: the environment's three turns, template headers included,
        # each the observation an environment of our own shows after the moves replied
        env = cfg.make_env()
        observation, info = env.reset(seed=7)
        shown, truths, cells = [observation], [-1], [info["position"]]
        for _ in range(2):
            observation, *_, info = env.step("east" if row == 0 else None)  # "up": no move
            shown.append(observation)
            truths.append(sg.GUIDES.index(sg.toy_env.true_polarity(info["progress"])))
            cells.append(info["position"])
        assert observations_of(tokenizer, batch, row) == shown
        assert batch.steps.truths[row].tolist() == truths
        assert batch.steps.cells[row].tolist() == [r * sg.toy_env.MAX_SIZE + c for r, c in cells]
        turns = sum((freetext.environment_turn(tokenizer, o, True, t == 0)
                     for t, o in enumerate(shown)), [])
        assert [t for t, w in zip(transcript.tokens, transcript.written) if not w] == turns
        # and the stream is the one a demonstration of these turns is cloned on
        ids, mask = freetext.encode_episode(tokenizer, True, list(zip(shown, [texts[0]] * 3)))
        assert ids == batch.prompt + transcript.tokens
        assert mask == [0] * len(batch.prompt) + transcript.written


def test_a_demonstration_is_encoded_from_the_opening_play_uses(monkeypatch):
    """With --example (the explained format and the example walk) and without the cue alike,
    a demonstration's encoding is the stream play writes for the same turns, token for
    token: cloning trains on the opening it plays with."""
    tokenizer = tokenizers()["bpe"]
    reply = "Assessment: positive, closer\nMove: east"
    monkeypatch.setattr(freetext, "generate_replies", Scripted(tokenizer, [[reply]]))
    for example, cue in [(True, True), (True, False), (False, True)]:
        cfg = tiny_config(max_steps=3, cue=cue)
        ft = freetext.FreeText(example=example)
        batch = freetext.play(None, tokenizer, [7], True, cfg, ft, 0)
        shown = observations_of(tokenizer, batch, 0)[-3:]
        ids, mask = freetext.encode_episode(tokenizer, True, [(o, reply) for o in shown],
                                            example, cue)
        transcript = batch.transcripts[0]
        assert ids == batch.prompt + transcript.tokens, (example, cue)
        assert mask == [0] * len(batch.prompt) + transcript.written


def observations_of(tokenizer, batch, row):
    """The observations shown in an episode, read back from its user turns."""
    text = tokenizer.decode(batch.transcripts[row].tokens, skip_special_tokens=False)
    return [part.split("<|end|>")[0].strip() for part in text.split("<|user|>")[1:]]


def test_rewards_and_token_advantages_from_scripted_replies_equal_hand_computed(monkeypatch):
    """One group of two episodes (task 7 of the tiny maze, neither reaches the goal in three
    turns), lambda = 1, step credit, the mean internal return, the guard on guide tokens:
      episode 0: positive, then unreadable ("unsure": neutral, 0), then positive
      episode 1: negative with no move (a bump), then negative, then negative
    r (mean over 3 steps): [+1/30, 0, +1/30] and [-1/30, -1/30, -1/30]; R_env = 0 for both,
    so A_env = 0 and a guide token's advantage (the guard) is 0. Internal returns
    I = +2/30 and -3/30: std 2.5/30. An action a_t is credited from r_{t+1} on: a_0 gets
    (+1/30 - (-2/30)) / 2 over the std's... computed below step by step."""
    script = [["Assessment: positive, closer\nMove: east", "Assessment: unsure\nMove: east",
               "Assessment: positive, closer\nMove: east"],
              ["Assessment: negative, wrong way\nMove: up", "Assessment: negative\nMove: west",
               "Assessment: negative\nMove: west"]]
    tokenizer, cfg, batch = scripted_play(monkeypatch, script, group_size=2, schedule="immediate")
    assert batch.steps.env_return.tolist() == [0.0, 0.0] and batch.steps.steps.tolist() == [3, 3]
    assert batch.unreadable.tolist() == [[False, True, False], [False, False, False]]
    assert batch.unparseable.tolist() == [[False, False, False], [True, False, False]]
    assert batch.steps.guides.tolist() == [[0, 1, 0], [2, 2, 2]]  # unreadable -> neutral
    advantages, returns = sg.iteration_advantages(batch.steps, cfg, 1.0)
    r = torch.tensor([[1, 0, 1], [-1, -1, -1]]) / 30
    assert returns.tolist() == pytest.approx([r[0].sum().item(), r[1].sum().item()])
    std = (r.sum(1)[0] - r.sum(1)[1]).abs().item() / 2           # population std of two
    to_go = [[r[i, t + 1:].sum().item() for t in range(3)] for i in range(2)]  # a_t's credit
    mean = [(to_go[0][t] + to_go[1][t]) / 2 for t in range(3)]
    action = [[(to_go[i][t] - mean[t]) / (std + 1e-6) for t in range(3)] for i in range(2)]
    per_token = freetext.spread_advantages(batch, advantages, [0, 1])
    for i in range(2):
        transcript = batch.transcripts[i]
        for token, (step, slot, value) in enumerate(zip(transcript.steps, transcript.slots,
                                                        per_token[i])):
            expected = 0.0 if slot != sg.SLOT_ACTION else action[i][step]
            assert value == pytest.approx(expected, abs=1e-5), (i, token)
        # the assessment's part of each reply is the guide's, the rest (move, end) the action's
        for step, (judged, moved) in enumerate(transcript.spans):
            assert all(transcript.slots[k] == sg.SLOT_GUIDE for k in range(*judged))
            if moved:
                assert all(transcript.slots[k] == sg.SLOT_ACTION for k in range(*moved))
    first_moves = [per_token[i][batch.transcripts[i].slots.index(sg.SLOT_ACTION)] for i in (0, 1)]
    assert first_moves[0] > 0 > first_moves[1]  # the rewarded episode's first move is credited


def test_unguided_replies_are_all_action_and_write_no_guide(monkeypatch):
    tokenizer, cfg, batch = scripted_play(monkeypatch, [["Move: east"]], guided=False)
    assert batch.steps.guides.eq(-1).all() and not batch.unreadable.any()
    transcript = batch.transcripts[0]
    assert {s for s, w in zip(transcript.slots, transcript.written) if w} == {sg.SLOT_ACTION}
    assert freetext.shares(batch) == {"unreadable": None, "unparseable": 0.0, "capped": 0.0}


def test_shares_are_over_the_replies_written_not_over_every_step_of_the_horizon(monkeypatch):
    """Three episodes of task 7 (its shortest path: east, east, north, north), 8 turns at
    most: the first two never reach the goal and reply 8 times, the last reaches it in 4. An
    assessment without a guide word is unreadable (counted as neutral), a move that is none
    of the four is no move (a bump). Each scripted reply is written down with what reading it
    must find, and the shares are counted from those over the 20 replies: 2/20 unreadable,
    13/20 without a move (over the 3 x 8 steps of the horizon they would be 2/24 and 13/24)."""
    # (reply, unreadable, no move); an episode repeats its last reply once its list runs out
    script = [[("Assessment: unsure\nMove: east", 1, 0), ("Assessment: positive\nMove: up", 0, 1)],
              [("Assessment: negative\nMove: north", 0, 0), ("Assessment: hmm\nMove: west", 1, 0),
               ("Assessment: neutral\nMove: sideways", 0, 1)],
              # last: Scripted answers the first rows of the script, as many as still play
              [(f"Assessment: positive\nMove: {move}", 0, 0)
               for move in ("east", "east", "north", "north")]]
    tokenizer = tokenizers()["bpe"]
    monkeypatch.setattr(freetext, "generate_replies",
                        Scripted(tokenizer, [[text for text, _, _ in row] for row in script]))
    batch = freetext.play(None, tokenizer, [7] * 3, True, tiny_config(max_steps=8),
                          freetext.FreeText(), 0)
    steps = [8, 8, 4]
    assert batch.steps.steps.tolist() == steps
    assert batch.steps.env_return.tolist() == [0.0, 0.0, 1.0]
    played = [[row[min(t, len(row) - 1)] for t in range(n)] for row, n in zip(script, steps)]
    for i, replies in enumerate(played):  # each reply read as written down
        assert batch.unreadable[i, :steps[i]].tolist() == [bool(r[1]) for r in replies]
        assert batch.unparseable[i, :steps[i]].tolist() == [bool(r[2]) for r in replies]
    written = sum(steps)
    assert freetext.shares(batch) == {
        "unreadable": pytest.approx(sum(r[1] for replies in played for r in replies) / written),
        "unparseable": pytest.approx(sum(r[2] for replies in played for r in replies) / written),
        "capped": 0.0}


class Counter:
    """A third text world, written as a user's would be (examples/textworld.py): count up to
    the task seed; "up" is progress, "down" a step back, any other action changes nothing.
    No demonstrator (it plays a model of --model's), so none of the tiny prior's members."""
    label, task_sets = "Do", {"held-out": "held-out counts", "tuning": "tuning counts"}
    reply = freetext.textworld.assessment_pattern(label)
    ACT = re.compile(r"(?i)" + freetext.textworld.LABEL.format("do") + r"(?P<act>[a-z]+)")

    @staticmethod
    def system_prompt(guided: bool) -> str:
        return "Count to the target." + (" Assessment: then Do: up or down." if guided else "")

    @staticmethod
    def read_action(text: str):
        found = Counter.ACT.search(text)
        return (found.span("act"), found.group("act").lower()) if found else (None, None)

    @classmethod
    def batch(cls, cfg, ft, count: int) -> list:
        return [cls() for _ in range(count)]

    side_by_side = staticmethod(lambda function, items: [function(item) for item in items])

    def reset(self, seed: int):
        self.count, self.target = 0, seed
        return f"count:0 target:{seed}", {"optimal": seed, "task": seed}

    def step(self, action):
        move = {"up": 1, "down": -1}.get(action, 0)
        self.count += move
        done = self.count == self.target
        return (f"count:{self.count} target:{self.target}", float(done), done,
                {"truth": [1, 0, 2][move], "valid": bool(move), "score": 10 * self.count})


def test_a_world_without_a_demonstrator_asks_for_a_model_in_one_line(monkeypatch, capsys):
    """No tiny prior to clone without a demonstrator: refused before any work, one line."""
    monkeypatch.setitem(freetext.WORLDS, "maze", Counter)
    with pytest.raises(SystemExit):
        freetext.parse_config([])
    assert "has no demonstrator to clone the tiny prior from: give a chat model (--model)" \
        in capsys.readouterr().err
    assert freetext.parse_config(["--model", "some-folder"])[1].model == "some-folder"


def test_a_world_of_a_users_own_plays_through_its_registry_entry_alone(monkeypatch):
    """Registered under a name and played through `play` unchanged: its system turn opens the
    chat, its label's replies are read (the assessment up to the label, the action's text),
    its truth is the step's, its score kept, and --mazes names its task sets."""
    monkeypatch.setitem(freetext.WORLDS, "counter", Counter)
    script = [["Assessment: neutral\nDo: up", "**Assessment:** fine\n**Do:** jump",
               "Assessment: positive Do: up"], ["Do: up"]]
    texts = [Counter.system_prompt(True), "count:0 target:2 count:1 target:1"] + script[0]
    tokenizer = freetext.build_tokenizer("bpe", (texts + script[1]) * 3, vocab=200)
    monkeypatch.setattr(freetext, "generate_replies", Scripted(tokenizer, script))
    ft = freetext.FreeText(world="counter")
    batch = freetext.play(None, tokenizer, [2, 1], True, tiny_config(max_steps=4), ft, 0)
    assert tokenizer.decode(batch.prompt, skip_special_tokens=True) == Counter.system_prompt(True)
    assert batch.steps.steps.tolist() == [3, 1] and batch.steps.env_return.tolist() == [1.0, 1.0]
    assert batch.steps.guides[0, :3].tolist() == [1, 1, 0]  # "fine" unreadable: neutral
    assert batch.unreadable[:, 0].tolist() == [False, True] and batch.unreadable[0, 1]
    assert batch.steps.truths[0, :3].tolist() == [-1, 0, 1]  # the step before's truth
    assert batch.invalid[0, :3].tolist() == [False, True, False] and not batch.unparseable.any()
    assert batch.scores.tolist() == [20, 10]
    transcript = batch.transcripts[0]  # the action's tokens get the action's advantage
    for _, acted in transcript.spans:
        assert {transcript.slots[k] for k in range(*acted)} == {sg.SLOT_ACTION}
    assert tokenizer.decode(transcript.tokens[slice(*transcript.spans[1][1])]).strip() == "jump"
    assert freetext.tasks_played(freetext.FreeText("counter", mazes="tuning")) == "tuning counts"


def test_replies_carried_across_turns_equal_those_of_each_unpadded_stream():
    """The conversation and its KV cache carried from turn to turn, with holes (turns of
    several lengths, a reply that ends before another) and an episode that ends: each greedy
    reply equals a fresh generate over that episode's own unpadded stream."""
    from types import SimpleNamespace
    from transformers import GPT2Config, GPT2LMHeadModel
    tokenizer = tokenizers()["bpe"]
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=256, n_embd=32,
                                       n_layer=1, n_head=2)).eval()
    ft, prompt = freetext.FreeText(reply_tokens=5), freetext.prompt_ids(tokenizer, True)
    turns = [[freetext.environment_turn(tokenizer, OBSERVATIONS[(e + t) % 3], True, t == 0)
              for t in range(3)] for e in range(3)]
    running = [[0, 1, 2], [0, 1, 2], [0, 2]]  # episode 1 ends after two turns

    def alone(ends):  # each episode on its own, its whole stream given to generate each turn
        replies = []
        for e in range(3):
            stream, mine = list(prompt), []
            for t in range(3 if e != 1 else 2):
                stream += turns[e][t]
                out = model.generate(input_ids=torch.tensor([stream]), do_sample=False,
                                     max_new_tokens=5, eos_token_id=ends, pad_token_id=0)
                reply = out[0, len(stream):].tolist()
                reply = reply[:reply.index(ends) + 1] if ends in reply else reply
                stream, mine = stream + reply, mine + [reply]
            replies.append(mine)
        return replies

    # an end of turn this random model writes: the second token of episode 0's first reply
    ends = alone(-1)[0][0][1]
    expected = alone(ends)
    chats, got = freetext.Chats(3, pad=0), [[], [], []]
    for t in range(3):
        chats.extend(running[t], [(prompt if t == 0 else []) + turns[e][t] for e in running[t]])
        replies = freetext.generate_replies(model, SimpleNamespace(eos_token_id=ends), chats,
                                            ft, 1.0, True, 0)
        for e, reply in zip(running[t], replies):
            got[e].append(reply)
    assert got == expected
    lengths = {len(r) for mine in got for r in mine}
    assert 2 in lengths and 5 in lengths  # a reply ended at its end of turn, another ran on
    assert (chats.mask == 0).any(dim=1).all()  # holes in every row


@pytest.mark.parametrize("architecture, kind", [("gpt2", "GPT2LMHeadModel"),
                                                ("llama", "LlamaForCausalLM")])
def test_the_tiny_prior_is_either_architecture_over_the_tokenizers_vocabulary(architecture, kind):
    tokenizer = tokenizers()["bpe"]
    ft = freetext.FreeText(architecture=architecture)
    model = freetext.make_model(tiny_config(), ft, tokenizer, positions=300)
    assert type(model).__name__ == kind and model.config.vocab_size == len(tokenizer)
    assert model.config.max_position_embeddings == 300
    assert model(torch.tensor([[1, 2, 3]])).logits.shape == (1, 3, len(tokenizer))


def test_cloning_trains_only_the_written_tokens():
    """A clone step's gradient comes from the written tokens alone: changing a token the
    model did not write, and that no written token follows, leaves the loss as it was."""
    tokenizer = tokenizers()["bpe"]
    cfg = tiny_config(prior_epochs=1, prior_batch=1, prior_lr=1e-9)
    ids, written = freetext.encode_episode(tokenizer, True, list(zip(OBSERVATIONS, REPLIES)))
    last = max(i for i, w in enumerate(written) if w)
    tail = [tokenizer.pad_token_id] * 3
    losses = []
    for extra in (tail, [tokenizer.eos_token_id] * 3):  # unwritten tokens after the last reply
        torch.manual_seed(0)
        model = freetext.make_model(cfg, freetext.FreeText(), tokenizer, positions=400)
        losses += freetext.clone(model, [(ids[:last + 1] + extra, written[:last + 1] + [0] * 3)],
                                 cfg, "cpu")
    assert losses[0] == losses[1]


# --- A player that reads one turn (ScienceWorld's --window): sampled and scored alike ---

@pytest.mark.parametrize("architecture", ["gpt2", "llama"])
def test_a_reply_sampled_from_its_own_turn_is_scored_under_that_turn(architecture):
    """Two episodes whose turns differ in length are sampled side by side, each turn a chat
    of its own after the shared prompt (left-padded, the prompt's cache made once), as play
    does with --window; the trainer's scoring of the whole completion (turn_logprobs) gives
    each sampled token the log-prob generate sampled it with. Scoring the completion as one
    chat, TRL's own forward, would not."""
    from accelerate import Accelerator
    tokenizer = tokenizers()["bpe"]
    torch.manual_seed(0)
    model = freetext.make_model(tiny_config(n_layer=2), freetext.FreeText(
        architecture=architecture), tokenizer, positions=512).eval()
    ft, prompt = freetext.FreeText(reply_tokens=6), freetext.prompt_ids(tokenizer, True)
    sampled, generate = [], model.generate

    def generate_keeping_scores(**settings):  # what generate sampled each token with
        out = generate(**settings, output_scores=True, return_dict_in_generate=True)
        sampled.append(torch.stack(out.scores, 1).log_softmax(-1))   # (B, new, V)
        return out.sequences
    model.generate = generate_keeping_scores
    completions = [[], []]
    for t, observations in enumerate([(OBSERVATIONS[0], OBSERVATIONS[1] + " cue:warmer"),
                                      (OBSERVATIONS[2] + " cue:same", OBSERVATIONS[0])]):
        turns = [freetext.environment_turn(tokenizer, o, True, True) for o in observations]
        chats = freetext.Chats(2, tokenizer.pad_token_id, prompt)
        chats.extend(chats.rows, turns)
        replies = freetext.generate_replies(model, tokenizer, chats, ft, 0.7, False, t)
        for e, (turn, reply) in enumerate(zip(turns, replies)):
            chosen = [sampled[-1][e, k, token].item() for k, token in enumerate(reply)]
            completions[e].append((turn, reply, chosen))
    for e in range(2):
        ids = prompt + sum((turn + reply for turn, reply, _ in completions[e]), [])
        written = sum(([0] * len(turn) + [1] * len(reply) for turn, reply, _ in completions[e]),
                      [])
        expected = sum((chosen for *_, chosen in completions[e]), [])
        logps, entropies = freetext.turn_logprobs(
            Accelerator(cpu=True), model, torch.tensor([ids]), torch.tensor([written]), 0.7,
            True)
        mine = torch.tensor(written).bool()
        assert logps[0, mine].tolist() == pytest.approx(expected, abs=1e-5)
        assert logps[0, ~mine].eq(0).all() and entropies[0, mine].gt(0).all()
        whole = model(torch.tensor([ids])).logits[0, len(prompt) - 1:-1] / 0.7   # one chat
        as_one_chat = whole.log_softmax(-1).gather(-1, torch.tensor(ids[len(prompt):])[:, None])
        assert not torch.allclose(as_one_chat.squeeze(-1)[mine], torch.tensor(expected),
                                  atol=1e-3)


def test_one_turn_pieces_scored_a_few_at_a_time_as_each_alone():
    """turn_logprobs scores its pieces (a turn and its reply) sorted by length, a few to a
    forward: the log-probs, the entropies and the gradient they give are those of scoring
    every piece in a forward of its own (no padding at all), whatever the group size, for
    rows whose turns differ in length and count."""
    from accelerate import Accelerator
    tokenizer = tokenizers()["bpe"]
    torch.manual_seed(0)
    model = freetext.make_model(tiny_config(n_layer=2), freetext.FreeText(architecture="llama"),
                                tokenizer, positions=512)
    prompt = freetext.prompt_ids(tokenizer, True)
    generator = torch.Generator().manual_seed(1)
    rows = []
    for turns in (5, 2, 4):  # each turn and reply of its own random length
        ids, written = [], []
        for _ in range(turns):
            turn, reply = (int(n) for n in torch.randint(2, 12, (2,), generator=generator))
            ids += torch.randint(3, len(tokenizer), (turn + reply,), generator=generator).tolist()
            written += [0] * turn + [1] * reply
        rows.append((ids, written))
    width = max(len(ids) for ids, _ in rows)
    ids = torch.tensor([prompt + i + [0] * (width - len(i)) for i, _ in rows])
    written = torch.tensor([w + [0] * (width - len(w)) for _, w in rows])
    results = {}
    for at_once in (1, 3, 100):
        model.zero_grad()
        logps, entropies = freetext.turn_logprobs(Accelerator(cpu=True), model, ids, written,
                                                  0.7, True, at_once)
        (logps * torch.linspace(0.5, 1.5, width)).sum().backward()
        results[at_once] = (logps.detach(), entropies.detach(),
                            torch.cat([p.grad.flatten() for p in model.parameters()
                                       if p.grad is not None]))
    assert written.sum() == results[1][0].ne(0).sum()  # every written token scored
    for at_once in (3, 100):
        for mine, alone in zip(results[at_once], results[1]):
            assert torch.allclose(mine, alone, atol=1e-5, rtol=1e-4)


def test_the_trainer_scores_one_turn_replies_under_their_turns_or_refuses():
    """With a player that reads one turn, the trainer's log-probs always come from
    turn_logprobs, with the written tokens the rollout or the loss gave; a batch whose
    written tokens are not known is refused, never scored as one chat."""
    require_trl(freetext.bridge.TRL_VERSION)
    from types import SimpleNamespace
    cls = freetext.make_trainer_class()
    trainer = SimpleNamespace(one_turn=True, written=None, temperature=1.0, in_loss=True,
                              accelerator=SimpleNamespace(device=torch.device("cpu")))
    ids = torch.ones(2, 10, dtype=torch.long)
    with pytest.raises(RuntimeError, match="cannot be scored as it was sampled"):
        cls._get_per_token_logps_and_entropies(trainer, None, ids, None, 6)
    trainer.written = torch.ones(2, 6)
    called = []
    original = freetext.turn_logprobs
    try:
        freetext.turn_logprobs = lambda *args: called.append(args) or (1, 2)
        assert cls._get_per_token_logps_and_entropies(trainer, None, ids, None, 6) == (1, 2, None)
    finally:
        freetext.turn_logprobs = original
    assert called and called[0][3] is trainer.written


def test_one_turn_cloning_batches_hold_one_prompt_and_score_as_whole_sequences():
    """Cloning a player that reads one turn: each batch holds sequences of one prompt (its
    keys and values made once), and the loss is the one of the whole sequences without the
    shared cache."""
    tokenizer = tokenizers()["bpe"]
    prompts = [freetext.prompt_ids(tokenizer, guided) for guided in (True, False)]
    sequences = [s for guided in (True, False) for s in freetext.encode_turns(
        tokenizer, guided, list(zip(OBSERVATIONS, REPLIES)))]
    groups = [0] * 3 + [1] * 3
    for batch in freetext.batches(6, 4, torch.Generator().manual_seed(0),
                                  [len(ids) for ids, _ in sequences], groups):
        assert len({groups[i] for i in batch.tolist()}) == 1
    cfg = tiny_config(prior_epochs=1, prior_batch=3, prior_lr=1e-9)
    losses = []
    for shared in (prompts, None):
        torch.manual_seed(0)
        model = freetext.make_model(cfg, freetext.FreeText(), tokenizer, positions=400)
        losses.append(sorted(freetext.clone(model, sequences, cfg, "cpu", by_length=True,
                                            prompts=shared)))
    assert losses[0] == pytest.approx(losses[1], abs=1e-5)


def test_the_mazes_priors_keep_their_keys_and_refuse_scienceworlds_settings(capsys):
    """The worlds' protocol and ScienceWorld's turn settings left the maze's cached priors
    where they were (folder names computed before them), and the maze refuses them."""
    for argv, name in [([], "prior-73a779fd06d8"), (["--tokenizer", "words"], "prior-59f2a5cccfb7"),
                       (["--architecture", "llama", "--seed", "3"], "prior-9b0ff226880b")]:
        assert freetext.prior_folder(*freetext.parse_config(argv)).name == name
    for argv in (["--window", "4"], ["--corpus", "gold"]):
        with pytest.raises(SystemExit):
            freetext.parse_config(argv)
        assert "--window and --corpus are ScienceWorld's" in capsys.readouterr().err


def test_train_tasks_trains_on_those_tasks_alone_and_training_evaluates_them(capsys):
    cfg, ft = freetext.parse_config(["--train-tasks", "5,9,2", "--iterations", "5",
                                     "--mazes", "training"])
    seeds = freetext.task_seeds(cfg, ft)
    assert set(seeds) == {5, 9, 2} and len(seeds) == 5 * cfg.tasks_per_iter
    assert freetext.evaluated_seeds(cfg, ft) == [5, 9, 2]
    cfg, ft = freetext.parse_config([])
    assert freetext.task_seeds(cfg, ft) == freetext.bridge.task_seeds(cfg)
    for argv in (["--mazes", "training"], ["--train-tasks", str(sg.TRAIN_SEED_RANGE)],
                 ["--train-tasks", "3,x"]):
        with pytest.raises(SystemExit):
            freetext.parse_config(argv)
        assert "--train-tasks" in capsys.readouterr().err


class Oracle(torch.nn.Module):
    """Stands in for a model: its most likely next token is the stream's own next token, save
    at the positions in `wrong`, where it is the pad."""

    def __init__(self, vocab, wrong=()):
        super().__init__()
        self.vocab, self.wrong, self.unused = vocab, set(wrong), torch.nn.Parameter(torch.zeros(1))

    def forward(self, ids):
        logits = torch.zeros(*ids.shape, self.vocab)
        nexts = ids[0, 1:].tolist() + [0]
        for p, token in enumerate(nexts):
            logits[0, p, 0 if p in self.wrong else token] = 1.0
        return type("Out", (), {"logits": logits})


def test_decisions_predicted_counts_a_word_right_only_if_all_its_tokens_are():
    """The cloning diagnostic reads the move and the guide word off each reply's parsed spans,
    on any tokenizer ('bpe' cuts words into pieces), and counts a word only if every one of
    its tokens is the most likely one."""
    tokenizer = tokenizers()["bpe"]
    steps = list(zip(OBSERVATIONS, REPLIES))
    episodes = [(True, steps), (False, steps[:2])]
    assert freetext.decisions_predicted(Oracle(len(tokenizer)), tokenizer, episodes) == {
        "moves": 1.0, "guides": 1.0}
    # the first episode's last move: one of its tokens predicted wrong, the other moves right
    ids, _ = freetext.encode_episode(tokenizer, True, steps)
    last = len(ids) - 2  # the reply's last token before its end of turn: the move's
    assert tokenizer.decode(ids[last:last + 1]).strip() == "south"
    seen = freetext.decisions_predicted(Oracle(len(tokenizer), {last - 1}), tokenizer, episodes)
    assert seen == {"moves": 4 / 5, "guides": 1.0}
    assert freetext.decisions_predicted(Oracle(len(tokenizer), range(10**4)), tokenizer,
                                        episodes) == {"moves": 0.0, "guides": 0.0}


# --- TRL: one iteration end to end, another architecture, two processes ---

@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory) -> Path:
    """A Llama-style model (RoPE, RMSNorm, SwiGLU, grouped-query attention) built in code,
    with the BPE tokenizer and chat template, saved as a chat model's folder is. Randomly
    initialised, then cloned for a few updates on the tiny maze's demonstrations, so that
    some of its sampled replies hold a move and a guide (a random model's hold none: every
    advantage would be 0, and nothing would train). Built once: the tests only read it."""
    require_trl(freetext.bridge.TRL_VERSION)
    from transformers import LlamaConfig, LlamaForCausalLM
    folder = tmp_path_factory.mktemp("llama")
    tokenizer = tokenizers()["bpe"]
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.eos_token_id))
    cfg = tiny_config(prior_episodes=8, prior_epochs=6, prior_batch=4, prior_lr=1e-2)
    freetext.clone(model, [freetext.encode_episode(tokenizer, guided, steps)
                           for guided, steps in freetext.demonstrations(cfg)], cfg, "cpu")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


assert TINY_ARGS[-2:] == ["--guide-temperature", "1"]  # one temperature here: the default
FREE_ARGS = TINY_ARGS[:-2] + ["--iterations", "2", "--tasks-per-iter", "2", "--eval-every", "1",
                         "--schedule", "immediate", "--lr", "3e-3", "--reply-tokens", "6",
                         "--threads", "1"]


def failures_read_by_hand(tokenizer, episodes: "freetext.Episodes", guided: bool) -> dict:
    """The shares of unreadable assessments and of replies without a move, read again off
    each reply's text (the tokens the model wrote at that step, decoded), over the replies."""
    unreadable = unparseable = replies = 0
    for transcript, taken in zip(episodes.transcripts, episodes.steps.steps.tolist()):
        for t in range(taken):
            reply = [token for token, written, step in zip(
                transcript.tokens, transcript.written, transcript.steps) if written and step == t]
            text = tokenizer.decode(reply, skip_special_tokens=True,
                                    clean_up_tokenization_spaces=False)
            assessment, _, move = freetext.parse_reply(text)
            unreadable += assessment is None or freetext.read_guide(text[slice(*assessment)]) < 0
            unparseable += move is None
            replies += 1
    return {"unreadable": unreadable / replies if guided else None,
            "unparseable": unparseable / replies}


def test_one_iteration_with_a_llama_style_model_trains_and_logs_the_failures(
        tiny_llama, tmp_path, monkeypatch, capsys):
    from safetensors.torch import load_file
    out, played, evaluated, play = tmp_path / "out", [], [], freetext.play

    def recorded(model, tokenizer, task_seeds, guided, *args, greedy=False, **kwargs):
        episodes = play(model, tokenizer, task_seeds, guided, *args, greedy=greedy, **kwargs)
        played.append((tokenizer, guided, greedy, episodes))
        evaluated.extend(task_seeds if greedy else [])
        return episodes
    monkeypatch.setattr(freetext, "play", recorded)
    # the guide's reward from the first iteration on (--schedule immediate): the readable
    # guides give some advantage that is not 0
    # --mazes tuning: every greedy evaluation plays the tuning mazes, and its line says so
    rows = freetext.main(FREE_ARGS + ["--iterations", "1", "--model", str(tiny_llama),
                                      "--out", str(out),
                                      "--freetext-cache", str(tmp_path / "cache"),
                                      "--mazes", "tuning"])
    assert set(evaluated) == {freetext.MAZES["tuning"] + i for i in range(8)}
    assert re.search(r"iter    1  lambda [0-9.]+  tuning success", capsys.readouterr().out)
    assert rows[-1][0].startswith("trained on TRL, free text (sg_gr)")
    record = json.loads((out / "log.jsonl").read_text())
    # the prior evaluated greedily (without and with the guide), the iteration's sampled
    # episodes, then its greedy evaluation: the failures logged are those of the third, and
    # the evaluation's those of the fourth
    assert [(guided, greedy) for _, guided, greedy, _ in played] == [
        (False, True), (True, True), (True, False), (True, True)]
    for (tokenizer, guided, _, episodes), logged in zip(played[2:], (record, record["eval"])):
        by_hand = failures_read_by_hand(tokenizer, episodes, guided)
        assert {k: logged[k] for k in by_hand} == pytest.approx(by_hand)
    assert record["zero_variance_groups"] < 1  # some advantage was not 0
    before = load_file(tiny_llama / "model.safetensors")
    after = load_file(out / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert "unreadable assessments" in (out / "summary.md").read_text()


def test_an_update_with_nothing_to_teach_leaves_the_policy_as_it_was(tiny_llama, tmp_path,
                                                                      monkeypatch):
    """GRPO (R_env alone) where no episode can succeed (one step; no maze is that short):
    every group is flat, every advantage 0, and the loss is the KL to the prior alone. The
    reference is scored as the loss scores the policy, so at the prior the KL and its
    gradient are 0 to the last bit, and the iteration's optimizer steps leave every weight as
    it was. (A reference scored outside the loss, by TRL's own forward and full head on a CPU,
    differs in the last bits; AdamW, dividing each step by the gradient's own scale, would make
    that rounding a step of about the learning rate in each weight.)"""
    from safetensors.torch import load_file
    out, scored, make = tmp_path / "out", [], freetext.make_trainer_class

    def counted():
        class Counted(make()):
            def reference_logprobs(self, inputs):
                scored.append(len(inputs["completion_ids"]))
                return super().reference_logprobs(inputs)
        return Counted
    monkeypatch.setattr(freetext, "make_trainer_class", counted)
    freetext.main(FREE_ARGS + ["--iterations", "1", "--variant", "grpo", "--max-steps", "1",
                               "--update-epochs", "2", "--model", str(tiny_llama),
                               "--out", str(out),
                               "--freetext-cache", str(tmp_path / "cache")])
    record = json.loads((out / "log.jsonl").read_text())
    assert record["success"] == 0 and record["zero_variance_groups"] == 1
    assert record["trl/kl"] == 0 and record["trl/grad_norm"] == 0
    assert scored == [4, 4]  # each minibatch's reference once, for both passes over it
    before = load_file(tiny_llama / "model.safetensors")
    after = load_file(out / "model.safetensors")
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_a_one_turn_minibatchs_reference_is_scored_as_its_policy_to_the_last_bit(tiny_llama):
    """For a player that reads one turn, the loss's reference is the minibatch's own, scored
    by turn_logprobs with the minibatch's written tokens as the policy is: at the first step
    (the same weights) the two are equal to the last bit, replies of several lengths padded."""
    import functools
    from types import SimpleNamespace
    cls = freetext.make_trainer_class()
    policy, _ = freetext.load_model(tiny_llama, torch.device("cpu"))
    reference, _ = freetext.load_model(tiny_llama, torch.device("cpu"))
    generator = torch.Generator().manual_seed(0)
    prompt = torch.randint(3, policy.config.vocab_size, (1, 5), generator=generator)
    completion = torch.randint(3, policy.config.vocab_size, (3, 14), generator=generator)
    written = torch.zeros(3, 14, dtype=torch.long)  # two turns a row, each with its reply
    written[0, 3:6] = written[0, 9:11] = written[1, 2:4] = written[1, 6:13] = 1
    written[2, 4:5] = written[2, 7:9] = 1
    completion_mask = torch.ones_like(completion)
    completion_mask[2, 9:] = 0  # a shorter row, right-padded
    trainer = SimpleNamespace(one_turn=True, in_loss=True, written=written * completion_mask,
                              temperature=0.5, ref_model=reference,
                              accelerator=SimpleNamespace(unwrap_model=lambda m: m,
                                                          autocast=contextlib.nullcontext,
                                                          device=torch.device("cpu")))
    trainer._get_per_token_logps_and_entropies = functools.partial(
        cls._get_per_token_logps_and_entropies, trainer)
    inputs = {"prompt_ids": prompt.expand(3, -1), "prompt_mask": torch.ones(3, 5, dtype=torch.long),
              "completion_ids": completion, "completion_mask": completion_mask}
    scored = cls.reference_logprobs(trainer, inputs)
    ids = torch.cat([inputs["prompt_ids"], completion], 1)
    mask = torch.cat([inputs["prompt_mask"], completion_mask], 1)
    logps, _, _ = trainer._get_per_token_logps_and_entropies(policy, ids, mask, 14,
                                                             compute_entropy=True)
    assert torch.equal(scored, logps.detach()) and (scored[trainer.written.bool()] < 0).all()


def test_load_model_reads_a_chat_models_folder_in_float32_and_refuses_a_plain_one(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel
    tokenizer = tokenizers()["bpe"]
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=64, n_embd=32, n_layer=1,
                               n_head=2)).to(torch.bfloat16).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    model, loaded = freetext.load_model(tmp_path, "cpu")  # --bf16 is mixed precision: float32
    assert next(model.parameters()).dtype == torch.float32 and loaded.chat_template
    model.save_pretrained(tmp_path / "plain")
    tokenizer.chat_template = None
    tokenizer.save_pretrained(tmp_path / "plain")
    with pytest.raises(SystemExit, match="no chat template"):
        freetext.load_model(tmp_path / "plain", "cpu")


@pytest.mark.parametrize("argv, message", [
    (["--guide-temperature", "0.1"], "one temperature"),
    (["--prior-guide-target", "0.8"], "unrecognized arguments"),  # research.py's settings
    (["--vocab", "10"], "--vocab must be at least 64"),
    (["--guide-advantage", "hindsight"], "invalid choice: 'hindsight'")])
def test_the_free_text_path_refuses_what_it_cannot_run_in_one_line(argv, message, capsys):
    with pytest.raises(SystemExit):
        freetext.parse_config(TINY_ARGS[:-2] + argv)
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("loss", ["bnpo", "dr_grpo"])  # every loss type the bridge offers
def test_two_free_text_processes_make_the_same_updates_as_one(tiny_llama, tmp_path, loss):
    """The free-text path on 2 processes, against 1, under each loss: iteration by iteration,
    every figure of the episodes played that log.jsonl holds is equal (the episodes
    themselves are not saved), and the same update from the same model (to a relative 1e-4).
    Replies differ in length, so the two processes hold different token counts."""
    pytest.importorskip("accelerate")
    (text_one, one), (text_two, two) = (
        launch(tmp_path, p, f"p{p}", FREE_ARGS,
               ["--model", str(tiny_llama), "--loss", loss,
                "--freetext-cache", str(tmp_path / "cache")], "trl_freetext.py") for p in (1, 2))
    assert "on 2 processes, whose weights agree" in text_two
    assert text_two.count("| policy | success") == 1
    for x, y in same_update(tiny_llama / "model.safetensors", one, two):
        # the episodes' figures: not TRL's own (its loss, gradient norm, KL: of the update;
        # its reward means: float32 sums over the gathered rows) nor the held-out evaluation
        episodes = {k for k in x if not k.startswith(("trl/", "eval"))
                    and not k.endswith(("_seconds", "_gib"))}  # nor what each process spent
        assert {"success", "steps", "revisits", "share_positive", "guide_balanced_accuracy",
                "unreadable", "unparseable", "zero_variance_groups", "trust"} <= episodes
        assert set(y) == set(x) and {k: y[k] for k in episodes} == {k: x[k] for k in episodes}
        assert y["trl/loss"] == pytest.approx(x["trl/loss"], rel=1e-4, abs=1e-6)


def test_the_loss_reads_log_probs_computed_only_where_the_model_wrote(tiny_llama):
    """The trainer's per-token log-probs and entropies at --temperature, its head applied at
    the written tokens only, equal those of a full forward pass over every position, read at
    the written tokens (padding in the batch, as TRL pads it), and 0 everywhere else."""
    from types import SimpleNamespace
    model, _ = freetext.load_model(tiny_llama, torch.device("cpu"))
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(3, model.config.vocab_size, (3, 20), generator=generator)
    attention = torch.ones_like(ids)
    attention[2, -4:] = 0  # a shorter completion, right-padded
    written = torch.zeros(3, 12, dtype=torch.long)  # the completion: the last 12 positions
    written[0, 2:6] = written[1, 7:12] = written[2, 1:5] = 1
    trainer = SimpleNamespace(written=written, one_turn=False, temperature=0.7,
                              ref_model=None, in_loss=False,
                              accelerator=SimpleNamespace(unwrap_model=lambda m: m,
                                                          autocast=contextlib.nullcontext,
                                                          device=torch.device("cpu")))
    method = freetext.make_trainer_class()._get_per_token_logps_and_entropies
    logps, entropies, aux = method(trainer, model, ids, attention, 12, compute_entropy=True)
    logits = model(ids, attention_mask=attention).logits[:, -13:-1] / 0.7      # (3, 12, V)
    full = torch.log_softmax(logits, -1)
    expected = full.gather(-1, ids[:, -12:, None]).squeeze(-1)
    mask = written.bool()
    assert torch.allclose(logps[mask], expected[mask], atol=1e-5) and (logps[~mask] == 0).all()
    assert torch.allclose(entropies[mask], -(full.exp() * full).sum(-1)[mask], atol=1e-5)
    assert aux is None and (entropies[~mask] == 0).all()
    logps.sum().backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_under_bf16_the_written_tokens_head_scores_as_trls_fused_head(tiny_llama):
    """--bf16: accelerate wraps the model's forward in bfloat16 autocast, and TRL scores with
    its fused head (add_fused_lm_head, in GRPOTrainer's own _get_per_token_logps_and_entropies)
    under the accelerator's autocast; the loss's head, applied at the written tokens outside
    the forward, runs under that autocast too, so the two agree as float32 ones do (a head in
    float32 would be off by bfloat16's rounding, and the first ratio would not be 1)."""
    from types import SimpleNamespace

    from trl import GRPOTrainer
    from trl.trainer.utils import add_fused_lm_head
    model, _ = freetext.load_model(tiny_llama, torch.device("cpu"))
    add_fused_lm_head(model, temperature=1.0)  # as GRPOTrainer patches the model it trains
    bf16 = lambda: torch.autocast("cpu", dtype=torch.bfloat16)  # noqa: E731
    forward = model.forward
    model.forward = lambda *a, **k: bf16()(forward)(*a, **k)  # as accelerate's prepare does
    ids = torch.randint(3, model.config.vocab_size, (2, 16),
                        generator=torch.Generator().manual_seed(0))
    mask, written = torch.ones_like(ids), torch.ones(2, 8, dtype=torch.long)
    with torch.no_grad():
        trls, _, _ = GRPOTrainer._get_per_token_logps_and_entropies.__wrapped__(  # unprofiled
            SimpleNamespace(accelerator=SimpleNamespace(autocast=bf16)), model, ids, mask, 8)
    method = freetext.make_trainer_class()._get_per_token_logps_and_entropies
    for autocast, close in [(bf16, True), (contextlib.nullcontext, False)]:
        trainer = SimpleNamespace(written=written, one_turn=False, temperature=1.0,
                                  ref_model=None, in_loss=False,
                                  accelerator=SimpleNamespace(unwrap_model=lambda m: m,
                                                              autocast=autocast,
                                                              device=torch.device("cpu")))
        with torch.no_grad():
            logps, _, _ = method(trainer, model, ids, mask, 8)
        assert torch.allclose(logps, trls, atol=1e-4) == close, autocast


def test_the_written_tokens_head_is_where_trls_projects_every_position_and_the_losss_only(
        monkeypatch):
    """On Triton's devices TRL's fused head already projects only the scored positions: there,
    and outside the loss, the trainer scores as TRL does."""
    import transformers.utils
    from types import SimpleNamespace
    written = torch.ones(2, 8)
    monkeypatch.setattr(transformers.utils, "is_triton_available", lambda: True)
    for device, mask, rows, width, own in [("cpu", written, 2, 8, True),
                                           ("cuda", written, 2, 8, False),
                                           ("mps", written, 2, 8, True),  # TRL scores all
                                           ("cpu", None, 2, 8, False),  # outside the loss
                                           ("cpu", written, 4, 8, False)]:  # another batch
        trainer = SimpleNamespace(written=mask, one_turn=False,
                                  accelerator=SimpleNamespace(device=torch.device(device)))
        assert freetext.written_head(trainer, rows, width) == own, (device, rows)


def test_the_cpu_recipe_reaches_trl_as_meant_and_trains_only_the_top_blocks(
        tiny_llama, tmp_path, monkeypatch):
    """examples/README.md's CPU recipe, read back from the trainer TRL built: no reference
    model (beta 0), one pass over each iteration's episodes (no second scoring), the optimizer
    holding only the top block and the final norm, whose weights alone move; each iteration's
    record holds its generation, scoring and update seconds and the peak memory."""
    from safetensors.torch import load_file
    made, real = {}, freetext.bridge.train_and_report

    def spy(make_trainer, *args, **kwargs):
        return real(lambda: made.setdefault("trainer", make_trainer()), *args, **kwargs)
    monkeypatch.setattr(freetext.bridge, "train_and_report", spy)
    out = tmp_path / "out"
    import resource
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # GiB
    freetext.main(FREE_ARGS + ["--iterations", "1", "--model", str(tiny_llama), "--kl-guide", "0",
                               "--update-epochs", "1", "--minibatches", "1", "--train-layers", "1",
                               "--out", str(out),
                               "--freetext-cache", str(tmp_path / "cache")])
    trainer = made["trainer"]
    assert (trainer.beta, trainer.ref_model, trainer.num_iterations) == (0.0, None, 1)
    assert (trainer.args.steps_per_generation, trainer.args.mixed_precision) == (1, "no")
    model = trainer.model
    top = {id(p) for module in (model.model.layers[-1], model.model.norm) for p in module.parameters()}
    held = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    assert held == top
    before, after = load_file(tiny_llama / "model.safetensors"), load_file(out / "model.safetensors")
    moved = {name for name in before if not torch.equal(before[name], after[name])}
    assert moved and all(name.startswith(("model.layers.0.", "model.norm")) for name in moved)
    record = json.loads((out / "log.jsonl").read_text())
    assert all(record[f"{k}_seconds"] > 0 for k in ("generation", "scoring", "update"))
    # the process's peak resident set: no lower than before the run, no higher than after
    assert peak_before <= record["peak_memory_gib"] <= \
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def test_train_layers_freezes_everything_below_the_top_blocks():
    from transformers import LlamaConfig, LlamaForCausalLM
    model = LlamaForCausalLM(LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=3, num_attention_heads=2,
                                         tie_word_embeddings=True))
    freetext.freeze_below(model, 0)  # 0: every weight trains, as loaded
    assert all(p.requires_grad for p in model.parameters())
    freetext.freeze_below(model, 2)
    trained = {name for name, p in model.named_parameters() if p.requires_grad}
    assert trained == {name for name, _ in model.named_parameters()
                       if name.startswith(("model.layers.1.", "model.layers.2.", "model.norm"))}
    with pytest.raises(SystemExit, match="--train-layers 4: the model has 3 blocks"):
        freetext.freeze_below(model, 4)


def test_a_run_stopped_after_a_checkpoint_resumes_to_the_run_it_would_have_been(
        tiny_llama, tmp_path, monkeypatch, capsys):
    """--save-every 2 on 4 iterations, stopped by an error in iteration 3's rollout, then the
    same command again: it resumes from iteration 2's checkpoint and ends with the weights and
    the log of the run never stopped (the same episodes: the rollout's streams, the optimizer,
    lambda's iteration and the log are all in the checkpoint); a finished run deletes its
    checkpoints; another run's settings are refused in one line."""
    args = FREE_ARGS + ["--iterations", "4", "--save-every", "2", "--eval-every", "2",
                        "--model", str(tiny_llama),
                        "--freetext-cache", str(tmp_path / "c")]
    freetext.main(args + ["--out", str(tmp_path / "whole")])
    play, sampled = freetext.play, []

    def breaks_in_iteration_3(*a, greedy=False, **k):
        sampled.extend([] if greedy else [1])
        if len(sampled) == 3:
            raise RuntimeError("a crash in iteration 3")
        return play(*a, greedy=greedy, **k)
    monkeypatch.setattr(freetext, "play", breaks_in_iteration_3)
    with pytest.raises(RuntimeError, match="a crash"):
        freetext.main(args + ["--out", str(tmp_path / "stopped")])
    monkeypatch.setattr(freetext, "play", play)
    kept, = (tmp_path / "stopped").glob("checkpoint-*")  # iteration 2's; the log's 2 records
    assert len(json.loads((kept / freetext.RESUME_FILE).read_text())["records"]) == 2
    with pytest.raises(SystemExit, match="another run .* --lr"):
        freetext.main(args + ["--lr", "1e-3", "--out", str(tmp_path / "stopped")])
    capsys.readouterr()
    freetext.main(args + ["--out", str(tmp_path / "stopped")])
    assert "resuming from" in capsys.readouterr().out
    assert not list((tmp_path / "stopped").glob("checkpoint-*"))
    from safetensors.torch import load_file
    a, b = (load_file(tmp_path / run / "model.safetensors") for run in ("whole", "stopped"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    # the log but what each run spent, and TRL's end-of-train() summary (its runtime, and
    # train_loss: the mean over the steps of that train() call, the resumed part alone)
    logs = [[{k: v for k, v in json.loads(line).items()
              if not k.endswith(("_seconds", "_gib", "_time")) and not k.startswith("trl/train_")}
             for line in (tmp_path / run / "log.jsonl").read_text().splitlines()]
            for run in ("whole", "stopped")]
    assert len(logs[0]) == len(logs[1]) == 4
    for x, y in zip(*logs):  # each key that differs, with its two values
        assert {k: (x.get(k), y.get(k)) for k in x.keys() | y.keys() if x.get(k) != y.get(k)} == {}


def test_a_resume_takes_the_last_whole_checkpoint_and_refuses_another_runs(tmp_path):
    """resume_point: the checkpoint of the most iterations among the whole ones (the resume
    file and TRL's trainer_state.json, written last, both there); none without one; another
    run's settings refused in one line, but for how it runs (--show, --save-every, --out)."""
    settings = {"lr": 1e-5, "seed": 1, "show": 0, "save_every": 10, "out": "a", "threads": 1}
    assert freetext.resume_point(tmp_path, settings) == (None, None)
    for step, whole in ((40, True), (80, True), (120, False)):  # 120: a save that broke
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        (folder / freetext.RESUME_FILE).write_text(json.dumps(
            {"settings": settings, "records": [{}] * (step // 4)}))
        if whole:
            (folder / "trainer_state.json").write_text("{}")
    last, state = freetext.resume_point(tmp_path, {**settings, "show": 2, "out": "a/"})
    assert last.name == "checkpoint-80" and len(state["records"]) == 20
    for changed in ({"lr": 3e-5}, {"threads": 2}):
        with pytest.raises(SystemExit, match=f"another run .*--{next(iter(changed))}"):
            freetext.resume_point(tmp_path, {**settings, **changed})
