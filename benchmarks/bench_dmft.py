"""Benchmark of the DMFT solver: single GeLU neuron on y = z², 10⁵ paths.

Reports the time of 100 and 200 steps (target: 100 steps < 5 s; 200 steps
<= 5 × 100 steps, i.e. no worse than T²), for the default Stein responses
with replicate errors and with cheap batch errors, the pathwise method on a
shorter run, and the peak RSS of a 1000-step run (in a subprocess).

Run: python benchmarks/bench_dmft.py [--skip-1000]
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

from dmftsolve import Problem
from dmftsolve.dynamics.dmft import solve_dmft


def problem(steps: int) -> Problem:
    return Problem.build(target="z**2", activation="gelu", eta=0.2, steps=steps, hold_zero=(0,))


def timed(steps: int, **kw) -> float:
    t0 = time.perf_counter()
    r = solve_dmft(problem(steps), 4.0, n_paths=100_000, seed=0, **kw)
    assert r.ok
    return time.perf_counter() - t0


def rss_run(steps: int, errors: str) -> dict:
    code = (
        "import resource, time, json\n"
        "from dmftsolve import Problem\n"
        "from dmftsolve.dynamics.dmft import solve_dmft\n"
        f"p = Problem.build(target='z**2', activation='gelu', eta=0.2, steps={steps}, hold_zero=(0,))\n"
        "t0 = time.perf_counter()\n"
        f"r = solve_dmft(p, 4.0, n_paths=100_000, seed=0, errors='{errors}')\n"
        "print(json.dumps({'seconds': time.perf_counter() - t0, 'ok': r.ok, "
        "'peak_rss_GiB': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    report = {}
    for errors in ("batch", "replicate"):
        t100 = timed(100, errors=errors)
        t200 = timed(200, errors=errors)
        report[f"stein/{errors}"] = {"100 steps s": t100, "200 steps s": t200,
                                     "ratio": t200 / t100}
        print(f"stein, errors={errors:9s}: 100 steps {t100:6.2f} s, 200 steps {t200:6.2f} s, "
              f"ratio {t200 / t100:.2f} (target <= 5)", flush=True)
    tp = timed(30, method="pathwise", errors="batch")
    ts = timed(30, errors="batch")
    report["pathwise/batch 30 steps s"] = tp
    print(f"30 steps: pathwise {tp:.2f} s vs stein {ts:.2f} s", flush=True)
    if "--skip-1000" not in sys.argv:
        r = rss_run(1000, "batch")
        report["1000 steps batch"] = r
        print(f"1000 steps (errors=batch): {r['seconds']:.1f} s, peak RSS {r['peak_rss_GiB']:.2f} GiB",
              flush=True)
    print(f"this process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
