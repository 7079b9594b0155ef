"""The BERT forward pass as an ONNX graph, built from the safetensors weights and run by onnxruntime.

The graph is written node by node with the ``onnx`` package's helper API from the same tensors
:class:`documents.embedders.bert_numpy.NumpyBert` uses (no exporter, no torch), in memory when the
model loads: nothing is cached on disk, so it works offline and on a fresh clone, and it can
never go stale against the weights. It uses onnxruntime's fused CPU kernels (the ``com.microsoft``
domain): ``Attention`` (query/key/value product, masked softmax and context in one op),
``SkipLayerNormalization`` (residual add + bias + LayerNorm) and ``BiasGelu`` (bias + exact erf
GELU, as BERT's); mean pooling and L2 normalisation are in the graph too. The session runs with
full graph optimisation on ``threads`` intra-op threads (1: workers are processes sharing few
cores) and is built once per encoder.

Its vectors equal the numpy pass's to float32 rounding (cosine > 0.99999; measured in
``bench/embed_speed.py``, pinned in ``tests/documents/test_embedding_onnx.py``).

No Django here: benchmarks import this module on its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from documents.embedders.bert_numpy import Array, BertConfig

if TYPE_CHECKING:
    import onnx

OPSET = 17  # LayerNormalization is a standard op from 17 on
MS_DOMAIN = "com.microsoft"


def build_graph(
    tensors: dict[str, Array], config: BertConfig, *, token_vectors: bool = False, normalize: bool = True
) -> onnx.ModelProto:
    """The encoder as an ONNX model: inputs ``input_ids`` (int64) and ``attention_mask`` (int64,
    1 for a real token, right-padded), both ``(batch, width)``; output ``embedding``
    ``(batch, dimension)``, the mean of the real tokens' last hidden states with unit L2 norm.

    With ``token_vectors`` the word table stays out of the graph (and of ``tensors``): the
    input ``token_vectors`` (float32, ``(batch, width, dimension)``) replaces ``input_ids``, each
    token's word row plus the token type's. Without ``normalize`` the mean keeps its length
    (to be averaged with other windows of a long text first)."""
    from onnx import TensorProto, helper, numpy_helper

    initializers: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def weight(name: str, array: npt.NDArray[Any]) -> str:
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(op: str, inputs: list[str], output: str, *, domain: str = "", **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, domain=domain, **attrs))
        return output

    def t(name: str) -> Array:
        return tensors[name]

    eps = config.eps
    # Embeddings: the word rows plus the first token type's (every text is one segment), so one
    # Gather replaces two; then the positions of this batch's width and a LayerNorm.
    first_input = "token_vectors" if token_vectors else "input_ids"
    position = weight("position", t("embeddings.position_embeddings.weight"))
    zero = weight("zero", np.array([0], dtype=np.int64))
    one = weight("one", np.array([1], dtype=np.int64))
    axis1 = weight("axis1", np.array([1], dtype=np.int64))
    axis2 = weight("axis2", np.array([2], dtype=np.int64))
    width = node(
        "Slice",
        [node("Shape", [first_input], "ids_shape"), one, weight("two", np.array([2], dtype=np.int64))],
        "width",
    )
    positions = node("Slice", [position, zero, width], "positions")
    if token_vectors:
        h = node("Add", ["token_vectors", positions], "embedded")
    else:
        word = weight(
            "word",
            t("embeddings.word_embeddings.weight") + t("embeddings.token_type_embeddings.weight")[0],
        )
        h = node("Add", [node("Gather", [word, "input_ids"], "tokens"), positions], "embedded")
    h = node(
        "LayerNormalization",
        [
            h,
            weight("emb_ln_w", t("embeddings.LayerNorm.weight")),
            weight("emb_ln_b", t("embeddings.LayerNorm.bias")),
        ],
        "emb_ln",
        axis=-1,
        epsilon=eps,
    )
    mask_i32 = node("Cast", ["attention_mask"], "mask_i32", to=TensorProto.INT32)

    for i in range(config.layers):
        p = f"encoder.layer.{i}"

        def w(name: str, layer: str = p) -> Array:
            return np.ascontiguousarray(tensors[f"{layer}.{name}.weight"].T)

        def b(name: str, layer: str = p) -> Array:
            return tensors[f"{layer}.{name}.bias"]

        qkv_w = np.concatenate(
            [w("attention.self.query"), w("attention.self.key"), w("attention.self.value")], axis=1
        )
        qkv_b = np.concatenate(
            [b("attention.self.query"), b("attention.self.key"), b("attention.self.value")]
        )
        # A raw 0/1 mask (batch, width): padded keys get no weight.
        context = node(
            "Attention",
            [h, weight(f"l{i}_qkv_w", qkv_w), weight(f"l{i}_qkv_b", qkv_b), mask_i32],
            f"l{i}_context",
            domain=MS_DOMAIN,
            num_heads=config.heads,
        )
        attended = node(
            "MatMul", [context, weight(f"l{i}_out_w", w("attention.output.dense"))], f"l{i}_attended"
        )
        h = node(
            "SkipLayerNormalization",
            [
                attended,
                h,
                weight(f"l{i}_ln1_w", t(f"{p}.attention.output.LayerNorm.weight")),
                weight(f"l{i}_ln1_b", t(f"{p}.attention.output.LayerNorm.bias")),
                weight(f"l{i}_out_b", b("attention.output.dense")),
            ],
            f"l{i}_ln1",
            domain=MS_DOMAIN,
            epsilon=eps,
        )
        inner = node("MatMul", [h, weight(f"l{i}_inter_w", w("intermediate.dense"))], f"l{i}_inner")
        inner = node(
            "BiasGelu",
            [inner, weight(f"l{i}_inter_b", b("intermediate.dense"))],
            f"l{i}_gelu",
            domain=MS_DOMAIN,
        )
        ffn = node("MatMul", [inner, weight(f"l{i}_ffn_w", w("output.dense"))], f"l{i}_ffn")
        h = node(
            "SkipLayerNormalization",
            [
                ffn,
                h,
                weight(f"l{i}_ln2_w", t(f"{p}.output.LayerNorm.weight")),
                weight(f"l{i}_ln2_b", t(f"{p}.output.LayerNorm.bias")),
                weight(f"l{i}_ffn_b", b("output.dense")),
            ],
            f"l{i}_ln2",
            domain=MS_DOMAIN,
            epsilon=eps,
        )

    # Mean over the real tokens, then unit length (the model's pooling and normalisation).
    mask_f = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    masked = node("Mul", [h, node("Unsqueeze", [mask_f, axis2], "mask_3d")], "masked")
    summed = node("ReduceSum", [masked, axis1], "summed", keepdims=0)
    count = node("ReduceSum", [mask_f, axis1], "count", keepdims=1)
    count = node("Max", [count, weight("min_count", np.array([1.0], dtype=np.float32))], "count_1")
    if normalize:
        node("LpNormalization", [node("Div", [summed, count], "pooled")], "embedding", axis=-1, p=2)
    else:
        node("Div", [summed, count], "embedding")

    graph = helper.make_graph(
        nodes,
        "bert_sentence_encoder",
        [
            helper.make_tensor_value_info(
                "token_vectors", TensorProto.FLOAT, ["batch", "width", config.dimension]
            )
            if token_vectors
            else helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "width"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "width"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", config.dimension])],
        initializers,
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS_DOMAIN, 1)],
        producer_name="documents.embedders.bert_onnx",
    )


class OnnxBert:
    """The forward pass on onnxruntime: ``(ids, mask) -> unit vectors``, as :class:`NumpyBert`.

    The session is made once (full graph optimisation, ``threads`` intra-op threads, one
    inter-op thread) and is safe to call from several threads.
    """

    def __init__(self, tensors: dict[str, Array], config: BertConfig, *, threads: int = 1) -> None:
        self.session = make_session(build_graph(tensors, config), threads=threads)

    def __call__(self, ids: npt.NDArray[np.int64], mask: Array) -> Array:
        (vectors,) = self.session.run(
            ["embedding"], {"input_ids": ids, "attention_mask": mask.astype(np.int64)}
        )
        return np.asarray(vectors, dtype=np.float32)


def make_session(model: onnx.ModelProto, *, threads: int = 1) -> Any:
    """An onnxruntime session of ``model``: full graph optimisation, ``threads`` intra-op threads,
    one inter-op thread, no spinning; safe to call from several threads."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # Spinning threads would burn a core that another worker process needs.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
