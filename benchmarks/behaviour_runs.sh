#!/usr/bin/env bash
# The behaviour-identity runs of issue 25: tiny-random, hf engine, 2 steps, seed 0, one per shape of task
# (code with the feedback modes, code cross/early-stop, the actions environment, the tool agent).
# Usage: benchmarks/behaviour_runs.sh OUT_DIR [NAME ...]   (default: every run), then   python benchmarks/compare_runs.py A_DIR B_DIR
set -euo pipefail
out=${1:?output directory}
shift
only=" $* "
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD:$PWD/tests${PYTHONPATH:+:$PYTHONPATH}"
py=${PYTHON:-python}
common=(model.name=tiny-random rollout.engine=hf training.steps=2 training.seed=0 training.torch_threads=1
        logging.progress_bar=false logging.tensorboard=false model.max_new_tokens=24
        'task.reward_funcs=[reward_fns:distinct_chars]')
run() {
  local name=$1; shift
  [[ "$only" == "  " || "$only" == *" $name "* ]] || return 0
  rm -rf "$out/$name"
  "$py" scripts/train.py "$@" "${common[@]}" training.output_dir="$out/$name" > "$out/$name.log" 2>&1 \
    || { echo "run $name failed (see $out/$name.log)"; exit 1; }
  echo "ran $name"
}
mkdir -p "$out"
run align --config configs/align_T2_G4.yaml dataset.eval_size=4 evaluation.probe_problems=2
run cross --config configs/cross_T2_G4.yaml dataset.eval_size=2 evaluation.probe_problems=1 evaluation.samples=1 \
    magrpo.num_generations=2 magrpo.early_termination_threshold=0.35 external.mode=level_passed
run actions --config configs/actions_T4_G2.yaml magrpo.num_turns=3 training.eval_size=1 evaluation.probe_problems=1 \
    evaluation.samples=1
run tool --config configs/tool_agent_T3_G4.yaml magrpo.num_turns=2 dataset.eval_size=2 evaluation.probe_problems=1 \
    evaluation.samples=1
