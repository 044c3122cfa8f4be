"""Plan -> Ansible inventory and per-host variables, and the deployment's addressing. Pure.

The inventory is rendered with Jinja2 from the plan's hosts; every value goes through
``tojson`` (JSON is YAML), so nothing from the topology is ever interpreted by YAML or a
shell. Private keys appear only as paths (``ansible_ssh_private_key_file``), never copied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jinja2

from testbed.errors import ProviderError
from testbed.runs.deployment import Endpoint
from testbed.topology.plan import HostPlan, Plan

REMOTE_ROOT = ".testbed"  # under the SSH user's home on each host

INVENTORY = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False).from_string(
    """# rendered by testbed.providers.ansible.inventory for run {{ run_id | tojson }}
all:
  vars:
    ansible_ssh_common_args: {{ ssh_args | tojson }}
    tb_run_id: {{ run_id | tojson }}
  hosts:
{%- for h in hosts %}
    {{ h.name | tojson }}:
      ansible_host: {{ h.address | tojson }}
      ansible_port: {{ h.port | tojson }}
{%- if h.user %}
      ansible_user: {{ h.user | tojson }}
{%- endif %}
{%- if h.key %}
      ansible_ssh_private_key_file: {{ h.key | tojson }}
{%- endif %}
      tb_nodes: {{ nodes[h.name] | tojson }}
      tb_become: {{ h.become | tojson }}
{%- for k, v in hostvars.get(h.name, {}).items() %}
      {{ k }}: {{ v | tojson }}
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
    return INVENTORY.render(run_id=run_id, ssh_args=ssh_args, hosts=list(hosts.values()),
                            nodes={h: by_host.get(h, []) for h in hosts}, hostvars=hostvars or {})


def render_inventory_hosts(hosts: list[dict[str, Any]], run_id: str, ssh_args: str,
                           hostvars: dict[str, dict[str, Any]] | None = None) -> str:
    """An inventory from host records (as kept in state.json / the wipe registry)."""
    hp = [HostPlan(name=h["name"], address=h["address"], user=h.get("user"), port=int(h.get("port") or 22),
                   key=h.get("key"), become=bool(h.get("become"))) for h in hosts]
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
