"""Fuzz the launched app's HTTP API with bad and extreme inputs, bypassing gradio_client.

Each endpoint (step, sweep, dynamics, inspect) gets hypothesis-generated calls, sent as raw
Gradio 6 API requests::

    POST {app_url}gradio_api/call/<api>   {"data": [...]}   -> {"event_id": ...}
    GET  {app_url}gradio_api/call/<api>/<event_id>           -> SSE "event: complete|error"

Inputs are positional (the public API order is written out below, as a caller sees it). One
input at a time is replaced by a bad or extreme value (wrong type, NaN/inf as JSON strings or as
the non-standard tokens NaN/Infinity/1e999, floats for ints, huge ints, 1 MB strings, unknown
choices), or the call has too few / too many inputs. Every answer must be either

  - a refusal whose message names the field (``lr``, ``n``, ...; for too few inputs, a missing
    one; for too many, how many the endpoint takes), delivered as an SSE ``error`` event or
    an HTTP 4xx on the POST; or
  - a completed result with the endpoint's number of outputs, whose summary echoes the inputs;
  - for a body past the server's cap (MAX_BODY_BYTES: a 1 MB string), HTTP 413 naming the cap.

Values that are certainly invalid (wrong type, non-finite, beyond the settings table's limits,
unknown choices) must be refused. No message may contain a Python object address or be longer
than MAX_MESSAGE characters (a 1 MB input must not come back whole), no answer may be a 5xx,
the server process must stay up, and a normal /step must work afterwards.

Valid-but-extreme values only ever use tiny shapes (8 x 4 x 2, a few training steps), so the
whole file runs in about a minute.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from http_calls import DEFAULT_STEP, FIELDS, Answer, Raw, call, request_body
from playground.core.model.models import MODELS
from playground.core.model.optimizers import OPTIMIZERS
from playground.core.recipes.registry import RECIPES
from playground.ui.upload_guard import MAX_BODY_BYTES

pytestmark = pytest.mark.slow

OUTPUTS = {"step": 10, "sweep": 4, "dynamics": 6, "inspect": 1}
TINY = [0, 8, 4, 2, 0.1, 1024.0, 0, 1.0, 1.0, "bfloat16"]  # 8 x 4 x 2
MODEL = ["linear", 2, 64, "relu", "sgd", None]  # the defaults, and no uploaded data
FLOAT8 = ["current", 16]  # the defaults
OPERATIONS = ["exercise", "regression", "none"]  # the defaults
BLOCKS = [0.0, 65536.0, "on"]  # the defaults: no outliers
STATE = ["float32", "float32", 0]  # the defaults: moments, accumulation, never promoted
SEQUENCE = [8, 2]  # the transformer's defaults: seq_len, heads
BASE = {
    "step": [*TINY, *MODEL, *FLOAT8, *OPERATIONS, *BLOCKS, *STATE, *SEQUENCE],
    "sweep": [*TINY, *MODEL, *FLOAT8, False, *OPERATIONS, *BLOCKS, *STATE, *SEQUENCE],
    "dynamics": [
        *(*TINY, 3, "static", 2, *MODEL, *FLOAT8, "nearest", False),
        *(*OPERATIONS, *BLOCKS, *STATE, *SEQUENCE),
    ],
    "inspect": [1.5],
}

FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_SMALLEST = 1.401298464324817e-45
# The settings table's limits (closed ranges). A tighter limit on the server keeps every
# "must refuse" case below refused; valid cases may then be refused too, naming the field.
INT_RANGES = {
    "model_seed": (0, 2**32 - 1),
    "data_seed": (0, 2**32 - 1),
    "n": (1, 4096),
    "d_in": (1, 1024),
    "d_out": (1, 1024),
    "steps": (1, 1000),
    "period": (1, 10**6),
    "hidden_layers": (1, 8),
    "hidden_width": (1, 1024),
    "amax_history": (1, 1024),
    "promotion_interval": (0, 4096),
    "seq_len": (1, 64),
    "heads": (1, 8),
}
FLOAT_RANGES = {
    "lr": (0.0, FLOAT32_MAX),
    "loss_scale": (FLOAT32_SMALLEST, FLOAT32_MAX),
    "input_scale": (2.0**-64, 2.0**64),
    "target_scale": (2.0**-64, 2.0**64),
    "outlier_share": (0.0, 0.01),
    "outlier_scale": (1.0, 65536.0),
}
CHOICES = {
    # The recipes with no blocks (the block recipes' steps are priced and run elsewhere).
    "compute_dtype": tuple(name for name, entry in RECIPES.items() if entry.block is None),
    "mode": ("none", "static", "dynamic"),
    "model": tuple(MODELS),
    "activation": ("relu", "gelu", "tanh"),
    "optimizer": tuple(OPTIMIZERS),
    "fp8_scaling": ("none", "current", "delayed"),
    "pure_rounding": ("nearest", "stochastic", "kahan"),
    "precision_policy": ("exercise", "autocast", "all_float32_but_matmul"),
    "task": ("regression", "classification"),
    "norm": ("none", "layernorm"),
    "nvfp4_hadamard": ("on", "off"),
    "moments_dtype": ("float32", "bfloat16"),
    "accumulation": ("float32", "bfloat16", "14_bits"),
}
# Fields whose every new value costs a compilation (shapes, the scan's static arguments): their
# valid replacements stay within a couple of tiny values per endpoint.
COSTLY_VALID = {
    "step": {"n": (8, 8.0, 1), "d_in": (4, 4.0, 1), "d_out": (2, 2.0, 1)},
    "sweep": {"n": (8, 8.0), "d_in": (4, 4.0), "d_out": (2, 2.0)},
    "dynamics": {
        "n": (8, 8.0),
        "d_in": (4, 4.0),
        "d_out": (2, 2.0),
        "steps": (3, 3.0, 1),
        "period": (2, 2.0),
    },
}

MAX_MESSAGE = 2000
BODY_CAP = f"capped at {MAX_BODY_BYTES // 2**10} kB"  # the server's 413 for a longer body
ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+|0x7f[0-9a-fA-F]{6,}")

REFUSE, EITHER = "refuse", "either"  # what a single-value case expects
SHORT, LONG = "too few inputs", "too many inputs"


class Long(str):
    """A long string sent as is, shown shortened in hypothesis's reports."""

    def __repr__(self) -> str:
        return f"<{len(self):,} characters {str.__repr__(self[:8])}...>"

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self))


class LongList(list):
    """A long list sent as is, shown shortened in hypothesis's reports."""

    def __repr__(self) -> str:
        return f"<list of {len(self):,} items {list.__repr__(self[:3])}...>"

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self))


def names(message: str, field: str) -> bool:
    """Whether ``message`` names ``field`` as a word, before any echo of the value ("; got")."""
    head = message.split("; got", 1)[0]
    return re.search(rf"(?<![\w]){re.escape(field)}(?![\w])", head) is not None


# ---- what to send ----------------------------------------------------------------------------

ONE_MB = Long("ab" * 2**19)

ALPHABET = st.characters(codec="utf-8", exclude_characters="xX\x00")
WRONG_TYPES = st.one_of(
    st.none(),
    st.booleans(),
    st.lists(st.integers(-5, 5), max_size=4),
    st.just(LongList([0] * 10_000)),
    st.dictionaries(st.text(ALPHABET, max_size=5), st.integers(), max_size=3),
    st.sampled_from(["", "1", "0.5", "3.0", "NaN", "nan", "Infinity", "-inf", "1e999", "None"]),
    st.text(ALPHABET, min_size=1, max_size=40),
    st.just(ONE_MB),
)
NON_FINITE = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf]),  # written as NaN / Infinity tokens
    st.sampled_from([Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), Raw("1e999"), Raw("-1E400")]),
)
HUGE_INTS = st.integers(39, 1000).map(lambda k: 10**k)  # beyond every limit (3.4e38)


def _int_values(endpoint: str, field: str) -> st.SearchStrategy[tuple[Any, str]]:
    low, high = INT_RANGES[field]
    refused = st.one_of(
        st.sampled_from([low - 1, high + 1, -(2**63), 2**64]),
        st.integers(max_value=low - 1),
        st.integers(min_value=high + 1, max_value=2**80),
        HUGE_INTS,
        st.sampled_from([0.5, 1.5, 2.25, 7.999]),  # floats for ints
        st.floats(min_value=1.0, max_value=1e6).filter(lambda v: not v.is_integer()),
        NON_FINITE,
        WRONG_TYPES,
    ).map(lambda value: (value, REFUSE))
    costly = COSTLY_VALID.get(endpoint, {}).get(field)
    valid = (
        st.sampled_from(costly)
        if costly is not None
        else st.one_of(st.integers(low, high), st.integers(low, high).map(float))
    )
    return st.one_of(refused, valid.map(lambda value: (value, EITHER)))


def _float_values(field: str) -> st.SearchStrategy[tuple[Any, str]]:
    low, high = FLOAT_RANGES[field]
    refused = st.one_of(
        st.sampled_from([-1.0, -1e-300, -FLOAT32_MAX, high * 2]),
        st.floats(max_value=-1e-9, allow_infinity=False),
        st.floats(min_value=1e39, allow_infinity=False),
        HUGE_INTS,
        NON_FINITE,
        WRONG_TYPES,
    ).map(lambda value: (value, REFUSE))
    either = st.one_of(
        st.sampled_from([0, 0.0, 1, low, high, 1e-300, 5e-324, 1e30, 2**64, 2.0**-64]),
        st.floats(min_value=0.0, max_value=1e39),
        st.integers(0, 10**40),
    ).map(lambda value: (value, EITHER))
    return st.one_of(refused, either)


def _choice_values(field: str) -> st.SearchStrategy[tuple[Any, str]]:
    choices = CHOICES[field]
    unknown = st.one_of(
        st.sampled_from(
            [
                "float32",
                "int8",
                "float64",
                "BFLOAT16",
                " bfloat16",
                "float16 ",
                "bf16",
                "adaptive",
                "Static",
                "auto",
                "0",
                "1",
            ]
        ),
        st.integers(-3, 3),
        st.floats(allow_nan=True),
        WRONG_TYPES,
    ).filter(lambda value: value not in choices)
    return st.one_of(
        unknown.map(lambda value: (value, REFUSE)),
        st.sampled_from(choices).map(lambda value: (value, EITHER)),
    )


def _number_values() -> st.SearchStrategy[tuple[Any, str]]:
    refused = st.one_of(
        st.integers(309, 1000).map(lambda k: 10**k),  # beyond float range
        st.none(),
        st.booleans(),
        st.lists(st.integers(-5, 5), max_size=4),
        st.just(LongList([0] * 10_000)),
        st.dictionaries(st.text(ALPHABET, max_size=5), st.integers(), max_size=3),
    ).map(lambda value: (value, REFUSE))
    # Text is read as a typed number: some of it is one ("1e999", "nan"), the rest is refused.
    typed = st.one_of(
        st.sampled_from(["", "1", "0.5", "3.0", "NaN", "nan", "Infinity", "-inf", "1e999", "None"]),
        st.text(ALPHABET, min_size=1, max_size=40),
        st.just(ONE_MB),
    ).map(lambda value: (value, EITHER))
    either = st.one_of(  # the inspector reads nan, inf and typed text too (issue 22)
        st.floats(),  # includes nan, +-inf, subnormals, -0.0
        st.sampled_from([Raw("Infinity"), Raw("-1e999"), 0, -0.0, 65520.0, 1e-45, 2**1023]),
        st.sampled_from([math.nan, Raw("NaN"), "1.5", "inf", "1/3", "0x3c00:float16"]),
        st.integers(-(10**300), 10**300),
    ).map(lambda value: (value, EITHER))
    return st.one_of(refused, either, typed)


def _data_values() -> st.SearchStrategy[tuple[Any, str]]:
    """The uploaded file: anything but an upload of this page is refused; None is no file."""
    refused = st.one_of(
        st.integers(-3, 3),
        st.text(ALPHABET, min_size=1, max_size=20),
        st.sampled_from([{"path": 5}, {"name": "x.csv"}, ["/etc/passwd"], True, 1.5]),
        st.just({"path": "/etc/passwd", "meta": {"_type": "gradio.FileData"}}),
    ).map(lambda value: (value, REFUSE))
    return st.one_of(refused, st.just((None, EITHER)))


def _values(endpoint: str, field: str) -> st.SearchStrategy[tuple[Any, str]]:
    if field == "number":
        return _number_values()
    if field == "data":
        return _data_values()
    if field == "downloads":  # true or false; anything else is refused
        return st.one_of(
            st.sampled_from([True, False]).map(lambda value: (value, EITHER)),
            st.sampled_from([0, 1, "yes", "true", None]).map(lambda value: (value, REFUSE)),
        )
    if field in CHOICES:
        return _choice_values(field)
    if field in FLOAT_RANGES:
        return _float_values(field)
    return _int_values(endpoint, field)


@dataclass
class Case:
    endpoint: str
    data: list[Any]
    field: str | None  # the replaced input, or None for an arity case
    expect: str  # REFUSE, EITHER, SHORT or LONG


@st.composite
def cases(draw: st.DrawFn, endpoint: str) -> Case:
    fields, base = FIELDS[endpoint], BASE[endpoint]
    kind = draw(st.sampled_from(["value"] * 8 + ["short", "long"]))
    if kind == "short":
        return Case(endpoint, base[: draw(st.integers(0, len(base) - 1))], None, SHORT)
    if kind == "long":
        extra = draw(
            st.lists(
                st.one_of(st.integers(), st.text(ALPHABET, max_size=5)), min_size=1, max_size=5
            )
        )
        return Case(endpoint, [*base, *extra], None, LONG)
    index = draw(st.integers(0, len(fields) - 1))
    value, expect = draw(_values(endpoint, fields[index]))
    data = list(base)
    data[index] = value
    return Case(endpoint, data, fields[index], expect)


# ---- the checks ------------------------------------------------------------------------------


def _echoes_inputs(case: Case, outputs: list[Any]) -> None:
    """A completed call's summary reports the inputs it ran with."""
    if case.endpoint == "inspect":
        assert isinstance(outputs[0], str) and outputs[0].startswith("Typed:"), outputs[0][:200]
        return
    summary = outputs[1]
    assert isinstance(summary, dict), f"second output is not the JSON summary: {summary!r:.200}"
    fields = FIELDS[case.endpoint]
    for name, sent in zip(fields, case.data, strict=False):
        if name == "data":  # no file: the synthetic batch
            assert summary.get("data", {"source": "synthetic"})["source"] == "synthetic"
            continue
        if name == "downloads":  # no setting: the files output says it, not the summary
            continue
        got = summary["config"][name] if name in summary["config"] else summary[name]
        if isinstance(sent, int) and isinstance(got, float):
            sent = float(sent)  # a float field keeps the nearest float of a big int
        assert got == sent, f"{case.endpoint}: sent {name}={sent!r:.60}, summary says {got!r:.60}"


def check(app_url: str, app_server, case: Case) -> Answer:
    answer = call(app_url, case.endpoint, case.data)
    message = answer.message
    sent = f"{case.endpoint} {case.expect} {case.field}={case.data!r:.300}"
    assert answer.status < 500, f"{sent}: HTTP {answer.status}: {message[:300]}"
    assert app_server.process.poll() is None, f"{sent}: the server process exited"
    assert answer.kind != "eof", f"{sent}: the event stream ended without a result"
    assert not ADDRESS.search(message), f"{sent}: message shows an object address: {message[:400]}"
    assert len(message) < MAX_MESSAGE, (
        f"{sent}: message of {len(message):,} characters (limit {MAX_MESSAGE}): {message[:200]}..."
    )
    if len(request_body(case.data).encode()) > MAX_BODY_BYTES:  # a 1 MB string, say
        assert answer.status == 413 and BODY_CAP in message, f"{sent}: {message[:300]}"
        return answer
    if answer.kind == "complete":
        assert case.expect not in (REFUSE, LONG), f"{sent}: accepted invalid inputs"
        assert isinstance(answer.payload, list), f"{sent}: {answer.payload!r:.200}"
        assert len(answer.payload) == OUTPUTS[case.endpoint], (
            f"{sent}: {len(answer.payload)} outputs, expected {OUTPUTS[case.endpoint]}"
        )
        _echoes_inputs(case, answer.payload)
        return answer
    # Refused: the message must say which input is wrong.
    fields = FIELDS[case.endpoint]
    if case.expect == SHORT:
        missing = fields[len(case.data) :]
        assert any(names(message, field) for field in missing), (
            f"{sent}: refusal names none of the missing inputs {missing}: {message[:300]}"
        )
    elif case.expect == LONG:
        assert f"takes {len(fields)} inputs" in message, (
            f"{sent}: refusal of {len(case.data)} inputs does not say what is expected: "
            f"{message[:300]}"
        )
    else:
        assert names(message, case.field), f"{sent}: refusal does not name it: {message[:300]}"
    return answer


def fuzz(examples: int) -> settings:
    """Hypothesis settings of one endpoint's fuzz test (its count from EXAMPLES)."""
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


# 180 cases in all (300 before the float8 inputs and the page tests grew the suite past its
# 8-minute budget): every endpoint still gets dozens of refusals and answers per run.
EXAMPLES = {"step": 60, "sweep": 40, "dynamics": 40, "inspect": 40}


@fuzz(EXAMPLES["step"])
@given(case=cases("step"))
def test_step_refuses_bad_inputs_naming_the_field(app_url, app_server, case):
    check(app_url, app_server, case)


@fuzz(EXAMPLES["sweep"])
@given(case=cases("sweep"))
def test_sweep_refuses_bad_inputs_naming_the_field(app_url, app_server, case):
    check(app_url, app_server, case)


@fuzz(EXAMPLES["dynamics"])
@given(case=cases("dynamics"))
def test_dynamics_refuses_bad_inputs_naming_the_field(app_url, app_server, case):
    check(app_url, app_server, case)


@fuzz(EXAMPLES["inspect"])
@given(case=cases("inspect"))
def test_inspect_refuses_bad_inputs_naming_the_field(app_url, app_server, case):
    check(app_url, app_server, case)


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        '{"data": {"n": 1}}',
        '{"data": "x"}',
        '{"nodata": []}',
        '{"data": [' + "1" * 5000 + "]}",  # past Python's int-parsing digit limit
    ],
    ids=["not-json", "dict", "string", "no-data", "5000-digit-int"],
)
@pytest.mark.parametrize("endpoint", ["step", "inspect"])
def test_unparseable_bodies_are_refused_with_http_4xx(app_url, endpoint, body):
    answer = call(app_url, endpoint, body=body)
    assert answer.kind in ("http", "error"), f"{answer.kind}: {answer.payload!r:.200}"
    assert answer.status < 500, f"HTTP {answer.status}: {answer.message[:300]}"
    assert len(answer.message) < MAX_MESSAGE
    assert not ADDRESS.search(answer.message), answer.message[:400]


def test_server_answers_a_normal_step_after_the_fuzz(app_url, app_server):
    assert app_server.process.poll() is None
    answer = call(app_url, "step", DEFAULT_STEP)
    assert answer.kind == "complete", answer.message[:300]
    assert len(answer.payload) == OUTPUTS["step"]
    assert answer.payload[1]["config"]["n"] == 256
    assert call(app_url, "ping", []).payload == ["pong"]
