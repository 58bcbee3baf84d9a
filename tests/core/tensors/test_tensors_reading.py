"""Reading a safetensors file: files written by the `safetensors` package from numpy and torch
come back with their names, shapes, dtypes and values as stored; every malformed, truncated,
oversized or foreign file is refused by name, before its tensor data is read."""

from __future__ import annotations

import io
import json
import struct

import ml_dtypes
import numpy as np
import pytest
import torch
from safetensors.numpy import save as save_numpy
from safetensors.torch import save as save_torch

from playground.core.bounds import ConfigError
from playground.core.caps import TENSOR_FILE_MAX_BYTES, TENSOR_SAMPLE_VALUES, TENSORS_MAX_COUNT
from playground.core.tensors.reading import read_tensors, sample_size

NAME = "mine.safetensors"
RNG = np.random.default_rng(35)


def read(content: bytes, name: str = NAME):
    return read_tensors(io.BytesIO(content), len(content), name)


def raw_file(header: dict, data: bytes = b"", pad: bytes = b"") -> bytes:
    text = json.dumps(header).encode() + pad
    return struct.pack("<Q", len(text)) + text + data


def test_numpy_tensors_of_every_float_dtype_come_back_as_stored():
    tensors = {
        "w.f32": RNG.standard_normal((3, 5)).astype(np.float32),
        "w.f64": RNG.standard_normal((2, 2, 2)) * 1e-300,
        "w.f16": RNG.standard_normal(7).astype(np.float16),
        "w.bf16": RNG.standard_normal((4, 1)).astype(ml_dtypes.bfloat16),
        "w.e4m3": RNG.standard_normal(9).astype(ml_dtypes.float8_e4m3fn),
        "w.e5m2": RNG.standard_normal((3, 3)).astype(ml_dtypes.float8_e5m2),
        "scalar": np.array(2.5, np.float32),
        "step": np.arange(4, dtype=np.int64),
    }
    stored = {t.name: t for t in read(save_numpy(tensors))}
    assert set(stored) == set(tensors)
    codes = {"w.f32": "F32", "w.f64": "F64", "w.f16": "F16", "w.bf16": "BF16"}
    codes |= {"w.e4m3": "F8_E4M3", "w.e5m2": "F8_E5M2", "scalar": "F32", "step": "I64"}
    for name, values in tensors.items():
        assert stored[name].dtype == codes[name]
        assert stored[name].shape == values.shape
        if name == "step":  # an integer tensor is listed, not read
            assert stored[name].values is None
            continue
        assert stored[name].values.dtype == values.dtype
        np.testing.assert_array_equal(
            stored[name].values.reshape(-1).view(np.uint8), values.reshape(-1).view(np.uint8)
        )


def test_torch_tensors_keep_their_names_shapes_and_dtypes():
    torch.manual_seed(0)
    tensors = {
        "layers.0.weight": torch.randn(4, 3),
        "layers.0.bias": torch.randn(4, dtype=torch.bfloat16),
        "head.weight": torch.randn(2, 4, dtype=torch.float16),
    }
    stored = {t.name: t for t in read(save_torch(tensors))}
    for name, tensor in tensors.items():
        assert stored[name].shape == tuple(tensor.shape)
        assert stored[name].dtype == {torch.float32: "F32", torch.bfloat16: "BF16"}.get(
            tensor.dtype, "F16"
        )
        expected = tensor.float().numpy()
        np.testing.assert_array_equal(stored[name].values.astype(np.float32), expected)


VALID = save_numpy({"a": np.ones((2, 3), np.float32), "b": np.zeros(4, np.float16)})
A = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"x,y\n1,2\n3,4\n5,6\n", "its first 8 bytes give a header of"),
        (b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False}", "header of"),
        (b"short", "fewer than the 8"),
        (VALID[:-3], "it is truncated: its header puts the data's end at byte 32"),
        (VALID[:20], "more than the 12 after them (truncated"),
        (VALID + b"\0" * 4, "4 bytes after the last tensor's data"),
        (struct.pack("<Q", 5) + b"{not}", "its header is not JSON"),
        (struct.pack("<Q", 2) + b"\xff\xfe", "its header is not UTF-8"),
        (raw_file([1, 2]), "its header is not a JSON object"),
        (raw_file({}), "it holds no tensors"),
        (raw_file({"a": {**A, "dtype": "F7"}}, b"\0" * 8), "tensor 'a' has dtype 'F7'; known"),
        (raw_file({"a": {**A, "shape": [3]}}, b"\0" * 8), "takes 12 bytes, but its data_offsets"),
        (raw_file({"a": {**A, "shape": [-2]}}, b"\0" * 8), "non-negative integers"),
        (raw_file({"a": {**A, "data_offsets": [0]}}, b"\0" * 8), "data_offsets must be two"),
        (raw_file({"a": {"dtype": "F32", "shape": [2]}}, b"\0" * 8), "exactly dtype, shape"),
        (
            raw_file({"a": A, "b": {**A, "data_offsets": [4, 12]}}, b"\0" * 12),
            "tensor 'b' begins at byte 4 of the data and overlaps",
        ),
        (
            raw_file({"a": A, "b": {**A, "data_offsets": [12, 20]}}, b"\0" * 20),
            "tensor 'b' begins at byte 12 of the data and leaves a gap",
        ),
        (raw_file({"__metadata__": {"k": 1}, "a": A}, b"\0" * 8), "__metadata__ must be"),
        (raw_file({"x" * 300: A}, b"\0" * 8), "300 characters; at most 256"),
    ],
    ids=[
        "csv", "npy", "short", "truncated-data", "truncated-header", "trailing", "json",
        "utf8", "array", "empty", "dtype", "size", "shape", "offsets", "keys", "overlap",
        "gap", "metadata", "name",
    ],
)  # fmt: skip
def test_each_bad_file_is_refused_naming_the_file_and_the_fault(content, words):
    with pytest.raises(ConfigError) as caught:
        read(content)
    assert caught.value.field == "file"
    assert f"'{NAME}'" in str(caught.value) and words in str(caught.value), str(caught.value)


def test_a_name_given_twice_is_refused():
    text = b'{"a": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}, "a": {}}'
    with pytest.raises(ConfigError, match="names 'a' twice"):
        read(struct.pack("<Q", len(text)) + text)


class NoDataReads(io.BytesIO):
    """A file that fails the test when anything past its header is read."""

    def __init__(self, content: bytes):
        super().__init__(content)
        self.header_end = 8 + struct.unpack("<Q", content[:8])[0]

    def read(self, size: int = -1) -> bytes:
        end = len(self.getbuffer()) if size < 0 else self.tell() + size
        assert end <= self.header_end, "tensor data was read before the caps were checked"
        return super().read(size)


def test_the_caps_refuse_before_any_tensor_data_is_read():
    many = {f"t{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(513)}
    too_many = raw_file(many)
    with pytest.raises(ConfigError) as caught:
        read_tensors(NoDataReads(too_many), len(too_many), NAME)
    assert f"holds 513 tensors; at most {TENSORS_MAX_COUNT}" in str(caught.value)
    assert NAME in str(caught.value)
    with pytest.raises(ConfigError, match=f"at most {TENSOR_FILE_MAX_BYTES:,}"):
        read_tensors(NoDataReads(VALID), TENSOR_FILE_MAX_BYTES + 1, NAME)


@pytest.mark.parametrize(
    "sizes, budget",
    [([10, 10**9], 1000), ([5] * 7, 30), ([1, 2, 3], 100), ([300, 40, 40, 2000, 7], 500)],
)
def test_the_sample_is_the_largest_that_fits_the_budget(sizes, budget):
    """Brute force: the largest s (at most TENSOR_SAMPLE_VALUES) with sum(min(size, s)) within
    the budget."""
    top = min(max(sizes), budget) + 1  # past max(sizes) every s counts the same
    fits = [s for s in range(1, top + 1) if sum(min(n, s) for n in sizes) <= budget]
    got = sample_size(sizes, budget)
    if max(fits) == top and top > max(sizes):  # every tensor whole: no sample needed
        assert got == TENSOR_SAMPLE_VALUES
    else:
        assert got == min(max(fits), TENSOR_SAMPLE_VALUES)


@pytest.mark.parametrize(
    "dtype", [ml_dtypes.bfloat16, np.float16, ml_dtypes.float8_e5m2, np.float32]
)
def test_a_file_past_the_budget_is_sampled_by_rows_and_its_nonfinite_counted_whole(dtype):
    """A (3000, 2, 250) tensor: 1.5 M values, sampled as whole rows of its (3000, 500) matmul
    view read from their own bytes; a NaN and two inf outside the sample still counted (by bit
    pattern for the narrow dtypes)."""
    values = (RNG.standard_normal((3000, 2, 250)) * 0.02).astype(dtype)
    small = RNG.standard_normal(100).astype(np.float32)
    values[2999, 1, 7] = np.nan
    values[1500, 0, 0] = np.inf
    values[1501, 0, 0] = -np.inf
    content = save_numpy({"big": values, "small": small})
    stored = {tensor.name: tensor for tensor in read(content)}
    big, little = stored["big"], stored["small"]
    assert little.values.tolist() == small.tolist() and not little.sampled
    assert big.sampled and big.values.shape[1] == 500
    assert big.values.size <= TENSOR_SAMPLE_VALUES
    bits = f"u{np.dtype(dtype).itemsize}"
    flat = values.reshape(3000, 500).view(bits)
    rows = [np.flatnonzero((flat == row).all(axis=1)) for row in big.values.view(bits)]
    assert all(len(match) >= 1 for match in rows)  # every sampled row is a row of the tensor
    assert big.nonfinite == {"nan": 1, "posinf": 1, "neginf": 1}


def test_trailing_spaces_after_the_header_are_allowed_as_the_format_pads_it():
    content = raw_file({"a": A}, struct.pack("<2f", 1.0, -2.0), pad=b"    ")
    (tensor,) = read(content)
    np.testing.assert_array_equal(tensor.values, np.array([1.0, -2.0], np.float32))
