"""What the GPU check relies on, checked on a CPU machine (CI runs it; stdlib + the carried wheels).

Run with a Python 3.12 that has PyTorch (CPU is enough) and nothing of Transformer Engine,
ModelOpt or nvidia-resiliency-ext, with PYTHONPATH = scripts/gpu-check (the stand-ins) followed
by the folder the bundle's wheels were installed into, and the bundle's Hugging Face cache:

    python cpu-check.py PLAN_JSON...

Each PLAN_JSON is `ovlaunch plan -o json` of one of the check's jobs (the training job, an MoE
grid job, the users' jobs: Bridge library functions and a user's recipe file). It checks that
1. the three packages are absent (otherwise this proves nothing about the GPU machine),
2. every module a Bridge pretraining run imports imports, from the carried wheels,
3. Bridge's recipe function of the plan, with the plan's trainer overrides applied by Bridge's
   own override code and `runtime_config_update` run, builds the config, and the stand-ins made
   the model use Megatron-Core's non-TE layer spec,
4. the trainer's record of its config (`run_config.yaml`, written after `runtime_config_update`
   when OVL_CHECK_DUMP is set) is written and holds the plan's model shape,
5. the grid's turns on the GPU (OVL_GPU_LOCK): jobs started together hold the GPU one at a
   time, the first waits until all are waiting, and a job whose turn passes the deadline exits
   75 untrained,
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
    from megatron.bridge.training import pretrain as entry
    from megatron.bridge.training.utils.omegaconf_utils import process_config_with_overrides

    for path in sys.argv[1:]:
        build(entry, process_config_with_overrides, json.load(open(path)))
    turns()
    return 0


def build(entry, process_config_with_overrides, plan):
    """Bridge's recipe function of `plan` with its trainer overrides, as the runner builds it."""
    trainer = plan["trainer"]
    cfg = recipe_function(trainer["recipe"], plan["recipe"]["family"])()
    cfg = process_config_with_overrides(cfg, cli_overrides=list(trainer["overrides"]))
    cfg.model.seq_length = cfg.dataset.seq_length  # the runner's own step
    dump = os.environ["OVL_CHECK_DUMP"]
    entry.runtime_config_update(cfg)  # as Bridge's pretrain calls it, with the check's record
    import megatron.bridge.models.gpt_provider as gp

    assert gp.transformer_engine_layer_spec is gp.local_layer_spec, "the layer-spec stand-in did not act"
    for k, v in plan["model"].items():
        if k in ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups",
                 "seq_length", "share_embeddings_and_output_weights", "num_moe_experts", "moe_router_topk",
                 "moe_ffn_hidden_size", "recompute_modules"):
            assert getattr(cfg.model, k) == v, f"model.{k}: plan {v}, Bridge {getattr(cfg.model, k)}"
    print(f"config: {trainer['recipe']} with {len(trainer['overrides'])} overrides builds; non-TE layer spec")
    import yaml

    record = yaml.load(open(os.path.join(dump, "run_config.yaml")), Loader=yaml.FullLoader)
    assert record["model"]["num_layers"] == plan["model"]["num_layers"], "run_config.yaml: model.num_layers"
    assert entry.pretrain.__qualname__.startswith("_patch_pretrain"), "pretrain is not the check's wrapper"
    print("record: run_config.yaml written after runtime_config_update")


def recipe_function(name, family):
    """Bridge's function `name`: a benchmark recipe of `family`, else a library recipe, which Bridge's
    runner finds in the H100 module of a model package of megatron.bridge.recipes."""
    import pkgutil

    perf = importlib.import_module("megatron.bridge.perf_recipes." + family)
    if hasattr(perf, name):
        return getattr(perf, name)
    recipes = importlib.import_module("megatron.bridge.recipes")
    for m in pkgutil.iter_modules(recipes.__path__):
        if m.ispkg and importlib.util.find_spec(f"{recipes.__name__}.{m.name}.h100"):
            module = importlib.import_module(f"{recipes.__name__}.{m.name}.h100")
            if hasattr(module, name):
                return getattr(module, name)
    raise AttributeError(f"{name}: in neither megatron.bridge.perf_recipes.{family} nor a library H100 module")


def turns():
    """Three processes ask for the GPU together; a fourth finds it held past its deadline."""
    import subprocess
    import tempfile
    import time

    lock = os.path.join(tempfile.mkdtemp(), "gpu.lock")
    job = (
        "import sitecustomize, sys, time; sitecustomize._gpu_turn(sys.argv[1]); t = time.time(); "
        "time.sleep(0.3); print(t, time.time())"
    )
    env = dict(os.environ, OVL_GPU_JOBS="3", OVL_GPU_SETTLE_S="30")
    env.pop("OVL_GPU_LOCK", None)
    procs = []
    for i in range(3):
        procs.append(subprocess.Popen([sys.executable, "-c", job, lock], env=env, stdout=subprocess.PIPE, text=True))
        time.sleep(0.5 * i)  # the last arrives a second after the first
    spans = sorted(tuple(map(float, p.communicate()[0].split())) for p in procs)
    assert all(p.returncode == 0 for p in procs), [p.returncode for p in procs]
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), f"turns overlap: {spans}"
    ready = max(os.path.getmtime(os.path.join(lock + ".ready", f)) for f in os.listdir(lock + ".ready"))
    assert spans[0][0] >= ready, "the first turn did not wait for every job"
    holder = open(lock).read().strip()
    assert holder in {str(p.pid) for p in procs}, f"the lock names {holder!r}, none of the jobs"
    fd = os.open(lock, os.O_RDWR)
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_EX)
    late = subprocess.run(
        [sys.executable, "-c", job, lock], env=dict(env, OVL_GPU_DEADLINE=str(time.time() + 1)), capture_output=True
    )
    assert late.returncode == 75, f"a job past its deadline exited {late.returncode}"
    print("turns: 3 jobs held the GPU one at a time; one past its deadline exited 75")


if __name__ == "__main__":
    sys.exit(main())
