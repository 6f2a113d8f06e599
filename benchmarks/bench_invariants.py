"""Physical invariants over many random valid scenarios.

Run: ``PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_invariants.py --n 100000``
(``--n 2000`` takes a minute or two on an idle core). Each scenario is drawn
by ``tests/scenario_strategies.py`` from a NumPy generator seeded with
``--seed`` and checked by ``tests/physical_invariants.py``, the same checks
``tests/test_invariants.py`` runs under hypothesis:

* the summary invariants (efficiency, strong speedup, one replica,
  throughput x epoch, finiteness) on every scenario;
* one monotonicity knob per scenario, in turn (``--all-knobs``: all five,
  six predictions a scenario), grown by a log-uniform factor in [1.01, 100];
* sweep against predict on the deterministic ones;
* a share of fused, communication-bound draws (``--fused-share``, default
  0.1; :func:`fused_spec`), checked on the compute knob grown 1.01-1.5
  times, where Horovod's ticks can merge buffers (their rows in the tables
  say ``(fused draw)``). ``--fused-share 0`` gives the draws of before;
* a share of asynchronous parameter servers on an in-process cluster of
  shared CPU cores (``--served-share``, default 0.05; :func:`served_spec`),
  where one server serves every worker's compute in turn (``(in-process
  draw)``). ``--served-share 0`` gives the draws of before it.

It prints the violations per invariant and per strategy (and per compute
distribution, which separates statistics from the rest), the draws the
scenario rules rejected, the predictions ``predict`` refused, any other
exception, and the smallest few violating scenarios of each invariant (deterministic
and noisy compute apart) as the
``make_scenario(...).replace(...)`` code that rebuilds them.
The examples are shrunk (``--no-shrink``: as drawn) by dropping each
replacement and keyword while the same invariant still breaks.
``--json PATH`` also writes every count and example. ``--jobs K`` checks the
scenarios in ``K`` processes; the draws are made in order in the parent, so
the counts do not depend on ``K``.
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import physical_invariants as inv  # noqa: E402
import scenario_strategies as strategies  # noqa: E402

import distsim  # noqa: E402

EXAMPLES_KEPT = 3


def label(scenario: distsim.Scenario) -> str:
    """Strategy name, with the mode for parameter servers (their sync and async engines differ)."""
    s = scenario.strategy
    return f"{s.name}/{s.resolved_mode}" if inv.uses_ps(scenario) else s.name


def size(spec: dict) -> tuple:
    """How big a reproducer is: replicas, steps, then how many fields it sets."""
    k = spec["kwargs"]
    return k["num_workers"] * k["devices_per_worker"], k["steps"], len(spec["replace"]), len(json.dumps(spec))


def check_one(scenario: distsim.Scenario, factors: dict[str, float]) -> list[inv.Violation]:
    """Every check of ``scenario``; ``factors`` maps the monotonicity knobs to check to their growth."""
    result = distsim.predict(scenario)
    found = inv.check_summary(scenario, result)
    for knob in inv.KNOBS:
        if knob.invariant in factors:
            found += inv.check_monotone(scenario, result, knob, factors[knob.invariant], floor=1e-6)
    if inv.sweep_applies(scenario):
        found += inv.check_sweep(scenario, result)
    return found


def violates(spec: dict, invariant: str, factors: dict[str, float]) -> inv.Violation | None:
    scenario = strategies.build(spec)
    if scenario is None:
        return None
    try:
        return next((v for v in check_one(scenario, factors) if v.invariant == invariant), None)
    except distsim.InputError:
        return None


def shrink(spec: dict, invariant: str, factors: dict[str, float]) -> tuple[dict, inv.Violation | None]:
    """A smaller spec that still breaks ``invariant``: greedily drops each
    replacement and each keyword (back to make_scenario's default) while it does."""
    found = None
    for _ in range(3):
        changed = False
        for i in reversed(range(len(spec["replace"]))):
            trial = {"kwargs": spec["kwargs"], "replace": spec["replace"][:i] + spec["replace"][i + 1:]}
            if v := violates(trial, invariant, factors):
                spec, found, changed = trial, v, True
        # The compute distribution stays: it separates the statistics causes from the rest.
        for key in [k for k in spec["kwargs"] if k not in ("device", "workload", "strategy", "compute_distribution")]:
            trial = {"kwargs": {k: v for k, v in spec["kwargs"].items() if k != key}, "replace": spec["replace"]}
            if v := violates(trial, invariant, factors):
                spec, found, changed = trial, v, True
        if not changed:
            break
    return spec, found


#: Share of the draws made fused and communication-bound (:func:`fused_spec`), checked on the compute knob.
FUSED_SHARE = 0.1
#: Strategies whose gradients go through collectives Horovod-style fusion can group (synchronous, one process
#: group per step).
FUSED_STRATEGIES = ("mirrored", "central_storage", "multi_worker_mirrored")
#: Workloads with many gradient tensors of very different sizes (VGG16's 32, ResNet-50's 161, ...).
FUSED_WORKLOADS = tuple(w for w in strategies.WORKLOADS if strategies._TENSORS[w] >= 16)
#: Share of the draws made in-process parameter servers on shared CPU cores (:func:`served_spec`).
SERVED_SHARE = 0.05
#: Device presets of kind ``cpu``: only their cores are shared by an in-process cluster.
CPU_DEVICES = tuple(d for d in strategies.DEVICES if strategies._KIND[d] == "cpu")
#: What :func:`served_spec` sets itself (or a rule refuses beside ``compute_at_ps``): dropped from the plain draw.
_SERVED_DROPPED = ("protocol", "topology", "ps_placement", "ps_local_sum", "physical_cores", "straggler_cores")


def fused_spec(chooser: strategies.Chooser) -> dict:
    """A scenario where fusion's tick groups decide the step: Horovod fusion with buffers of 64 KiB to 64 MiB
    and a cycle of 0.1-10 ms, on a slow-latency intra link (0.1-10 ms) so the buffers' fixed costs dominate.
    The plain draws land there rarely (fusion is one grouping of four and most links are fast), so the
    compute knob missed the non-monotone fused steps (the fusion_groups docstring's example)."""
    spec = strategies.scenario_spec(chooser, strategies=FUSED_STRATEGIES)
    kwargs = {k: v for k, v in spec["kwargs"].items()
              if k not in ("num_buckets", "bytes_per_pack", "backup_workers")}
    kwargs.update(workload=chooser.one_of(FUSED_WORKLOADS), grouping="fusion",
                  fusion_threshold_bytes=chooser.one_of([2**16, 2**20, 2**22, 64 * 2**20]),
                  fusion_cycle_s=chooser.log_uniform(1e-4, 1e-2))
    latency = ("cluster.intra_link.latency_s", chooser.log_uniform(1e-4, 1e-2))
    return {"kwargs": kwargs, "replace": [r for r in spec["replace"] if r[0] != latency[0]] + [latency]}


def served_spec(chooser: strategies.Chooser) -> dict:
    """An asynchronous parameter server on an in-process cluster of 2+ CPU workers sharing
    ``physical_cores``: the one server serves every worker's compute with the transfers and applies, in
    turn (``AsyncCosts.compute_at_ps``, ``distsim/engines/costs.py``). Five draws must meet for the plain
    scenarios to land there, about 40 times in 20,000; a full-duplex link is refused with the rule."""
    spec = strategies.scenario_spec(chooser, strategies=("parameter_server",))
    while spec["kwargs"]["num_workers"] < 2:
        spec = strategies.scenario_spec(chooser, strategies=("parameter_server",))
    kwargs = {k: v for k, v in spec["kwargs"].items() if k not in _SERVED_DROPPED}
    cores = chooser.log_uniform(0.5, 8.0)
    kwargs.update(device=chooser.one_of(CPU_DEVICES), mode=chooser.one_of([None, "async"]),
                  ps_cluster="in_process", physical_cores=cores)
    if chooser.coin(0.3):
        kwargs["straggler_cores"] = cores * chooser.log_uniform(0.1, 1.0)
    duplex = ("cluster.inter_link.full_duplex", "cluster.inter_link.whole_message_bytes")
    return {"kwargs": kwargs, "replace": [r for r in spec["replace"] if r[0] not in duplex]}


def draws(n: int, seed: int, all_knobs: bool, fused_share: float = FUSED_SHARE,
          served_share: float = SERVED_SHARE) -> list[tuple[dict, dict[str, float]]]:
    """The ``n`` valid scenario specs and their knob factors, drawn in order from one seeded generator
    (the same draws whatever ``--jobs``; rejected draws are counted in ``strategies.REJECTED``).
    A ``fused_share`` of them is :func:`fused_spec`, checked on the compute knob grown by 1.01-1.5 times
    (the small growths that move a few tensors across a tick; 100x makes the step compute-bound), marked
    ``"fused": True``. A ``served_share`` of the rest is :func:`served_spec`, checked like the plain
    draws and marked ``"served": True``."""
    rng = np.random.default_rng(seed)
    chooser = strategies.RandomChooser(rng)
    out = []
    for i in range(n):
        fused = fused_share > 0 and rng.random() < fused_share  # share 0: the draws of before
        served = not fused and served_share > 0 and rng.random() < served_share
        make = fused_spec if fused else served_spec if served else strategies.scenario_spec
        spec = make(chooser)
        while strategies.build(spec) is None:
            spec = make(chooser)
        if served:
            spec["served"] = True
        if fused:
            spec["fused"] = True
            out.append((spec, {inv.KNOBS[4].invariant: float(np.exp(rng.uniform(np.log(1.01), np.log(1.5))))}))
            continue
        knobs = inv.KNOBS if all_knobs else (inv.KNOBS[i % len(inv.KNOBS)],)
        out.append((spec, {k.invariant: float(np.exp(rng.uniform(np.log(1.01), np.log(100.0)))) for k in knobs}))
    return out


def check_spec(item: tuple[dict, dict[str, float]]) -> dict:
    """One drawn scenario checked: its label, distribution and violations, or why it was not checked."""
    spec, factors = item
    scenario = strategies.build(spec)
    name = label(scenario) + (" (fused draw)" if spec.get("fused") else " (in-process draw)" if spec.get("served")
                              else "")
    out = {"name": name, "distribution": scenario.training.compute_distribution}
    before = collections.Counter(inv.EXCUSED)
    try:
        out["found"] = check_one(scenario, factors)
        out["excused"] = inv.EXCUSED - before
    except distsim.InputError as exc:
        out["refused"] = exc.path
    except Exception as exc:  # noqa: BLE001 - a crash is a finding, recorded with its reproducer
        out["crash"] = {"error": f"{type(exc).__name__}: {exc}", "where": traceback.format_exc(limit=-3)}
    return out


def run(n: int, seed: int, all_knobs: bool, progress: bool, shrink_examples: bool, jobs: int = 1,
        fused_share: float = FUSED_SHARE, served_share: float = SERVED_SHARE) -> dict:
    counts: collections.Counter = collections.Counter()
    by_strategy: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    by_distribution: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    checked: collections.Counter = collections.Counter()
    refused: collections.Counter = collections.Counter()
    crashes: list[dict] = []
    excused: collections.Counter = collections.Counter()
    examples: dict[str, list] = collections.defaultdict(list)
    strategies.REJECTED.clear()
    items = draws(n, seed, all_knobs, fused_share, served_share)
    drawn = collections.Counter(strategies.REJECTED)  # before checking and shrinking build more
    pool = multiprocessing.get_context("fork").Pool(jobs) if jobs > 1 else None
    outcomes = pool.imap(check_spec, items, chunksize=8) if pool else map(check_spec, items)
    if progress:
        from tqdm import tqdm
        outcomes = tqdm(outcomes, total=n, unit="scenario", mininterval=2.0)
    for (spec, factors), outcome in zip(items, outcomes):
        name = outcome["name"]
        if "refused" in outcome:
            refused[outcome["refused"]] += 1
            continue
        if "crash" in outcome:
            crashes.append({**outcome["crash"], "spec": spec})
            continue
        checked[name] += 1
        excused.update(outcome.get("excused", {}))
        for violation in outcome["found"]:
            counts[violation.invariant] += 1
            by_strategy[name][violation.invariant] += 1
            by_distribution[outcome["distribution"]][violation.invariant] += 1
            # Deterministic and noisy examples apart: noise brings causes of its own (statistics).
            noise = "deterministic" if outcome["distribution"] == "deterministic" else "noisy"
            kept = examples[f"{violation.invariant} ({noise})"]
            kept.append({"size": size(spec), "strategy": name, "detail": violation.detail, "spec": spec,
                         "factors": factors, "invariant": violation.invariant})
            kept.sort(key=lambda e: e["size"])
            del kept[EXAMPLES_KEPT:]
    if pool:
        pool.close()
        pool.join()
    if shrink_examples:
        for kept in examples.values():
            for e in kept:
                small, found = shrink(e["spec"], e["invariant"], e["factors"])
                if found is not None:
                    e.update(spec=small, detail=found.detail, shrunk=True)
    return {"n": n, "seed": seed, "all_knobs": all_knobs, "jobs": jobs, "fused_share": fused_share,
            "served_share": served_share,
            "checked": dict(checked),
            "violations": dict(counts),
            "by_strategy": {k: dict(v) for k, v in sorted(by_strategy.items())},
            "by_distribution": {k: dict(v) for k, v in sorted(by_distribution.items())},
            "rejected_draws": {k: v for k, v in drawn.items() if k != "ok"}, "built": drawn["ok"],
            "refused_by_predict": dict(refused), "crashes": crashes, "excused": dict(excused), "examples": dict(examples)}


def table(rows: dict[str, dict], columns: tuple[str, ...], first: str) -> str:
    short = [c.replace("step_time_vs_", "t~") for c in columns]
    widths = [max([len(first), *(len(r) for r in rows)])] + [max(len(s), 5) for s in short]
    lines = ["  ".join([first.ljust(widths[0])] + [s.rjust(w) for s, w in zip(short, widths[1:])])]
    for name, counts in rows.items():
        lines.append("  ".join([name.ljust(widths[0])] + [str(counts.get(c, 0)).rjust(w)
                                                          for c, w in zip(columns, widths[1:])]))
    return "\n".join(lines)


def report(out: dict) -> str:
    checked = sum(out["checked"].values())
    knob_note = "all five knobs" if out["all_knobs"] else "one monotonicity knob each, in turn"
    lines = [f"{checked:,} scenarios checked (seed {out['seed']}, {knob_note}); "
             f"{sum(out['rejected_draws'].values()):,} draws rejected by the scenario rules "
             f"(of {out['built'] + sum(out['rejected_draws'].values()):,}), "
             f"{sum(out['refused_by_predict'].values()):,} refused by predict, {len(out['crashes'])} crashed", ""]
    if out["rejected_draws"]:
        lines.append(f"rejected draws by field: {out['rejected_draws']}")
    if out["refused_by_predict"]:
        lines.append(f"refused by predict, by field: {out['refused_by_predict']}")
    lines += ["", "violations per invariant:"]
    lines += [f"  {name:32s} {out['violations'].get(name, 0):7,}" for name in inv.INVARIANTS]
    lines += ["", "steps that moved the wrong way within a stated mechanism's derived bound:"]
    lines += [f"  {name:60s} {count:7,}" for name, count in sorted(out.get("excused", {}).items())] or ["  none"]
    lines += ["", "violations per strategy (checked scenarios in brackets):"]
    rows = {f"{k} [{out['checked'].get(k, 0)}]": out["by_strategy"].get(k, {}) for k in sorted(out["checked"])}
    lines += [table(rows, inv.INVARIANTS, "strategy"), "", "violations per compute distribution:",
              table(out["by_distribution"], inv.INVARIANTS, "distribution"), ""]
    for name, kept in sorted(out["examples"].items()):
        lines.append(f"smallest examples of {name}:")
        for e in kept:
            lines.append(f"  [{e['strategy']}{', shrunk' if e.get('shrunk') else ''}] {e['detail']}")
            lines.append(f"    {strategies.reproducer(e['spec'])}")
        lines.append("")
    for crash in out["crashes"][:EXAMPLES_KEPT]:
        lines += [f"crash: {crash['error']}", f"    {strategies.reproducer(crash['spec'])}", crash["where"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="scenarios to check (default 100,000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the scenario draws (default 0)")
    parser.add_argument("--all-knobs", action="store_true", help="check all five monotonicity knobs per scenario")
    parser.add_argument("--no-shrink", action="store_true", help="print the examples as drawn, not shrunk")
    parser.add_argument("--json", type=Path, help="also write the counts and examples to this JSON file")
    parser.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes checking scenarios (default 1); "
                        "the draws and counts do not depend on it")
    parser.add_argument("--fused-share", type=float, default=FUSED_SHARE,
                        help=f"share of fused, communication-bound draws checked on compute (default {FUSED_SHARE})")
    parser.add_argument("--served-share", type=float, default=SERVED_SHARE,
                        help=f"share of in-process parameter servers on shared CPU cores (default {SERVED_SHARE})")
    args = parser.parse_args(argv)
    for flag, share in (("--fused-share", args.fused_share), ("--served-share", args.served_share)):
        if not 0 <= share <= 1:
            parser.error(f"{flag}={share}; allowed: a number from 0 to 1")
    if args.n < 1:
        parser.error(f"--n={args.n}; allowed: an integer >= 1")
    if args.jobs < 1:
        parser.error(f"--jobs={args.jobs}; allowed: an integer >= 1")
    start = time.perf_counter()
    out = run(args.n, args.seed, args.all_knobs, not args.no_progress, not args.no_shrink, args.jobs,
              args.fused_share, args.served_share)
    out["wall_s"] = round(time.perf_counter() - start, 1)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))
    print(report(out))
    print(f"wall time {out['wall_s']} s (a shared machine: not a speed measurement)")
    return 1 if out["violations"] or out["crashes"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
