"""Stand-ins of the GPU check (scripts/gpu-check), loaded by Python at start-up from PYTHONPATH.

The check's machine has a GPU, PyTorch and CUDA but not Transformer Engine, NVIDIA modelopt or
nvidia-resiliency-ext, and none can be carried to it. Megatron-Bridge 0.6.2 needs them in two ways;
each stand-in below covers one, prints itself on stderr when it acts, and does nothing else:

1. Import surface. A few Bridge modules import these packages at module level, unguarded (e.g.
   `megatron/bridge/peft/lora_layers.py`: `import transformer_engine.pytorch as te`), although a
   pretraining run with LoRA, distillation and in-process restart off never calls into them. Such
   an import statement (unindented, in a `megatron.bridge.*` module) receives an inert placeholder
   module: its classes are classes no object is an instance of, its functions do nothing and
   return None, which is what the entry points Bridge calls unconditionally do for a model with
   no ModelOpt state (`save_sharded_modelopt_state`, `restore_modelopt_state`,
   `get_tensor_shapes_adjust_fn_for_distillation`). Every other import of them (Megatron-Core's, Bridge's guarded `try:` imports, imports
   inside functions) still fails, so Megatron-Core and Bridge see the packages absent, and nothing
   is placed in `sys.modules`.
2. Layer spec. Bridge's GPT provider always builds Transformer Engine layers
   (`gpt_provider.default_layer_spec`); without TE this swaps in Megatron-Core's non-TE spec
   (`gpt_provider.local_layer_spec`, Bridge's own function), and before the model config is
   finalized turns off the fusions whose kernels come only with TE or Apex: `apply_rope_fusion`,
   `masked_softmax_fusion`, `persist_layer_norm` (the torch norm refuses it) and the TE
   cross-entropy kernel (`cross_entropy_fusion_impl` "te" -> "native"). The plan states the rest
   (`gradient_accumulation_fusion`, `cross_entropy_loss_fusion`) through `--set`.

3. One GPU, several jobs (not a stand-in: the check's scheduling). The grid starts its jobs at once,
   so their imports and Bridge's configuration (most of a small job's minute) overlap; when
   OVL_GPU_LOCK names a file, Bridge's `pretrain` first waits for an exclusive lock on it and
   holds it until the process exits, so only one job at a time initializes, trains and measures
   on the GPU. The first job to get it also waits (at most OVL_GPU_SETTLE_S seconds) until all
   OVL_GPU_JOBS jobs are waiting, so no import competes with its timed steps for the CPU. A job
   whose turn has not come by OVL_GPU_DEADLINE (seconds since the epoch) exits 75 untrained.

When OVL_CHECK_DUMP names a directory, every Python process of rank 0 also writes the environment
it started with (`env-<pid>.json`) and, at exit, the CUDA memory peaks it saw (`mem-<pid>.json`);
the trainer writes the configuration it trains with as Bridge's checkpoints record it
(`run_config.yaml`: `ConfigContainer.to_yaml` right after `runtime_config_update`), so a job that
saves no checkpoint is compared too.
"""

import builtins
import fcntl
import importlib.abc
import importlib.util
import json
import linecache
import os
import sys
import time
import types

_ABSENT = ("transformer_engine", "modelopt", "nvidia_resiliency_ext")


def _say(msg):
    print(f"[gpu-check stand-in] {msg}", file=sys.stderr, flush=True)


def _missing(name):
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):
        return True


class _Inert(type):
    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _inert_class(name)


def _inert_class(name):
    def _init(self, *a, **k):
        pass

    return _Inert(name, (), {"__init__": _init, "__module__": "gpu_check_placeholder"})


class _InertModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return None

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        if name[:1].islower():
            return _InertModule(f"{self.__name__}.{name}")
        return _inert_class(name)


_STUBBED = [p for p in _ABSENT if _missing(p)]
_real_import = builtins.__import__
_seen = set()


def _unguarded_module_level(frame):
    if frame is None or frame.f_code.co_name != "<module>":
        return False
    caller = frame.f_globals.get("__name__", "")
    if not caller.startswith("megatron.bridge."):
        return False
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    return line[:1] in ("i", "f")  # `import ...` / `from ...` at column 0: no try, no def


def _import(name, globals=None, locals=None, fromlist=(), level=0):
    top = name.split(".")[0]
    if level == 0 and top in _STUBBED and _unguarded_module_level(sys._getframe(1)):
        caller = sys._getframe(1).f_globals.get("__name__")
        if (caller, name) not in _seen:
            _seen.add((caller, name))
            _say(f"{caller}: `{name}` is absent; its unguarded import gets an inert placeholder")
        return _InertModule(name if fromlist else top)
    return _real_import(name, globals, locals, fromlist, level)


if _STUBBED:
    builtins.__import__ = _import


def _patch_provider(module):
    module.transformer_engine_layer_spec = module.local_layer_spec
    _say("Transformer Engine absent: Bridge's gpt_provider.local_layer_spec (Megatron-Core's non-TE spec)")


def _patch_config(module):
    cls = module.TransformerConfig
    original = cls.finalize

    def finalize(self):
        off = []
        for field in ("apply_rope_fusion", "masked_softmax_fusion", "persist_layer_norm"):
            if getattr(self, field, False):
                setattr(self, field, False)
                off.append(f"{field}=False")
        if getattr(self, "cross_entropy_fusion_impl", None) == "te":
            self.cross_entropy_fusion_impl = "native"
            off.append("cross_entropy_fusion_impl=native")
        if off:
            _say("Transformer Engine absent: " + ", ".join(off))
        return original(self)

    cls.finalize = finalize


_TURN = []  # the lock file, held open (and so locked) until the process exits
_USED = []  # the GPU's used memory (MiB, nvidia-smi) when this job's turn began, its
# predecessor gone


def _device_used_mib():
    """The whole GPU's used memory as the driver reports it (nvidia-smi, which opens no CUDA
    context in this process), MiB; None where it cannot be read."""
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True, text=True, timeout=20,
        ).stdout
        return float(out.split()[0])
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def _previous_gone(pid, limit_s=30.0):
    """Waits (at most `limit_s`) until the previous holder of the GPU, whose lock ends as it
    exits, has also left the driver's count: its process is gone or a zombie."""
    until = time.monotonic() + limit_s
    while pid.isdigit() and time.monotonic() < until:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except (OSError, IndexError):
            return
        time.sleep(0.1)


def _released(used, limit_s=30.0):
    """The GPU's used memory once the driver has released what the previous job held (its
    process can be gone before its memory is): polled until it stops falling, at most `limit_s`."""
    until = time.monotonic() + limit_s
    while used is not None and time.monotonic() < until:
        time.sleep(1.0)
        now = _device_used_mib()
        if now is None or now >= used:
            break
        used = now
    return used


def _gpu_turn(lock):
    ready = lock + ".ready"
    os.makedirs(ready, exist_ok=True)
    open(os.path.join(ready, str(os.getpid())), "w").close()
    deadline = float(os.environ.get("OVL_GPU_DEADLINE", "inf"))
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    asked = time.monotonic()
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.time() > deadline:
                print("[gpu-check] time budget: this job's turn on the GPU did not come; not run", file=sys.stderr, flush=True)
                sys.exit(75)
            time.sleep(0.2)
    _TURN.append(fd)
    _previous_gone(os.pread(fd, 32, 0).decode(errors="replace").strip())
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    jobs = int(os.environ.get("OVL_GPU_JOBS", "1"))
    settle = time.monotonic() + float(os.environ.get("OVL_GPU_SETTLE_S", "0"))
    while len(os.listdir(ready)) < jobs and time.monotonic() < settle:
        time.sleep(0.2)
    _USED.append(_released(_device_used_mib()))
    print(f"[gpu-check] the GPU is this job's after {time.monotonic() - asked:.1f} s", file=sys.stderr, flush=True)


def _patch_pretrain(module):
    lock = os.environ.get("OVL_GPU_LOCK")
    original = module.pretrain
    update = module.runtime_config_update

    def pretrain(*args, **kwargs):
        if lock:
            _gpu_turn(lock)
        return original(*args, **kwargs)

    def runtime_config_update(config, *args, **kwargs):
        out = update(config, *args, **kwargs)
        config.to_yaml(os.path.join(_DIR, "run_config.yaml"))
        return out

    module.pretrain = pretrain
    if _DIR:
        module.runtime_config_update = runtime_config_update


_AFTER = {}
if "transformer_engine" in _STUBBED:
    _AFTER["megatron.bridge.models.gpt_provider"] = _patch_provider
    _AFTER["megatron.bridge.models.transformer_config"] = _patch_config
_DIR = os.environ.get("OVL_CHECK_DUMP") if os.environ.get("RANK", "0") == "0" else None
if os.environ.get("OVL_GPU_LOCK") or _DIR:
    _AFTER["megatron.bridge.training.pretrain"] = _patch_pretrain


class _After(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name not in _AFTER:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None:
            return None
        spec._gpu_check_inner = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return spec._gpu_check_inner.create_module(spec)

    def exec_module(self, module):
        module.__spec__._gpu_check_inner.exec_module(module)
        _AFTER[module.__name__](module)


if _AFTER:
    sys.meta_path.insert(0, _After())


if _DIR:
    os.makedirs(_DIR, exist_ok=True)
    with open(os.path.join(_DIR, f"env-{os.getpid()}-{time.time_ns()}.json"), "w") as f:
        json.dump({"argv": sys.argv, "env": dict(os.environ)}, f)

    import atexit

    def _peaks():
        torch = sys.modules.get("torch")
        if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
            return
        out = {
            "argv": sys.argv,
            "max_allocated": torch.cuda.max_memory_allocated(),
            "max_reserved": torch.cuda.max_memory_reserved(),
            "device": torch.cuda.get_device_name(0),
            # What the GPU holds outside PyTorch's allocator (CUDA context, NCCL, cuBLAS and
            # other libraries' own allocations): the driver's count at exit less the one at the
            # job's turn (other jobs' idle processes, constant meanwhile) less what the
            # allocator holds at exit.
            "reserved_at_exit": torch.cuda.memory_reserved(),
            "device_used_at_turn_mib": _USED[0] if _USED else None,
            "device_used_at_exit_mib": _device_used_mib() if _USED else None,
        }
        with open(os.path.join(_DIR, f"mem-{os.getpid()}.json"), "w") as f:
            json.dump(out, f)

    atexit.register(_peaks)
