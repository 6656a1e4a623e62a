"""Benchmark: posting-list intersection and union with each twin of postings.

    python perf/bench_postings.py --fast          # quick look
    python perf/bench_postings.py -o post.json    # keep the figures (pyperf compare_to ...)

Three shapes a find meets (brainy/index/where.py, "The planner's part"):

- ``intersect 1k x 100k``: a rare value against a common one (ratio 100: the galloping path);
- ``intersect 50k x 50k``: two common values of one size (the linear merge);
- ``union 10 x 10k``: an ``in`` over ten values, ten lists of 10,000 (union_many).

Dense ints are drawn without repeats from 0..1,000,000 (a store of a million rows), from a fixed
seed, so every pyperf worker times the same lists.
"""

import random
from array import array

import pyperf

from brainy._speedups import load

UNIVERSE = 1_000_000


def postings(rnd, n):
    return array("Q", sorted(rnd.sample(range(UNIVERSE), n)))


def main():
    runner = pyperf.Runner()
    rnd = random.Random(20250601)
    small, large = postings(rnd, 1_000), postings(rnd, 100_000)
    left, right = postings(rnd, 50_000), postings(rnd, 50_000)
    tens = [postings(rnd, 10_000) for _ in range(10)]
    for which in ("cython", "python"):
        try:
            twin = load("postings", which)
        except ImportError:
            continue  # the compiled twin is not built here; the pure one still runs
        runner.bench_func(f"postings.intersect 1k x 100k [{which}]", twin.intersect, small, large)
        runner.bench_func(f"postings.intersect 50k x 50k [{which}]", twin.intersect, left, right)
        runner.bench_func(f"postings.union_many 10 x 10k [{which}]", twin.union_many, tens)


if __name__ == "__main__":
    main()
