"""Peak memory of N=2 agents: LoRA adapters on one shared base vs two full models (agents.mode=full).

Each measurement is a fresh process (this script re-invoked with --child), so peaks never mix: it builds
the real trainer (`comlrl.run.trainer.build`: policies, AdamW over the trainable parameters, sandbox) for
code_collab with N=2, T=1, G=4, then runs one `training_step` (one batched generate of 2 agents x G rows,
sandbox scoring, loss, backward, optimizer step). Peak RSS is the kernel's high-water mark (VmHWM) of the
child; RSS after import, after loading and after the step are reported too. The modes alternate, the
ratio is the median of the per-round ratios lora / full.

    python benchmarks/memory.py [--rounds 2] [--length 32] [key=value ...]   # e.g. model.gradient_checkpointing=true
    python benchmarks/memory.py --quick     # tiny-random smoke run

The trainer's defaults apply (e.g. magrpo.loss.micro_batch_size); overrides are passed to both modes.
Writes benchmarks/results/memory.json (`--quick`: memory_quick.json; with gradient checkpointing on:
memory_checkpointing.json).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, TieBreakTask, command, machine, median, setup, write  # noqa: E402


def status(key: str) -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":")) / 1024


def child(mode: str, model: str, length: int, threads: int, overrides: list[str]) -> None:
    setup(threads)
    import torch

    from comlrl.config.schema import load_config
    from comlrl.run.trainer import build, training_step

    out = {"mode": mode, "rss_import_mb": status("VmRSS")}
    cfg = load_config(ROOT / "configs" / "align_T2_G4.yaml", [
        f"model.name={model}", f"model.max_new_tokens={length}", f"agents.mode={mode}", "magrpo.num_turns=1",
        f"training.torch_threads={threads}", "external.mode=plain", "logging.progress_bar=false",
        "dataset.eval_size=1", "sandbox.workers=1", "rollout.engine=hf", *overrides,
    ])
    out["micro_batch_size"] = cfg.magrpo.loss.micro_batch_size
    out["gradient_checkpointing"] = cfg.model.gradient_checkpointing
    t0 = time.perf_counter()
    comp = build(cfg)
    comp.task = TieBreakTask(comp.task)  # every group has signal: the step trains on all 2 x G completions
    out["rss_loaded_mb"] = status("VmRSS")
    out["hwm_loaded_mb"] = status("VmHWM")
    params = list(comp.policies.module.parameters())
    out["parameters_m"] = round(sum(p.numel() for p in params) / 1e6, 2)
    out["trainable_m"] = round(sum(p.numel() for p in params if p.requires_grad) / 1e6, 2)
    torch.manual_seed(0)
    policies = comp.policies
    orig = policies.generate

    def generate(*a, **kw):  # RSS right after the batched generate, before the loss and backward
        res = orig(*a, **kw)
        out["rss_after_generate_mb"], out["hwm_after_generate_mb"] = status("VmRSS"), status("VmHWM")
        return res

    policies.generate = generate
    metrics, _ = training_step(comp, 0)
    out["samples"] = int(metrics["samples"])
    out["gen_tokens"] = int(metrics["gen_tokens"])
    out["rss_after_step_mb"] = status("VmRSS")
    out["peak_rss_mb"] = status("VmHWM")
    out["seconds"] = round(time.perf_counter() - t0, 1)
    comp.sandbox.close()
    print("RESULT " + json.dumps(out), flush=True)


def measure(mode: str, args) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", mode, "--model", args.model,
           "--length", str(args.length), "--threads", str(args.threads), *args.overrides]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT)
    lines = [x for x in res.stdout.splitlines() if x.startswith("RESULT ")]
    if res.returncode != 0 or not lines:
        raise RuntimeError(f"{mode} child failed ({res.returncode}): {res.stderr[-2000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--length", type=int, default=32, help="new tokens per completion")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="tiny-random, 1 round, 8 tokens")
    ap.add_argument("--child", choices=("lora", "full"), help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None)
    ap.add_argument("overrides", nargs="*",
                    help="config overrides for both modes, e.g. model.gradient_checkpointing=true")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.model, args.length, args.threads, args.overrides)
        return
    if args.quick:
        args.model, args.rounds, args.length = "tiny-random", 1, min(args.length, 8)
    setup(args.threads)
    t_start = time.perf_counter()
    info = machine(args.threads)
    with open("/proc/meminfo") as f:
        avail = next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:")) / 1024
    info["mem_available_mb_at_start"] = round(avail)
    print(f"# {args.model}: N=2 agents, T=1, G=4, {args.length} new tokens, one training step per process, "
          f"overrides {args.overrides or 'none'}; "
          f"MemAvailable {avail:.0f} MB, load {os.getloadavg()[0]:.2f}", flush=True)
    rec: dict = {"lora": [], "full": [], "ratios": []}
    for r in range(args.rounds):
        order = ("lora", "full") if r % 2 == 0 else ("full", "lora")
        res = {m: measure(m, args) for m in order}
        for m in order:
            rec[m].append(res[m])
        rec["ratios"].append(round(res["lora"]["peak_rss_mb"] / res["full"]["peak_rss_mb"], 3))
        print(f"# round {r + 1}/{args.rounds}: peak RSS lora {res['lora']['peak_rss_mb']:.0f} MB, full "
              f"{res['full']['peak_rss_mb']:.0f} MB, ratio {rec['ratios'][-1]:.2f}", flush=True)
    ratio = median(rec["ratios"])
    cols = ("rss_import_mb", "rss_loaded_mb", "hwm_after_generate_mb", "rss_after_step_mb", "peak_rss_mb")
    print(f"\n{'mode':<6} {'params M':>9} {'trainable M':>12} {'import MB':>10} {'loaded MB':>10} "
          f"{'generate MB':>12} {'after step MB':>14} {'peak MB':>9}")
    for m in ("lora", "full"):
        x = rec[m]
        vals = [median([y[c] for y in x]) for c in cols]
        print(f"{m:<6} {x[0]['parameters_m']:>9.1f} {x[0]['trainable_m']:>12.2f} {vals[0]:>10.0f} {vals[1]:>10.0f} "
              f"{vals[2]:>12.0f} {vals[3]:>14.0f} {vals[4]:>9.0f}")
    print(f"{'ratio':<6} {'':>9} {'':>12} {'':>10} {'':>10} {'':>12} {'':>14} {ratio:>9.2f}")
    out = {"command": command("memory.py"), "quick": args.quick, "model": args.model, "machine": info,
           "overrides": args.overrides, "micro_batch_size": rec["lora"][0]["micro_batch_size"],
           "gradient_checkpointing": rec["lora"][0]["gradient_checkpointing"],
           "rounds": args.rounds, "length": args.length, "lora": rec["lora"], "full": rec["full"],
           "ratios": rec["ratios"], "median_ratio": ratio,
           "median_peak_rss_mb": {m: median([y["peak_rss_mb"] for y in rec[m]]) for m in ("lora", "full")},
           "total_s": round(time.perf_counter() - t_start, 1)}
    name = "memory_quick" if args.quick else "memory"
    if any(o.startswith("model.gradient_checkpointing=true") for o in args.overrides):
        name += "_checkpointing"
    write(name, out, args.out)
    print(f"peak RSS of N=2 LoRA agents on one base vs two full models (load + generate + one training step, "
          f"micro-batch {out['micro_batch_size']}, gradient checkpointing {out['gradient_checkpointing']}, median of "
          f"{args.rounds} rounds): {ratio:.2f}x; target <= 0.6")


if __name__ == "__main__":
    main()
