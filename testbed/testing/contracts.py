"""An import-linter contract type for the protocol packages (used by ``lint-imports`` only).

``builds_on``: under ``container`` (``testbed.protocols``), protocol ``p`` may import protocol
``q`` only when ``q`` is in ``p``'s ``BUILDS_ON`` (the tuple literal in its ``topology.py``, read as text: linting imports
none of the project's code). Written as a contract type rather than one contract per pair so that a new protocol
folder is covered without editing pyproject.toml.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


class BuildsOnContract(Contract):
    type_name = "builds_on"
    container = fields.StringField()

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        container = str(self.container)  # type: ignore[arg-type]
        names = sorted(m.rsplit(".", 1)[1] for m in graph.find_children(container))
        folder = _folder(container)
        allowed = {name: builds_on(folder / name / "topology.py") for name in names}
        broken = []
        for p in names:
            for q in names:
                if p == q or q in allowed[p]:
                    continue
                chains = graph.find_shortest_chains(importer=f"{container}.{p}",
                                                    imported=f"{container}.{q}", as_packages=True)
                for chain in sorted(chains):
                    broken.append({"importer": p, "imported": q, "chain": list(chain),
                                   "builds_on": sorted(allowed[p])})
        return ContractCheck(kept=not broken, metadata={"broken": broken})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for b in check.metadata["broken"]:
            output.print_error(f"{b['importer']} imports {b['imported']}, which is not in its "
                               f"BUILDS_ON {tuple(b['builds_on'])}:", bold=True)
            output.new_line()
            output.indent_cursor()
            output.print(" -> ".join(b["chain"]))
            output.new_line()


def _folder(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"builds_on: {package} is not a package")
    return Path(list(spec.submodule_search_locations)[0])


def builds_on(topology: Path) -> set[str]:
    """The names in ``BUILDS_ON = (...)`` of a topology module's text (empty when it has none)."""
    if not topology.is_file():
        return set()
    for node in ast.parse(topology.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "BUILDS_ON" for t in node.targets):
            value = ast.literal_eval(node.value)
            return {str(v) for v in value}
    return set()
