"""The activations a transformer's backward pass keeps, term by term (Korthikanti et al. 2022).

Rule: "Reducing Activation Recomputation in Large Transformer Models" (Korthikanti et al.,
2022, section 4.1) counts what one layer keeps for its backward pass at 16 bits, with a 4h MLP,
dropout (1-byte masks) and attention computed without flash attention, as
``s b h (34 + 5 a s / h)`` bytes (s: sequence length, b: micro-batch, h: hidden size, a: heads).
These are its terms, each a tensor of ``shape`` entries (``tokens`` = s b; q = a x head_dim,
kv = key/value heads x head_dim; i the MLP's width) and a ``kind`` that says how a recipe
stores it (``core.compare.architecture_ledger``), with the bytes the paper gives each::

    term                      shape           kind         the paper's bytes
    attention_norm_input      (tokens, h)     high         2sbh   layer norm's input
    qkv_input                 (tokens, h)     gemm input   2sbh   the QKV matmul's input
    query, key                (tokens, q|kv)  high         4sbh   Q K^T's inputs
    value                     (tokens, kv)    high         2sbh   the values
    attention_probs           (b a s, s)      high         2as^2b softmax output   } without
    attention_dropout_mask    (b a s, s)      mask         as^2b                   } flash
    attention_dropout_output  (b a s, s)      high         2as^2b                  } attention
    proj_input                (tokens, q)     gemm input   2sbh   the output projection's input
    attention_residual_mask   (tokens, h)     mask         sbh
    mlp_norm_input            (tokens, h)     high         2sbh
    fc1_input                 (tokens, h)     gemm input   2sbh
    fc1_output                (tokens, i|2i)  high         8sbh   GELU's input (SwiGLU: gate, up)
    fc2_input                 (tokens, i)     gemm input   8sbh   GELU's output
    mlp_dropout_mask          (tokens, h)     mask         sbh
                                                           34sbh + 5as^2b

The masks and the dropout output exist only with dropout. With flash attention the three
(b a s, s) terms are never stored: its backward reads the output O, kept at 16 bits
(``attention_output``, high), and one float32 log-sum-exp per head and token
(``softmax_stats``); the projection's input is then O itself, so ``proj_input`` is kept only as
a quantizing recipe's copy of it (kind ``quantized copy``). The output layer, once (section
4.2): the embedding's dropout mask (with dropout), the final norm's input and the head's input
(high), and the logits in float32 for the cross entropy (``(tokens, vocab)``, 4sbv). With full
recomputation a layer keeps only its input (``layer_input``, high: 2sbh) and recomputes the
rest, one layer at a time. A norm's statistics (a few bytes per token) are not counted.

Example::

    >>> from playground.core.compare.architecture import architecture
    >>> gpt = architecture({"family": "gpt2", "hidden_size": 8, "num_attention_heads": 2,
    ...     "num_key_value_heads": 2, "intermediate_size": 32, "dropout": True})
    >>> terms = layer_terms(gpt, sequence_length=4, micro_batch=1, flash_attention=False)
    >>> sum(t.entries * SIXTEEN_BIT_BYTES[t.kind] for t in terms) == 4 * 8 * (34 + 5 * 2 * 4 / 8)
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from playground.core.compare.architecture import Architecture

HIGH, GEMM_INPUT, QUANTIZED_COPY, MASK, FLOAT32 = (
    "high",
    "gemm input",
    "quantized copy",
    "mask",
    "float32",
)
KINDS = (HIGH, GEMM_INPUT, QUANTIZED_COPY, MASK, FLOAT32)
# Bytes per entry of each kind when nothing is quantized (the paper's 16-bit activations).
SIXTEEN_BIT_BYTES = {HIGH: 2, GEMM_INPUT: 2, QUANTIZED_COPY: 0, MASK: 1, FLOAT32: 4}


@dataclass(frozen=True)
class Term:
    """One tensor the backward pass keeps (see the module rule): ``shape`` entries of
    ``kind``; a GEMM input's shape is (tokens, features)."""

    name: str
    shape: tuple[int, int]
    kind: str

    @property
    def entries(self) -> int:
        return math.prod(self.shape)


def layer_terms(
    model: Architecture, sequence_length: int, micro_batch: int, flash_attention: bool
) -> tuple[Term, ...]:
    """What one layer keeps without recomputation (the module rule's table)."""
    tokens, h = sequence_length * micro_batch, model.hidden_size
    q, kv, i = model.query_width, model.key_value_width, model.intermediate_size
    scores = (micro_batch * model.num_attention_heads * sequence_length, sequence_length)
    terms = [
        Term("attention_norm_input", (tokens, h), HIGH),
        Term("qkv_input", (tokens, h), GEMM_INPUT),
        Term("query", (tokens, q), HIGH),
        Term("key", (tokens, kv), HIGH),
        Term("value", (tokens, kv), HIGH),
    ]
    if flash_attention:
        terms += [
            Term("attention_output", (tokens, q), HIGH),
            Term("softmax_stats", (tokens, model.num_attention_heads), FLOAT32),
            Term("proj_input", (tokens, q), QUANTIZED_COPY),
        ]
    else:
        terms.append(Term("attention_probs", scores, HIGH))
        if model.dropout:
            terms += [
                Term("attention_dropout_mask", scores, MASK),
                Term("attention_dropout_output", scores, HIGH),
            ]
        terms.append(Term("proj_input", (tokens, q), GEMM_INPUT))
    if model.dropout:
        terms.append(Term("attention_residual_mask", (tokens, h), MASK))
    terms += [
        Term("mlp_norm_input", (tokens, h), HIGH),
        Term("fc1_input", (tokens, h), GEMM_INPUT),
        Term("fc1_output", (tokens, 2 * i if model.swiglu else i), HIGH),
        Term("fc2_input", (tokens, i), GEMM_INPUT),
    ]
    if model.dropout:
        terms.append(Term("mlp_dropout_mask", (tokens, h), MASK))
    return tuple(terms)


def layer_input(model: Architecture, sequence_length: int, micro_batch: int) -> Term:
    """What a layer keeps under full recomputation: its input."""
    return Term("layer_input", (sequence_length * micro_batch, model.hidden_size), HIGH)


def output_terms(model: Architecture, sequence_length: int, micro_batch: int) -> tuple[Term, ...]:
    """What the embedding and the output layer keep, once (the module rule)."""
    tokens, h = sequence_length * micro_batch, model.hidden_size
    terms = [Term("embedding_dropout_mask", (tokens, h), MASK)] if model.dropout else []
    return (
        *terms,
        Term("final_norm_input", (tokens, h), HIGH),
        Term("head_input", (tokens, h), HIGH),
        Term("logits", (tokens, model.vocab_size), FLOAT32),
    )
