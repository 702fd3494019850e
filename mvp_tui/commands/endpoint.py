"""`mvp-tui endpoint [RUN] [--env | --json]`: the run's OpenAI endpoint for other tools.

From the run's endpoint record (no provider call, no network): the local base URL, the run's
key and the model. RUN omitted: the newest run whose node serves now through a live mvp-tui.
`eval "$(mvp-tui endpoint --env)"` (sh, bash, zsh) or `mvp-tui endpoint --env --shell fish |
source` sets OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL, and for the seed's prompt RPC
MVP_PROMPT_RPC_ADDR and MVP_PROMPT_RPC_TOKEN (each request line's `token`). The model is the
id the dashboard configured (not the node's echo of it), and `--env` refuses one outside
letters, digits and `._:/@+-`, so nothing a shell evaluates comes from the rented node. The
key and token go to stdout only (never to a log); mind where that output is kept.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from mvp_tui.config import Config
from mvp_tui.engine.endpoint_words import slots_words
from mvp_tui.exit_codes import ExitCode
from mvp_tui.lease.endpoint_record import EndpointRecord, load_endpoint, process_alive
from mvp_tui.lease.port_owner import port_owner
from mvp_tui.lease.records import RecordStore
from mvp_tui.node_protocol import webui_host
from mvp_tui.untrusted import clean_line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run", nargs="?", metavar="RUN", help="a run id (default: the newest serving one)"
    )
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--env", action="store_true",
                       help="shell assignments, for eval (POSIX shells; --shell fish)")
    shape.add_argument("--json", action="store_true", help="one JSON object")
    parser.add_argument("--shell", choices=SHELLS, default="sh",
                        help="with --env: the shell that reads it (sh: also bash and zsh)")


SHELLS = ("sh", "fish")
# What a model id may hold to be printed for a shell: an OpenAI model name or a hub path.
SAFE_MODEL_ID = re.compile(r"[A-Za-z0-9._:/@+-]{1,200}")


def live(endpoint: EndpointRecord) -> bool:
    """Its node serves, through a forward an mvp-tui process still holds."""
    return endpoint.serving and bool(endpoint.base_url) and process_alive(endpoint.pid)


def newest_serving(store: RecordStore) -> tuple[str, EndpointRecord] | None:
    found = [(run_id, load_endpoint(store, run_id)) for run_id in store.run_ids()]
    serving = [(r, e) for r, e in found if e is not None and live(e)]
    return max(serving, key=lambda x: x[1].updated_at) if serving else None


def facts(run_id: str, endpoint: EndpointRecord) -> dict[str, Any]:
    return {
        "run": run_id,
        "base_url": endpoint.openai_base_url,
        "api_key": endpoint.api_key if endpoint.auth == "key" else "",
        "model": endpoint.model,
        "authenticated": endpoint.auth == "key",
        "serving": live(endpoint),
        "webui_url": webui_url(endpoint),
        "idle_stop_mins": endpoint.idle_stop_mins,
        "slots": endpoint.slots,  # requests served at once; 0: the node did not say
        "rpc_addr": endpoint.rpc_addr,
        "rpc_token": endpoint.rpc_token if endpoint.rpc_addr else "",
    }


def webui_url(endpoint: EndpointRecord) -> str:
    """Where the web UI is served: a keyed endpoint's on its own `<label>.localhost` name."""
    port = endpoint.port
    if not endpoint.base_url or port is None:
        return ""
    if endpoint.auth != "key":
        return f"{endpoint.base_url}/"
    return f"http://{webui_host(endpoint.api_key)}:{port}/"


def address_moved(wanted: int, endpoint: EndpointRecord, state_dir: Path) -> str:
    """When the run serves elsewhere than the one fixed address ([prompt] openai_port, taken
    when it started), where it is and who holds the usual port now; else ""."""
    port = endpoint.port
    if not wanted or port is None or port == wanted or not endpoint.base_url:
        return ""
    owner = port_owner(wanted, state_dir)
    held = f" (held by {owner})" if owner else ""
    return (
        f"the address moved: [prompt] openai_port {wanted} was taken{held}, so this run "
        f"serves on {endpoint.base_url}/v1 — point your tools there (or free {wanted} for "
        "the next run)"
    )


def fish_quote(value: str) -> str:
    """`value` as one fish word: in fish's single quotes only `\\` and `\'` are escapes."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def env_lines(values: dict[str, Any], shell: str = "sh") -> list[str]:
    # An unauthenticated endpoint still takes any key: clients that insist on one get a word.
    key = values["api_key"] or "none"
    pairs = [("OPENAI_BASE_URL", values["base_url"]), ("OPENAI_API_KEY", key),
             ("OPENAI_MODEL", values["model"])]
    if values["rpc_addr"]:
        pairs += [("MVP_PROMPT_RPC_ADDR", values["rpc_addr"]),
                  ("MVP_PROMPT_RPC_TOKEN", values["rpc_token"])]
    if shell == "fish":  # `;` ends each: `eval (…)` joins the lines into one
        return [f"set -gx {name} {fish_quote(str(value))};" for name, value in pairs]
    return [f"export {name}={shlex.quote(str(value))}" for name, value in pairs]


def unsafe_model(model: str) -> str:
    """Why `model` may not be printed for a shell to evaluate, or ""."""
    if SAFE_MODEL_ID.fullmatch(model):
        return ""
    return (f"the run's model id {clean_line(model, 80)!r} holds characters outside letters, "
            "digits and ._:/@+- (or is empty or over 200)")


def _fail(message: str) -> int:
    print(f"mvp-tui endpoint: {message}", file=sys.stderr)
    return int(ExitCode.USAGE)


def run(config: Config, args: argparse.Namespace) -> int:
    store = RecordStore(config.state_dir)
    if args.run:
        try:
            endpoint = load_endpoint(store, args.run)
        except ValueError:
            endpoint = None
        if endpoint is None:
            return _fail(f"run {args.run} has no endpoint record; `mvp-tui ls --all` lists runs")
        run_id = str(args.run)
    else:
        newest = newest_serving(store)
        if newest is None:
            return _fail(
                "no run serves now; start one (`mvp-tui`, or `mvp-tui up --headless`), or "
                "re-attach to a kept lease"
            )
        run_id, endpoint = newest
    values = facts(run_id, endpoint)
    if not values["serving"]:
        print(f"mvp-tui endpoint: warning: run {run_id} does not serve now (no mvp-tui holds "
              "its port); these are its last values", file=sys.stderr)
    if not values["authenticated"]:
        print(f"mvp-tui endpoint: warning: run {run_id}'s endpoint is UNAUTHENTICATED: any "
              "local user or web page can use it", file=sys.stderr)
    moved = address_moved(config.settings.prompt.openai_port, endpoint, config.state_dir)
    if moved:
        print(f"mvp-tui endpoint: note: {moved}", file=sys.stderr)
    if args.shell != "sh" and not args.env:
        return _fail("--shell says which shell reads --env's lines: use it with --env")
    if args.json:
        print(json.dumps(values))
    elif args.env:
        why = unsafe_model(str(values["model"]))
        if why:
            return _fail(f"{why}; it is not printed for a shell to evaluate (from run "
                         f"{run_id}'s endpoint record); fix: set [model] id (MVP_MODEL_ID, "
                         "--model-id) to such a name for the next run, or read --json")
        print("\n".join(env_lines(values, args.shell)))
    else:
        print(f"run      {run_id}")
        print(f"base url {values['base_url']}")
        print(f"api key  {values['api_key'] or '(none: unauthenticated)'}")
        print(f"model    {values['model']}")
        if slots_words(endpoint.slots):
            print(f"serves   {slots_words(endpoint.slots)}")
        print(f"web UI   {values['webui_url']} (the dashboard logs a browser in: `w`)")
        idle = values["idle_stop_mins"]
        print("idle stop " + (f"after {idle:g} min with no request" if idle else "off"))
        if values["rpc_addr"]:
            print(f"prompt RPC {values['rpc_addr']} (JSON lines; each request's \"token\": "
                  f"{values['rpc_token']})")
    return int(ExitCode.OK)
