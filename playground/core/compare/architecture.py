"""A decoder-only transformer's shape, as a Hugging Face ``config.json`` gives it: its weights.

Rule: an :class:`Architecture` is one of two families, each read from its config.json names::

    llama  hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads (absent:
           num_attention_heads), head_dim (absent: hidden_size / heads), intermediate_size,
           vocab_size, tie_word_embeddings (absent: false), attention_bias, mlp_bias (absent:
           false); RMSNorm (a weight), rotary positions (no weights), SwiGLU MLP
    gpt2   n_embd, n_layer, n_head, n_inner (absent or null: 4 x n_embd), vocab_size,
           n_positions, tie_word_embeddings (absent: true); LayerNorm (weight and bias),
           learned positions, biases on every linear layer, 4h GELU MLP

``dropout`` is whether any dropout probability of the config (attention_dropout,
hidden_dropout; attn_pdrop, resid_pdrop, embd_pdrop) is above 0. Its weights, with q = heads x
head_dim and kv = key/value heads x head_dim, as TransformerEngine's layers fuse them (one
GEMM, one set of FP8 scales, per line; ``shape`` is (in_features, out_features), the
playground's kernel)::

    per layer   qkv   (h, q + 2 kv)     query, key and value projections, fused
                proj  (q, h)            attention output projection
                fc1   (h, 2 i) SwiGLU (gate and up, fused), (h, i) GELU
                fc2   (i, h)
                norms, biases           vectors
    once        embedding (vocab, h); positions (n_positions, h) for gpt2; final norm;
                head (h, vocab) unless tied to the embedding

Only a layer's four GEMMs are ``quantized``: an FP8 recipe leaves the embeddings, norms and
the output layer in high precision (as Megatron-LM's output layer and TransformerEngine's
layers do).

Example::

    >>> llama = parse_config_json('{"hidden_size": 2048, "num_hidden_layers": 16, '
    ...     '"num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192, '
    ...     '"vocab_size": 128256, "tie_word_embeddings": true}')
    >>> llama.parameters, [w.shape for w in llama.weights if w.quantized]
    (1235814400, [(2048, 3072), (2048, 2048), (2048, 16384), (8192, 2048)])
    >>> parse_config_json('{"n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257, '
    ...     '"n_positions": 1024}').parameters
    124439808
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from playground.core.bounds import Bounds, ConfigError, shown

FAMILIES = ("llama", "gpt2")
# The longest config.json text read (a real one is a few kB).
MAX_CONFIG_CHARS = 100_000
# The input that carries a config.json's text.
CONFIG_JSON = "config_json"
FIELDS = {
    "family": Bounds(
        "family",
        0,
        0,
        "llama: RMSNorm, rotary positions, SwiGLU, no biases; gpt2: LayerNorm, learned "
        "positions, biases, 4h GELU.",
        choices=FAMILIES,
    ),
    "hidden_size": Bounds("hidden size h", 1, 2**17, "The model's width.", integer=True),
    "num_hidden_layers": Bounds("layers L", 1, 2**12, "Transformer layers.", integer=True),
    "num_attention_heads": Bounds("attention heads a", 1, 2**12, "Query heads.", integer=True),
    "num_key_value_heads": Bounds(
        "key/value heads",
        1,
        2**12,
        "Heads of keys and values (grouped-query attention; = a without it).",
        integer=True,
    ),
    "head_dim": Bounds("head dimension", 0, 2**12, "Per head (0: h / a).", integer=True),
    "intermediate_size": Bounds(
        "MLP width i", 1, 2**20, "The MLP's inner width (gpt2: usually 4h).", integer=True
    ),
    "vocab_size": Bounds("vocabulary V", 1, 2**22, "Tokens in the vocabulary.", integer=True),
    "max_position_embeddings": Bounds(
        "positions",
        1,
        2**22,
        "Learned position embeddings (gpt2's n_positions; llama's rotary ones have no weights).",
        integer=True,
    ),
}
# Yes/no fields: name -> (label, help).
FLAGS = {
    "tie_word_embeddings": ("tied embeddings", "The output layer reuses the embedding."),
    "dropout": ("dropout", "Dropout is on (its masks are kept, 1 byte per entry)."),
    "attention_bias": ("attention biases", "The attention's linear layers have biases."),
    "mlp_bias": ("MLP biases", "The MLP's linear layers have biases."),
}
# The names of a family's config.json -> the field each one sets.
GPT2_NAMES = {
    "n_embd": "hidden_size",
    "n_layer": "num_hidden_layers",
    "n_head": "num_attention_heads",
    "n_inner": "intermediate_size",
    "vocab_size": "vocab_size",
    "n_positions": "max_position_embeddings",
    "tie_word_embeddings": "tie_word_embeddings",
}
LLAMA_NAMES = {
    name: name
    for name in (*FIELDS, "tie_word_embeddings", "attention_bias", "mlp_bias")
    if name != "family"
}
DROPOUTS = ("attention_dropout", "hidden_dropout", "attn_pdrop", "resid_pdrop", "embd_pdrop")
PROBABILITY = Bounds("dropout probability", 0, 1, "A dropout probability.")
# A 1B Llama-like model (Llama 3.2 1B's shape): the page's starting point.
DEFAULT = {
    "family": "llama",
    "hidden_size": 2048,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 0,
    "intermediate_size": 8192,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": True,
    "dropout": False,
    "attention_bias": False,
    "mlp_bias": False,
}


@dataclass(frozen=True)
class Weight:
    """One weight of the model: ``shape`` ((in, out) for a matmul's), held ``count`` times
    (once per layer for a layer's); ``quantized``: a layer's GEMM, which an FP8 recipe
    quantizes."""

    name: str
    shape: tuple[int, ...]
    count: int
    quantized: bool = False

    @property
    def entries(self) -> int:
        return math.prod(self.shape) * self.count


def check_flag(name: str, value: Any, label: str) -> bool:
    """``value`` if it is a bool, else ConfigError naming ``name``."""
    if not isinstance(value, bool):
        raise ConfigError(name, f"{name} ({label}) must be true or false; got {shown(value)}")
    return value


@dataclass(frozen=True)
class Architecture:
    """A decoder-only transformer (see the module rule); every field checked on creation,
    ConfigError naming the field and its allowed values otherwise."""

    family: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool
    dropout: bool
    attention_bias: bool = False
    mlp_bias: bool = False

    def __post_init__(self) -> None:
        for name, bounds in FIELDS.items():
            object.__setattr__(self, name, bounds.check(name, getattr(self, name)))
        for name, (label, _) in FLAGS.items():
            check_flag(name, getattr(self, name), label)
        heads, groups = self.num_attention_heads, self.num_key_value_heads
        if not self.head_dim and self.hidden_size % heads:
            raise ConfigError(
                "num_attention_heads",
                f"num_attention_heads (attention heads a) must divide hidden_size "
                f"({self.hidden_size}) when head_dim is 0; got {heads}",
            )
        if heads % groups:
            raise ConfigError(
                "num_key_value_heads",
                f"num_key_value_heads (key/value heads) must divide num_attention_heads "
                f"({heads}); got {groups}",
            )

    @property
    def head_width(self) -> int:
        """Each head's width: head_dim, or h / a when it is 0."""
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def query_width(self) -> int:
        return self.num_attention_heads * self.head_width

    @property
    def key_value_width(self) -> int:
        return self.num_key_value_heads * self.head_width

    @property
    def swiglu(self) -> bool:
        """Whether the MLP is SwiGLU (gate and up projections) rather than one GELU layer."""
        return self.family == FAMILIES[0]

    @property
    def weights(self) -> tuple[Weight, ...]:
        """Every weight, a layer's GEMMs first (see the module rule)."""
        h, q, kv, i = (
            self.hidden_size,
            self.query_width,
            self.key_value_width,
            self.intermediate_size,
        )
        layers, vocab = self.num_hidden_layers, self.vocab_size
        fc1 = 2 * i if self.swiglu else i
        norm = (h,) if self.swiglu else (2, h)  # RMSNorm: a weight; LayerNorm: weight and bias
        attention_bias = self.attention_bias or not self.swiglu
        mlp_bias = self.mlp_bias or not self.swiglu
        found = [
            Weight("qkv", (h, q + 2 * kv), layers, quantized=True),
            Weight("proj", (q, h), layers, quantized=True),
            Weight("fc1", (h, fc1), layers, quantized=True),
            Weight("fc2", (i, h), layers, quantized=True),
            Weight("layer_norms", (2, *norm), layers),
        ]
        if attention_bias:
            found.append(Weight("attention_biases", (q + 2 * kv + h,), layers))
        if mlp_bias:
            found.append(Weight("mlp_biases", (fc1 + h,), layers))
        found.append(Weight("embedding", (vocab, h), 1))
        if not self.swiglu:
            found.append(Weight("positions", (self.max_position_embeddings, h), 1))
        found.append(Weight("final_norm", norm, 1))
        if not self.tie_word_embeddings:
            found.append(Weight("head", (h, vocab), 1))
        return tuple(found)

    @property
    def parameters(self) -> int:
        return sum(weight.entries for weight in self.weights)

    @property
    def quantized_parameters(self) -> int:
        """The entries of the weights an FP8 recipe quantizes."""
        return sum(weight.entries for weight in self.weights if weight.quantized)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def architecture(values: dict[str, Any]) -> Architecture:
    """The architecture of the fields ``values`` (missing ones from DEFAULT)."""
    fields = {field.name for field in dataclasses.fields(Architecture)}
    return Architecture(**(DEFAULT | {k: v for k, v in values.items() if k in fields}))


def _read(config: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """The fields a config sets through ``names``, each checked under the config's own key."""
    values = {}
    for key, name in names.items():
        if key not in config or config[key] is None:
            continue
        if name in FIELDS:
            values[name] = FIELDS[name].check(key, config[key])
        else:
            values[name] = check_flag(key, config[key], FLAGS[name][0])
    return values


def parse_config_json(text: Any) -> Architecture:
    """The architecture of a config.json's ``text`` (see the module rule); ConfigError naming
    the config's key (its allowed values) or ``config_json`` when the text is no such file."""
    if not isinstance(text, str) or len(text) > MAX_CONFIG_CHARS:
        raise ConfigError(
            CONFIG_JSON,
            f"{CONFIG_JSON} must be a config.json's text of at most {MAX_CONFIG_CHARS:,} "
            f"characters; got {shown(text)}",
        )
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(CONFIG_JSON, f"{CONFIG_JSON} is not JSON: {error}") from None
    if not isinstance(config, dict):
        raise ConfigError(CONFIG_JSON, f"{CONFIG_JSON} must be a JSON object; got {shown(config)}")
    gpt2 = "n_embd" in config
    if not gpt2 and "hidden_size" not in config:
        raise ConfigError(
            CONFIG_JSON,
            f"{CONFIG_JSON} names neither hidden_size (a Llama-like model) nor n_embd (GPT-2)",
        )
    family = FAMILIES[1] if gpt2 else FAMILIES[0]
    names = GPT2_NAMES if gpt2 else LLAMA_NAMES
    required = [key for key, name in names.items() if name in FIELDS and key not in config]
    optional = {"n_inner", "num_key_value_heads", "head_dim", "max_position_embeddings"}
    missing = [key for key in required if key not in optional]
    if missing:
        raise ConfigError(missing[0], f"{missing[0]} is missing from config.json ({family} family)")
    values = _read(config, names)
    values.setdefault("num_key_value_heads", values["num_attention_heads"])
    values.setdefault("intermediate_size", 4 * values["hidden_size"])
    values.setdefault("tie_word_embeddings", gpt2)
    values.setdefault("head_dim", 0)
    dropout = any(PROBABILITY.check(key, config[key]) > 0 for key in DROPOUTS if key in config)
    try:
        return Architecture(**(DEFAULT | values | {"family": family, "dropout": dropout}))
    except ConfigError as error:  # a rule across fields: named as this config names them
        keys = {name: key for key, name in names.items()}
        message = re.sub(r"\w+", lambda word: keys.get(word[0], word[0]), str(error))
        raise ConfigError(keys.get(error.field, error.field), message) from None
