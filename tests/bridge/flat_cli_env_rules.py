"""Case-by-case agreement of ovlaunch's layout-coupled env re-derivation with Megatron-Bridge 0.6's
own flat-CLI compatibility code.

Bridge 0.6's performance scripts keep each flat recipe's `env_vars` and, when the user overrides
TP, CP, MoE all-to-all overlap, EP, PP or NCCL userbuffers on the command line, re-derive the
coupled variables with `_apply_flat_cli_environment_compatibility`
(`scripts/performance/utils/overrides.py`, in Bridge's repository, not its package). This script
takes that function (and the two helpers it calls) from a Bridge checkout, as Bridge's own code,
and runs it on generated inputs: every shipped ovlaunch row with each of these layout changes
(TP doubled or halved, CP doubled, PP to 1 or doubled, EP doubled or halved, all-to-all overlap
switched, NCCL userbuffers on). The same change goes to `ovlaunch plan --set ...`; the recipe env
Bridge's function starts from is the plan's `env_bridge_recipe` (equal to Bridge's recipe env on
every shipped row: the bridge_proof test), the effective layout is the plan's. The coupled
variables are compared name for name. A change ovlaunch refuses (the layout does not fit the GPUs,
or Bridge's own validation refuses it) is not a case.

Usage (any Python with PyYAML, e.g. the Bridge venv's):
    git -C BRIDGE checkout v0.6.0
    python tests/bridge/flat_cli_env_rules.py --bridge BRIDGE --ovlaunch target/release/ovlaunch
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import types
from pathlib import Path

COUPLED = {
    "tp": ["CUDA_DEVICE_MAX_CONNECTIONS"],
    "cp": ["CUDA_DEVICE_MAX_CONNECTIONS"],
    "a2a": ["CUDA_DEVICE_MAX_CONNECTIONS"],
    "ep": ["NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN"],
    "pp": ["NCCL_P2P_NET_CHUNKSIZE"],
    "nccl_ub": ["NCCL_NVLS_ENABLE", "NCCL_CTA_POLICY"],
}


def bridge_function(bridge: Path):
    """`_apply_flat_cli_environment_compatibility` and its helpers, from Bridge's file."""
    path = bridge / "scripts/performance/utils/overrides.py"
    tree = ast.parse(path.read_text())
    wanted = {"_set_recipe_env", "_remove_recipe_env", "_apply_flat_cli_environment_compatibility"}
    module = ast.Module(body=[n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted],
                        type_ignores=[])
    ns: dict = {"argparse": argparse, "ConfigContainer": object}
    exec(compile(module, str(path), "exec"), ns)  # noqa: S102 - Bridge's own code, run as it is
    return ns["_apply_flat_cli_environment_compatibility"]


def changes(model: dict, ddp: dict, co: dict) -> list[tuple[str, object, list[str]]]:
    tp, pp, cp, ep = (model[k] for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                                          "context_parallel_size", "expert_model_parallel_size"))
    a2a = bool((co or {}).get("overlap_moe_expert_parallel_comm"))
    out = [("tp", tp * 2, [f"model.tensor_model_parallel_size={tp * 2}"]),
           ("cp", cp * 2, [f"model.context_parallel_size={cp * 2}"]),
           ("pp", pp * 2, [f"model.pipeline_model_parallel_size={pp * 2}"]),
           ("ep", ep * 2, [f"model.expert_model_parallel_size={ep * 2}"]),
           ("a2a", not a2a, [f"comm_overlap.overlap_moe_expert_parallel_comm={str(not a2a).lower()}"]),
           ("nccl_ub", True, ["ddp.nccl_ub=true"])]
    if tp > 1:
        out.append(("tp", tp // 2, [f"model.tensor_model_parallel_size={tp // 2}"]))
    if pp > 1:
        out.append(("pp", 1, ["model.pipeline_model_parallel_size=1",
                              "model.virtual_pipeline_model_parallel_size=null"]))
    if ep > 1:
        out.append(("ep", ep // 2, [f"model.expert_model_parallel_size={ep // 2}"]))
    return out


def plan(ovlaunch: str, args: list[str]):
    r = subprocess.run([ovlaunch, "plan", *args, "-o", "json"], capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bridge", required=True, type=Path, help="a Megatron-Bridge 0.6 checkout")
    ap.add_argument("--ovlaunch", required=True)
    ap.add_argument("--recipes", type=Path, default=Path("recipes"))
    args = ap.parse_args()
    compat = bridge_function(args.bridge)
    import yaml  # the generated recipe files list the shipped rows

    rows = [yaml.safe_load(f.read_text()) for f in sorted(args.recipes.glob("*.yaml"))]
    cases = agree = 0
    differ = []
    for r in rows:
        for v in r["variants"]:
            base_args = ["--recipe", r["name"], "--gpus", f"{v['gpu']}x{v['num_gpus']}", "--precision", v["precision"]]
            if v.get("variant"):
                base_args += ["--variant", v["variant"]]
            base = plan(args.ovlaunch, base_args)
            if base is None:
                continue
            backend = base["model"].get("moe_flex_dispatcher_backend") if base["model"].get("num_moe_experts") else None
            base_a2a = bool(base["model"].get("overlap_moe_expert_parallel_comm"))
            for flag, value, sets in changes(base["model"], base["ddp"], base.get("comm_overlap")):
                p = plan(args.ovlaunch, base_args + [w for s in sets for w in ("--set", s)])
                if p is None:
                    continue
                ns = argparse.Namespace(
                    gpu=v["gpu"], model_family_name=base["recipe"]["family"],
                    model_recipe_name=base["recipe"]["model_recipe"], task=base["recipe"]["task"] or "pretrain",
                    tensor_model_parallel_size=value if flag == "tp" else None,
                    context_parallel_size=value if flag == "cp" else None,
                    moe_a2a_overlap=value if flag == "a2a" else None,
                    expert_model_parallel_size=value if flag == "ep" else None,
                    pipeline_model_parallel_size=value if flag == "pp" else None,
                    nccl_ub=True if flag == "nccl_ub" else None,
                )
                recipe = types.SimpleNamespace(model=types.SimpleNamespace(**p["model"]),
                                               env_vars=dict(base.get("env_bridge_recipe", {})))
                cases += 1
                try:
                    compat(recipe, ns, base_dispatcher_backend=backend, base_moe_a2a_overlap=base_a2a)
                except ValueError as e:  # Bridge refuses what ovlaunch accepted
                    differ.append((base_args, sets, f"refused: {e}", p["env"]))
                    continue
                theirs = {k: str(recipe.env_vars[k]) for k in COUPLED[flag] if k in recipe.env_vars}
                ours = {k: p["env"][k]["value"] for k in COUPLED[flag] if k in p["env"]}
                if theirs == ours:
                    agree += 1
                else:
                    differ.append((base_args, sets, theirs, ours))
    print(f"{cases} layout changes of the shipped rows that ovlaunch accepts; the coupled variables agree "
          f"with Bridge's flat-CLI compatibility code on {agree} ({100.0 * agree / max(cases, 1):.1f}%)")
    for base_args, sets, theirs, ours in differ[:8]:
        print(f"  {' '.join(base_args)} {' '.join(sets)}: Bridge {theirs}, ovlaunch {ours}")
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
