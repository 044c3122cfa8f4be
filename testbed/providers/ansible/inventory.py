"""Plan -> Ansible inventory and per-host variables, and the deployment's addressing. Pure.

The inventory is rendered with Jinja2 from the plan's hosts; every value goes through
:func:`yaml_value` (JSON, which is YAML, with every string tagged ``!unsafe``), so nothing
from the topology or from what a host reports about itself is interpreted by YAML, by
Ansible's own templating (a ``{{ }}`` in an address stays text) or by a shell. Values are
validated first (:func:`check_host`, :func:`check_hostvars`): a host's address is a host
name or an IP address, its user a user name, its key and the root it reports absolute paths
without control characters; anything else is a ProviderError naming the host and the key.
Private keys appear only as paths (``ansible_ssh_private_key_file``), never copied.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Any

import jinja2

from testbed.errors import ProviderError
from testbed.runs.deployment import Endpoint
from testbed.topology.plan import HostPlan, Plan

REMOTE_ROOT = ".testbed"  # under the SSH user's home on each host

HOSTNAME_RE = re.compile(r"(?=.{1,253}\Z)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                         r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?")
USER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: hostvars holding paths (the root a host reports about itself, ...): absolute, no control characters
PATH_VARS = ("tb_root",)


def yaml_value(v: Any) -> str:
    """``v`` as YAML flow text: JSON, every string tagged ``!unsafe`` (never templated by Ansible)."""
    if isinstance(v, str):
        return "!unsafe " + json.dumps(v)
    if v is None or isinstance(v, (bool, int, float)):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(yaml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {yaml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"not an inventory value: {type(v).__name__}")


def _is_address(a: str) -> bool:
    try:
        ipaddress.ip_address(a)
        return True
    except ValueError:
        return bool(HOSTNAME_RE.fullmatch(a))


def _is_abs_path(p: Any) -> bool:
    return isinstance(p, str) and p.startswith("/") and not _CONTROL.search(p) and "{{" not in p and "{%" not in p


def check_host(hp: HostPlan) -> None:
    """A host's address, user and key as the inventory may carry them; ProviderError otherwise."""
    if not isinstance(hp.address, str) or not _is_address(hp.address):
        raise ProviderError(f"hosts.{hp.name}.address: {str(hp.address)[:80]!r} is not a host name or an IP "
                            f"address", host=hp.name)
    if hp.user is not None and not USER_RE.fullmatch(hp.user):
        raise ProviderError(f"hosts.{hp.name}.user: {hp.user[:80]!r} is not a user name "
                            f"(letters, digits, '_', '.', '-'; at most 32)", host=hp.name)
    if hp.key is not None and (_CONTROL.search(hp.key) or "{{" in hp.key or "{%" in hp.key):
        raise ProviderError(f"hosts.{hp.name}.key: {hp.key[:80]!r} is not a plain path", host=hp.name)


def check_hostvars(hostvars: dict[str, dict[str, Any]]) -> None:
    """Paths among a host's variables (e.g. the root it reported about itself) are absolute."""
    for h, hv in hostvars.items():
        for k in PATH_VARS:
            if k in hv and hv[k] is not None and not _is_abs_path(hv[k]):
                raise ProviderError(f"{k}: {str(hv[k])[:80]!r} is not an absolute path", host=h)


_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
_ENV.filters["yaml"] = yaml_value
INVENTORY = _ENV.from_string(
    """# rendered by testbed.providers.ansible.inventory for run {{ run_id | tojson }}
all:
  vars:
    ansible_ssh_common_args: {{ ssh_args | yaml }}
    tb_run_id: {{ run_id | yaml }}
  hosts:
{%- for h in hosts %}
    {{ h.name | tojson }}:
      ansible_host: {{ h.address | yaml }}
      ansible_port: {{ h.port | yaml }}
{%- if h.user %}
      ansible_user: {{ h.user | yaml }}
{%- endif %}
{%- if h.key %}
      ansible_ssh_private_key_file: {{ h.key | yaml }}
{%- endif %}
      tb_nodes: {{ nodes[h.name] | yaml }}
      tb_become: {{ h.become | yaml }}
{%- for k, v in hostvars.get(h.name, {}).items() %}
      {{ k }}: {{ v | yaml }}
{%- endfor %}
{%- endfor %}
""")


def plan_hosts(plan: Plan) -> dict[str, HostPlan]:
    """The hosts the plan's processes run on, each with an address. Raises ProviderError."""
    used = sorted({n.host for n in plan.nodes.values()})
    out = {}
    for h in used:
        hp = plan.hosts.get(h)
        if hp is None or not hp.address:
            raise ProviderError("the ansible provider needs an address for every host that runs nodes "
                                "(hosts.<name>.address in the topology)", host=h)
        out[h] = hp
    return out


def nodes_by_host(plan: Plan) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for n in plan.nodes.values():
        out.setdefault(n.host, []).append(n.name)
    return out


def render_inventory(plan: Plan, run_id: str, ssh_args: str,
                     hostvars: dict[str, dict[str, Any]] | None = None,
                     only: list[str] | None = None) -> str:
    hosts = plan_hosts(plan)
    if only is not None:
        hosts = {k: v for k, v in hosts.items() if k in only}
    by_host = nodes_by_host(plan)
    for hp in hosts.values():
        check_host(hp)
    check_hostvars(hostvars or {})
    return INVENTORY.render(run_id=run_id, ssh_args=ssh_args, hosts=list(hosts.values()),
                            nodes={h: by_host.get(h, []) for h in hosts}, hostvars=hostvars or {})


def render_inventory_hosts(hosts: list[dict[str, Any]], run_id: str, ssh_args: str,
                           hostvars: dict[str, dict[str, Any]] | None = None) -> str:
    """An inventory from host records (as kept in state.json / the wipe registry)."""
    hp = [HostPlan(name=h["name"], address=h["address"], user=h.get("user"), port=int(h.get("port") or 22),
                   key=h.get("key"), become=bool(h.get("become"))) for h in hosts]
    for h in hp:
        check_host(h)
    check_hostvars(hostvars or {})
    return INVENTORY.render(run_id=run_id, ssh_args=ssh_args, hosts=hp, nodes={h.name: [] for h in hp},
                            hostvars=hostvars or {})


def host_record(hp: HostPlan) -> dict[str, Any]:
    """What down/wipe need to reach a host again: no secrets (the key is a path)."""
    return {"name": hp.name, "address": hp.address, "user": hp.user, "port": hp.port, "key": hp.key,
            "become": hp.become}


@dataclass(frozen=True)
class Layout:
    """Where every node listens: plan host address + ports found free on that host."""

    endpoints: dict[str, Endpoint]

    def peers(self) -> dict[str, tuple[str, int]]:
        return {n: ep.data for n, ep in self.endpoints.items()}


def layout(plan: Plan, free_ports: dict[str, list[int]]) -> Layout:
    """Two ports per node (data, control) from each host's free ports, in plan order."""
    hosts = plan_hosts(plan)
    by_host = nodes_by_host(plan)
    eps: dict[str, Endpoint] = {}
    for h, names in by_host.items():
        ports = free_ports.get(h, [])
        if len(ports) < 2 * len(names):
            raise ProviderError(f"needs {2 * len(names)} free ports, the host offered {len(ports)}", host=h)
        addr = hosts[h].address
        for i, n in enumerate(names):
            eps[n] = Endpoint(n, h, (addr, ports[2 * i]), (addr, ports[2 * i + 1]))
    return Layout({n: eps[n] for n in plan.nodes})
