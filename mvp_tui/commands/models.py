"""`mvp-tui models`: choose a model by name. `models QUERY` searches the hub's GGUF repos;
`models --repo OWNER/NAME` lists a repo's models, one per quant (a split one as one, its
parts' sizes summed), each with what it needs per node at the run's context; `--save QUANT`
writes that quant to the config file's `[model]` (tomlkit: comments kept).

The hub is `MVP_HF_ENDPOINT` (else huggingface.co), as for the node's download; `HF_TOKEN`
goes to it and nowhere else.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from mvp_tui.config import Config, ConfigPaths
from mvp_tui.config.toml_file import save_hub_model
from mvp_tui.engine.gguf_quants import QuantModel
from mvp_tui.engine.hub_models import HubError, HubModels
from mvp_tui.engine.model_fit import GIB, fit_slots
from mvp_tui.engine.quant_fit import RepoFit
from mvp_tui.exit_codes import ExitCode
from mvp_tui.untrusted import clean_line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", nargs="?", metavar="QUERY",
                        help="search the hub's GGUF repos whose name holds QUERY")
    parser.add_argument("--repo", metavar="OWNER/NAME",
                        help="list this repo's models (one per quant) instead of searching")
    parser.add_argument("--save", metavar="QUANT",
                        help="with --repo: write that quant (e.g. Q4_K_M) to the config "
                        "file's [model] gguf_repo and gguf_file")
    parser.add_argument("--json", action="store_true", help="JSON instead of a table")


def _table(rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n"
        for r in rows
    )


def _quant_json(fit: RepoFit, quant: QuantModel) -> dict[str, Any]:
    need = fit.need_of(quant)
    return {
        "quant": quant.quant, "file": quant.file, "files": list(quant.files),
        "size_bytes": quant.size, "parts": quant.parts, "complete": quant.complete,
        "needs_gb": need.per_node_gb if need is not None else None,
        "servable": not quant.unservable(), "why_not": quant.unservable() or None,
    }


def _print_repo(fit: RepoFit, as_json: bool) -> None:
    if as_json:
        json.dump({"repo": fit.repo, "context": fit.context or None,
                   "shape_note": fit.note or None,
                   "quants": [_quant_json(fit, q) for q in fit.quants]}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    rows: list[tuple[str, ...]] = [("quant", "size GB", "needs GB", "parts", "file")]
    for q in fit.quants:
        need = fit.need_of(q)
        parts = str(q.parts) if q.complete else f"{len(q.files)} of {q.parts}"
        rows.append((clean_line(q.label, 24), f"{q.size / GIB:.1f}",
                     str(need.per_node_gb) if need is not None else "?", parts,
                     clean_line(q.file, 160)))
    sys.stdout.write(_table(rows))
    if fit.needs:
        print(f"needs per node at {fit.context:,} tokens of context: weights + KV cache + "
              "margin (as the board's fit)", file=sys.stderr)
    elif fit.note:
        print(f"needs unknown: {clean_line(fit.note, 600)}", file=sys.stderr)


def _save(config: Config, fit: RepoFit, wanted: str) -> int:
    quants = [q for q in fit.quants if q.label.upper() == wanted.upper()]
    if not quants:
        known = ", ".join(q.label for q in fit.quants) or "none"
        print(f"mvp-tui: --save {wanted!r}: {fit.repo} has no such quant; it has: {known}",
              file=sys.stderr)
        return int(ExitCode.USAGE)
    quant = quants[-1]  # the largest of that name
    why = quant.unservable()
    if why:
        print(f"mvp-tui: --save {wanted!r}: {why}", file=sys.stderr)
        return int(ExitCode.USAGE)
    path = config.file or ConfigPaths().default
    try:
        said = save_hub_model(path, fit.repo, quant.file, config.sources)
    except OSError as exc:
        print(f"mvp-tui: could not write [model] to {path}: {exc.strerror or exc}",
              file=sys.stderr)
        return int(ExitCode.RUN_FAILED)
    print(f"{quant.label} of {fit.repo} ({quant.file}) {said}", file=sys.stderr)
    return int(ExitCode.OK)


def run(config: Config, args: argparse.Namespace) -> int:
    if not args.repo and not args.query:
        print("mvp-tui: models needs a QUERY to search, or --repo OWNER/NAME to list",
              file=sys.stderr)
        return int(ExitCode.USAGE)
    if args.save and not args.repo:
        print("mvp-tui: --save QUANT needs --repo OWNER/NAME", file=sys.stderr)
        return int(ExitCode.USAGE)
    hub = HubModels(os.environ)
    try:
        settings = config.settings
        if args.repo:
            fit = asyncio.run(hub.fit(args.repo, (), context=settings.model.max_context,
                                      nodes=settings.runtime.nodes,
                                      slots=fit_slots(settings.model.parallel)))
        else:
            hits = asyncio.run(hub.search(args.query))
    except HubError as exc:
        print(f"mvp-tui: {clean_line(str(exc), 600)}", file=sys.stderr)
        return int(ExitCode.RUN_FAILED)
    if args.repo:
        _print_repo(fit, args.json)
        return _save(config, fit, args.save) if args.save else int(ExitCode.OK)
    if args.json:
        json.dump([{"repo": h.repo, "downloads": h.downloads, "likes": h.likes,
                    "gated": h.gated} for h in hits], sys.stdout, indent=1)
        sys.stdout.write("\n")
    elif hits:
        sys.stdout.write(_table([("repo", "downloads", "likes", "access"),
                                 *((clean_line(h.repo, 100), f"{h.downloads}", f"{h.likes}",
                                    "gated" if h.gated else "open") for h in hits)]))
    print(f"{len(hits)} GGUF repo(s) for {args.query!r} on {hub.endpoint}; "
          "`mvp-tui models --repo OWNER/NAME` lists one's quants", file=sys.stderr)
    return int(ExitCode.OK)
