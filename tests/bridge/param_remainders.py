"""Whether Megatron-Core builds Transformer Engine's FusedAdam to keep each FP32 master weight as
the 16-bit remainder its BF16 parameter lacks (`store_param_remainders`).

Input (stdin): a JSON list of cases {"te": version, "precision_aware": bool, "fp8_recipe": str or
null, "main_params_dtype": "float32" | "float16", "store_param_remainders": bool, "bf16": bool}.
Output (stdout): a JSON list, one object per case: the flags `OptimizerConfig.__post_init__`
(megatron/core/optimizer/optimizer_config.py) leaves, the keyword arguments
`_get_megatron_optimizer_based_on_param_groups` (megatron/core/optimizer/__init__.py) builds the
Adam class with, and `remainders`: whether `FusedAdam` then keeps remainders for BF16
parameters. Megatron-Core's code runs for real; Transformer Engine, which this venv does not
carry, is stood in for by a module reporting the case's version and a `FusedAdam` that records
its arguments (the post-init checks its keyword names) and stops there. Transformer Engine's own
rule is stated here from its source (transformer_engine/pytorch/optimizers/fused_adam.py):
`FusedAdam.__init__` keeps remainders when `store_param_remainders and master_weights and
master_weight_dtype == torch.float32`, and `FusedAdam.step` for parameters whose dtype is
`torch.bfloat16`. The estimator's rule (`estimate::master_weight_remainders`) is held to this by
tests/it/estimate.rs.

    python tests/bridge/param_remainders.py < cases.json
"""

import json
import sys

import te_standin


class Built(Exception):
    """The Adam class was called."""


def stand_in_fused_adam():
    """Transformer Engine's FusedAdam as Megatron-Core builds it, recording its
    arguments (for `te_standin.install`)."""
    import torch

    class FusedAdam:
        def __init__(
            self,
            params,
            lr=1e-3,
            betas=(0.9, 0.999),
            eps=1e-8,
            weight_decay=0.0,
            amsgrad=False,
            *,
            bias_correction=True,
            adam_w_mode=True,
            capturable=False,
            master_weights=False,
            master_weight_dtype=torch.float32,
            exp_avg_dtype=torch.float32,
            exp_avg_sq_dtype=torch.float32,
            use_decoupled_grad=False,
            store_param_remainders=False,
        ):
            raise Built(
                dict(
                    master_weights=master_weights,
                    master_weight_dtype=str(master_weight_dtype),
                    store_param_remainders=store_param_remainders,
                )
            )

    return FusedAdam


def run_case(c):
    import torch
    from megatron.core import optimizer as opt
    from megatron.core.optimizer.optimizer_config import OptimizerConfig

    fused_adam = stand_in_fused_adam()
    saved = te_standin.install(c["te"], fused_adam)
    adam, pytorch_fallback = opt.Adam, opt.USING_PYTORCH_OPTIMIZER
    opt.Adam, opt.USING_PYTORCH_OPTIMIZER = fused_adam, False
    try:
        cfg = OptimizerConfig(
            optimizer="adam",
            lr=1e-4,
            use_distributed_optimizer=True,
            use_precision_aware_optimizer=c["precision_aware"],
            bf16=c["bf16"],
            fp8_recipe=c["fp8_recipe"],
            main_params_dtype=getattr(torch, c["main_params_dtype"]),
            store_param_remainders=c["store_param_remainders"],
        )
        row = {
            "no_fp8_or_ds_fp8": cfg.use_precision_aware_optimizer_no_fp8_or_ds_fp8,
            "store_param_remainders": cfg.store_param_remainders,
        }
        param = torch.nn.Parameter(torch.zeros(2, dtype=torch.bfloat16 if c["bf16"] else torch.float32))
        try:
            opt._get_megatron_optimizer_based_on_param_groups(cfg, [], [{"params": [param]}])
            raise AssertionError("the Adam class was not called")
        except Built as b:
            kwargs = b.args[0]
        row["fused_adam"] = kwargs
        # Transformer Engine's FusedAdam.__init__ and .step
        row["remainders"] = bool(
            kwargs["store_param_remainders"]
            and kwargs["master_weights"]
            and kwargs["master_weight_dtype"] == "torch.float32"
            and param.dtype == torch.bfloat16
        )
        return row
    finally:
        opt.Adam, opt.USING_PYTORCH_OPTIMIZER = adam, pytorch_fallback
        te_standin.restore(saved)


def main() -> int:
    import logging
    import warnings

    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    json.dump([run_case(c) for c in json.load(sys.stdin)], sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
