#!/usr/bin/env bash
# Self-Guide on ScienceWorld with a chat model you name, on one GPU (examples/README.md,
# "ScienceWorld"): the model prompted without and with its assessment (ReAct, ReAct w/ SG),
# then GRPO, GRPO w/ SG and GRPO w/ SG & GR trained from it on the train variations of the four
# find-* tasks, every row scored on the 300 test variations, paired over seeds: the table of
# experiments/scienceworld_table.py, with the model in place of the tiny prior. Never run on a GPU
# here (this project's machines have none): DRY_RUN's commands are checked on a CPU.
#
#   MODEL=Qwen/Qwen3-1.7B bash experiments/scienceworld_gpu.sh    # a folder, or a hub name
#                                    # already downloaded (nothing is downloaded at run time)
#   DRY_RUN=1 MODEL=... bash experiments/scienceworld_gpu.sh      # the commands, one a line
#   JOBS=2 SEEDS=1,2,3 MODEL=... bash experiments/scienceworld_gpu.sh   # three seeds, not five
#
# Stages, each skipped where its result is already there (run it again after a crash):
#  1. the packages (TRL, ScienceWorld's simulator) and Java, which the simulator needs;
#  2. a smoke step: one iteration of the full method on 8 test variations, device errors
#     reported where they happen (CUDA_LAUNCH_BLOCKING=1), before any long run;
#  3. the table: experiments/scienceworld_table.py's units, JOBS at a time, each trained run with
#     a checkpoint every 10 iterations (a crashed run resumes from it), --threads chosen once.
set -euo pipefail
cd "$(dirname "$0")/.."
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}

MODEL=${MODEL:?name the chat model: MODEL=<folder or downloaded hub name> bash $0}
OUT=${OUT:-runs/scienceworld-gpu}
SEEDS=${SEEDS:-1,2,3,4,5}  # the registered table's seeds
JOBS=${JOBS:-1}
# a chat model's settings (examples/README.md, "A chat model of your own"): its replies need
# more tokens than the tiny prior's, its guide a lighter KL; dr_grpo weighs a move alike in
# every arm
G="--model $MODEL --bf16 --device cuda --reply-tokens 64 --kl-guide 0.04 --loss dr_grpo"

say() { echo "== $*" >&2; }
run() {  # a command, or with DRY_RUN its line alone (quoted as a shell reads it back)
  if [ -n "${DRY_RUN:-}" ]; then printf '%q ' "$@" | sed 's/ $//'; echo; else "$@"; fi
}

say "1. packages and Java"
run python -m pip install --quiet -r requirements.txt trl==1.16.0 scienceworld==1.2.3
if ! command -v java > /dev/null; then  # as root, or through sudo
  run $( [ "$(id -u)" = 0 ] || echo sudo ) apt-get install -y default-jre-headless
fi
if [ -z "${DRY_RUN:-}" ]; then
  python -c "import sys, torch; sys.exit(None if torch.cuda.is_available() else
    'error: torch sees no CUDA device (torch ' + torch.__version__ + '): this script is for a GPU')"
fi
# the CPU's cores shared among the runs, chosen once and kept: a rerun with fewer JOBS (after
# an out-of-memory crash) resumes its runs' checkpoints with the --threads they started with
if [ -z "${DRY_RUN:-}" ] && [ -f "$OUT/threads" ]; then THREADS=$(cat "$OUT/threads"); else
  THREADS=$(( $(nproc) / JOBS > 0 ? $(nproc) / JOBS : 1 ))
  [ -n "${DRY_RUN:-}" ] || { mkdir -p "$OUT" && echo "$THREADS" > "$OUT/threads"; }
fi

say "2. the smoke step"
[ -f "$OUT/smoke/summary.md" ] || run env CUDA_LAUNCH_BLOCKING=1 python examples/trl_freetext.py \
  --world scienceworld $G --variant sg_gr --iterations 1 --eval-tasks 8 --threads "$THREADS" \
  --out "$OUT/smoke"

say "3. the table, $JOBS unit(s) at a time"
run python experiments/scienceworld_table.py --seeds "$SEEDS" --parallel "$JOBS" --out "$OUT/table" \
  --run "$G --save-every 10 --threads $THREADS"
