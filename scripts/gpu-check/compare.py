"""The GPU check's comparisons and its CSV (scripts/gpu-check/run.sh calls it; std library + PyYAML).

1. Config: every field `ovlaunch plan -o json` states in the sections Bridge's ConfigContainer has
   (model, train, ddp, optimizer, comm_overlap, mixed_precision) against Bridge's own record of
   the config it trained with, `run_config.yaml` in the job's checkpoint (or, for a job that
   saved none, the same record written by sitecustomize.py). Nothing is skipped:
   a plan field Bridge's record lacks is reported as such.
2. Environment: `ovlaunch env --format json` (a value, or null for a variable the job removes)
   against the environment the trainer process started with (the last Python process of rank 0
   running Bridge's runner: after the rank runtime and the runner's own re-execution). Variables
   the trainer has beyond the launching shell's and the plan's are listed with their values.
3. Measurements: per job, the median step time of the steps after warm-up (from Bridge's log
   lines), tokens/s, the CUDA memory peaks (torch.cuda.max_memory_allocated/_reserved at exit),
   next to `ovlaunch estimate`'s prediction, as a CSV with the GPU, driver and package versions.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import re
import statistics
import sys

import yaml

SECTIONS = ("model", "train", "ddp", "optimizer", "comm_overlap", "mixed_precision")
STEP = re.compile(
    r"iteration\s+(\d+)/\s*\d+ \|.*?elapsed time per iteration \(ms\): ([0-9.]+) \|.*?lm loss: ([0-9.E+-]+)"
)
WARMUP = 3  # steps left out of the median: allocator warm-up, the first optimizer step
GIB = 1024**3


def normal(v):
    """Bridge's YAML form of a value -> the plan's JSON form."""
    if isinstance(v, dict) and "_target_" in v:
        t = v["_target_"]
        if t.startswith("torch.") and v.get("_call_") is False:
            return t[len("torch.") :]
        if t == "signal.Signals":
            return v.get("_name_")
        return {k: normal(x) for k, x in v.items() if k not in ("_target_", "_call_")}
    if isinstance(v, dict):
        return {k: normal(x) for k, x in v.items()}
    if isinstance(v, list):
        return [normal(x) for x in v]
    return v


def same(p, b):
    if isinstance(p, bool) or isinstance(b, bool):
        return p == b
    if isinstance(p, (int, float)) and isinstance(b, (int, float)):
        return abs(p - b) <= 1e-12 * max(abs(p), 1.0)
    if isinstance(p, list) and isinstance(b, list):
        return len(p) == len(b) and all(same(x, y) for x, y in zip(p, b))
    if isinstance(p, dict) and isinstance(b, dict):
        return all(k in b and same(v, b[k]) for k, v in p.items())
    return p == b


# What sitecustomize.py (part 2) sets on the model for want of Transformer Engine, and prints as
# it does: a plan field Bridge's record holds at this value is the stand-in's, not a difference.
STAND_IN = {
    "model.apply_rope_fusion": False,
    "model.masked_softmax_fusion": False,
    "model.persist_layer_norm": False,
    "model.cross_entropy_fusion_impl": "native",
}


def compare_config(plan, run_config):
    diffs, n = [], 0
    for s in SECTIONS:
        ps, bs = plan.get(s), normal(run_config.get(s))
        if not isinstance(ps, dict):
            continue
        for k, pv in ps.items():
            n += 1
            if not isinstance(bs, dict) or k not in bs:
                diffs.append(f"{s}.{k}: plan {json.dumps(pv)} / not in Bridge's record")
            elif not same(pv, bs[k]):
                why = " (the stand-in's, for want of TE)" if STAND_IN.get(f"{s}.{k}", pv) == bs[k] else ""
                diffs.append(f"{s}.{k}: plan {json.dumps(pv)} / Bridge {json.dumps(bs[k])}{why}")
    return n, diffs


def load_yaml(path):
    with open(path) as f:
        text = f.read()
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return yaml.load(text, Loader=yaml.FullLoader)


def trainer_env(dump):
    best = None
    for f in glob.glob(os.path.join(dump, "env-*.json")):
        d = json.load(open(f))
        if len(d["argv"]) > 0 and d["argv"][0].endswith("run_recipe.py"):
            key = int(os.path.basename(f).split("-")[2].split(".")[0])
            if best is None or key > best[0]:
                best = (key, d["env"])
    return best[1] if best else None


def compare_env(planned, env, outer):
    diffs, extra = [], []
    # `ovlaunch env` is the plan's: a value naming the job directory holds `{job_dir}`, which
    # the rendered job replaces with the directory the trainer reports as OVLAUNCH_JOB_DIR
    job_dir = env.get("OVLAUNCH_JOB_DIR")
    for k, v in planned.items():
        if v is not None and job_dir and "{job_dir}" in v:
            v = v.replace("{job_dir}", job_dir)
        if v is None and k in env:
            diffs.append(f"{k}: the plan removes it / trainer {env[k]!r}")
        elif v is not None and env.get(k) != v:
            diffs.append(f"{k}: plan {v!r} / trainer {env.get(k)!r}")
    for k in sorted(env):
        if k not in planned and outer.get(k) != env[k]:
            extra.append(f"{k}={env[k]}")
    return diffs, extra


def steps(log):
    out = []
    if os.path.exists(log):
        for line in open(log, errors="replace"):
            m = STEP.search(line)
            if m:
                out.append((int(m.group(1)), float(m.group(2)), float(m.group(3))))
    return out


def estimate_args(path):
    """The job's `ovlaunch estimate` arguments (one per line in the file), less the flags that
    only place the trainer and its checkpoints, shell-quoted."""
    import shlex

    words = open(path).read().splitlines() if os.path.exists(path) else []
    out, skip = [], False
    for i, w in enumerate(words):
        if skip:
            skip = False
            continue
        if w in ("--bridge-root", "--torch-version"):
            skip = True
            continue
        if w == "--set" and i + 1 < len(words) and words[i + 1].startswith("checkpoint."):
            skip = True
            continue
        out.append(w)
    return shlex.join(out)


def peaks(dump):
    for f in glob.glob(os.path.join(dump, "mem-*.json")):
        d = json.load(open(f))
        if d["argv"] and d["argv"][0].endswith("run_recipe.py"):
            return d
    return None


def outside(mem):
    """GiB the job's process held on the GPU outside PyTorch's allocator at exit, or ''."""
    if not mem or mem.get("device_used_at_exit_mib") is None or mem.get("device_used_at_turn_mib") is None:
        return ""
    used = (mem["device_used_at_exit_mib"] - mem["device_used_at_turn_mib"]) * 2**20
    held = (used - mem["reserved_at_exit"]) / GIB
    # Below zero, the turn's reading still counted the previous job's memory: no reading.
    return round(held, 3) if held >= 0 else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--driver", required=True)
    ap.add_argument("--versions", required=True)
    a = ap.parse_args()
    logs = os.path.join(a.work, "logs")
    outer = {k: v for k, v in os.environ.items() if k != "OVL_CHECK_DUMP"}
    versions = dict(kv.split("=", 1) for kv in a.versions.split())

    # 1. config, on the jobs that wrote a checkpoint (train and resume share one directory)
    records = {
        "train": os.path.join("train", "checkpoints", "iter_0000020"),
        "resume": os.path.join("train", "checkpoints", "iter_0000030"),
        "preempt": os.path.join("preempt", "checkpoints", "iter_*"),
    }
    for plan_f in sorted(glob.glob(os.path.join(logs, "*.plan.json"))):
        job = os.path.basename(plan_f)[: -len(".plan.json")]
        # The checkpoint's record where the job saved one, else the one the trainer wrote.
        saved = os.path.join(a.work, "jobs", records[job], "run_config.yaml") if job in records else None
        recs = sorted(glob.glob(saved)) if saved else []
        recs = recs or glob.glob(os.path.join(a.work, "dump", job, "run_config.yaml"))
        if not recs:
            print(f"config {job}: no run_config.yaml to compare")
            continue
        n, diffs = compare_config(json.load(open(plan_f)), load_yaml(recs[-1]))
        where = os.path.relpath(recs[-1], a.work)
        stand_in = sum(d.endswith("for want of TE)") for d in diffs)
        print(f"config {job}: {n} plan fields against {where}: {n - len(diffs)} equal, "
              f"{stand_in} set by the stand-in, {len(diffs) - stand_in} differ")
        for d in diffs:
            print(f"  {d}")

    # 2. environment
    rows = []
    for plan_env in sorted(glob.glob(os.path.join(logs, "*.env.json"))):
        job = os.path.basename(plan_env)[: -len(".env.json")]
        env = trainer_env(os.path.join(a.work, "dump", job))
        if env is None:
            print(f"env {job}: the trainer's environment was not recorded")
            continue
        diffs, extra = compare_env(json.load(open(plan_env)), env, outer)
        planned = json.load(open(plan_env))
        print(f"env {job}: {len(planned)} planned variables, {len(planned) - len(diffs)} as planned, {len(diffs)} not")
        for d in diffs:
            print(f"  differs: {d}")
        if job == "train":
            print(f"  also in the trainer's environment (set by the script, torchrun, the rank runtime or Bridge's runner): {len(extra)}")
            for e in extra:
                print(f"    {e}")

    # 3. measurements
    for est_f in sorted(glob.glob(os.path.join(logs, "*.estimate.json"))):
        job = os.path.basename(est_f)[: -len(".estimate.json")]
        if job in ("resume", "preempt") or (job == "train" and os.path.exists(os.path.join(logs, "base.args"))):
            continue
        plan = json.load(open(os.path.join(logs, f"{job}.plan.json")))
        est = json.load(open(est_f))
        s = steps(os.path.join(logs, f"{job}.log"))
        timed = [ms for it, ms, _ in s if it > WARMUP]
        mem = peaks(os.path.join(a.work, "dump", job))
        m, t = plan["model"], plan["train"]
        med = statistics.median(timed) if timed else None
        tokens = t["global_batch_size"] * m["seq_length"]
        rows.append({
            "gpu": a.gpu, "driver": a.driver, "torch": versions.get("torch"), "cuda": versions.get("cuda"),
            "megatron_core": versions.get("megatron-core"), "megatron_bridge": versions.get("megatron-bridge"),
            "transformer_engine": "none (Megatron-Core local layer spec)",
            "job": job, "num_layers": m["num_layers"], "hidden_size": m["hidden_size"],
            "ffn_hidden_size": m["ffn_hidden_size"], "num_attention_heads": m["num_attention_heads"],
            "num_query_groups": m["num_query_groups"], "vocab_size": m["vocab_size"], "seq_length": m["seq_length"],
            "tied_embeddings": m.get("share_embeddings_and_output_weights", ""), "recipe": plan["trainer"]["recipe"],
            "micro_batch_size": t["micro_batch_size"], "global_batch_size": t["global_batch_size"],
            "recompute": m.get("recompute_granularity") or "none", "precision": plan["recipe"]["precision"],
            "num_moe_experts": m.get("num_moe_experts") or "", "moe_router_topk": m.get("moe_router_topk") or "",
            "moe_ffn_hidden_size": m.get("moe_ffn_hidden_size") or "",
            "recompute_modules": " ".join(m.get("recompute_modules") or [])
            if m.get("recompute_granularity") == "selective" else "",
            "steps_timed": len(timed),
            "step_ms_median": round(med, 1) if med else "",
            "tokens_per_s": round(tokens / (med / 1000.0)) if med else "",
            "max_allocated_gib": round(mem["max_allocated"] / GIB, 3) if mem else "",
            "max_reserved_gib": round(mem["max_reserved"] / GIB, 3) if mem else "",
            "outside_allocator_gib": outside(mem),
            "estimate_args": estimate_args(os.path.join(logs, f"{job}.args")),
            "estimate_step_ms": round(est["step_time_s"] * 1000.0, 1),
            "estimate_memory_gib": round(est["memory_gib_per_gpu"], 3),
        })
    if rows:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        for r in rows:
            print(
                f"measured {r['job']}: {r['step_ms_median']} ms/step ({r['steps_timed']} steps), "
                f"{r['tokens_per_s']} tokens/s, peak {r['max_allocated_gib']} GiB allocated / "
                f"{r['max_reserved_gib']} reserved; estimate {r['estimate_step_ms']} ms, {r['estimate_memory_gib']} GiB"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
