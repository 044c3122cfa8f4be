"""Units of the topology format, parsed into the Plan's fixed units.

Every parser takes the value as written in YAML (a string, or a number where
a bare number is allowed) and returns a plain number, or raises
``ValueError`` with a message that names the allowed units. The pydantic
types at the bottom (``Time``, ``Size``, ...) wrap the parsers so a schema can
say ``duration: Time``.

=========  =====================================  ==================
kind       written                                parsed to
=========  =====================================  ==================
time       ``250us``, ``0.5ms``, ``2s``, ``1m``   seconds (float)
size       ``100B``, ``4KB``, ``1MB``             bytes (int; K = 1024)
rate       ``25/s``                               per second (float)
link rate  ``512kbit``, ``100mbit``, ``1gbit``    bits/s (int; k = 1000)
loss       ``0.1%``                               fraction 0..1
memory     ``512M``, ``64MB``, ``2G``, ``1GiB``   bytes (int; K = 1024)
cpu        ``0.25``, ``2`` (a bare number)        cores (float, > 0)
=========  =====================================  ==================
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator

_NUM = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"

TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}
SIZE_UNITS = {"B": 1, "KB": 1024, "MB": 1024 * 1024}
LINK_RATE_UNITS = {"kbit": 1_000, "mbit": 1_000_000, "gbit": 1_000_000_000}

_TIME_RE = re.compile(rf"^({_NUM})\s*(us|ms|s|m)$")
_SIZE_RE = re.compile(rf"^({_NUM})\s*(B|KB|MB)$")
_RATE_RE = re.compile(rf"^({_NUM})\s*/\s*s$")
_LINK_RATE_RE = re.compile(rf"^({_NUM})\s*(kbit|mbit|gbit)$")
_LOSS_RE = re.compile(rf"^({_NUM})\s*%$")
MEMORY_UNITS = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}
_MEMORY_RE = re.compile(rf"^({_NUM})\s*([KMG])(?:B|iB)?$")
MIN_MEMORY = 4 * 1024 * 1024  # below this no Python process starts; the kernel refuses tiny limits too


def _text(value: Any, what: str, allowed: str, example: str) -> str:
    if isinstance(value, bool):
        raise ValueError(f"expected a {what} with a unit ({allowed}), got {value!r}")
    if isinstance(value, (int, float)):
        raise ValueError(f"a bare number is not a {what}: write it with a unit ({allowed}), e.g. {value}{example}")
    if not isinstance(value, str):
        raise ValueError(f"expected a {what} with a unit ({allowed}), got {type(value).__name__}")
    text = value.strip()
    if re.fullmatch(_NUM, text):
        raise ValueError(f"a bare number is not a {what}: write it with a unit ({allowed}), e.g. {text}{example}")
    return text


def _scaled(text: str, what: str, allowed: str, pattern: re.Pattern, units: dict[str, float], example: str) -> float:
    """A number with one of ``units`` (matched by ``pattern``: number, unit), in the base unit."""
    m = pattern.fullmatch(text)
    if not m:
        raise ValueError(f"{text!r} is not a {what}; use a number with one of the units {allowed} (e.g. {example})")
    return float(m.group(1)) * units[m.group(2)]


def parse_time(value: Any, *, allow_inf: bool = False) -> float:
    """``"250ms"`` -> 0.25 (seconds). ``inf`` only when ``allow_inf``. Never negative."""
    allowed = "us, ms, s, m" + (", or inf" if allow_inf else "")
    text = _text(value, "time", allowed, "s")
    if text == "inf":
        if allow_inf:
            return math.inf
        raise ValueError("inf is not allowed here; give a time in us, ms, s or m")
    seconds = _scaled(text, "time", allowed, _TIME_RE, TIME_UNITS, "250ms")
    if seconds < 0 or not math.isfinite(seconds):
        raise ValueError(f"{text!r}: a time must be zero or positive")
    return seconds


def parse_size(value: Any) -> int:
    """``"4KB"`` -> 4096 (bytes)."""
    allowed = "B, KB, MB"
    text = _text(value, "size", allowed, "B")
    n = _scaled(text, "size", allowed, _SIZE_RE, SIZE_UNITS, "100B")
    if n < 0:
        raise ValueError(f"{text!r}: a size must be zero or positive")
    if n != int(n):
        raise ValueError(f"{text!r} is not a whole number of bytes")
    return int(n)


def parse_rate(value: Any) -> float:
    """``"25/s"`` -> 25.0 (per second). Must be positive."""
    allowed = "N/s"
    text = _text(value, "rate", allowed, "/s")
    m = _RATE_RE.fullmatch(text)
    if not m:
        raise ValueError(f"{text!r} is not a rate; write it as N/s (e.g. 25/s)")
    n = float(m.group(1))
    if n <= 0:
        raise ValueError(f"{text!r}: a rate must be positive")
    return n


def parse_link_rate(value: Any) -> int:
    """``"100mbit"`` -> 100_000_000 (bits/s). Must be positive."""
    allowed = "kbit, mbit, gbit"
    text = _text(value, "link rate", allowed, "mbit")
    n = _scaled(text, "link rate", allowed, _LINK_RATE_RE, LINK_RATE_UNITS, "100mbit")
    if n <= 0:
        raise ValueError(f"{text!r}: a link rate must be positive")
    if n < 1:
        raise ValueError(f"{text!r}: a link rate must be at least 1 bit/s")
    return int(round(n))


def parse_loss(value: Any) -> float:
    """``"0.1%"`` -> 0.001 (fraction). 0% .. 100%."""
    text = _text(value, "loss", "%", "%")
    m = _LOSS_RE.fullmatch(text)
    if not m:
        raise ValueError(f"{text!r} is not a loss; write it as a percentage (e.g. 0.1%)")
    pct = float(m.group(1))
    if not 0 <= pct <= 100:
        raise ValueError(f"{text!r}: a loss must be between 0% and 100%")
    return pct / 100.0


def parse_memory(value: Any) -> int:
    """``"512M"`` -> 536870912 (bytes; K/M/G, optionally KB/MB/GB or KiB/MiB/GiB, all 1024-based)."""
    allowed = "K, M, G"
    text = _text(value, "memory size", allowed, "M")
    m = _MEMORY_RE.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a memory size; use a number with one of the units {allowed} (e.g. 512M)")
    n = float(m.group(1)) * MEMORY_UNITS[m.group(2)]
    if n <= 0:
        raise ValueError(f"{text!r}: a memory size must be positive")
    if n < MIN_MEMORY:
        raise ValueError(f"{text!r}: a memory limit below 4M cannot run a node")
    return int(n)


def parse_cpu(value: Any) -> float:
    """``0.25`` -> 0.25 (cores). A bare positive number; at least 0.01 core (the kernel's 1ms per 100ms)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number of cores (e.g. 0.25 or 2), got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{value!r}: a CPU share must be a positive number of cores")
    if v < 0.01:
        raise ValueError(f"{value!r}: a CPU share must be at least 0.01 core")
    return v


def format_time(seconds: float) -> str:
    """A short human form of a time in seconds (``0.0025`` -> ``2.5ms``)."""
    if math.isinf(seconds):
        return "inf"
    if seconds == 0:
        return "0s"
    if seconds < 1e-3:
        return f"{seconds * 1e6:g}us"
    if seconds < 1:
        return f"{seconds * 1e3:g}ms"
    if seconds >= 60 and (seconds / 60).is_integer():
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


def format_ms(ms: float) -> str:
    return format_time(ms / 1000.0)


def format_link_rate(bps: int | None) -> str:
    if bps is None:
        return "unlimited"
    for unit, mult in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if bps >= mult and bps % mult == 0:
            return f"{bps // mult}{unit}"
    if bps >= 10**6:
        return f"{bps / 10**6:g}mbit"
    return f"{bps / 10**3:g}kbit"


def format_size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, mult in (("MB", 1024 * 1024), ("KB", 1024)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{unit}"
    return f"{n}B"


def format_memory(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, mult in (("G", 1024 ** 3), ("M", 1024 ** 2), ("K", 1024)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{unit}"
    return f"{n / 1024 ** 2:.1f}M"


def format_cpu(cores: float | None) -> str:
    return "-" if cores is None else f"{cores:g} core" + ("" if cores == 1 else "s")


# -- pydantic types ---------------------------------------------------------------
Time = Annotated[float, BeforeValidator(parse_time)]
TimeOrInf = Annotated[float, BeforeValidator(lambda v: parse_time(v, allow_inf=True))]
Size = Annotated[int, BeforeValidator(parse_size)]
Rate = Annotated[float, BeforeValidator(parse_rate)]
LinkRate = Annotated[int, BeforeValidator(parse_link_rate)]
Loss = Annotated[float, BeforeValidator(parse_loss)]
Memory = Annotated[int, BeforeValidator(parse_memory)]
Cpu = Annotated[float, BeforeValidator(parse_cpu)]

__all__ = [
    "parse_time", "parse_size", "parse_rate", "parse_link_rate", "parse_loss", "parse_memory", "parse_cpu",
    "format_time", "format_ms", "format_link_rate", "format_size", "format_memory", "format_cpu",
    "Time", "TimeOrInf", "Size", "Rate", "LinkRate", "Loss", "Memory", "Cpu",
]
