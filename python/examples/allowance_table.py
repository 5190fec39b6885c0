"""What each allowance can and cannot see on the model cases: every planted model-level bug of the example
engines (torch_engine.BUGS that live in a model case's code, transformers_engine.BUGS), computed once by the
FP32 engine with the bug planted, then judged as an engine declaring each allowance would be.

A bug that passes under an allowance is one that allowance's thresholds cannot tell from rounding: an engine
that declares it must run the op cases that see the bug (docs/fixtures.md "What each allowance can see"),
whose thresholds are derived per op. Prints the markdown table of that section:

    python python/examples/allowance_table.py [--suite fixtures/suite] [--engines torch,transformers]

Each cell is FAIL or PASS with the worst check's share of what passes (value ÷ threshold; "exact" for a
failed exact check). It takes about five minutes on one core."""
import argparse
import math
import pathlib
import sys

import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

ALLOWANCES = ("", "int8_activations", "bf16_activations", "fp16_activations", "tf32")  # "": none declared
MODEL_OPS = ("layer", "end_to_end", "kv_handoff")


def planted_bugs(engine_name):
    """(module, [bug names that live in a model case's code]) of one example engine."""
    if engine_name == "torch":
        import torch_engine as module
        return module, [name for name, bug in module.BUGS.items() if set(bug.ops) & set(MODEL_OPS)]
    if engine_name == "transformers":
        import transformers_engine as module
        return module, list(module.BUGS)
    raise SystemExit(f"--engines: unknown engine {engine_name!r} (torch, transformers)")


def used(row):
    """How much of what passes the row used; an exact check (no margin) counts 0 passed, infinity failed."""
    if math.isnan(row.margin):
        return 0.0 if row.passed else math.inf
    return row.margin


def cell(rows):
    """FAIL or PASS, with the worst row's share of what passes."""
    worst = max(rows, key=used)
    share = "exact" if math.isnan(worst.margin) else f"{worst.margin:.2g}×"
    return f"{'PASS' if all(r.passed for r in rows) else 'FAIL'} {share}"


def main():
    import plumb
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default=str(HERE.parents[1] / "fixtures" / "suite"))
    ap.add_argument("--engines", default="torch,transformers")
    args = ap.parse_args()
    torch.set_num_threads(1)
    suite = plumb.Suite(args.suite)
    cases = [c for c in suite if c.op in MODEL_OPS]
    print("| engine | planted bug | case | " + " | ".join(a or "none" for a in ALLOWANCES) + " |")
    print("|---|---|---|" + "---|" * len(ALLOWANCES))
    for engine_name in args.engines.split(","):
        module, bugs = planted_bugs(engine_name)
        for bug in bugs:
            engine = module.Engine("fp32", bug=bug)
            for case in cases:
                if engine_name == "torch" and case.op not in module.BUGS[bug].ops:
                    continue  # the bug's code is not on this case's path
                try:
                    outputs = engine(case)
                except NotImplementedError as e:
                    print(f"| {engine_name} | `{bug}` | `{case.name}` | not run: {e} |")
                    continue
                cells = [cell(plumb.verify(suite, {case.name: outputs}, allow=[a] if a else [])[0])
                         for a in ALLOWANCES]
                print(f"| {engine_name} | `{bug}` | `{case.name}` | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
