"""Stand-ins for what cannot run on a CPU-only test machine, and nothing else.

* TransformerEngine and NVIDIA modelopt need CUDA to build or install, so neither is in the test
  virtualenv. Megatron-Core and Megatron-Bridge import them at module level (layer classes,
  recipe objects, version checks). `install()` registers an import hook that answers any
  `transformer_engine[.X]` / `modelopt[.X]` import with an empty module whose every attribute is
  an inert placeholder class. Only the import surface exists: calling into it does nothing
  useful, and nothing the configuration code computes comes from it except TE's version
  (`transformer_engine.__version__`, which Bridge's overlap and precision checks read through
  `megatron.core.utils.get_te_version`), set from OVLAUNCH_STUB_TE_VERSION (default: the
  TransformerEngine version ovlaunch's plan assumes by default, 2.14.0).
* There is no GPU: `fake_gpu(kind)` answers torch's CUDA *device queries* (count, name,
  compute capability, properties) for one GPU kind. No CUDA call is faked.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import types

STUBBED = ("transformer_engine", "modelopt")
TE_VERSION = os.environ.get("OVLAUNCH_STUB_TE_VERSION", "2.14.0")


class _Meta(type):
    """Attribute access on a placeholder gives another placeholder (`te.common.recipe.X`)."""

    def __getattr__(cls, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = _placeholder(name)
        setattr(cls, name, value)
        return value


class _Placeholder(metaclass=_Meta):
    """Any TE/modelopt class or function: constructible, subclassable, does nothing."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return self

    def __init_subclass__(cls, **kwargs):
        pass


def _placeholder(name: str):
    return type(name, (_Placeholder,), {"__module__": "ovlaunch_stubs"})


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        full = f"{self.__name__}.{name}"
        if full in sys.modules:
            return sys.modules[full]
        value = _placeholder(name)
        setattr(self, name, value)
        return value


class _FusedAdam(_Placeholder):
    """TE's FusedAdam constructor signature: Megatron-Core's OptimizerConfig inspects its
    parameters to decide whether the precision-aware optimizer is supported (TE >= 2.x)."""

    def __init__(self, params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-8,
                 adam_w_mode=True, weight_decay=0.0, amsgrad=False, set_grad_none=True,
                 capturable=False, master_weights=None, master_weight_dtype=None,
                 exp_avg_dtype=None, exp_avg_sq_dtype=None, use_decoupled_grad=False,
                 store_param_remainders=False):
        pass


# Members whose signature is read, not just imported.
SURFACE = {"transformer_engine.pytorch.optimizers": {"FusedAdam": _FusedAdam}}


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        if spec.name == "transformer_engine":
            module.__version__ = TE_VERSION
        if spec.name == "modelopt":
            module.__version__ = "0.44.0"
        for k, v in SURFACE.get(spec.name, {}).items():
            setattr(module, k, v)
        return module

    def exec_module(self, module):
        pass


def install() -> None:
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


# Device facts per GPU kind (public datasheet values): compute capability, name, SM count,
# memory. Only what torch.cuda's query functions return.
GPUS = {
    "h100": ((9, 0), "NVIDIA H100 80GB HBM3", 132, 80),
    "h200": ((9, 0), "NVIDIA H200", 132, 141),
    "b200": ((10, 0), "NVIDIA B200", 148, 180),
    "gb200": ((10, 0), "NVIDIA GB200", 152, 186),
    "b300": ((10, 3), "NVIDIA B300 SXM6 AC", 148, 270),
    "gb300": ((10, 3), "NVIDIA GB300", 152, 279),
    "vr200": ((11, 0), "NVIDIA VR200", 160, 288),
    # R100: none of these is published; compute capability 10 is the bound its Bridge recipes
    # imply (they run MXFP8 and NVFP4), as hardware/gpus.yaml states it. Its SM count and
    # memory are left out: a query for them fails rather than answer an invented number.
    "r100": ((10, 0), "NVIDIA R100", None, None),
}


def fake_gpu(kind: str, count: int = 8) -> None:
    import torch

    cap, name, sms, gib = GPUS[kind]
    props = types.SimpleNamespace(name=name, major=cap[0], minor=cap[1])
    if sms is not None:
        props.multi_processor_count = sms
    if gib is not None:
        props.total_memory = gib << 30
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: count
    torch.cuda.current_device = lambda: 0
    torch.cuda.get_device_capability = lambda device=None: cap
    torch.cuda.get_device_name = lambda device=None: name
    torch.cuda.get_device_properties = lambda device=None: props
