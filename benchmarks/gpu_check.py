"""GPU readiness in one command: the trainer's CUDA paths on a randomly initialised model of a real size.

Speed needs no trained weights, so the model is Qwen2.5-1.5B's architecture (ARCHS below) with random
weights, built on the device and saved once; the tokenizer is the embedded model's (SmolLM2's 49152 tokens,
a subset of the 151936 ids the model samples from; ids past it decode to nothing). Each stage is a fresh
process, so peaks never mix, and runs the real trainer (`comlrl.run.trainer.build`, `training_step`) on
code_collab (N=2 LoRA agents, T=2, G=4, align, `--trees` trees per step, the real sandbox) with a
negligible length tie-break so every completion trains (benchmarks/_common.TieBreakTask):

  bf16        bf16 weights, the hf engine (transformers generate), one step of warm-up, then `--steps`
  bf16_ckpt   the same with gradient checkpointing
  zero2       the same under `accelerate launch` + DeepSpeed ZeRO-2, one process (configs/accelerate)

Per stage: seconds per trained completion, generated tokens per second of generation time, the step's
split (rollout / update) and the peak GPU memory (torch.cuda.max_memory_allocated), as JSON.

    python benchmarks/gpu_check.py [--steps 2] [--trees 4] [--arch qwen2.5-1.5b] [--out FILE] [key=value ...]
    bash benchmarks/gpu_check.sh     # on an offline GPU machine: installs what .gpu/ carries, then the above
    python benchmarks/gpu_check.py --quick   # the tiny architecture on CPU: the same code minus CUDA (a slow test)

Writes benchmarks/results/gpu_check.json (`--quick`: gpu_check_quick.json).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, TieBreakTask, command, machine, setup, write  # noqa: E402

# Architectures as published in the models' config.json (Qwen2.5-1.5B-Instruct); "tiny" is for --quick.
ARCHS = {
    "qwen2.5-1.5b": dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                         num_attention_heads=12, num_key_value_heads=2, max_position_embeddings=32768,
                         rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True),
    "tiny": dict(vocab_size=151936, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
                 rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=True),
}
STAGES = {  # stage -> (config overrides, launched under accelerate's DeepSpeed ZeRO-2 config)
    "bf16": ([], False),
    "bf16_ckpt": (["model.gradient_checkpointing=true"], False),
    "zero2": ([], True),
}
CARRIED_TOKENIZER = ROOT / ".gpu" / "tokenizer"  # what benchmarks/gpu_check.sh --prepare copies for the device


def tokenizer_dir() -> Path:
    """The embedded model's tokenizer: carried in .gpu/ (an offline GPU machine) or from the model cache."""
    if (CARRIED_TOKENIZER / "tokenizer.json").is_file():
        return CARRIED_TOKENIZER
    from comlrl.models import TINY_RANDOM, resolve_model_path

    return Path(resolve_model_path(TINY_RANDOM))


def build_model(arch: str, dest: Path, dtype: str) -> dict:
    """Save a randomly initialised Qwen2 model of `arch` (fixed seed) with the tokenizer into `dest`."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir()))
    config = Qwen2Config(**ARCHS[arch], bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    t0 = time.perf_counter()
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(config).to(getattr(torch, dtype))
    model.save_pretrained(dest)
    tok.save_pretrained(dest)
    n = sum(p.numel() for p in model.parameters())
    del model
    return {"arch": arch, "parameters_m": round(n / 1e6, 1), "build_seconds": round(time.perf_counter() - t0, 1),
            **{k: ARCHS[arch][k] for k in ("hidden_size", "num_hidden_layers", "vocab_size")}}


def environment() -> dict:
    """What the machine offers: CUDA, bf16, and the versions the trainer runs on."""
    import torch

    info = machine(threads=torch.get_num_threads())
    info["cuda"] = torch.cuda.is_available()
    if info["cuda"]:
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                    bf16=torch.cuda.is_bf16_supported(), torch_cuda=torch.version.cuda)
    for pkg in ("accelerate", "deepspeed"):
        try:
            info[pkg] = __import__(pkg).__version__
        except ImportError as exc:
            info[pkg] = f"missing ({exc})"
    return info


def stage_overrides(model_dir: str, dtype: str, trees: int, new_tokens: int, stage: str, extra: list[str]) -> list[str]:
    return [f"model.name={model_dir}", f"model.dtype={dtype}", f"model.max_new_tokens={new_tokens}",
            "rollout.engine=hf", "external.mode=plain", "logging.progress_bar=false", "dataset.eval_size=1",
            "dataset.max_problems=null", f"training.trees_per_step={trees}", "sandbox.workers=4",
            *STAGES[stage][0], *extra]


def child(stage: str, model_dir: str, dtype: str, steps: int, warmup: int, trees: int, new_tokens: int,
          extra: list[str]) -> None:
    """One stage in this process: build the trainer, `warmup` untimed steps, `steps` timed ones; prints RESULT."""
    setup(threads=min(8, os.cpu_count() or 1))
    import torch

    from comlrl.config.schema import load_config
    from comlrl.run.trainer import build, training_step

    # a run folder of its own: steps write into it (the preference rounds' pairs.jsonl), and the shipped
    # config's runs/align_T2_G4 is neither there on a fresh machine nor ours to write into
    run_dir = Path(tempfile.mkdtemp(prefix=f"gpu_check_{stage}_"))
    cfg = load_config(ROOT / "configs" / "align_T2_G4.yaml",
                      [*stage_overrides(model_dir, dtype, trees, new_tokens, stage, extra),
                       f"training.output_dir={run_dir}"])
    t0 = time.perf_counter()
    comp = build(cfg)
    comp.task = TieBreakTask(comp.task)
    out: dict = {"stage": stage, "device": str(comp.accelerator.device),
                 "distributed_type": str(comp.accelerator.distributed_type),
                 "gradient_checkpointing": cfg.model.gradient_checkpointing,
                 "micro_batch_size": cfg.magrpo.loss.micro_batch_size,
                 "build_seconds": round(time.perf_counter() - t0, 1)}
    cuda = torch.cuda.is_available()
    if cuda:
        out["memory_after_build_gib"] = round(torch.cuda.memory_allocated() / 2**30, 2)
    steps_out = []
    for step in range(warmup + steps):  # warm-up steps (allocator, kernels, sandbox workers) are not counted
        if cuda:
            torch.cuda.synchronize()
        metrics, _ = training_step(comp, step)
        if cuda:
            torch.cuda.synchronize()
        steps_out.append({k: round(float(metrics[k]), 3) for k in
                          ("samples", "gen_tokens", "gen_seconds", "rollout_seconds", "update_seconds",
                           "step_seconds", "loss", "grad_norm") if k in metrics})
    timed = steps_out[warmup:]
    samples = sum(s["samples"] for s in timed)
    out.update(steps=steps_out, timed_steps=len(timed), trained_completions=int(samples),
               seconds_per_trained_completion=round(sum(s["step_seconds"] for s in timed) / max(samples, 1), 4),
               gen_tokens_per_s=round(sum(s["gen_tokens"] for s in timed)
                                      / max(sum(s["gen_seconds"] for s in timed), 1e-9), 1),
               update_seconds_per_completion=round(sum(s["update_seconds"] for s in timed) / max(samples, 1), 4))
    if cuda:
        out["peak_gpu_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        out["peak_gpu_reserved_gib"] = round(torch.cuda.max_memory_reserved() / 2**30, 2)
    comp.sandbox.close()
    shutil.rmtree(run_dir, ignore_errors=True)
    print("RESULT " + json.dumps(out), flush=True)


def run_stage(stage: str, args, model_dir: Path) -> dict:
    script = [str(Path(__file__).resolve()), "--child", stage, "--model-dir", str(model_dir), "--dtype", args.dtype,
              "--steps", str(args.steps), "--warmup", str(args.warmup), "--trees", str(args.trees),
              "--new-tokens", str(args.new_tokens), *args.overrides]
    if STAGES[stage][1]:
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
               str(ROOT / "configs" / "accelerate" / "deepspeed_zero2.yaml"), "--num_processes", "1", *script]
    else:
        cmd = [sys.executable, *script]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=args.stage_timeout)
    lines = [x for x in res.stdout.splitlines() if x.startswith("RESULT ")]
    if res.returncode != 0 or not lines:
        tail = (res.stderr or res.stdout)[-1500:]
        print(f"# stage {stage} FAILED (exit {res.returncode}):\n{tail}", flush=True)
        return {"stage": stage, "ok": False, "exit": res.returncode, "error_tail": tail}
    out = json.loads(lines[-1][len("RESULT "):])
    out.update(ok=True, process_seconds=round(time.perf_counter() - t0, 1))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", choices=sorted(ARCHS), default="qwen2.5-1.5b")
    ap.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    ap.add_argument("--steps", type=int, default=2, help="timed training steps per stage (after one warm-up)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed training steps first")
    ap.add_argument("--trees", type=int, default=4, help="training.trees_per_step")
    ap.add_argument("--new-tokens", type=int, default=128, help="model.max_new_tokens")
    ap.add_argument("--stages", default=",".join(STAGES), help="comma-separated, of " + ", ".join(STAGES))
    ap.add_argument("--stage-timeout", type=int, default=900)
    ap.add_argument("--work", default=None, help="where the random model is saved (default: a temp dir)")
    ap.add_argument("--quick", action="store_true",
                    help="tiny architecture in float32 (CPU): 1 step, no warm-up, 1 tree, 8 tokens")
    ap.add_argument("--out", default=None)
    ap.add_argument("overrides", nargs="*",
                    help="config overrides for every stage, e.g. magrpo.loss.micro_batch_size=16")
    ap.add_argument("--child", choices=sorted(STAGES), help=argparse.SUPPRESS)
    ap.add_argument("--model-dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.model_dir, args.dtype, args.steps, args.warmup, args.trees, args.new_tokens,
              args.overrides)
        return
    if args.quick:
        args.arch, args.dtype, args.steps, args.warmup, args.trees, args.new_tokens = "tiny", "float32", 1, 0, 1, 8
    stages = [s for s in args.stages.split(",") if s]
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        sys.exit(f"gpu_check: unknown stage(s) {unknown} in --stages; expected {', '.join(STAGES)}")
    setup(threads=min(8, os.cpu_count() or 1))

    t0 = time.perf_counter()
    report: dict = {"command": command("gpu_check.py"), "quick": args.quick, "environment": environment(),
                    "setup": {"config": "configs/align_T2_G4.yaml", "task": "code_collab", "agents": "2 x LoRA",
                              "turns": 2, "generations": 4, "joint_mode": "align", "trees_per_step": args.trees,
                              "max_new_tokens": args.new_tokens, "dtype": args.dtype, "engine": "hf",
                              "overrides": args.overrides}}
    print("# " + json.dumps(report["environment"]), flush=True)
    with tempfile.TemporaryDirectory(prefix="gpu_check_", dir=args.work) as work:
        model_dir = Path(work) / f"{args.arch}-random"
        report["model"] = build_model(args.arch, model_dir, args.dtype)
        print(f"# model: {report['model']}", flush=True)
        report["stages"] = {}
        for stage in stages:
            res = report["stages"][stage] = run_stage(stage, args, model_dir)
            if args.out:  # what is done survives a stage that runs out of time
                Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
            if res["ok"]:
                print(f"# {stage}: {res['seconds_per_trained_completion']} s per trained completion "
                      f"({res['trained_completions']} in {res['timed_steps']} steps), "
                      f"{res['gen_tokens_per_s']} generated tokens/s, peak GPU memory "
                      f"{res.get('peak_gpu_memory_gib', 'n/a')} GiB", flush=True)
    report["ok"] = all(s["ok"] for s in report["stages"].values())
    report["total_seconds"] = round(time.perf_counter() - t0, 1)
    write("gpu_check_quick" if args.quick else "gpu_check", report, args.out)
    print(json.dumps({k: {m: v.get(m) for m in ("ok", "seconds_per_trained_completion", "gen_tokens_per_s",
                                                  "peak_gpu_memory_gib")} for k, v in report["stages"].items()}))
    sys.exit(0 if report["ok"] else 1)


if __name__ == "__main__":
    main()
