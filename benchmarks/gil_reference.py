"""What CPython itself gives up when N threads share the work: ``python benchmarks/gil_reference.py``.

How it works: a fixed amount of pure-Python work (dict stores and integer arithmetic, no I/O, no
locks) runs once in one thread and once split over N threads, alternating, ``--reps`` times. Each
pair gives a ratio (N-thread rate / one-thread rate); the median is printed as JSON. Only one thread
holds the GIL at a time, so the ratio can at best be 1.0; what is lost is the interpreter's own cost of
handing the GIL over (a forced switch every ``sys.getswitchinterval()``). ``run.py`` prints it next
to the producer's thread scaling measured in the same run, as the ceiling a pure-Python ``send()``
can reach on that machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time


def _work(n: int) -> None:
    d: dict[int, int] = {}
    for i in range(n):
        d[i & 1023] = i * 3


def _rate(threads: int, total: int) -> float:
    workers = [threading.Thread(target=_work, args=(total // threads,)) for _ in range(threads)]
    started = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return total / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description="pure-Python N-thread / 1-thread throughput ratio")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--work", type=int, default=3_000_000, help="loop iterations per run")
    args = parser.parse_args()
    ratios = []
    for _ in range(args.reps):
        one = _rate(1, args.work)
        many = _rate(args.threads, args.work)
        ratios.append(many / one)
    print(json.dumps({"threads": args.threads, "median_ratio": statistics.median(ratios),
                      "ratios": [round(r, 3) for r in ratios]}))


if __name__ == "__main__":
    main()
