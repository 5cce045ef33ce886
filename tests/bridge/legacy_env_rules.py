"""Case-by-case agreement of ovlaunch's env rules with Megatron-Bridge's own rule code.

Bridge's performance env rules lived in `PerfEnvPlugin` (`scripts/performance/perf_plugins.py`,
release tags v0.2.0 to v0.5.1), which is in Bridge's repository, not its package. This script
loads that file from a Bridge checkout, runs the plugin's `setup` on generated inputs the way
`setup_experiment.py` did (an executor whose env is the baseline `PERF_ENV_VARS` of
`utils/executors.py` beside it, plus `NCCL_NVLS_ENABLE=1`, `NCCL_CTA_POLICY=1` under `--nccl_ub`),
runs ovlaunch's rules on the same inputs (`cargo run --example env_rules`), and compares the
resulting env name for name. A case both refuse (HybridEP with EP > 72 on an NVL72 kind) agrees.

Stand-ins, nothing else: the NeMo-Run classes the plugin file imports (`Plugin`, `Script`,
`SlurmExecutor`: a base class, a task with an argument list, an executor with an env map) and
`get_workload_base_config`, which returns the generated case's workload fields. The launcher-only
knobs of the baseline (`TRANSFORMERS_OFFLINE`, `TOKENIZERS_PARALLELISM`, `HF_HUB_OFFLINE`) are not
workload env and are left out of the comparison; ovlaunch's rule 0 (CPU offload v1) came after
v0.5.1 and is off in every case.

Usage:
    git -C BRIDGE checkout v0.5.1
    cargo build --release --example env_rules
    python3 tests/bridge/legacy_env_rules.py --bridge BRIDGE --rules target/release/examples/env_rules \
        [--cases 5000] [--seed 0]
Prints the number of cases, how many agree, and the first differences.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib.util
import json
import random
import subprocess
import sys
import types
from pathlib import Path

MODELS = [
    ("llama", "llama3_8b"),
    ("llama", "llama3_70b"),
    ("llama", "llama31_405b"),
    ("deepseek", "deepseek_v3"),
    ("kimi", "kimi_k2"),
    ("gpt_oss", "gpt_oss_20b"),
    ("gpt_oss", "gpt_oss_120b"),
    ("qwen", "qwen3_30b_a3b"),
    ("qwen", "qwen3_235b_a22b"),
    ("nemotronh", "nemotron_3_nano"),
]
GPUS = ["h100", "b200", "b300", "gb200", "gb300", "vr200"]
DTYPES = ["bf16", "fp8_cs", "fp8_ds", "fp8_mx", "fp8_sc", "nvfp4"]
LAUNCHER_ONLY = {"TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM", "HF_HUB_OFFLINE"}


def generate(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    cases = []
    for _ in range(n):
        family, recipe = rng.choice(MODELS)
        impl = rng.choice(["none", "local", "transformer_engine", "full_iteration"])
        cases.append(
            {
                "gpu": rng.choice(GPUS),
                "family": family,
                "model_recipe": recipe,
                "task": rng.choice(["pretrain", "pretrain", "sft"]),
                "compute_dtype": rng.choice(DTYPES),
                "tp": rng.choice([1, 2, 4, 8]),
                "pp": rng.choice([1, 2, 4, 8]),
                "cp": rng.choice([1, 1, 2]),
                "ep": rng.choice([1, 4, 8, 16, 32, 64, 72, 128]),
                "moe_a2a_overlap": rng.random() < 0.3,
                "flex_backend": rng.choice([None, None, "deepep", "hybridep"]),
                "cuda_graph_impl": impl,
                "cuda_graph_scope": rng.choice([[], ["attn"], ["full_iteration"]]),
                "cutedsl_fused_grouped_mlp": rng.random() < 0.3,
                "fine_grained_activation_offloading": False,
                "nccl_ub": rng.random() < 0.2,
                "use_megatron_fsdp": rng.random() < 0.2,
            }
        )
    return cases


def load_plugin(bridge: Path):
    """Bridge's perf_plugins.py with the NeMo-Run classes it imports stood in."""
    current: dict = {}

    class Plugin:  # NeMo-Run's base class: a keyword dataclass base
        pass

    class Script:
        def __init__(self):
            self.args: list[str] = []

    class SlurmExecutor:
        pass

    nemo_run = types.ModuleType("nemo_run")
    nemo_run.Plugin, nemo_run.Script, nemo_run.SlurmExecutor = Plugin, Script, SlurmExecutor
    nemo_run.Partial = nemo_run.Executor = object
    sys.modules["nemo_run"] = nemo_run

    utils = types.ModuleType("utils")
    utils_utils = types.ModuleType("utils.utils")

    @dataclasses.dataclass
    class WorkloadBaseConfig:
        pass

    utils_utils.WorkloadBaseConfig = WorkloadBaseConfig
    utils_utils.get_workload_base_config = lambda *a, **k: types.SimpleNamespace(**current)
    utils.utils = utils_utils
    sys.modules["utils"], sys.modules["utils.utils"] = utils, utils_utils

    path = bridge / "scripts/performance/perf_plugins.py"
    spec = importlib.util.spec_from_file_location("bridge_perf_plugins", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    # the executor baseline, read as data from executors.py (that module needs all of NeMo-Run)
    tree = ast.parse((bridge / "scripts/performance/utils/executors.py").read_text())
    baseline = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "PERF_ENV_VARS" for t in node.targets)
    )
    return module, Script, current, baseline


def bridge_env(module, Script, current: dict, baseline: dict, case: dict):
    current.clear()
    current.update(
        moe_flex_dispatcher_backend=case["flex_backend"],
        cuda_graph_impl=case["cuda_graph_impl"],
        cuda_graph_scope=case["cuda_graph_scope"],
        cutedsl_fused_grouped_mlp=case["cutedsl_fused_grouped_mlp"],
        moe_a2a_overlap=case["moe_a2a_overlap"],
        nccl_ub=case["nccl_ub"],
        use_megatron_fsdp=case["use_megatron_fsdp"],
        tensor_model_parallel_size=case["tp"],
        pipeline_model_parallel_size=case["pp"],
        context_parallel_size=case["cp"],
        expert_model_parallel_size=case["ep"],
    )
    executor = types.SimpleNamespace(env_vars=dict(baseline))
    if case["nccl_ub"]:  # setup_experiment.py's custom env under --nccl_ub
        executor.env_vars.update({"NCCL_NVLS_ENABLE": "1", "NCCL_CTA_POLICY": "1"})
    plugin = module.PerfEnvPlugin(
        model_family_name=case["family"],
        model_recipe_name=case["model_recipe"],
        gpu=case["gpu"],
        compute_dtype=case["compute_dtype"],
        train_task=case["task"],
        tp_size=case["tp"],
        pp_size=case["pp"],
        cp_size=case["cp"],
        ep_size=case["ep"],
        moe_a2a_overlap=case["moe_a2a_overlap"],
    )
    try:
        plugin.setup(Script(), executor)
    except AssertionError as e:
        return {"error": str(e)}
    return {"env": {k: v for k, v in executor.env_vars.items() if k not in LAUNCHER_ONLY}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bridge", required=True, type=Path, help="a Megatron-Bridge checkout with PerfEnvPlugin")
    ap.add_argument("--rules", required=True, help="ovlaunch's env_rules example binary")
    ap.add_argument("--cases", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cases = generate(args.cases, args.seed)
    module, Script, current, baseline = load_plugin(args.bridge)
    theirs = [bridge_env(module, Script, current, baseline, c) for c in cases]
    run = subprocess.run([args.rules], input=json.dumps(cases), capture_output=True, text=True, check=True)
    ours = json.loads(run.stdout)
    agree, differ = 0, []
    for case, t, o in zip(cases, theirs, ours):
        if ("error" in t and "error" in o) or (t.get("env") is not None and t.get("env") == o.get("env")):
            agree += 1
        else:
            differ.append((case, t, o))
    refused = sum("error" in t for t in theirs)
    print(f"{len(cases)} generated cases ({refused} refused by Bridge); ovlaunch agrees on {agree} "
          f"({100.0 * agree / len(cases):.1f}%)")
    for case, t, o in differ[:5]:
        te, oe = t.get("env", t), o.get("env", o)
        keys = sorted(set(te) | set(oe)) if isinstance(te, dict) and isinstance(oe, dict) else []
        diff = {k: (te.get(k), oe.get(k)) for k in keys if te.get(k) != oe.get(k)}
        print(f"  {json.dumps(case)}\n    Bridge vs ovlaunch: {diff or (t, o)}")
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
