"""Whether Megatron-Core accepts a model's sizes where it checks them only when it builds the
model or runs its first step, on CPU with tiny other sizes:

* "router": the experts' scores of 4 tokens routed by `topk_routing_with_score_function`
  (megatron/core/transformer/moe/moe_utils.py, what `TopKRouter.routing` calls), for
  `num_moe_experts` and `moe_router_topk`;
* "attention": the local GPT layer spec's self-attention built (`Attention.__init__`) and run
  on 4 tokens up to its QKV split (`SelfAttention.get_query_key_value_tensors`), for
  `num_attention_heads`, `num_query_groups` and `tensor_model_parallel_size` 1; a later
  failure for want of a GPU counts as accepted (the split is behind it);
* "mamba": `MambaMixer.__init__` (megatron/core/ssm/mamba_mixer.py) with `fp8` set or not, for
  `mamba_num_heads`, `mamba_head_dim`, `mamba_num_groups`, `mamba_state_dim`. The mamba_ssm
  kernels this venv lacks are reported present so that the constructor reaches its own size
  asserts; what fails after them (no layer specs given) counts as accepted.

Input (stdin): a JSON list of {"kind": ..., field: value, ...}. Output (stdout): a JSON list,
one object per case: {"ok": true} or {"ok": false, "error": "TYPE: MESSAGE"}.

    python tests/bridge/build_refusals.py < cases.json
"""

import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")


def setup():
    """One CPU rank with every model-parallel size 1."""
    import torch.distributed as dist
    from megatron.core import parallel_state

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(20000 + os.getpid() % 20000))
    dist.init_process_group("gloo", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)


def router(case):
    import torch
    from megatron.core.transformer.moe.moe_utils import topk_routing_with_score_function

    scores = torch.randn(4, case["num_moe_experts"])
    topk_routing_with_score_function(
        scores, topk=case["moe_router_topk"], use_pre_softmax=False, score_function="softmax")


def attention(case):
    import torch
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.spec_utils import build_module
    from megatron.core.transformer.transformer_config import TransformerConfig

    heads = case["num_attention_heads"]
    config = TransformerConfig(
        num_layers=1, hidden_size=2 * heads, num_attention_heads=heads,
        num_query_groups=case["num_query_groups"], use_cpu_initialization=True)
    spec = get_gpt_layer_local_spec().submodules.self_attention
    module = build_module(spec, config=config, layer_number=1)
    try:
        module(torch.randn(4, 1, 2 * heads), attention_mask=None)
    except RuntimeError as e:
        if "NVIDIA" not in str(e) and "CUDA" not in str(e):
            raise


def mamba(case):
    import megatron.core.ssm.mamba_mixer as mixer
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.transformer.transformer_config import TransformerConfig

    mixer.HAVE_MAMBA_SSM = True
    config = TransformerConfig(
        num_layers=1, hidden_size=64, num_attention_heads=2, use_cpu_initialization=True,
        mamba_num_heads=case["mamba_num_heads"], mamba_head_dim=case["mamba_head_dim"],
        mamba_num_groups=case["mamba_num_groups"], mamba_state_dim=case["mamba_state_dim"])
    config.fp8 = "hybrid" if case["fp8"] else None
    try:
        mixer.MambaMixer(config, mixer.MambaMixerSubmodules(), d_model=64, layer_number=1,
                         pg_collection=ProcessGroupCollection.use_mpu_process_groups())
    except AssertionError:
        raise
    except Exception:
        pass  # past the size asserts


def main():
    cases = json.load(sys.stdin)
    setup()
    rows = []
    for case in cases:
        try:
            {"router": router, "attention": attention, "mamba": mamba}[case["kind"]](case)
            rows.append({"ok": True})
        except Exception as e:  # noqa: BLE001 - the row reports what upstream raised
            rows.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
    json.dump(rows, sys.stdout)


if __name__ == "__main__":
    main()
