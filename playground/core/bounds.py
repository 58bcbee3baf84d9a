"""The schema of one setting and the check every value passes: :class:`Bounds` and ConfigError.

Rule: a setting is either categorical (``choices``) or a number in a closed range
[``low``, ``high``], whole when ``integer``. :meth:`Bounds.check` returns the value coerced to
the setting's type or raises a :class:`ConfigError` (a ``ValueError``) that names the setting
and states its allowed values in words; an error never echoes more than a short prefix of the
value back (:func:`shown`).

Example::

    >>> Bounds("batch rows N", 1, 4096, "Rows in the batch.", integer=True).check("n", 32.0)
    32
    >>> Bounds("batch rows N", 1, 4096, "Rows in the batch.", integer=True).check("n", 0)
    Traceback (most recent call last):
    ...
    playground.core.bounds.ConfigError: n (batch rows N) must be an integer in [1, 4096]; got 0
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class ConfigError(ValueError):
    """A setting outside its allowed range; ``field`` names the offending setting."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters: an error never echoes a huge input back."""
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else "a huge integer"
    return text if len(text) <= limit else text[: limit - 20] + f"... ({len(text):,} chars)"


def _fmt(value: float) -> str:
    """A bound as a person reads it: whole numbers as such, extreme powers of two as 2^k."""
    mantissa, exponent = math.frexp(value)
    if mantissa == 0.5 and abs(exponent - 1) >= 20:
        return f"2^{exponent - 1}"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"


class Names(Sequence[str]):
    """The names of a registry (a dict), read from it at every use: the choices of a setting
    that follow their registry, so an entry added to it later (a test's throwaway recipe) is one
    of them. Equal to, and hashed as, the tuple of the names the registry holds now.

    Example::

        >>> registry = {"sgd": 0}
        >>> names = Names(registry)
        >>> registry["adam"] = 2
        >>> names, names[0], names == ("sgd", "adam")
        (Names('sgd', 'adam'), 'sgd', True)
    """

    def __init__(self, registry: Mapping[str, Any]):
        self._registry = registry

    def __getitem__(self, index: Any) -> Any:
        return tuple(self._registry)[index]

    def __len__(self) -> int:
        return len(self._registry)

    def __contains__(self, name: object) -> bool:
        return name in self._registry

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str) or not isinstance(other, Sequence):
            return False
        return tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Names{tuple(self)!r}"


@dataclass(frozen=True)
class Bounds:
    """How one setting is shown and checked: a label, the closed range [low, high], a help line.

    ``integer`` fields accept only whole numbers; ``log`` asks the UI for a log-scale control;
    ``choices`` replaces the range for a categorical field. ``group`` says which part of the
    page owns the control ("step", "data" or "dynamics").
    """

    label: str
    low: float
    high: float
    help: str
    integer: bool = False
    log: bool = False
    choices: Sequence[str] = ()
    group: str = "step"

    def describe(self) -> str:
        """The allowed values in words, used in every error message."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        kind = "an integer" if self.integer else "a finite number"
        return f"{kind} in [{_fmt(self.low)}, {_fmt(self.high)}]"

    def check(self, name: str, value: Any) -> Any:
        """Return ``value`` coerced to the setting's type, or raise ConfigError naming ``name``.

        Integers accept whole floats such as ``3.0`` (browsers send numbers as floats) but not
        ``3.5``, booleans or strings; floats must be finite and inside the closed range.
        """
        if self.choices:
            if isinstance(value, str) and value in self.choices:
                return value
            raise self._refusal(name, value)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise self._refusal(name, value)
        try:
            number = float(value)
        except OverflowError:  # an int too large for a float is out of every range here
            raise self._refusal(name, value) from None
        if not math.isfinite(number) or not self.low <= number <= self.high:
            raise self._refusal(name, value)
        if self.integer:
            if not number.is_integer() and not isinstance(value, numbers.Integral):
                raise self._refusal(name, value)
            return int(value)
        return number

    def _refusal(self, name: str, value: Any) -> ConfigError:
        if value is None or value == "":  # a cleared field
            return ConfigError(name, f"{name} ({self.label}) is empty: enter {self.describe()}")
        return ConfigError(
            name, f"{name} ({self.label}) must be {self.describe()}; got {shown(value)}"
        )
