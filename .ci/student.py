"""Make the student version of selfguide.py for a course, and say what grades it.

    python .ci/student.py handout/                    # every graded function blanked
    python .ci/student.py handout/ trust_schedule     # only the functions named
    python .ci/student.py --list                      # each function and its grading command

Each chosen function keeps its signature and docstring (the specification) and its body
becomes a `raise NotImplementedError` that names the command grading it. The other project
files are copied unchanged, so students run the very tests an instructor grades with.
"""
import ast
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = ["selfguide.py", "toy_env.py", "test_toy_env.py", "test_selfguide.py", "conftest.py",
         "requirements.txt", "README.md", "LICENSE"]
GRADED = {  # function of selfguide.py: the pytest -k expression of the tests that grade it
    "guide_to_reward": "guide_to_reward",
    "step_rewards": "step_rewards",
    "trust_schedule": "trust_schedule",
    "length_neutral": "composite_return",
    "composite_return": "composite_return",
    "group_advantages": "group_advantages",
    "step_credit": "step_credit",
    "slot_vocab_mask": "slot_vocab_mask",
    "per_token": "per_token",
    "grpo_loss": "grpo_loss",
}


def grading_command(name: str) -> str:
    return f'python -m pytest -q test_selfguide.py -k "{GRADED[name]}"'


def blank(source: str, names) -> str:
    """`source` with the bodies of the top-level functions `names` replaced (docstrings kept)."""
    lines = source.splitlines(keepends=True)
    functions = {node.name: node for node in ast.parse(source).body
                 if isinstance(node, ast.FunctionDef)}
    for name in sorted(names, key=lambda n: functions[n].lineno, reverse=True):
        node = functions[name]
        body = node.body[1:] if ast.get_docstring(node) is not None else node.body
        indent = " " * body[0].col_offset
        message = (f"{name} is yours to write: its docstring says what it must do; "
                   f"check it with: {grading_command(name)}")
        lines[body[0].lineno - 1:node.end_lineno] = [f"{indent}raise NotImplementedError({message!r})\n"]
    return "".join(lines)


def parse_args(argv):
    """(the handout's folder, the functions to blank), or (None, []) for --list; a bad
    command line exits in one line."""
    if argv == ["--list"]:
        return None, []
    if not argv or argv[0].startswith("-"):
        sys.exit(__doc__)
    out, names = Path(argv[0]), argv[1:] or list(GRADED)
    unknown = [n for n in names if n not in GRADED]
    if unknown:
        sys.exit(f"error: {', '.join(unknown)} not graded; choose among: {', '.join(GRADED)}")
    return out, names


def main(argv):
    out, names = parse_args(argv)
    if out is None:
        for name in GRADED:
            print(f"{name:18s} {grading_command(name)}")
        return
    out.mkdir(parents=True, exist_ok=True)
    for file in FILES:
        shutil.copy(ROOT / file, out / file)
    (out / "selfguide.py").write_text(blank((ROOT / "selfguide.py").read_text(), names))
    print(f"student version in {out}: blanked {', '.join(names)}")


if __name__ == "__main__":
    main(sys.argv[1:])
