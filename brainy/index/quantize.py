"""The model the embedder runs: the installed one with its matrix products made integer, derived once per
machine and kept in brainy's cache (docs/recall-models.md, "The model the embedder runs").

The installed ``model.onnx`` stores its weights as int8 but turns them back into float32 when it loads, so
every product runs in float32: about 10 ms a short text on one core. onnxruntime's dynamic quantization
makes the same products int8 × int8 (each weight column with its own scale, each activation scaled as it
runs), 2.6 times faster on the same core and within cosine 0.985 of the float32 model (recall on
``perf/eval_conversations.py`` unchanged). It is derived from the installed file by the installed
libraries, so nothing is fetched; the derived file is named by the source's checksum and the quantizer's
version, written once (to a temporary name, then renamed, so a reader never sees half of it) and read
after that. When it cannot be made (``onnx`` not installed, no writable cache), the installed model runs
as it is and :func:`derived` says why.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

CACHE = "BRAINY_CACHE_DIR"
VARIANT = "int8-dynamic"  # what :func:`derived` makes; "as-installed" when it runs the source itself
RECIPE = 1  # raised whenever the derivation changes, so a file made the old way is never read


@dataclass(frozen=True)
class Model:
    path: Path
    variant: str  # VARIANT, or "as-installed"
    reason: str | None = None  # why it runs as installed


class _Quiet(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing" not in record.getMessage()


def cache_dir() -> Path:
    """``BRAINY_CACHE_DIR``, else ``$XDG_CACHE_HOME/brainy``, else ``~/.cache/brainy``."""
    chosen = os.environ.get(CACHE)
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "brainy"


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def derived(source: Path) -> Model:
    """The model to run for ``source``: the integer form from the cache, made now when it is not there yet."""
    try:
        import onnxruntime
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as missing:  # onnx is what the quantizer needs beyond the runtime
        return Model(source, "as-installed", f"the quantizer cannot load: {missing}")
    name = f"{source.stem}-{_digest(source)[:16]}-{VARIANT}-r{RECIPE}-ort{onnxruntime.__version__}.onnx"
    target = cache_dir() / "models" / name
    if target.is_file():
        return Model(target, VARIANT)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".deriving-") as work:
            plain = Path(work) / "float32.onnx"
            options = onnxruntime.SessionOptions()
            # the stored int8 weights folded to float32 constants: the graph the quantizer reads
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
            options.optimized_model_filepath = str(plain)
            onnxruntime.InferenceSession(str(source), sess_options=options, providers=["CPUExecutionProvider"])
            made = Path(work) / name
            quiet = _Quiet()  # the quantizer advises a pre-processing step on the root logger; this graph needs none
            logging.getLogger().addFilter(quiet)
            try:
                quantize_dynamic(str(plain), str(made), weight_type=QuantType.QInt8, per_channel=True)
            finally:
                logging.getLogger().removeFilter(quiet)
            os.replace(made, target)
    except OSError as failed:
        return Model(source, "as-installed", f"the integer model could not be kept in {target.parent}: {failed}")
    return Model(target, VARIANT)
