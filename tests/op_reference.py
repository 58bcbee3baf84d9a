"""A float64 model of a step under a precision preset, a task and a layer norm (numpy only).

Every value is rounded where the step casts it: each operation's inputs and parameters to its
kind's dtype, and its result to that dtype; the arithmetic in between is float64 and the
backward pass is exact float64 at the rounded forward values. Independent of the code under
test: the kinds' dtypes are written here per preset, from the issue's table.
"""

from __future__ import annotations

import numpy as np

import reference

# preset -> the kinds computed in float32 (the rest in the compute dtype).
FLOAT32_KINDS = {
    "exercise": (),
    "autocast": ("normalisation", "loss", "attention"),
    "all_float32_but_matmul": ("activation", "normalisation", "loss", "attention"),
}
EPSILON = 1e-6  # flax's LayerNorm default


def layer_norm(z, scale, bias):
    """(output, backward(d_output) -> (d_z, d_scale, d_bias)) of a layer norm over the last axis."""
    mean = z.mean(-1, keepdims=True)
    variance = np.maximum((z * z).mean(-1, keepdims=True) - mean**2, 0)
    inv = 1 / np.sqrt(variance + EPSILON)
    normalized = (z - mean) * inv

    def backward(d_out):
        d_norm = d_out * scale
        width = z.shape[-1]
        d_z = inv * (
            d_norm
            - d_norm.sum(-1, keepdims=True) / width
            - normalized * (d_norm * normalized).sum(-1, keepdims=True) / width
        )
        return d_z, (d_out * normalized).sum(0), d_out.sum(0)

    return normalized * scale + bias, backward


def _log_softmax(logits):
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def step_reference(params, x, y, *, dtype, preset, task, activation=None, hidden=0, norm=False):
    """(loss, {name: gradient}) of the model given by ``params`` (the linear model's kernel and
    bias, or an MLP's layers.i.* and norms.i.*), see the module rule."""

    def rounder(kind):
        low = "float32" if kind in FLOAT32_KINDS[preset] else dtype
        return lambda v: reference.rounded(v, low)

    rm, ra, rn, rl = (rounder(k) for k in ("matmul", "activation", "normalisation", "loss"))
    names = ["kernel"] if "kernel" in params else [f"layers.{i}.kernel" for i in range(hidden + 1)]
    act, act_grad = activation or (None, None)
    inputs, tape = [rm(reference.rounded(x, dtype))], []
    for index, kernel_name in enumerate(names):
        prefix = kernel_name[: -len("kernel")]
        z = rm(rm(inputs[-1]) @ rm(params[kernel_name]) + rm(params[prefix + "bias"]))
        if index == len(names) - 1:
            outputs = z
            break
        record = {"z": z}
        if norm:
            scale, bias = rn(params[f"norms.{index}.scale"]), rn(params[f"norms.{index}.bias"])
            normed, record["norm_backward"] = layer_norm(rn(z), scale, bias)
            z = rn(normed)
        record["act_in"] = ra(z)
        tape.append(record)
        inputs.append(ra(act(record["act_in"])))
    out, target = rl(outputs), rl(y)
    rows = out.shape[0]
    if task == "classification":
        loss = -np.mean((target * _log_softmax(out)).sum(-1))
        delta = (np.exp(_log_softmax(out)) - target) / rows
    else:
        loss = np.mean((out - target) ** 2)
        delta = 2 * (out - target) / out.size
    grads = {}
    for index in reversed(range(len(names))):
        prefix = names[index][: -len("kernel")]
        grads[prefix + "kernel"] = rm(inputs[index]).T @ delta
        grads[prefix + "bias"] = delta.sum(0)
        if index == 0:
            break
        delta = delta @ rm(params[names[index]]).T
        record = tape[index - 1]
        delta = delta * act_grad(record["act_in"])
        if norm:
            delta, d_scale, d_bias = record["norm_backward"](delta)
            grads[f"norms.{index - 1}.scale"], grads[f"norms.{index - 1}.bias"] = d_scale, d_bias
    return float(rl(loss)), grads
