"""The trainer's environment, end to end: stands at BRIDGE_ROOT/scripts/training/run_recipe.py
of a job ovlaunch rendered, is exec'd by the real rank runtime with the environment the
launcher gave it, runs the runner's steps on its own argv in its own process environment, and
stops right after `runtime_config_update`, writing `os.environ` as it is then.

The runner's steps are probe.py's (Bridge's recipe function, override code, the runner's
benchmark steps, `apply_environment_variables` and the `ddp.nccl_ub` defaults, then
`runtime_config_update`), here in the live environment (`build(live=True)`): nothing is cleared
or restored, and the world size is the one the launcher set (WORLD_SIZE, else SLURM_NTASKS, as
the runner reads it). A benchmark recipe re-executes itself after the env step with its marker
variable, as the runner's `bootstrap_recipe_environment` does (recipe_runner.py), so the second
process is the one that trains and the one that writes.

`chain.json` beside BRIDGE_ROOT/scripts (written by the test) says the GPU kind (the stand-in
CUDA device queries) and the file to write; nothing reaches this process through its environment
but what the launcher put there. Importing probe.py sets its offline Hugging Face hub variables;
they are taken out again before the runner's steps, so the written environment holds none of them.

For a job of several ranks (tests/it/trainer_env_slurm.rs) the file's name holds `{rank}`, put
as the launcher's RANK, and with `received_only` in chain.json the rank writes only what it was
started with (`received`, the environment as the launcher handed it over, and its argv) and
imports nothing: the test runs the runner's steps on them with Bridge's code in one process of
its own (an import of Bridge costs about 20 s of CPU per process).
"""

import json
import os
import sys
from pathlib import Path

START = dict(os.environ)
ROOT = Path(__file__).resolve().parents[2]
CHAIN = json.loads((ROOT / "chain.json").read_text())
RANK = os.environ.get("RANK", "")
OUT = Path(CHAIN["out"].replace("{rank}", RANK))


def write(doc: dict) -> None:
    tmp = OUT.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc))
    tmp.replace(OUT)


if CHAIN.get("received_only"):
    write({"received": START, "argv": ["python", *sys.argv]})
    sys.exit(0)

sys.path.insert(0, CHAIN["probe_dir"])
import probe  # noqa: E402

# the hub cache location is read at import; the variables go again
os.environ.clear()
os.environ.update(START)

# recipe_runner.py RECIPE_ENV_BOOTSTRAP_MARKER
MARKER = "_MB_TRAINING_RECIPE_ENV_BOOTSTRAPPED"
BENCHMARK = []


def bootstrap(meta) -> None:
    """The runner's re-execution of a benchmark recipe with the environment it set."""
    BENCHMARK.append(meta is not None)
    if meta is None or os.environ.get(MARKER) == str(os.getpid()):
        return
    env = dict(os.environ)
    env[MARKER] = str(os.getpid())
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe(sys.executable, [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:]], env)


def main() -> None:
    world = os.environ.get("WORLD_SIZE") or os.environ.get("SLURM_NTASKS")
    case = {"argv": ["python", *sys.argv], "world_size": int(world), "gpu": CHAIN["gpu"]}
    probe.build(case, live=True, bootstrap=bootstrap)
    write({"env": dict(os.environ), "benchmark": BENCHMARK == [True]})


if __name__ == "__main__":
    main()
