"""Transformer Engine for Megatron-Core's own checks in a venv that does not carry it: a module
reporting a version, with the `FusedAdam` class a script gives it, or none at all (its import then
fails, as in a container without it). Used by optimizer_post_init.py and param_remainders.py.
"""

import sys
import types

MODULES = ("transformer_engine", "transformer_engine.pytorch", "transformer_engine.pytorch.optimizers")


def install(version, fused_adam):
    """Transformer Engine of `version` (with `fused_adam` as its FusedAdam) for the next import,
    or none where `version` is None; Megatron-Core's cached version is dropped. Returns what it
    replaced, for `restore`."""
    import megatron.core.utils as mcore_utils

    saved = {name: sys.modules.get(name) for name in MODULES}
    mcore_utils._te_version = None
    if version is None:
        for name in MODULES:
            sys.modules[name] = None  # the import raises ImportError
        return saved
    te = types.ModuleType("transformer_engine")
    te.__version__ = version
    pytorch = types.ModuleType("transformer_engine.pytorch")
    optimizers = types.ModuleType("transformer_engine.pytorch.optimizers")
    optimizers.FusedAdam = fused_adam
    te.pytorch, pytorch.optimizers = pytorch, optimizers
    sys.modules.update(zip(MODULES, (te, pytorch, optimizers)))
    return saved


def restore(saved):
    """Puts back the modules `install` replaced."""
    import megatron.core.utils as mcore_utils

    mcore_utils._te_version = None
    for name, module in saved.items():
        if module is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = module
