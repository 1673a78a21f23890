#!/usr/bin/env bash
# Issue 39's arms, one run at a time: every arm of one config under the same training time (evaluations not
# counted), seed by seed, then benchmarks/tree_arms.py compares them.
# Usage: benchmarks/tree_arms_runs.sh OUT_DIR CONFIG MINUTES SEED [SEED ...]
#   e.g. benchmarks/tree_arms_runs.sh runs/arms learn_easy_T1 12 0 1 2
# Arms (ARMS="fixed share" by default; `solved` is for two-turn configs). The redraw, split and branch arms were
# measured and their switches removed (docs/results.md#what-did-not-work):
#   fixed   the fixed tree: every switch off, whatever the config ships; on learn_easy_T1, which ships wideshare,
#           the align tree of 8 samples per agent on 4 problems a step it shipped before (coop_T1_G8's own tree)
#   solved  rollout.solved_generations=2
#   share   magrpo.advantage.train_per_group=4 (each group trains 4 of its completions, unbiased)
#   cross   magrpo.joint_mode=cross (every pairing of the drawn completions scored: at T=1 no extra sample)
#   crossshare  cross and share together (every pairing scored, each group trains 4 of its completions)
#   wideshare  the fixed tree's 64 completions a step spread over twice the problems: cross, G = 4, 8 trees a step,
#           each group training 2 of its 4 completions (the pair's 32 trained completions, from 8 problems not 4)
# EXTRA="key=value ..." adds overrides to every run (e.g. a tiny-random smoke check of the script itself).
# A run already finished (OUT_DIR/ARM_sSEED/final) is kept, so the script resumes where it stopped.
set -euo pipefail
out=${1:?output directory}; config=${2:?config name under configs/}; minutes=${3:?training minutes per run}
shift 3
(($#)) || { echo "give at least one seed" >&2; exit 2; }
cd "$(dirname "$0")/.."
py=${PYTHON:-python}
# every arm states every switch: a config may ship one on (align_T2_G4, cross_T2_G4, learn_easy: solved_generations)
# and the tree it departs from: learn_easy_T1 ships wideshare, its arms are measured from the fixed tree
tree=""
[[ $config == learn_easy_T1 ]] && tree="magrpo.joint_mode=align magrpo.num_generations=8 training.trees_per_step=4"
off="$tree rollout.solved_generations=null magrpo.advantage.train_per_group=null"
share="magrpo.advantage.train_per_group=4"; cross="magrpo.joint_mode=cross"
declare -A switch=([fixed]="$off" [solved]="$off rollout.solved_generations=2" [share]="$off $share"
                   [cross]="$off $cross" [crossshare]="$off $cross $share"
                   [wideshare]="$off $cross magrpo.num_generations=4 training.trees_per_step=8
                                magrpo.advantage.train_per_group=2")
arms=${ARMS:-fixed share}
mkdir -p "$out"
for seed in "$@"; do
  for arm in $arms; do
    [[ -v "switch[$arm]" ]] || { echo "unknown arm $arm (one of: ${!switch[*]})" >&2; exit 2; }
    run="$out/${arm}_s$seed"
    [[ -d "$run/final" ]] && { echo "kept $run"; continue; }
    # training.steps is only a cap here: the time budget ends every arm
    # shellcheck disable=SC2086
    "$py" scripts/train.py --config "configs/$config.yaml" training.seed="$seed" training.output_dir="$run" \
        training.steps=200 training.time_budget_minutes="$minutes" training.overwrite=true \
        logging.progress_bar=false ${switch[$arm]} ${EXTRA:-} > "$run.log" 2>&1 \
      || { echo "run $run failed (see $run.log)"; exit 1; }
    echo "ran $run"
  done
done
args=()
for arm in $arms; do
  args+=(--arm "$arm"); for seed in "$@"; do args+=("$out/${arm}_s$seed"); done
done
"$py" benchmarks/tree_arms.py "${args[@]}" --json "$out/arms.json" --plot "$out/plots"
