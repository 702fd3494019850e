"""What may import what (ARCHITECTURE.md, "Layers"): read from every import statement of the
shipped code, lazy ones inside functions and `TYPE_CHECKING` blocks included.

The runtime checks beside it (tests/foundation/test_packaging.py's
`test_engine_and_providers_never_import_textual`, tests/datastream/test_isolation.py) prove
the same for what actually loads; this one names the file and line that breaks a rule.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.shipped import PACKAGES

ROOT = Path(__file__).resolve().parents[2]

NODE = ("mvp_tui.node",)
# The node's log reader and stopper: in the zipapp, but it starts alone with `python3 -S`, so it
# imports nothing of mvp_tui (mvp_tui/ssh/logtail.py reads its frame constants from it).
NODE_ALONE = ("mvp_tui.node.follow",)
# The app's modules the agent imports, shipped in its zipapp (mvp_tui/agent_bundle.py): the
# standard library only, and nothing of mvp_tui but each other.
NODE_SHARED = ("mvp_tui.node_protocol", "mvp_tui.untrusted", "mvp_tui.secrets")
BASE = tuple(
    f"mvp_tui.{name}"
    for name in (
        "errors",
        "events",
        "untrusted",
        "secrets",
        "node_protocol",
        "exit_codes",
        "run_ids",
        "labels",
        "install_tag",
        "lazy_names",
        "keymap",
        "config",
        "agent_bundle",
    )
)
# A provider's declaration is base layer, so the config reads the provider sections without
# loading a client: the kinds' registry (providers/registry.py), `ProviderKind`
# (providers/kind.py), each package's `kind.py` and `section.py`, and the packages' own
# `__init__.py`, which import nothing. Held to the base rules: base and stdlib imports only.
DECLARED = ("kind", "section")


def _declaration(name: str) -> bool:
    parts = name.split(".")
    if parts[:2] != ["mvp_tui", "providers"]:
        return False
    rest = parts[2:]
    if not rest or rest[0] in ("kind", "registry"):
        return True
    if not (ROOT / "providers" / rest[0]).is_dir():  # a top-level module (base, boot_guard)
        return False
    return len(rest) == 1 or rest[1] in DECLARED


def _base(name: str) -> bool:
    return _within(name, BASE) or _declaration(name)


ENGINE = tuple(
    f"mvp_tui.{name}" for name in ("providers", "lease", "ssh", "datastream", "prompt", "engine")
)
# The engine-side packages that stand on providers (a label's grammar is the base's labels.py).
PROVIDER_USERS = tuple(f"mvp_tui.{name}" for name in ("lease", "ssh", "prompt", "engine"))
UI = ("mvp_tui.widgets", "mvp_tui.themes", "mvp_tui.tui")
ENTRY = ("mvp_tui.cli", "mvp_tui.__main__", "mvp_tui.commands", "mvp_tui.preflight",
         "mvp_tui.rehearsal")
UI_LIBRARIES = ("textual", "rich")
NETWORK_LIBRARIES = ("httpx", "asyncssh", "docker")


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _modules() -> Iterator[tuple[str, Path]]:
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join([package, *parts]), path


def _imports(module: str, path: Path) -> Iterator[tuple[int, str]]:
    """(line, imported name) for every import; `from a import b` yields `a` and `a.b`."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            if base == "__future__":
                continue
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def _provider_package(name: str) -> str | None:
    """`vastai` for `mvp_tui.providers.vastai` and anything below it; else None."""
    parts = name.split(".")
    if parts[:2] == ["mvp_tui", "providers"] and len(parts) > 2:
        return parts[2] if (ROOT / "providers" / parts[2]).is_dir() else None
    return None


def _provider_node(name: str) -> bool:
    """A provider's node part (`providers/<name>/node_api.py`): node layer, in the zipapp."""
    parts = name.split(".")
    return _provider_package(name) is not None and len(parts) > 3 and parts[3] == "node_api"


def _marker(name: str) -> bool:
    """The package markers above a provider's node part, also in the zipapp: they import
    nothing of mvp_tui (the node imports them before any node part)."""
    return name == "mvp_tui.providers" or (
        _provider_package(name) is not None and len(name.split(".")) == 3
    )


def _node_side(module: str) -> bool:
    return _within(module, (*NODE, *NODE_SHARED)) or _provider_node(module) or _marker(module)


def _node_may_import(module: str) -> tuple[str, ...]:
    """The mvp_tui modules a node-side module may import (besides the standard library)."""
    if _within(module, NODE_ALONE) or _marker(module):
        return ()
    if _within(module, NODE_SHARED):
        return NODE_SHARED
    return (*NODE_SHARED, "mvp_tui.node")


def _breaks(module: str, target: str) -> str | None:
    """Why `module` may not import `target`, or None."""
    top = target.split(".")[0]
    if _node_side(module):
        allowed = _node_may_import(module)
        if top == "mvp_tui" and target != "mvp_tui" and _within(target, allowed):
            return None
        if top not in sys.stdlib_module_names:
            return (
                "the node side runs alone on a node: standard library only, and of mvp_tui "
                f"only {', '.join(allowed) or 'nothing'}"
            )
        return None
    if _base(module) and top == "mvp_tui" and not _base(target):
        return "the base layer imports only the base layer"
    if (_base(module) or _within(module, ENGINE)) and (
        top in UI_LIBRARIES or _within(target, (*UI, *ENTRY))
    ):
        return "the engine side knows nothing of Textual, the UI or the commands"
    if _base(module) and top in NETWORK_LIBRARIES:
        return "the base layer does no network"
    if _within(module, ("mvp_tui.datastream",)) and (
        top in NETWORK_LIBRARIES or _within(target, ("mvp_tui.providers", "mvp_tui.ssh"))
    ):
        return "the datastream (and so replay) can reach no provider and no node"
    if _within(module, ("mvp_tui.widgets",)):
        if top in NETWORK_LIBRARIES:
            return "widgets know nothing of HTTP, SSH or Docker"
        if _within(target, ("mvp_tui.providers",)) and not _within(
            target, ("mvp_tui.providers.base",)
        ):
            return "widgets see providers only through providers/base.py's types"
        if _within(target, ("mvp_tui.tui", *ENTRY)):
            return "widgets are composed by the app, never the other way round"
    if _within(module, ("mvp_tui.providers",)) and _within(target, PROVIDER_USERS):
        return "providers stand below the lease walk, SSH, prompts and the engine that use them"
    engine = ("mvp_tui.engine",)
    if _within(module, ENGINE) and _within(target, engine) and not _within(module, engine):
        return "only the engine drives providers, leases, SSH, the datastream and prompts"
    return None


def _violations() -> list[str]:
    found = []
    for module, path in _modules():
        for line, target in _imports(module, path):
            why = _breaks(module, target)
            if why:
                found.append(f"{path.relative_to(ROOT)}:{line} imports {target}: {why}")
    return sorted(set(found))


def test_every_import_keeps_to_the_layers() -> None:
    modules = dict(_modules())
    assert {
        "mvp_tui.engine.run", "mvp_tui.providers.vastai.client", "mvp_tui.widgets.prompt"
    } <= set(modules)
    assert "mvp_tui.node_protocol" in {
        t for _, t in _imports("", modules["mvp_tui.engine.attempt_stage"])
    }
    assert _violations() == []


def test_the_rules_catch_each_kind_of_break() -> None:
    assert _breaks("mvp_tui.node.engine", "mvp_tui.node_protocol.WEIGHTS_CHANNEL") is None
    assert _breaks("mvp_tui.node.engine", "mvp_tui.node.control") is None
    assert _breaks("mvp_tui.node.engine", "json") is None
    assert _breaks("mvp_tui.node.engine", "mvp_tui.errors")
    assert _breaks("mvp_tui.node.engine", "mvp_tui.datastream.frame_line")
    assert _breaks("mvp_tui.node.engine", "msgspec")
    assert _breaks("mvp_tui.untrusted", "mvp_tui.node.frames")
    assert _breaks("mvp_tui.secrets", "mvp_tui.errors")
    assert _breaks("mvp_tui.node_protocol", "mvp_tui.secrets") is None
    assert _breaks("mvp_tui.node.follow", "mvp_tui.node_protocol")
    assert _breaks("mvp_tui.node.follow", "mvp_tui.node.control")
    assert _breaks("mvp_tui.untrusted", "mvp_tui.lease.records")
    assert _breaks("mvp_tui.engine.run", "textual.app")
    assert _breaks("mvp_tui.providers.vastai.client", "mvp_tui.widgets.offers")
    assert _breaks("mvp_tui.datastream.hub", "httpx")
    assert _breaks("mvp_tui.widgets.offers", "mvp_tui.providers.vastai.client")
    assert _breaks("mvp_tui.widgets.offers", "mvp_tui.providers.base.Offer") is None
    assert _breaks("mvp_tui.widgets.offers", "mvp_tui.tui.app")
    assert _breaks("mvp_tui.lease.walk", "mvp_tui.engine.run")
    assert _breaks("mvp_tui.providers.docker_spec", "mvp_tui.lease.naming.parse_label")
    assert _breaks("mvp_tui.providers.docker_spec", "mvp_tui.labels.parse_label") is None
    assert _breaks("mvp_tui.lease.walk", "mvp_tui.providers.base") is None
    assert _breaks("mvp_tui.tui.app", "textual.app") is None
    # A provider's node part is node side: the standard library and the node's own only.
    assert _breaks("mvp_tui.providers.vastai.node_api", "mvp_tui.node.instance_api") is None
    assert _breaks("mvp_tui.providers.vastai.node_api", "mvp_tui.node_protocol") is None
    assert _breaks("mvp_tui.providers.vastai.node_api", "mvp_tui.providers.base")
    assert _breaks("mvp_tui.providers.vastai.node_api", "mvp_tui.providers.vastai.client")
    assert _breaks("mvp_tui.providers.runpod.node_api", "httpx")
    assert _breaks("mvp_tui.providers.vastai", "mvp_tui.providers.vastai.kind")
    assert _breaks("mvp_tui.providers", "mvp_tui.providers.registry")
    # A provider's declaration is base: the config reads it; it reads no client.
    assert _breaks("mvp_tui.config.schema", "mvp_tui.providers.registry.PROVIDERS") is None
    assert _breaks("mvp_tui.config.schema", "mvp_tui.providers.vastai.section") is None
    assert _breaks("mvp_tui.config.schema", "mvp_tui.providers.vastai.client")
    assert _breaks("mvp_tui.config.schema", "mvp_tui.providers.base")
    assert _breaks("mvp_tui.providers.vastai.kind", "mvp_tui.providers.vastai.client")
    assert _breaks("mvp_tui.providers.registry", "mvp_tui.providers.marketplace_http")
    assert _breaks("mvp_tui.providers.runpod.section", "httpx")
    assert _breaks("mvp_tui.providers.kind", "mvp_tui.engine.run")


def _arrows(inside: str) -> dict[str, set[str]]:
    """module → the modules it imports, of the modules under `inside` (every import)."""
    modules = dict(_modules())
    mine = {m for m in modules if _within(m, (inside,))}
    return {
        m: {t if t in mine else t.rsplit(".", 1)[0] for _, t in _imports(m, modules[m])} & mine
        for m in sorted(mine)
    }


def circles(arrows: dict[str, set[str]]) -> list[list[str]]:
    """The import circles (strongly connected groups of two or more modules), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(m: str) -> None:
        index[m] = low[m] = len(index)
        stack.append(m)
        for t in sorted(arrows.get(m, ())):
            if t not in index:
                visit(t)
                low[m] = min(low[m], low[t])
            elif t in stack:
                low[m] = min(low[m], index[t])
        if low[m] == index[m]:
            group = []
            while True:
                t = stack.pop()
                group.append(t)
                if t == m:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for m in sorted(arrows):
        if m not in index:
            visit(m)
    return sorted(found)


def test_no_import_circle_inside_the_engine() -> None:
    # Lazy and TYPE_CHECKING imports count: each is a part that needs its caller.
    arrows = _arrows("mvp_tui.engine")
    assert "mvp_tui.engine.ledger" in arrows["mvp_tui.engine.limits"]
    assert circles(arrows) == []
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_zipapp_carries_exactly_the_modules_the_node_may_import() -> None:
    """The layer rule above and the builder name the same shared modules, and every module of
    the node package imports nothing else of mvp_tui (so the zip holds all it needs)."""
    from mvp_tui.agent_bundle import SHARED_MODULES, agent_members

    shipped = {f"mvp_tui.{name.removesuffix('.py')}" for name in SHARED_MODULES}
    assert shipped - {"mvp_tui.__init__"} == set(NODE_SHARED)
    modules = dict(_modules())
    node = [m for m in modules if _node_side(m)]
    assert "mvp_tui.node.main" in node and len(node) > 10
    assert {"mvp_tui.providers.vastai.node_api", "mvp_tui.providers.runpod.node_api"} <= set(node)
    # The zip holds exactly the node side (each provider's node part and its markers).
    zipped = {
        name.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        for name, _ in agent_members()
        if name != "__main__.py"
    }
    assert zipped - {"mvp_tui"} == set(node)
    reached = {
        t.rsplit(".", 1)[0] if t not in modules else t
        for m in node
        for _, t in _imports(m, modules[m])
        if t.startswith("mvp_tui.")
    }
    assert {t for t in reached if t in modules} <= set(node)
