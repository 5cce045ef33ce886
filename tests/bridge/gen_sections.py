"""Generate ovlaunch's table of Megatron-Bridge's pass-through config sections
(src/config/bridge_fields.rs) from Bridge's own config classes.

The sections are the ones a real training run needs and ovlaunch does not resolve: `scheduler`,
`dataset`, `tokenizer`, `checkpoint`, `logger`, `profiling` and `ft`. For each, every field a
user may set (the class's `__init__` fields; fields Bridge computes, private fields and object
fields are left out) is written with its type, mapped to the small type language of
`config::bridge`. The class is the one Bridge's pretraining performance recipes put in that
section (checked below for every shipped recipe function), so a key path ovlaunch accepts is a
key path of the class the trainer holds. Each section also lists the values every shipped recipe
function holds alike (`recipe`), which ovlaunch's checks of Bridge's section rules start from.

Usage (the interpreter is the Bridge venv's, see .ci/bridge-venv.sh):
    python tests/bridge/gen_sections.py --out src/config/bridge_fields.rs          # write
    python tests/bridge/gen_sections.py --out src/config/bridge_fields.rs --check  # compare only
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata as md
import sys
import types
import typing
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import probe  # noqa: E402  (sets up the offline hub and the stand-ins)

from megatron.bridge.training import config as C  # noqa: E402
from megatron.bridge.training.tokenizers.config import TokenizerConfig  # noqa: E402

import gen_recipes  # noqa: E402

# section -> (class, Bridge module path of the class, whether the recipes leave it None)
SECTIONS = {
    "scheduler": C.SchedulerConfig,
    "dataset": C.GPTDatasetConfig,
    "tokenizer": TokenizerConfig,
    "checkpoint": C.CheckpointConfig,
    "logger": C.LoggerConfig,
    "profiling": C.ProfilingConfig,
    "ft": C.FaultToleranceConfig,
}

# Fields the user does not set: Megatron-Core's internal copy of the sequence length (Bridge's
# `seq_length` is the one it reads and writes back, `GPTDatasetConfig.to_cfg_dict`), and the
# tokenizer object the trainer builds itself.
SKIP = {("dataset", "sequence_length"), ("dataset", "tokenizer")}


def ty(t) -> tuple[str, bool]:
    """(Rust `Ty` expression, nullable) for a Python annotation."""
    origin = typing.get_origin(t)
    args = typing.get_args(t)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        nullable = len(rest) < len(args)
        if len(rest) == 1:
            inner, _ = ty(rest[0])
            return inner, nullable
        if set(rest) == {str, list[str]}:
            return "Ty::StrOrList", nullable
        return "Ty::Any", nullable
    if t is bool:
        return "Ty::Bool", False
    if t is int:
        return "Ty::Int", False
    if t is float:
        return "Ty::Float", False
    if t is str:
        return "Ty::Str", False
    if origin is typing.Literal:
        if all(isinstance(a, str) for a in args):
            return "Ty::Choice(&[" + ", ".join(f'"{a}"' for a in args) + "])", False
        if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            return "Ty::IntChoice(&[" + ", ".join(str(a) for a in args) + "])", False
    if origin is list and len(args) == 1:
        if args[0] is int:
            return "Ty::IntList", False
        if args[0] is str:
            return "Ty::StrList", False
    if origin is dict and args == (str, str):
        return "Ty::StrMap", False
    return "Ty::Any", False


def fields_of(section: str, cls) -> list[tuple[str, str, bool]]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if not f.init or f.name.startswith("_") or (section, f.name) in SKIP:
            continue
        t, nullable = ty(hints.get(f.name, f.type))
        # a None default makes the field nullable whatever the annotation says
        if f.default is None:
            nullable = True
        out.append((f.name, t, nullable))
    return out


def shipped_configs():
    """(function name, ConfigContainer) for every performance recipe function the catalogue
    ships, each built on its own (faked) GPU kind. A model of the generator's list without a
    recipe file (Bridge's runner refuses all its functions: recipes/NOT_SHIPPED.md) is not shipped."""
    recipes = Path(__file__).resolve().parents[2] / "recipes"
    for name, (prefix, family, _) in gen_recipes.MODELS.items():
        if not (recipes / f"{name}.yaml").exists():
            continue
        module = importlib.import_module(f"megatron.bridge.perf_recipes.{family}")
        for fn in sorted(n for n in dir(module) if n.startswith(prefix) and n.endswith("_config")):
            m = probe.BENCHMARK_NAME.search(fn)
            if not m or m["hardware"] not in gen_recipes.GPU_KINDS:
                continue
            probe.ovlaunch_stubs.fake_gpu(m["hardware"])
            yield fn, getattr(module, fn)()


def recipe_values() -> dict[str, dict[str, str]]:
    """Per section, the fields whose value is the same in every shipped recipe function (JSON
    text), which ovlaunch's checks of Bridge's section rules read. A value that names the
    working directory (Bridge derives some paths from it) is left out."""
    import json
    import os

    seen: dict[tuple[str, str], set[str]] = {}
    for _, cfg in shipped_configs():
        for section, cls in SECTIONS.items():
            obj = getattr(cfg, section)
            if obj is None:
                continue
            for name, _, _ in fields_of(section, cls):
                v = getattr(obj, name)
                seen.setdefault((section, name), set()).add(json.dumps(probe.plain(v), sort_keys=True))
    out: dict[str, dict[str, str]] = {s: {} for s in SECTIONS}
    for (section, name), vals in seen.items():
        if len(vals) == 1:
            (v,) = vals
            if os.getcwd() not in v:
                out[section][name] = v
    return out


def check_recipe_classes() -> list[str]:
    """Every shipped performance recipe function holds exactly these classes (and no `ft`)."""
    problems = []
    for fn, cfg in shipped_configs():
        for section, cls in SECTIONS.items():
            v = getattr(cfg, section)
            if section == "ft":
                if v is not None:
                    problems.append(f"{fn}: sets ft (ovlaunch assumes Bridge's recipes leave it None)")
            elif type(v) is not cls:
                problems.append(f"{fn}: {section} is a {type(v).__name__}, not a {cls.__name__}")
    return problems


def rust_str(v: str) -> str:
    """A Rust raw string literal holding `v`."""
    hashes = "#"
    while f'"{hashes}' in v:
        hashes += "#"
    return f'r{hashes}"{v}"{hashes}'


def generate() -> str:
    common = recipe_values()
    lines = [
        f"//! Megatron-Bridge {md.version('megatron-bridge')}'s pass-through config sections: every field a user may",
        "//! set, with its type. GENERATED by tests/bridge/gen_sections.py from Bridge's config classes:",
        "//! do not edit; regenerate.",
        "",
        "use super::bridge_schema::{Field, SectionDef, Ty};",
        "",
    ]
    for section, cls in SECTIONS.items():
        const = section.upper()
        lines.append(f"/// `{section}`: `{cls.__module__}.{cls.__qualname__}`.")
        lines.append(f"pub const {const}: SectionDef = SectionDef {{")
        lines.append(f'    name: "{section}",')
        lines.append(f'    class: "{cls.__module__}.{cls.__qualname__}",')
        fields = fields_of(section, cls)
        lines.append("    names: &[")
        for name, _, _ in fields:
            lines.append(f'        "{name}",')
        lines.append("    ],")
        lines.append("    recipe: &[")
        for name, v in sorted(common[section].items(), key=lambda kv: [f[0] for f in fields].index(kv[0])):
            lines.append(f'        ("{name}", {rust_str(v)}),')
        lines.append("    ],")
        lines.append("    fields: &[")
        for name, t, nullable in fields:
            lines.append(f'        Field {{ name: "{name}", ty: {t}, nullable: {str(nullable).lower()} }},')
        lines.append("    ],")
        lines.append("};")
        lines.append("")
    lines.append("/// Every field's full path, typed: `paths::SCHEDULER.max_steps` is `\"scheduler.max_steps\"`.")
    lines.append("pub mod paths {")
    for section, cls in SECTIONS.items():
        names = ", ".join(name for name, _, _ in fields_of(section, cls))
        camel = "".join(w.capitalize() for w in section.split("_"))
        lines.append(f"    crate::field_paths! {{ const {section.upper()}: {camel}Paths in {section} {{ {names} }} }}")
    lines.append("}")
    lines.append("")
    lines.append("/// All of them, in `ConfigContainer` order of ovlaunch's plan.")
    lines.append("pub const SECTIONS: &[SectionDef] = &[" + ", ".join(s.upper() for s in SECTIONS) + "];")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    problems = check_recipe_classes()
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    text = generate()
    path = Path(args.out)
    if args.check:
        if not path.exists() or path.read_text() != text:
            print(f"{path}: out of date with the installed Megatron-Bridge; run tests/bridge/gen_sections.py", file=sys.stderr)
            return 1
        return 0
    path.write_text(text)
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
