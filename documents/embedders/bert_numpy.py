"""The BERT forward pass in numpy, and the model's config and weights as both runtimes read them.

Why not torch: the model (all-MiniLM-L6-v2: 6 layers, 384 wide, 22 M parameters) is small enough
that numpy's BLAS matrix products run it at a speed close to torch on CPU, while torch would add
over a gigabyte to the install (see ``bench/README.md``, "Embedding model"). The weights are read
from the package's ``model.safetensors`` with ``safetensors``; text is tokenised with the model's
own ``tokenizer.json`` by Hugging Face ``tokenizers``. Both are small, well-kept libraries.

The computation is the standard post-LayerNorm BERT encoder followed by the model's pooling
(mean over the real tokens, as its ``1_Pooling/config.json`` says) and L2 normalisation; the test
suite checks the vectors against reference vectors made by sentence-transformers itself.

No Django here: benchmarks import this module on its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float32]


def _gelu_(x: Array) -> Array:
    """BERT's exact (erf) GELU, computed in place in ``x`` (a fresh temporary) to spare memory traffic.

    numpy has no erf and scipy is a large dependency for one function: Abramowitz & Stegun 7.1.26
    is accurate to 1.5e-7, well under float32 noise at the model's activations.
    """
    a = np.abs(x)
    a *= np.float32(1 / np.sqrt(2.0))  # |x| / sqrt(2): erf's argument
    t = a * np.float32(0.3275911)
    t += 1
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a  # 1 - erf(|x|/sqrt(2))
    # gelu(x) = x * (1 + erf(x/sqrt(2))) / 2 = x * (1 - poly/2) for x >= 0, x * poly/2 for x < 0
    poly *= np.float32(0.5)
    np.subtract(1, poly, out=poly, where=x >= 0)
    x *= poly
    return x


def _layer_norm(x: Array, weight: Array, bias: Array, eps: float) -> Array:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + eps) * weight + bias).astype(np.float32, copy=False)


class _Layer:
    """One encoder layer's weights, transposed once so every product is ``x @ W``."""

    def __init__(self, tensors: dict[str, Array], prefix: str) -> None:
        def w(name: str) -> Array:
            return np.ascontiguousarray(tensors[f"{prefix}.{name}.weight"].T)

        def b(name: str) -> Array:
            return tensors[f"{prefix}.{name}.bias"]

        # Query, key and value in one product: one large matrix multiply beats three small ones.
        self.qkv_w = np.ascontiguousarray(
            np.concatenate(
                [w("attention.self.query"), w("attention.self.key"), w("attention.self.value")], axis=1
            )
        )
        self.qkv_b = np.concatenate(
            [b("attention.self.query"), b("attention.self.key"), b("attention.self.value")]
        )
        self.out_w, self.out_b = w("attention.output.dense"), b("attention.output.dense")
        self.ln1_w = tensors[f"{prefix}.attention.output.LayerNorm.weight"]
        self.ln1_b = tensors[f"{prefix}.attention.output.LayerNorm.bias"]
        self.inter_w, self.inter_b = w("intermediate.dense"), b("intermediate.dense")
        self.ffn_w, self.ffn_b = w("output.dense"), b("output.dense")
        self.ln2_w = tensors[f"{prefix}.output.LayerNorm.weight"]
        self.ln2_b = tensors[f"{prefix}.output.LayerNorm.bias"]


@dataclass(frozen=True)
class BertConfig:
    """What the forward pass needs of ``config.json`` (and ``sentence_bert_config.json``)."""

    layers: int
    heads: int
    dimension: int
    eps: float
    max_length: int

    @classmethod
    def from_dir(cls, model_dir: Path) -> BertConfig:
        config = json.loads((model_dir / "config.json").read_text())
        st_config_path = model_dir / "sentence_bert_config.json"
        st_config = json.loads(st_config_path.read_text()) if st_config_path.exists() else {}
        return cls(
            layers=int(config["num_hidden_layers"]),
            heads=int(config["num_attention_heads"]),
            dimension=int(config["hidden_size"]),
            eps=float(config.get("layer_norm_eps", 1e-12)),
            max_length=int(st_config.get("max_seq_length", config["max_position_embeddings"])),
        )


def read_tensors(model_dir: Path) -> dict[str, Array]:
    """The model's weights from ``model.safetensors``, as float32 arrays by their BERT names."""
    from safetensors.numpy import load_file

    return {
        k: np.asarray(v, dtype=np.float32)
        for k, v in load_file(model_dir / "model.safetensors").items()
        if not k.endswith("position_ids")
    }


Forward = Callable[[npt.NDArray[np.int64], Array], Array]


class NumpyBert:
    """The forward pass in numpy: token ids ``(batch, width)`` and their 0/1 mask -> unit vectors
    (mean of the real tokens' last hidden states, L2-normalised)."""

    def __init__(self, tensors: dict[str, Array], config: BertConfig) -> None:
        self.heads, self.dimension, self.eps = config.heads, config.dimension, config.eps
        self.word = tensors["embeddings.word_embeddings.weight"]
        self.position = tensors["embeddings.position_embeddings.weight"]
        self.token_type = tensors["embeddings.token_type_embeddings.weight"][0]
        self.emb_ln_w = tensors["embeddings.LayerNorm.weight"]
        self.emb_ln_b = tensors["embeddings.LayerNorm.bias"]
        self.layers = [_Layer(tensors, f"encoder.layer.{i}") for i in range(config.layers)]

    def __call__(self, ids: npt.NDArray[np.int64], mask: Array) -> Array:
        batch, width = ids.shape
        head_dim = self.dimension // self.heads
        h = self.word[ids] + self.position[:width] + self.token_type
        h = _layer_norm(h, self.emb_ln_w, self.emb_ln_b, self.eps)
        # Padding positions get a large negative score so softmax gives them no weight.
        attn_bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(head_dim))
        for layer in self.layers:
            qkv = h @ layer.qkv_w + layer.qkv_b
            qkv = qkv.reshape(batch, width, 3, self.heads, head_dim).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + attn_bias
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores, out=scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, width, self.dimension)
            h = _layer_norm(h + context @ layer.out_w + layer.out_b, layer.ln1_w, layer.ln1_b, self.eps)
            inner = _gelu_(h @ layer.inter_w + layer.inter_b)
            h = _layer_norm(h + inner @ layer.ffn_w + layer.ffn_b, layer.ln2_w, layer.ln2_b, self.eps)
        pooled = (h * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
