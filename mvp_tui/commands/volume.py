"""`mvp-tui volume list|delete NAME`: the network volumes that hold a RunPod model cache.

A volume bills by the GB and month whether a pod runs or not, and holds the model a next run
would download again, so `down` never deletes one: only `volume delete`, naming it, asks
the provider and confirms it gone (a read answering 404)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from mvp_tui.config import Config, ConfigError
from mvp_tui.engine.provider_factory import build_provider
from mvp_tui.exit_codes import ExitCode
from mvp_tui.lease.volumes import forget_volume, load_volumes
from mvp_tui.providers.base import ProviderError
from mvp_tui.providers.runpod.kind import KIND as RUNPOD
from mvp_tui.providers.runpod.section import RunpodSection


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("list", "delete"), help="list them, or delete one")
    parser.add_argument("name", nargs="?", metavar="NAME", help="the volume's name or id")
    parser.add_argument("--yes", action="store_true", help="do not ask before deleting")


def _confirm(what: str) -> bool:
    if not sys.stdin.isatty():
        return False
    answer = input(f"Delete {what}? The model cache on it is lost. [y/N] ")
    return answer.strip().lower() in {"y", "yes"}


async def _list(config: Config) -> int:
    from mvp_tui.providers.runpod.client import RunPodProvider
    from mvp_tui.providers.runpod.volumes import list_volumes

    provider = build_provider(config.for_provider(RUNPOD.name))
    assert isinstance(provider, RunPodProvider)
    try:
        volumes = await list_volumes(provider)
    finally:
        await provider.aclose()
    runpod = config.for_provider(RUNPOD.name).settings.of(RunpodSection)
    rate = runpod.network_volume_usd_per_gb_month if runpod else 0.0
    for v in volumes:
        print(f"{v.id:<14} {v.name:<24} {v.size_gb:>5} GB  {v.data_center:<10} "
              f"${v.usd_per_month(rate):.2f}/month")
    print(f"{len(volumes)} network volume(s) on the RunPod account", file=sys.stderr)
    return int(ExitCode.OK)


async def _delete(config: Config, name: str) -> int:
    from mvp_tui.providers.runpod.client import RunPodProvider
    from mvp_tui.providers.runpod.volumes import delete_volume, find_volume

    provider = build_provider(config.for_provider(RUNPOD.name))
    assert isinstance(provider, RunPodProvider)
    try:
        volume = await find_volume(provider, name)
        if volume is None:
            print(f"mvp-tui: no RunPod network volume {name!r}; see `mvp-tui volume list`",
                  file=sys.stderr)
            forget_volume(config.state_dir, RUNPOD.name, name)
            return int(ExitCode.USAGE)
        gone = await delete_volume(provider, volume)
    finally:
        await provider.aclose()
    if not gone:
        print(f"NOT CONFIRMED: network volume {volume.id} ({volume.name}) may still bill",
              file=sys.stderr)
        return int(ExitCode.MAY_BILL)
    forget_volume(config.state_dir, RUNPOD.name, volume.id)
    print(f"deleted network volume {volume.id} ({volume.name}, {volume.size_gb} GB), "
          "confirmed by RunPod", file=sys.stderr)
    return int(ExitCode.OK)


def run(config: Config, args: argparse.Namespace) -> int:
    try:
        if args.action == "list":
            return asyncio.run(_list(config))
        if not args.name:
            print("mvp-tui: volume delete needs the volume's NAME or id", file=sys.stderr)
            return int(ExitCode.USAGE)
        known = {v.volume_id: v for v in load_volumes(config.state_dir)}
        what = f"network volume {args.name}"
        if args.name in known:
            what += f" ({known[args.name].size_gb} GB)"
        if not args.yes and not _confirm(what):
            print("mvp-tui: not confirmed; nothing deleted (add --yes to skip the question)",
                  file=sys.stderr)
            return int(ExitCode.USAGE)
        return asyncio.run(_delete(config, args.name))
    except (ConfigError, ProviderError) as exc:
        print(f"mvp-tui: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
