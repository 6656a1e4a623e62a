"""The measurement that chose the vector index's library: build time, top-10 p50, recall@10 against exact.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python perf/compare_vector_libraries.py 20000 clustered exact,usearch,hnswlib,faiss

Candidates: usearch, hnswlib, faiss-cpu (HNSW, M 16, efConstruction 128, one thread each) and the exact
numpy/BLAS scan. Data: ``random`` (Gaussian, unit length) or ``clustered`` (n/200 centres, noise 0.35),
queries near stored vectors (noise 0.1), 200 of them. Not a pyperf benchmark: a one-off table for the
commit that chose; the engine's own figures are perf/bench_vectors.py's.
"""

import statistics
import sys
import time

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


def p50(fn, qs):
    ts = []
    for q in qs:
        t = time.perf_counter()
        fn(q)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1000


def recall(fn, x, qs):
    r = 0
    for q in qs:
        truth = set(exact(x, q).tolist())
        r += len(truth & set(np.asarray(fn(q)).tolist()[:10])) / 10
    return r / len(qs)


def run(n, kind, which):
    x, qs = data(n, kind)
    out = {}
    if "exact" in which:
        out["exact"] = (0.0, p50(lambda q: exact(x, q), qs), 1.0)
    if "usearch" in which:
        from usearch.index import Index

        t = time.perf_counter()
        idx = Index(ndim=384, metric="ip", dtype="f32", connectivity=16, expansion_add=128, expansion_search=64)
        idx.add(np.arange(n), x, threads=1)
        b = time.perf_counter() - t
        f = lambda q: idx.search(q, 10, threads=1).keys
        out["usearch"] = (b, p50(f, qs), recall(f, x, qs))
        for ef in (128, 256):
            idx.expansion_search = ef
            out[f"usearch ef{ef}"] = (b, p50(f, qs), recall(f, x, qs))
    if "hnswlib" in which:
        import hnswlib

        t = time.perf_counter()
        idx = hnswlib.Index(space="ip", dim=384)
        idx.init_index(max_elements=n, ef_construction=128, M=16)
        idx.set_num_threads(1)
        idx.add_items(x, np.arange(n))
        b = time.perf_counter() - t
        for ef in (64, 128, 256):
            idx.set_ef(ef)
            f = lambda q: idx.knn_query(q, k=10)[0][0]
            out[f"hnswlib ef{ef}"] = (b, p50(f, qs), recall(f, x, qs))
    if "faiss" in which:
        import faiss

        faiss.omp_set_num_threads(1)
        t = time.perf_counter()
        idx = faiss.IndexHNSWFlat(384, 16, faiss.METRIC_INNER_PRODUCT)
        idx.hnsw.efConstruction = 128
        idx.add(x)
        b = time.perf_counter() - t
        for ef in (64, 128, 256):
            idx.hnsw.efSearch = ef
            f = lambda q: idx.search(q[None, :], 10)[1][0]
            out[f"faiss-hnsw ef{ef}"] = (b, p50(f, qs), recall(f, x, qs))
        fl = faiss.IndexFlatIP(384)
        fl.add(x)
        f = lambda q: fl.search(q[None, :], 10)[1][0]
        out["faiss-flat"] = (0.0, p50(f, qs), recall(f, x, qs))
    for k, (b, p, r) in out.items():
        print(f"{n:>7} {kind:>9} {k:<18} build {b:7.2f} s  p50 {p:6.3f} ms  recall@10 {r:.3f}", flush=True)


if __name__ == "__main__":
    n = int(sys.argv[1])
    kind = sys.argv[2]
    which = sys.argv[3].split(",")
    run(n, kind, which)
