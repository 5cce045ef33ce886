"""Whether Megatron-Core's `OptimizerConfig.__post_init__`
(megatron/core/optimizer/optimizer_config.py) accepts an optimizer section, with or without
Transformer Engine in the container.

Input (stdin): a JSON list of cases {"te": version or null, "optimizer": {field: value}} (a plan's
`optimizer` section; dtype fields by torch's name). Output (stdout): a JSON list, one object per
case: {"ok": true} or {"ok": false, "error": "TYPE: MESSAGE"}. Megatron-Core's class runs for
real, built with every field of the section it has. Transformer Engine, which this venv does not
carry, is absent for `"te": null` (its import fails, as in a container without it) and otherwise
stood in for by a module reporting the version with a `FusedAdam` whose keyword names are the
ones the post-init looks for.

    python tests/bridge/optimizer_post_init.py < cases.json
"""

import dataclasses
import json
import sys

import te_standin


class FusedAdam:
    """Transformer Engine's optimizer as the post-init inspects it: its keyword names."""

    def __init__(self, params, master_weight_dtype=None, exp_avg_dtype=None,
                 exp_avg_sq_dtype=None, use_decoupled_grad=False, store_param_remainders=False):
        pass


def set_te(version):
    """Transformer Engine of `version` for the next import, or none (`None`)."""
    te_standin.install(version, FusedAdam)


def main():
    import torch
    from megatron.core.optimizer.optimizer_config import OptimizerConfig

    fields = {f.name: f for f in dataclasses.fields(OptimizerConfig)}
    dtypes = {"main_grads_dtype", "main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype", "params_dtype"}
    out = []
    for case in json.load(sys.stdin):
        set_te(case["te"])
        kwargs = {}
        for name, value in case["optimizer"].items():
            if name not in fields or not fields[name].init:
                continue
            if name in dtypes and isinstance(value, str):
                value = getattr(torch, value)
            kwargs[name] = value
        try:
            OptimizerConfig(**kwargs)
            out.append({"ok": True})
        except (AssertionError, ValueError, RuntimeError) as e:
            out.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
