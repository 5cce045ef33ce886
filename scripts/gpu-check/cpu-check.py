"""What the GPU check relies on, checked on a CPU machine (CI runs it; stdlib + the carried wheels).

Run with a Python 3.12 that has PyTorch (CPU is enough) and nothing of Transformer Engine,
ModelOpt or nvidia-resiliency-ext, with PYTHONPATH = scripts/gpu-check (the stand-ins) followed
by the folder the bundle's wheels were installed into, and the bundle's Hugging Face cache:

    python cpu-check.py PLAN_JSON

PLAN_JSON is `ovlaunch plan -o json` of the check's training job. It checks that
1. the three packages are absent (otherwise this proves nothing about the GPU machine),
2. every module a Bridge pretraining run imports imports, from the carried wheels,
3. Bridge's recipe function of the plan, with the plan's trainer overrides applied by Bridge's
   own override code and `runtime_config_update` run, builds the config, and the stand-ins made
   the model use Megatron-Core's non-TE layer spec,
so a GPU run cannot fail on a missing wheel, a stand-in or an override Bridge refuses.
"""

import importlib
import importlib.util
import json
import os
import sys

MODULES = (
    "megatron.bridge.training.pretrain",
    "megatron.bridge.training.setup",
    "megatron.bridge.training.train",
    "megatron.bridge.training.gpt_step",
    "megatron.bridge.training.checkpointing",
    "megatron.bridge.training.utils.omegaconf_utils",
    "megatron.bridge.recipes",
    "megatron.bridge.perf_recipes",
    "megatron.core.datasets.helpers",
    "megatron.core.optimizer",
    "megatron.core.dist_checkpointing",
)


def main():
    plan = json.load(open(sys.argv[1]))
    site = [p for p in sys.path if os.path.isdir(os.path.join(p, "megatron", "bridge"))]
    for pkg in ("transformer_engine", "modelopt", "nvidia_resiliency_ext"):
        assert importlib.util.find_spec(pkg) is None, f"{pkg} is installed: this check needs it absent"
    for m in MODULES:
        mod = importlib.import_module(m)
        assert site and mod.__file__.startswith(site[0]), f"{m} from {mod.__file__}, not the carried wheels"
    print(f"imports: {len(MODULES)} modules from {site[0]}")

    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    from megatron.bridge.training.config import runtime_config_update
    from megatron.bridge.training.utils.omegaconf_utils import process_config_with_overrides

    trainer = plan["trainer"]
    family = importlib.import_module("megatron.bridge.perf_recipes." + plan["recipe"]["family"])
    cfg = getattr(family, trainer["recipe"])()
    cfg = process_config_with_overrides(cfg, cli_overrides=list(trainer["overrides"]))
    cfg.model.seq_length = cfg.dataset.seq_length  # the runner's own step
    runtime_config_update(cfg)
    import megatron.bridge.models.gpt_provider as gp

    assert gp.transformer_engine_layer_spec is gp.local_layer_spec, "the layer-spec stand-in did not act"
    for k, v in plan["model"].items():
        if k in ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "seq_length"):
            assert getattr(cfg.model, k) == v, f"model.{k}: plan {v}, Bridge {getattr(cfg.model, k)}"
    print(f"config: {trainer['recipe']} with {len(trainer['overrides'])} overrides builds; non-TE layer spec")
    return 0


if __name__ == "__main__":
    sys.exit(main())
