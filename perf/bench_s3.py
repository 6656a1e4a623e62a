"""Benchmark: the S3 clients shipping could use, on the calls it makes, against moto's server on loopback.

    python perf/bench_s3.py                 # starts moto's ThreadedMotoServer on a loopback port
    python perf/bench_s3.py -n 1000 --size 4096

Timed one call at a time (a ``--ship sync`` write waits on one conditional put of its group's frames, so the
cost per call is what matters), each ``n`` times after ``n // 10`` untimed: ``put_new`` (a ``size``-byte object
under ``If-None-Match: *``, a fresh name each time), ``get`` (that object back) and ``list`` (a prefix of 100
names). Printed per client: p50 and p99 in microseconds. moto's own cost is in both columns alike.

Candidates: brainy's own SigV4 client (``brainy.fleet.objectstore``: blocking sockets, one kept-alive
connection) and boto3 (botocore). aiobotocore is not measured: shipping runs on worker threads, not the loop.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BUCKET = "brainy-bench"


def _quantiles(samples: list[int]) -> str:
    samples.sort()
    p50 = samples[len(samples) // 2] / 1000
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))] / 1000
    return f"p50 {p50:8.1f} us   p99 {p99:8.1f} us"


def _timed(n: int, op: Callable[[int], object]) -> str:
    for i in range(n // 10):
        op(-1 - i)
    samples = []
    for i in range(n):
        started = time.perf_counter_ns()
        op(i)
        samples.append(time.perf_counter_ns() - started)
    return _quantiles(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=500)
    parser.add_argument("--size", type=int, default=4096)
    args = parser.parse_args()
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    body = b"x" * args.size
    try:
        from brainy.fleet.objectstore import ObjectStore

        own = ObjectStore.from_url(f"s3://{BUCKET}/own", env)
        own.create_bucket()
        for i in range(100):
            own.put_new(f"listed/{i:04d}", b"")
        print(f"own SigV4    put_new  {_timed(args.n, lambda i: own.put_new(f'p/{i}', body))}")
        print(f"own SigV4    get      {_timed(args.n, lambda i: own.get(f'p/{max(i, 0)}'))}")
        print(f"own SigV4    list     {_timed(args.n // 5, lambda i: own.list('listed/'))}")
        try:
            import boto3
        except ImportError as exc:
            print(f"boto3: not installed ({exc})")
            return
        s3 = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
            region_name="us-east-1",
        )
        for i in range(100):
            s3.put_object(Bucket=BUCKET, Key=f"boto/listed/{i:04d}", Body=b"")

        def boto_put(i: int) -> None:
            s3.put_object(Bucket=BUCKET, Key=f"boto/p/{i}", Body=body, IfNoneMatch="*")

        print(f"boto3        put_new  {_timed(args.n, boto_put)}")
        print(
            f"boto3        get      {_timed(args.n, lambda i: s3.get_object(Bucket=BUCKET, Key=f'boto/p/{max(i, 0)}')['Body'].read())}"
        )
        print(
            f"boto3        list     {_timed(args.n // 5, lambda i: s3.list_objects_v2(Bucket=BUCKET, Prefix='boto/listed/'))}"
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
