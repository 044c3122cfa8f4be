"""The pydantic models of a topology file (version 1).

Every model forbids unknown keys. Values are parsed into the Plan's units as
they are validated (times in seconds, sizes in bytes, ...; see ``units.py``),
so a validated :class:`Topology` holds numbers, not strings with units.

The protocol-specific parts (``params``, ``placement``, a client group's
``params``) are kept as plain mappings here and validated by the protocol's
own models (``testbed/protocols/<protocol>/topology.py``) in ``loader.py``,
which stores the validated result on the Topology.
"""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    field_validator,
    model_validator,
)

from testbed.errors import Problem
from testbed.topology.plan import LINK_DISTRIBUTIONS
from testbed.topology.positions import dotted, locate
from testbed.topology.units import Cpu, LinkRate, Loss, Memory, Rate, Size, Time

NAME_RE = re.compile(r"^[a-z][a-z0-9-]*$")
PROVIDERS = ("local", "docker", "ansible")


def _check_name(v: str) -> str:
    if not NAME_RE.fullmatch(v):
        raise ValueError(
            f"{v!r} is not a valid name: use lowercase letters, digits and '-', starting with a letter"
        )
    return v


Name = Annotated[str, AfterValidator(_check_name)]


def _one_or_list(v: Any) -> Any:
    return [v] if isinstance(v, str) else v


class StrictModel(BaseModel):
    """Base of every topology model: unknown keys are errors; values are not coerced."""

    model_config = ConfigDict(extra="forbid", strict=False, frozen=False, populate_by_name=True)


class Site(StrictModel):
    """A geographic site. No keys yet (``{}``); ``label`` is a free-form display name."""

    label: str | None = None


class Host(StrictModel):
    address: str | None = None  # None = this machine
    user: str | None = None
    site: Name | None = None
    port: StrictInt = Field(22, ge=1, le=65535)
    key: str | None = None
    docker: str | None = None
    become: StrictBool = False  # ansible provider: may install packages / run tc as root (sudo)
    runtime: Literal["auto", "docker", "process"] = "auto"  # ansible provider: containers or processes
    cpu: Cpu | None = None  # the host's cores: every process on it together (docs/topology.md)
    memory: Memory | None = None  # the host's memory (bytes), every process on it together


SERVICE_DISTRIBUTIONS = ("exponential", "constant")


class Service(StrictModel):
    """A node's per-message service time (docs/topology.md, *Service time*): the messages it receives
    from other processes are handled one at a time, each holding it for a time drawn with this mean."""

    mean: Time
    distribution: Literal["exponential", "constant"] = "exponential"

    @field_validator("mean")
    @classmethod
    def _positive(cls, v: float) -> float:
        if not v > 0:
            raise ValueError("the mean service time must be more than 0 (e.g. 5ms)")
        if v > 10:
            raise ValueError("a mean service time over 10s is not a per-message cost")
        return v


def _service(v: Any) -> Any:
    return {"mean": v} if isinstance(v, (str, int, float)) and not isinstance(v, bool) else v


class Node(StrictModel):
    role: str
    site: Name
    host: Name | None = None
    neighbors: list[Name] = Field(default_factory=list)
    cell: str | None = None
    cpu: Cpu | None = None  # this node's cores (overrides its host's)
    memory: Memory | None = None  # this node's memory limit (bytes; overrides its host's)
    # a per-message cost the paper's brokers had and ours lack (docs/topology.md, *Service time*)
    service: Annotated[Service | None, BeforeValidator(_service)] = None


class ClientGroup(StrictModel):
    role: str
    count: StrictInt = Field(1, ge=1)
    attach: Annotated[list[Name], BeforeValidator(_one_or_list), Field(min_length=1)]  # name or list
    rate: Rate | None = None
    size: Size | None = None
    filter: str | None = None
    # extensions (docs/topology.md)
    site: Name | None = None  # default: the site of the first attach node
    host: Name | None = None  # default: the host of the first attach node
    params: dict[str, Any] = Field(default_factory=dict)  # validated by the protocol's ClientParams

    @property
    def attach_list(self) -> list[str]:
        return list(self.attach)


class LinkParams(StrictModel):
    """Emulation keys of a link; every key is optional and overrides only itself."""

    delay: Time | None = None
    jitter: Time | None = None
    distribution: Literal[LINK_DISTRIBUTIONS] | None = None  # type: ignore[valid-type]
    loss: Loss | None = None
    rate: LinkRate | None = None
    reorder: StrictBool | None = None  # extension: allow reordering under jitter

    def overrides(self) -> dict[str, Any]:
        """The keys set here, in LinkSpec field names and units."""
        out: dict[str, Any] = {}
        if self.delay is not None:
            out["delay_ms"] = self.delay * 1000.0
        if self.jitter is not None:
            out["jitter_ms"] = self.jitter * 1000.0
        if self.distribution is not None:
            out["distribution"] = self.distribution
        if self.loss is not None:
            out["loss"] = self.loss
        if self.rate is not None:
            out["rate_bps"] = self.rate
        if self.reorder is not None:
            out["reorder"] = self.reorder
        return out


class LinkSelector(LinkParams):
    """A link rule or a set_link target: ``sites: [a, b]`` / ``sites: [a]`` or ``nodes: [x, y]``."""

    sites: list[Name] | None = Field(None, min_length=1, max_length=2)
    nodes: list[Name] | None = Field(None, min_length=2, max_length=2)

    @model_validator(mode="after")
    def _one_selector(self) -> "LinkSelector":
        if (self.sites is None) == (self.nodes is None):
            raise ValueError("give exactly one of sites: [a, b] or nodes: [x, y]")
        if self.nodes is not None and self.nodes[0] == self.nodes[1]:
            raise ValueError("nodes: a link needs two different nodes")
        return self


class Links(StrictModel):
    default: LinkParams = Field(default_factory=LinkParams)
    rules: list[LinkSelector] = Field(default_factory=list)
    clients: LinkParams | None = None


FAULT_KINDS = ("stall", "crash", "restart", "cut", "partition", "pause", "set_link", "throttle")
WINDOWED = ("stall", "pause", "cut", "partition", "throttle")


class Fault(StrictModel):
    """One ``faults`` entry. Besides the core kinds (``FAULT_KINDS``), a protocol may declare its
    own schedule actions (``SCHEDULE`` of its topology module, e.g. a client's ``move`` and
    ``reject``): such a key is kept as an extra here (its value unvalidated) and the loader
    validates it with the protocol's model; a key no protocol declares is reported there."""

    model_config = ConfigDict(extra="allow", strict=False, frozen=False, populate_by_name=True)

    at: Time
    for_: Time | None = Field(None, alias="for")
    stall: Name | None = None
    crash: Name | None = None
    restart: Name | None = None
    pause: Name | None = None
    cut: list[Name] | None = Field(None, min_length=2, max_length=2)
    close: StrictBool | None = None  # cut only: also close the connection (detected at once)
    partition: list[list[Name]] | None = Field(None, min_length=2)
    set_link: LinkSelector | None = None
    throttle: Name | None = None  # the node whose CPU share becomes ``cpu`` (restored after ``for``)
    cpu: Cpu | None = None  # throttle only: the share during the window, in cores
    # a protocol action's control call (a topology.protocols.ProtocolCall), set by the loader
    _call: Any = PrivateAttr(None)

    @property
    def kind(self) -> str:
        for k in FAULT_KINDS:
            if getattr(self, k) is not None:
                return k
        for k in self.model_extra or {}:
            return k  # a protocol's schedule action
        raise AssertionError("validated fault without a kind")

    @property
    def protocol_action(self) -> bool:
        """True for a protocol's own schedule action (a key that is not a core fault kind)."""
        return bool(self.model_extra)

    @property
    def value(self) -> Any:
        """The value of the fault's kind key (``b1`` of ``{crash: b1}``)."""
        extra = self.model_extra or {}
        return extra[self.kind] if self.kind in extra else getattr(self, self.kind)

    @field_validator("for_")
    @classmethod
    def _positive_for(cls, v: float | None) -> float | None:
        if v is not None and v <= 0:
            raise ValueError("'for' must be longer than 0s")
        return v

    @model_validator(mode="after")
    def _one_kind(self) -> "Fault":
        for k in self.model_extra or {}:  # a misspelt 'at'/'for'/'close' is not a protocol action
            close = difflib.get_close_matches(str(k), ("at", "for", "close", "cpu"), n=1, cutoff=0.6)
            if close and str(k) not in FAULT_KINDS:
                raise ValueError(f"unknown key '{k}' (did you mean '{close[0]}'?)")
        kinds = [k for k in FAULT_KINDS if getattr(self, k) is not None] + list(self.model_extra or {})
        if not kinds:
            raise ValueError(f"a fault needs one of: {', '.join(FAULT_KINDS)}")
        if len(kinds) > 1:
            raise ValueError(f"a fault has exactly one kind, got {', '.join(kinds)}")
        kind = kinds[0]
        if self.model_extra:  # a protocol action: its protocol's model checks the rest (loader)
            if self.close is not None:
                raise ValueError(f"'close' only applies to cut, not to {kind}")
            if self.cpu is not None:
                raise ValueError(f"'cpu' only applies to throttle, not to {kind}")
            return self
        if kind == "throttle" and self.cpu is None:
            raise ValueError("throttle needs 'cpu': the node's share in cores during the fault (e.g. cpu: 0.1)")
        if self.cpu is not None and kind != "throttle":
            raise ValueError(f"'cpu' only applies to throttle, not to {kind}")
        if self.for_ is not None and kind not in WINDOWED:
            raise ValueError(f"'for' does not apply to {kind} (only to {', '.join(WINDOWED)})")
        if kind == "cut" and self.cut[0] == self.cut[1]:
            raise ValueError("cut needs two different nodes")
        if self.close is not None and kind != "cut":
            raise ValueError(f"'close' only applies to cut, not to {kind}")
        if kind == "partition":
            if any(len(g) == 0 for g in self.partition):
                raise ValueError("every partition group needs at least one site or node")
        return self


class Topology(StrictModel):
    version: Literal[1]
    name: Name
    protocol: str
    provider: Literal[PROVIDERS] = "local"  # type: ignore[valid-type]
    duration: Time
    seed: StrictInt = 0
    sites: dict[Name, Site] = Field(min_length=1)
    hosts: dict[Name, Host] = Field(default_factory=dict)
    nodes: dict[Name, Node] = Field(min_length=1)
    clients: dict[Name, ClientGroup] = Field(default_factory=dict)
    placement: dict[str, Any] = Field(default_factory=dict)
    links: Links = Field(default_factory=Links)
    faults: list[Fault] = Field(default_factory=list)
    params: dict[str, Any] = Field(default_factory=dict)
    sweep: dict[str, list[Any]] = Field(default_factory=dict)
    repeat: StrictInt = Field(1, ge=1)

    # Filled by the loader (not keys of the file).
    _path: str = PrivateAttr("")
    _source_text: str = PrivateAttr("")
    _rendered_text: str = PrivateAttr("")
    _point: dict[str, Any] = PrivateAttr(default_factory=dict)
    _data: Any = PrivateAttr(None)  # the ruamel round-trip tree (positions)
    _params: Any = PrivateAttr(None)  # protocol Params instance
    _placement: Any = PrivateAttr(None)  # protocol Placement instance
    _client_params: dict[str, Any] = PrivateAttr(default_factory=dict)  # group -> ClientParams instance

    # -- what the loader attached ------------------------------------------------
    @property
    def path(self) -> str:
        return self._path

    @property
    def source_text(self) -> str:
        """The file as given (before Jinja2 rendering)."""
        return self._source_text

    @property
    def rendered_text(self) -> str:
        """The file after Jinja2 rendering (what was parsed as YAML)."""
        return self._rendered_text

    @property
    def point(self) -> dict[str, Any]:
        return dict(self._point)

    @property
    def protocol_params(self) -> Any:
        """The validated protocol Params model (``params`` with defaults filled in)."""
        return self._params

    @property
    def protocol_placement(self) -> Any:
        return self._placement

    def client_params(self, group: str) -> Any:
        """The validated ClientParams model of one client group (or None)."""
        return self._client_params.get(group)

    # -- locations ------------------------------------------------------------------
    def locate(self, *keys: str | int) -> tuple[int, int]:
        """1-based (line, col) of the value at ``keys`` in the rendered file (0, 0 if unknown)."""
        return locate(self._data, keys)

    def problem(self, keys: tuple[str | int, ...], message: str):
        """A Problem located at ``keys`` (for protocol ``check`` functions)."""
        line, col = self.locate(*keys)
        return Problem(self._path, line, col, dotted(keys), message)

    # -- names ----------------------------------------------------------------------
    def process_names(self) -> list[str]:
        return list(self.nodes) + list(self.clients)

    def site_of(self, name: str) -> str | None:
        if name in self.nodes:
            return self.nodes[name].site
        if name in self.clients:
            g = self.clients[name]
            if g.site:
                return g.site
            first = g.attach_list[0]
            return self.nodes[first].site if first in self.nodes else None
        return None
