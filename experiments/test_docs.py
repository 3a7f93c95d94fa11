"""The docs run as written: every command in README.md, examples/README.md and
experiments/REPORT.md, and in the run commands of each script's docstring, is accepted by the
parser of the script it names; every link, image and #anchor of those pages resolves; and the
course's handout that README's commands make is graded as README says.

Nothing is trained: each command is parsed, not run, so the commands' check takes a second and
needs no optional package (with accelerate installed, `accelerate launch`'s own options are
parsed too). The one kind run is `paired.py --plays` on kept plays, which reads JSON: every
line it prints must stand in the docs as printed. And the course's handout (README's
`python .ci/student.py handout/`) is made, and each grading command run on it (40 s).

    python -m pytest -q experiments/test_docs.py
"""
import ast
import importlib
import os
import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ["README.md", "examples/README.md", "experiments/REPORT.md"]
PARSERS = {  # every script the docs run: the function of it that reads its command line
    "selfguide.py": "parse_config",
    "toy_env.py": None,  # takes no arguments
    "experiments/compare.py": "parse_args",
    "experiments/research.py": "parse_args",
    "experiments/checkpoints.py": "parse_args",
    "experiments/benchmark.py": "parse_args",
    "experiments/plots.py": "parse_args",
    "experiments/paired.py": "parse_args",
    "experiments/gradient.py": "parse_args",
    "experiments/priors.py": "parse_args",
    "experiments/freetext.py": "parse_args",
    "experiments/prompted.py": "parse_args",
    "experiments/results.py": "parse_args",
    "experiments/scienceworld_table.py": "parse_args",
    "examples/science_world.py": "parse_args",
    "examples/smollm2.py": "parse_args",
    "examples/trl_selfguide.py": "parse_config",
    "examples/trl_freetext.py": "parse_config",
    "examples/warm_start.py": "parse_config",
    ".ci/student.py": "parse_args",
}
PLACEHOLDER = re.compile(r"^[A-Z]{1,3}$|\.\.\.")  # S, LR, ... in prose: a pattern, not a command


def load(script: str):
    """The module of a script, imported by its name with its folder importable (as the
    scripts import each other: experiments/ and examples/ are no packages)."""
    for folder in (str(ROOT), str((ROOT / script).parent)):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    return importlib.import_module(Path(script).stem)


# --- where the commands are ---

def without_code(text: str) -> str:
    """Markdown prose: fenced blocks and inline code removed (a link inside code is no link)."""
    return re.sub(r"`[^`]*`", "", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M))


def bash_blocks(text: str) -> list:
    return re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M)


def block_commands(block: str) -> list:
    """Each command of a bash block as its words: lines joined at a trailing backslash,
    comments dropped, NAME="..." lines (and `for NAME in ...; do` loops, with their first
    value) defining variables that later lines, and later definitions, expand, and commands
    split at && and ;."""
    variables, commands, reference = {}, [], re.compile(r"\$\{(\w+)\}|\$(\w+)")

    def expand(match):  # $NAME or ${NAME} in the line being read
        name = match[1] or match[2]
        if name not in variables:
            raise AssertionError(f"${name} is not defined in its block: {line.strip()!r}")
        return variables[name]

    for line in block.replace("\\\n", " ").splitlines():
        assignment = re.fullmatch(r"\s*([A-Za-z_]\w*)=(.*)", line)
        loop = re.fullmatch(r"\s*for (\w+) in (\S+).*; do\s*", line)  # checked with its first value
        if assignment or loop:
            name, value = (assignment or loop)[1], (assignment or loop)[2]
            value = reference.sub(expand, value)  # G="... $S ...", as bash
            variables[name] = " ".join(shlex.split(value, comments=True))
            continue
        if line.strip() == "done":
            continue
        line = reference.sub(expand, line)
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split, lexer.commenter = True, "#"
        command = []
        for word in list(lexer) + [";"]:
            if word in ("&&", ";", "||"):
                commands += [command] if command else []
                command = []
            else:
                command.append(word)
    return commands


def doc_commands() -> list:
    """(where, words) of every command in the docs' bash blocks, in the inline code of their
    prose that names a script, and in the run commands of each script's docstring."""
    found = []
    for doc in DOCS:
        text = (ROOT / doc).read_text()
        for block in bash_blocks(text):
            found += [(doc, words) for words in block_commands(block)]
        prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
        for span in re.findall(r"`([^`]+)`", prose):
            span = " ".join(span.split())
            if re.match(r"(python|accelerate launch|torchrun) \S+\.py", span) \
                    and not any(PLACEHOLDER.search(w) for w in span.split()):
                found += [(f"{doc} (inline)", words) for words in block_commands(span)]
    for script in PARSERS:
        doc = ast.get_docstring(ast.parse((ROOT / script).read_text())) or ""
        for line in doc.replace("\\\n", " ").splitlines():
            if re.match(r"\s*(python|accelerate launch|torchrun|pip) ", line):
                found += [(f"{script} (docstring)", w) for w in block_commands(line.strip())]
    return found


# --- what each command may be ---

def without_env(words: list) -> list:
    """A command without what sets its environment: `SUITE=1 bash ...`, `env NAME=1 python ...`."""
    words = words[1:] if words[:1] == ["env"] else words
    while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
        words = words[1:]
    return words


def check_script(script: str, argv: list, processes: int = 1):
    assert script in PARSERS, f"{script}: no such script, or one this test does not know"
    if PARSERS[script] is None:
        assert not argv, f"{script} takes no arguments, given {argv}"
        return
    parse = getattr(load(script), PARSERS[script])
    previous = os.environ.get("WORLD_SIZE")
    os.environ["WORLD_SIZE"] = str(processes)  # what a launcher sets: the bridge checks it
    try:
        parse(argv)
    except SystemExit as stopped:  # --help stops with 0; a refusal with its message or 2
        if stopped.code not in (0, None):
            raise AssertionError(f"{script} refuses {argv}: {stopped}") from None
    finally:
        if previous is None:
            del os.environ["WORLD_SIZE"]
        else:
            os.environ["WORLD_SIZE"] = previous


def check_pytest(argv: list):
    """Paths exist, and every name of a -k expression matches a test in them."""
    paths = [ROOT / a for i, a in enumerate(argv)
             if not a.startswith("-") and (i == 0 or argv[i - 1] != "-k")]
    assert paths and all(p.exists() for p in paths), f"pytest on missing paths: {argv}"
    tests = " ".join(re.findall(r"def (test_\w+)", "".join(
        f.read_text() for p in paths for f in ([p] if p.is_file() else p.glob("test_*.py")))))
    if "-k" in argv:
        for name in re.findall(r"\w+", argv[argv.index("-k") + 1]):
            assert name in ("and", "or", "not") or name in tests, f"-k {name} selects no test"


def check_command(words: list):
    words = without_env(words)
    program, argv = words[0], words[1:]
    if program == "python" and argv[:2] == ["-m", "pytest"]:
        return check_pytest(argv[2:])
    if program == "python" and argv[:2] == ["-m", "pip"]:
        return check_command(argv[1:])
    if program == "python" and argv[:1] == ["-c"]:
        return compile(argv[1], "<python -c>", "exec")
    if program == "python" and argv[:2] == ["experiments/scienceworld_table.py", "prior"]:
        out = argv.index("--out") if "--out" in argv else None  # the unit's own flag
        rest = argv[2:] if out is None else argv[2:out] + argv[out + 2:]
        return check_script("examples/trl_freetext.py", rest)  # the flags its prior takes
    if program == "python":
        return check_script(argv[0], argv[1:])
    if program == "pip":
        assert argv[0] == "install", words
        files = [argv[i + 1] for i, a in enumerate(argv) if a == "-r"]
        assert all((ROOT / f).exists() for f in files), f"pip -r of a missing file: {words}"
        return None
    if program == "bash":
        assert (ROOT / argv[0]).exists(), f"bash on a missing script: {words}"
        return None
    if program == "torchrun":
        from torch.distributed.run import get_args_parser
        launch = get_args_parser().parse_args(argv)
        return check_script(launch.training_script, launch.training_script_args,
                            int(launch.nproc_per_node))
    if words[:2] == ["accelerate", "launch"]:
        script = next(i for i, a in enumerate(argv) if a.endswith(".py"))
        options = argv[1:script]
        try:
            from accelerate.commands.launch import launch_command_parser
            launch_command_parser().parse_args(options + ["x.py"])
        except ImportError:
            pass  # accelerate comes with TRL, an optional extra
        processes = 1 if "--cpu" in options else int(
            options[options.index("--num_processes") + 1]) if "--num_processes" in options else 1
        return check_script(argv[script], argv[script + 1:], processes)
    raise AssertionError(f"a command this test does not know how to check: {words}")


def test_every_command_in_the_docs_is_accepted_by_its_script():
    commands = doc_commands()
    assert len(commands) > 40  # every block was found (the docs hold more than that)
    failures = []
    for where, words in commands:
        try:
            check_command(words)
        except Exception as error:  # noqa: BLE001: collect them all, say each
            failures.append(f"{where}: {shlex.join(words)}\n    {type(error).__name__}: {error}")
    assert not failures, f"{len(failures)} commands fail:\n" + "\n".join(failures)


def test_every_pairing_of_kept_plays_in_the_docs_prints_what_the_docs_show(monkeypatch):
    """`paired.py --plays` on plays kept under experiments/results/ is run as the docs give it
    (from the repository's root), and each line it prints stands in the docs verbatim."""
    paired = load("experiments/paired.py")
    monkeypatch.chdir(ROOT)
    docs = "".join((ROOT / doc).read_text() for doc in DOCS)
    pairings = [words for _, words in doc_commands()
                if words[1:3] == ["experiments/paired.py", "--plays"]
                and words[3].startswith("experiments/results/")]
    assert pairings  # the seed runs' comparisons (examples/README.md)
    for words in pairings:
        for line in paired.main(words[2:]):
            assert line in docs, f"{shlex.join(words)} prints a line the docs lack:\n{line}"


def test_the_gpu_script_runs_only_commands_its_scripts_accept(tmp_path):
    """experiments/smollm2_gpu.sh with DRY_RUN=1 lists what it runs on a fresh machine (no
    stage's result there yet): every command is accepted by its script, and every stage is
    there in order: the install, the model, the smoke step (a small warm start and one
    iteration, device errors reported where they happen) before the warm start, the rates on
    the tuning mazes, three seeds of three arms, their plays, and each arm paired with the
    warm start and with each other arm, greedy and sampled."""
    import subprocess
    run = subprocess.run(["bash", str(ROOT / "experiments/smollm2_gpu.sh")], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "DRY_RUN": "1",
                                                      "OUT": str(tmp_path / "gpu")})
    assert run.returncode == 0, run.stderr
    listed = [shlex.split(line) for line in run.stdout.splitlines()]
    for words in listed:
        check_command(words)
    smoke = [words[:2] == ["env", "CUDA_LAUNCH_BLOCKING=1"] for words in listed]
    commands = [without_env(words) for words in listed]
    if (ROOT / "runs/models/SmolLM2-135M-Instruct/config.json").exists():
        # a checkout that already converted the weights skips the conversion: list it as a fresh
        # machine would run it, so the indices below read the same in both
        assert "examples/smollm2.py" not in {words[1] for words in commands}
        commands.insert(2, ["python", "examples/smollm2.py"])
        smoke.insert(2, False)
    scripts = [words[1] for words in commands if words[0] == "python"]
    assert scripts[:3] == ["-m", "-m", "examples/smollm2.py"]
    assert scripts[3:6] == ["examples/warm_start.py", "examples/trl_freetext.py",
                            "examples/warm_start.py"] and smoke[3:6] == [True, True, False]
    assert commands[3][commands[3].index("--prior-episodes") + 1] == "8"
    trained = [words for words in commands if words[1] == "examples/trl_freetext.py"]
    assert "--iterations" in trained[0] and len(trained) == 1 + 2 * 3 + 3 * 3
    assert sum("--mazes" in words for words in trained) == 6
    assert scripts.count("experiments/prompted.py") == 1 + 3 * 3
    pairs = {words[3] for words in commands if words[1] == "experiments/paired.py"}
    arms = ["grpo-seed{seed}-play:ReAct", "sg-seed{seed}-play:ReAct w/ SG",
            "sg_gr-seed{seed}-play:ReAct w/ SG"]
    warm = ["warm:ReAct", "warm:ReAct w/ SG", "warm:ReAct w/ SG"]
    out = f"{tmp_path}/gpu/"
    assert pairs == {f"{out}{a}, {how}|{out}{b}, {how}" for how in ("greedy", "sampled")
                     for a, b in [*zip(arms, warm), (arms[1], arms[0]), (arms[2], arms[0]),
                                  (arms[2], arms[1])]}


def test_the_scienceworld_gpu_script_runs_only_commands_its_scripts_accept(tmp_path):
    """experiments/scienceworld_gpu.sh with DRY_RUN=1 and a model named: the install (the
    simulator's package with it), the smoke step (one iteration, device errors where they
    happen) before the table, the table's units taking the model and a checkpoint every 10
    iterations; every command accepted by its script. Without a model: one line."""
    import subprocess
    script = str(ROOT / "experiments/scienceworld_gpu.sh")
    run = subprocess.run(["bash", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "DRY_RUN": "1", "MODEL": "runs/models/chat",
                              "OUT": str(tmp_path / "sw")})
    assert run.returncode == 0, run.stderr
    listed = [shlex.split(line) for line in run.stdout.splitlines()]
    for words in listed:
        check_command(words)
    commands = [without_env(words) for words in listed]
    assert "scienceworld==1.2.3" in commands[0] and listed[1][:2] == ["env", "CUDA_LAUNCH_BLOCKING=1"]
    assert commands[1][1] == "examples/trl_freetext.py" and "--iterations" in commands[1]
    table = commands[-1]
    assert table[1] == "experiments/scienceworld_table.py"
    settings = shlex.split(table[table.index("--run") + 1])
    assert settings[settings.index("--model") + 1] == "runs/models/chat" and "--save-every" in settings
    missing = subprocess.run(["bash", script], capture_output=True, text=True, timeout=60,
                             env={k: v for k, v in os.environ.items() if k != "MODEL"})
    assert missing.returncode != 0 and "name the chat model" in missing.stderr


def test_the_command_reader_splits_expands_and_finds_what_is_not_accepted():
    block = 'A="--seeds 2  --workers 2"  # two\npython selfguide.py $A \\\n    --seed 5 # c\n' \
            'pip install -r requirements.txt && python -m pytest -q test_selfguide.py\n'
    assert block_commands(block) == [
        ["python", "selfguide.py", "--seeds", "2", "--workers", "2", "--seed", "5"],
        ["pip", "install", "-r", "requirements.txt"],
        ["python", "-m", "pytest", "-q", "test_selfguide.py"]]
    with pytest.raises(AssertionError, match=r"\$B is not defined"):
        block_commands("python selfguide.py $B")
    assert block_commands('S="--size 4"\nG="--seed 1 $S"\npython selfguide.py $G') == [
        ["python", "selfguide.py", "--seed", "1", "--size", "4"]]  # expanded where defined
    check_command(["python", "selfguide.py", "--variant", "grpo"])
    check_command(["python", "experiments/compare.py", "--rows", "core", "--seeds", "2"])
    for refused, why in (
            (["python", "selfguide.py", "--compare"], "refuses"),  # not one of its flags
            (["python", "selfguide.py", "--variant", "ppo"], "refuses"),  # not a choice
            (["python", "experiments/compare.py", "--show", "1"], "refuses"),  # a run's flag
            (["python", "toy_env.py", "--seed", "1"], "takes no arguments"),
            (["python", "nowhere.py"], "no such script"),
            (["python", "-m", "pytest", "-q", "test_selfguide.py", "-k", "no_such_test"],
             "selects no test"),
            (["pip", "install", "-r", "missing.txt"], "pip -r of a missing file"),
            (["make", "all"], "does not know how to check")):
        with pytest.raises(AssertionError, match=why):
            check_command(refused)


# --- links ---

def anchor(heading: str) -> str:
    """GitHub's id of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    return {anchor(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def test_every_link_image_and_anchor_in_the_docs_resolves():
    broken = []
    for doc in DOCS:
        page = ROOT / doc
        for target in re.findall(r"\]\(([^)\s]+)\)", without_code(page.read_text())):
            if re.match(r"[a-z]+://", target):
                continue  # the web: not reachable from here
            path, _, fragment = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{doc}: {target} (no such file)")
            elif fragment and fragment not in anchors(linked):
                broken.append(f"{doc}: {target} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_anchor_follows_github():
    assert anchor("0. The default: the familiar maze") == "0-the-default-the-familiar-maze"
    assert anchor("6. Where judging takes thought (`--dist`)") == \
        "6-where-judging-takes-thought---dist"


# --- the course's handout ---

def test_the_handout_blanks_the_graded_functions_and_every_grading_test_then_fails(tmp_path):
    """`python .ci/student.py handout/`: the files README lists; in selfguide.py each graded
    function keeps its signature and docstring and its body becomes a NotImplementedError that
    names the command grading it, and every other statement of the file is as it is. Each
    function's grading command (README's table) then fails on a handout that blanks it alone,
    by that NotImplementedError; on selfguide.py the suite runs those tests and they pass."""
    import shutil
    import subprocess
    student = load(".ci/student.py")
    made = subprocess.run([sys.executable, str(ROOT / ".ci/student.py"), str(tmp_path)],
                          capture_output=True, text=True, check=True)
    assert "blanked " + ", ".join(student.GRADED) in made.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(student.FILES)
    original = (ROOT / "selfguide.py").read_text()
    mine, theirs = (ast.parse(text).body for text in (original,
                                                     (tmp_path / "selfguide.py").read_text()))
    assert len(mine) == len(theirs)
    for node, blanked in zip(mine, theirs):
        if getattr(node, "name", None) not in student.GRADED:
            assert ast.dump(node) == ast.dump(blanked)
            continue
        assert [ast.dump(n) for n in (node.args, node.body[0])] == \
            [ast.dump(n) for n in (blanked.args, blanked.body[0])]  # signature, docstring
        raised = blanked.body[1:]
        assert len(raised) == 1 and isinstance(raised[0], ast.Raise)
        assert student.grading_command(node.name) in ast.unparse(raised[0]), node.name
    running = {}  # each blanked alone in a handout of its own, graded as README says, at once
    for name, selection in student.GRADED.items():
        folder = tmp_path / f"graded-{name}"
        shutil.copytree(tmp_path, folder, ignore=shutil.ignore_patterns("graded-*"))
        (folder / "selfguide.py").write_text(student.blank(original, [name]))
        running[name] = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=line",
             "test_selfguide.py", "-k", selection], cwd=folder, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
    for name, process in running.items():
        stdout, _ = process.communicate(timeout=300)
        summary = stdout.strip().splitlines()[-1]
        assert re.fullmatch(r"\d+ failed, \d+ deselected in .*", summary), (name, summary)
        assert stdout.count(f"NotImplementedError: {name} is yours to write") >= \
            int(summary.split()[0]), name  # each failure is the blank's
