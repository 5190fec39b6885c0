#!/usr/bin/env python3
"""plumb against llama.cpp on the same GGUF files (scripts/compare; docs/compare.md).

Each measurement is one process of each engine, run back to back in alternating rounds (plumb, llama.cpp,
plumb, llama.cpp, ...), so that a host whose speed drifts (turbo, a neighbour, thermal limits) moves both
sides of a pair alike; the table gives the ratio plumb / llama.cpp of each pair, median and min–max over the
rounds. Tests (token counts set by --pp, --tg, --depth):

  tg      decode rate of tg tokens from an (almost) empty cache     plumb bench -P 1 -G tg;      llama-bench -p 0 -n tg
  depth   decode rate of tg tokens after a depth-token context      plumb bench -P depth -G tg;  llama-bench -p 0 -n tg -d depth
  pp      prefill rate of a pp-token prompt                         plumb bench -P pp -G 1;      llama-bench -p pp -n 0
  ttft    time to first token of a pp-token prompt, computed the same way for both from the round's own pp and tg
          runs: pp / (pp rate) + 1 / (tg rate), that is the prefill and one decode step

Every process's peak RSS is taken from the kernel (wait4's ru_maxrss), the same way for both engines.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = ["tg", "depth", "pp", "ttft"]


def run_child(cmd, timeout):
    """Runs cmd with stdout and stderr to files; returns (exit code, stdout, stderr, peak RSS in bytes, seconds).
    wait4 gives this child's own rusage, so the peak RSS is the child's, not the maximum over all children."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        deadline = start + timeout if timeout else None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if deadline and time.monotonic() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        seconds = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # keeps Popen from waiting again
        out.seek(0)
        err.seek(0)
        # ru_maxrss is in KiB on Linux.
        return proc.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"), \
            usage.ru_maxrss * 1024, seconds


def last_line(text):
    lines = [l.strip() for l in text.replace("\r", "\n").splitlines() if l.strip()]
    return lines[-1] if lines else "(no output)"


class Failure(Exception):
    pass


# ---- plumb ---------------------------------------------------------------------------------------------------

def plumb_cmd(args, model, threads, prompt, gen):
    # --probe-mib 1: the bandwidth probe that plumb bench runs after its rows is not used here, and a large
    # buffer would count in the process's peak RSS.
    return [args.plumb, "bench", "--model", model, "--threads", str(threads), "--prompt-tokens", str(prompt),
            "--gen-tokens", str(gen), "--repetitions", "1", "--probe-mib", "1"]


def parse_plumb(stdout):
    """plumb bench's markdown table -> {'prefill': tok/s, 'decode': tok/s, 'kernels': text}. The columns are
    found by their headers ('prefill pp<P> tok/s', 'decode tg<G> tok/s'); a cell reads 'mean ± stddev'."""
    header = None
    result = {}
    for line in stdout.splitlines():
        m = re.search(r"\| kernels: (.*?) \|", line)
        if m:
            result["kernels"] = m.group(1)
        if line.startswith("| threads |"):
            header = [c.strip() for c in line.strip().strip("|").split("|")]
            continue
        if header and line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            row = dict(zip(header, cells))
            for name, value in row.items():
                number = float(value.split("±")[0]) if re.match(r"^[\d.]+", value) else None
                if name.startswith("prefill pp"):
                    result["prefill"] = number
                elif name.startswith("decode tg"):
                    result["decode"] = number
            break
    if "prefill" not in result or "decode" not in result:
        raise Failure("plumb bench printed no table row with prefill and decode rates")
    return result


def run_plumb(args, model, threads, test):
    prompt, gen = {"tg": (1, args.tg), "depth": (args.depth, args.tg), "pp": (args.pp, 1)}[test]
    cmd = plumb_cmd(args, model, threads, prompt, gen)
    code, out, err, rss, secs = run_child(cmd, args.timeout)
    if code != 0:
        raise Failure(f"plumb bench exited {code}: {last_line(err or out)}")
    r = parse_plumb(out)
    rate = r["prefill"] if test == "pp" else r["decode"]
    return {"rate": rate, "rss": rss, "seconds": secs, "kernels": r.get("kernels", ""), "cmd": cmd}


# ---- llama.cpp -----------------------------------------------------------------------------------------------

def llama_cmd(args, model, threads, test):
    p, n, d = {"tg": (0, args.tg, 0), "depth": (0, args.tg, args.depth), "pp": (args.pp, 0, 0)}[test]
    cmd = [args.llama_bench, "-m", model, "-t", str(threads), "-p", str(p), "-n", str(n), "-r", "1", "-o", "json"]
    if d:
        cmd += ["-d", str(d)]
    return cmd


def run_llama(args, model, threads, test):
    cmd = llama_cmd(args, model, threads, test)
    code, out, err, rss, secs = run_child(cmd, args.timeout)
    if code != 0:
        raise Failure(f"llama-bench exited {code}: {last_line(err or out)}")
    try:
        rows = json.loads(out)
    except json.JSONDecodeError:
        raise Failure(f"llama-bench printed no JSON: {last_line(err or out)}")
    if len(rows) != 1:
        raise Failure(f"llama-bench gave {len(rows)} results, expected 1")
    row = rows[0]
    return {"rate": float(row["avg_ts"]), "rss": rss, "seconds": secs, "cmd": cmd,
            "info": {k: row.get(k) for k in ("build_commit", "build_number", "cpu_info", "type_k", "type_v",
                                              "flash_attn", "n_batch", "n_ubatch", "model_type", "model_size")}}


# ---- the table -----------------------------------------------------------------------------------------------

def host_lines(args):
    cpu, flags = "unknown", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and cpu == "unknown":
                    cpu = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        cpu = platform.processor() or "unknown"
    isa = ", ".join(f"{f} {'yes' if f in flags else 'no'}" for f in ("avx2", "avx512f", "avx512_vnni"))

    def git(*a):
        try:
            return subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True).stdout.strip()
        except OSError:
            return ""
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    if git("status", "--porcelain", "--untracked-files=no"):
        commit += " (with uncommitted changes)"
    return [f"host: {cpu} | {os.cpu_count()} CPUs | {isa}",
            f"date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
            f"plumb: git {commit} ({args.plumb})",
            f"llama.cpp: {args.llama_version or 'unknown'} ({args.llama_bench})"]


def fmt_range(values, digits=2):
    return f"{min(values):.{digits}f}–{max(values):.{digits}f}"


def labels(args):
    return {"tg": f"tg{args.tg}", "depth": f"tg{args.tg} @ d{args.depth}", "pp": f"pp{args.pp}",
            "ttft": f"TTFT pp{args.pp}+1"}


def print_tables(args, results):
    """results[(model, threads)][test] = list over rounds of {'round': r, 'plumb': value, 'llama': value,
    'plumb_rss': bytes, 'llama_rss': bytes}"""
    lab = labels(args)
    # Pairs with no data (a file an engine refused) are left out; an interrupted run has fewer rounds.
    results = {k: v for k, v in results.items() if any(v.values())}
    rounds_done = max((len(pairs) for v in results.values() for pairs in v.values()), default=0)
    print()
    print(f"Ratios plumb / llama.cpp: median (min–max) over {rounds_done} round(s). tok/s tests: above 1 means "
          "plumb is faster. TTFT and peak RSS: below 1 means plumb is faster / smaller.")
    print()
    tests = [t for t in TESTS if t in args.tests]
    head = ["model", "threads"] + [lab[t] for t in tests] + ["peak RSS"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for (model, threads), by_test in results.items():
        cells = [Path(model).name, str(threads)]
        for t in tests:
            pairs = by_test.get(t, [])
            ratios = [p["plumb"] / p["llama"] for p in pairs]
            cells.append(f"{statistics.median(ratios):.2f} ({fmt_range(ratios)})" if ratios else "—")
        # Peak RSS of a round: the largest of that engine's processes in the round (the longest context's).
        rss = []
        for r in range(rounds_done):
            pr = [p["plumb_rss"] for t in by_test.values() for p in t if p["round"] == r and p.get("plumb_rss")]
            lr = [p["llama_rss"] for t in by_test.values() for p in t if p["round"] == r and p.get("llama_rss")]
            if pr and lr:
                rss.append(max(pr) / max(lr))
        cells.append(f"{statistics.median(rss):.2f} ({fmt_range(rss)})" if rss else "—")
        print("| " + " | ".join(cells) + " |")

    print()
    print("Absolute figures, medians over the rounds (tok/s; TTFT in ms; peak RSS in MiB of that test's "
          "process).")
    print()
    print("| model | threads | test | plumb | llama.cpp | ratio | ratio min–max | plumb RSS MiB | llama.cpp RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (model, threads), by_test in results.items():
        for t in tests:
            pairs = by_test.get(t, [])
            if not pairs:
                continue
            scale = 1e3 if t == "ttft" else 1.0
            pv = statistics.median(p["plumb"] for p in pairs) * scale
            lv = statistics.median(p["llama"] for p in pairs) * scale
            ratios = [p["plumb"] / p["llama"] for p in pairs]
            prss = [p["plumb_rss"] / 2**20 for p in pairs if p.get("plumb_rss")]
            lrss = [p["llama_rss"] / 2**20 for p in pairs if p.get("llama_rss")]
            print(f"| {Path(model).name} | {threads} | {lab[t]} | {pv:.2f} | {lv:.2f} | "
                  f"{statistics.median(ratios):.2f} | {fmt_range(ratios)} | "
                  f"{f'{statistics.median(prss):.0f}' if prss else '—'} | "
                  f"{f'{statistics.median(lrss):.0f}' if lrss else '—'} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="",
                    help="comma-separated GGUF files (default: every models/bench/*.gguf but the f16/bf16 ones)")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (1,2)")
    ap.add_argument("--tests", default=",".join(TESTS), help=f"comma-separated, of {', '.join(TESTS)} (all)")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds (5)")
    ap.add_argument("--pp", type=int, default=512, help="prompt tokens of the pp and ttft tests (512)")
    ap.add_argument("--tg", type=int, default=128, help="decoded tokens of the tg and depth tests (128)")
    ap.add_argument("--depth", type=int, default=4096, help="context before the depth test's decode (4096)")
    ap.add_argument("--timeout", type=float, default=0, help="seconds one process may run (0: no limit)")
    ap.add_argument("--raw", help="also write every measurement, commands included, to this JSON file")
    ap.add_argument("--plumb", default=str(REPO / "build" / "plumb"))
    ap.add_argument("--llama-bench", default=str(REPO / "build-llama" / "build" / "bin" / "llama-bench"))
    ap.add_argument("--llama-version", default="", help="how to name the llama.cpp build in the header")
    args = ap.parse_args()

    args.tests = [t.strip() for t in args.tests.split(",") if t.strip()]
    for t in args.tests:
        if t not in TESTS:
            ap.error(f"unknown test '{t}' (one of {', '.join(TESTS)})")
    threads = [int(t) for t in args.threads.split(",") if t.strip()]
    models = [m for m in args.models.split(",") if m] or sorted(
        m for m in glob.glob(str(REPO / "models" / "bench" / "*.gguf")) if not re.search(r"-b?f16\.gguf$", m))
    if not models:
        ap.error("no models: pass --models, or make some with scripts/bench-models")
    for m in models:
        if not os.path.isfile(m):
            ap.error(f"{m}: no such file")
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    # TTFT is computed from the round's pp and tg runs.
    runs = [t for t in ("tg", "depth", "pp") if t in args.tests or (t in ("tg", "pp") and "ttft" in args.tests)]

    for line in host_lines(args):
        print(line)
    print(f"rounds: {args.rounds} | threads: {','.join(map(str, threads))} | tests: {', '.join(args.tests)}")
    sys.stdout.flush()

    results = {}
    raw = []
    failed = []
    info_printed = False
    try:
        for model in models:
            try:
                info_printed = run_model(args, model, threads, runs, results, raw, info_printed)
            except Failure as e:
                # One file an engine refuses does not stop the others; the exit status says so at the end.
                print(f"compare: {model}: {e}", file=sys.stderr)
                failed.append(model)
    except KeyboardInterrupt:
        print("compare: interrupted; the tables hold the rounds done", file=sys.stderr)
    finally:
        if args.raw:
            with open(args.raw, "w") as f:
                json.dump(raw, f, indent=1)
    print_tables(args, results)
    if failed:
        print(f"compare: failed on {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)


def run_model(args, model, threads, runs, results, raw, info_printed):
    """All rounds of one model at each thread count, into results[(model, threads)]."""
    for n in threads:
        by_test = results.setdefault((model, n), {})
        for r in range(args.rounds):
            got = {}
            for t in runs:
                # The pair: plumb, then llama.cpp, back to back.
                p = run_plumb(args, model, n, t)
                l = run_llama(args, model, n, t)
                raw.append({"model": model, "threads": n, "test": t, "round": r, "plumb": p, "llama": l})
                if not info_printed:
                    print(f"plumb kernels: {p['kernels']}")
                    print("llama-bench: " + " | ".join(f"{k} {v}" for k, v in l["info"].items()))
                    sys.stdout.flush()
                    info_printed = True
                got[t] = (p, l)
                print(f"  {Path(model).name} t={n} round {r + 1}/{args.rounds} {labels(args)[t]}: "
                      f"plumb {p['rate']:.2f} tok/s ({p['rss'] / 2**20:.0f} MiB, {p['seconds']:.0f} s), "
                      f"llama.cpp {l['rate']:.2f} tok/s ({l['rss'] / 2**20:.0f} MiB, {l['seconds']:.0f} s)",
                      file=sys.stderr)
            for t in ("tg", "depth", "pp"):
                if t in args.tests:
                    p, l = got[t]
                    by_test.setdefault(t, []).append({"round": r, "plumb": p["rate"], "llama": l["rate"],
                                                      "plumb_rss": p["rss"], "llama_rss": l["rss"]})
            if "ttft" in args.tests:
                # Both engines the same way: the prefill's time and one decode step's.
                (pp_p, pp_l), (tg_p, tg_l) = got["pp"], got["tg"]
                by_test.setdefault("ttft", []).append({
                    "round": r,
                    "plumb": args.pp / pp_p["rate"] + 1.0 / tg_p["rate"],
                    "llama": args.pp / pp_l["rate"] + 1.0 / tg_l["rate"]})
    return info_printed


if __name__ == "__main__":
    main()
