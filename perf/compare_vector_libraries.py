"""Vector search libraries beside brainy's own index, in one process and run: build time, top-10 p50, recall@10.

    OMP_NUM_THREADS=2 python perf/compare_vector_libraries.py 20000 clustered exact,usearch,hnswlib,faiss,brainy
    python perf/compare_vector_libraries.py 1000000 clustered hnswlib,usearch,faiss,brainy --build-threads 2

Candidates: usearch, hnswlib, faiss-cpu (HNSW, M 16, efConstruction 128; built on ``--build-threads`` threads,
searched on one) and the exact numpy/BLAS scan; ``brainy``: brainy's ``VectorIndex`` over the same vectors, its
graph (faiss HNSW, the same M and efConstruction) caught up and searched with the efSearch it picks for its size
(``vectors.EF_SEARCH``), its exact re-scoring and liveness checks included; ``brainy-partitioned``: the same
index read back from a base written with its partitioned copy, searched before its graph is taken (what a first
search after an open answers from). Each library is swept over efSearch values (``--efs``). Data: ``random``
(Gaussian, unit length) or ``clustered`` (n/200 centres, noise 0.35), perf/bench_vectors.py's, at this script's
seed; queries near stored vectors (noise 0.1), 200 of them. p50 is the median of one pass over the queries after
a warming pass, each query one call. Not a pyperf benchmark: a table for the commit that chooses.
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_vectors import queries, vectors


def data(n, kind, seed=7):
    """The bench's data sets (perf/bench_vectors.py), at this script's seed."""
    x = vectors(n, kind, seed)
    return x, queries(x, seed + 1)


def exact(x, q, k=10):
    s = x @ q
    i = np.argpartition(-s, k)[:k]
    return i[np.argsort(-s[i])]


def truths(x, qs, k=10):
    """The exact top-k of every query, 50 queries a pass over the rows."""
    out = []
    for at in range(0, len(qs), 50):
        s = x @ qs[at : at + 50].T
        out += [set(np.argpartition(-s[:, j], k)[:k].tolist()) for j in range(s.shape[1])]
    return out


def p50(fn, qs):
    for q in qs:  # a warming pass: first touches of pages and caches are not what is compared
        fn(q)
    ts = []
    for q in qs:
        t = time.perf_counter()
        fn(q)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1000


def recall(fn, truth, qs):
    return sum(len(want & set(np.asarray(fn(q)).tolist()[:10])) / 10 for q, want in zip(qs, truth)) / len(qs)


def brainy_index(x):
    """brainy's VectorIndex of ``x`` (dense int i for row i), its graph caught up."""
    from brainy.index.vectors import VectorIndex

    index = VectorIndex()
    index.apply_all((None, {"denseInt": i, "vector": x[i].tobytes()}) for i in range(len(x)))
    index.stamp = 1
    index.catch_up()
    return index


def brainy_partitioned(index, folder):
    """``index`` written as a base with its partitioned copy and read back, the graph left untaken."""
    from brainy.index import vector_partitions as VP
    from brainy.index.vector_format import write_link
    from brainy.index.vectors import read_chain

    frozen = index.freeze(base=True)
    write_link(folder, frozen, frozen.encode())
    started = time.perf_counter()
    assert VP.write_partitioned(
        folder, 1, len(frozen.dense), frozen.vectors.contiguous(len(frozen.dense)), frozen.dense
    )
    built = time.perf_counter() - started
    read, why = read_chain(folder, 10**12, graph_later=True)
    assert read is not None and not why and read._partitions is not None, why
    return read, built


def run(n, kind, which, efs, threads):
    x, qs = data(n, kind)
    truth = truths(x, qs)
    out = {}

    def row(name, build, fn):
        out[name] = (build, p50(fn, qs), recall(fn, truth, qs))
        print(
            f"{n:>9,} {kind:>9} {name:<22} build {build:8.1f} s  p50 {out[name][1]:6.3f} ms  recall@10 {out[name][2]:.3f}",
            flush=True,
        )

    if "exact" in which:
        row("exact", 0.0, lambda q: exact(x, q))
    if "usearch" in which:
        from usearch.index import Index

        t = time.perf_counter()
        idx = Index(ndim=384, metric="ip", dtype="f32", connectivity=16, expansion_add=128)
        idx.add(np.arange(n), x, threads=threads)
        b = time.perf_counter() - t
        for ef in efs:
            idx.expansion_search = ef
            row(f"usearch ef{ef}", b, lambda q: idx.search(q, 10, threads=1).keys)
        del idx
    if "hnswlib" in which:
        import hnswlib

        t = time.perf_counter()
        idx = hnswlib.Index(space="ip", dim=384)
        idx.init_index(max_elements=n, ef_construction=128, M=16)
        idx.set_num_threads(threads)
        idx.add_items(x, np.arange(n))
        b = time.perf_counter() - t
        idx.set_num_threads(1)
        for ef in efs:
            idx.set_ef(ef)
            row(f"hnswlib ef{ef}", b, lambda q: idx.knn_query(q, k=10)[0][0])
        del idx
    if "faiss" in which or "brainy" in which:
        import faiss

        from brainy.index import vectors as V

        faiss.omp_set_num_threads(threads)
        t = time.perf_counter()
        index = brainy_index(x)  # its graph: faiss IndexHNSWSQ (float16 copies), M 16, efConstruction 128
        b = time.perf_counter() - t
        faiss.omp_set_num_threads(1)
        graph = index._graph
        if "faiss" in which:
            for ef in efs:
                params = faiss.SearchParametersHNSW()
                params.efSearch = ef
                row(f"faiss-hnsw ef{ef}", b, lambda q: graph.search(q[None, :], 10, params=params)[1][0])
        if "brainy" in which:
            chosen = V.ef_search(n)
            row(f"brainy graph ef{chosen}", b, lambda q: index.search(q, 10)[1])
            from brainy.index import vector_partitions as VP

            if n < VP.PARTITION_SLOTS:
                return  # a base this small has no partitioned copy
            with tempfile.TemporaryDirectory() as folder:
                read, built = brainy_partitioned(index, Path(folder))
                del index, graph
                row("brainy partitioned", built, lambda q: read.search(q, 10)[1])
                del read


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int)
    parser.add_argument("kind", choices=["clustered", "random"])
    parser.add_argument("which", help="comma-separated: exact, usearch, hnswlib, faiss, brainy")
    parser.add_argument("--efs", default="64,128,256,512", help="efSearch values swept (default 64,128,256,512)")
    parser.add_argument("--build-threads", type=int, default=1, help="threads a library builds on (searches: one)")
    args = parser.parse_args()
    run(args.n, args.kind, args.which.split(","), [int(e) for e in args.efs.split(",")], args.build_threads)
