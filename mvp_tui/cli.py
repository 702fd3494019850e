"""The `mvp-tui` command line: the dashboard by default, plus the headless commands.

Exit codes (also in `--help`): 0 success, 1 the run failed, 2 bad usage or configuration,
3 a lease may still exist and bill (teardown not confirmed).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from mvp_tui import __version__
from mvp_tui.exit_codes import ExitCode

if TYPE_CHECKING:
    from mvp_tui.config import Config
    from mvp_tui.config.schema import KeySpec

# The config machinery (schema, TOML, platform dirs) loads in the functions that need it:
# `--version` answers without it (bench/bench_startup.py: ≤ 3x `python -c pass`).
VERSION = f"mvp-tui {__version__}"

EPILOG = """\
exit codes:
  0  success
  1  the run failed (what it leased was torn down, confirmed)
  2  bad usage or configuration (nothing was started)
  3  a lease may still exist and bill: teardown was not confirmed (see `mvp-tui ls`)

Configuration layers, later wins: built-in defaults, the TOML file (--config PATH, else
$MVP_CONFIG, else the user config dir's config.toml), environment (MVP_*), flags.
Every key with its env var and flag: config.example.toml, docs/configuration.md; effective
values: `mvp-tui config`.
"""

# Where each command is documented, the last line of its --help: a page of the docs site in
# this repository (docs/, `mkdocs serve`), since no copy of the site is hosted.
DOCS_PAGE = "docs/commands.md"


def docs_line(command: str | None) -> str:
    """The `docs:` line that ends a command's --help (None: the top-level parser's)."""
    if command is None:
        return f"docs: {DOCS_PAGE} (every page: docs/index.md; read them with `mkdocs serve`)"
    return f"docs: {DOCS_PAGE}#{command}"


# Built commands: name -> (module under mvp_tui.commands, one-line help).
COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("check", "check the setup before a first run: config, each provider's API key "
              "(one read, no spend), SSH identity, local engine, state dir, clock (--json)"),
    "up": ("up", "run the engine: lease, bootstrap, serve (--headless prints JSON lines)"),
    "down": ("down", "tear down what this install made (RUN or --all), confirmed by the "
             "provider; --instance PROVIDER:ID for one instance, after asking"),
    "ls": ("ls", "list runs with leases that may still exist"),
    "endpoint": ("endpoint", "the serving run's local OpenAI endpoint: URL, key, model "
                 "(--env for eval, --json)"),
    "bench": ("bench", "measure the serving run's model under load: N concurrent streams per "
              "level, aggregate and per-stream tok/s, TTFT, $/Mtok, kept in the host journal "
              "(--concurrency 1,4,8, --duration S, --json)"),
    "offers": ("offers", "print the filtered, sorted offer list (--json)"),
    "models": ("models", "choose a model by name: search the hub's GGUF repos (QUERY), or "
               "list a repo's quants with what each needs (--repo; --save QUANT writes it to "
               "the config)"),
    "hosts": ("hosts", "list the host journal: every attempt's host, stage reached and why it "
              "failed, newest first (--json, --days N, --provider X)"),
    "replay": ("replay", "open the dashboard on a datastream archive (read-only)"),
    "volume": ("volume", "list or delete (by name) the RunPod network volumes that hold the "
               "model cache; `down` never deletes one"),
    "rehearse": ("rehearse", "the whole lifecycle offline: a simulated marketplace, this machine "
                 "as the node (--faults NAME replays what can go wrong)"),
}


class _FlagValue(argparse.Action):
    """Keeps the value together with the flag as typed, so errors can name it."""

    def __init__(self, *args: Any, const_value: str | None = None, **kwargs: Any) -> None:
        self.const_value = const_value
        super().__init__(*args, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        value = self.const_value if self.const_value is not None else str(values)
        setattr(namespace, self.dest, (value, option_string or self.dest))


def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("configuration (each overrides its env var and TOML key)")
    group.add_argument(
        "--config",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help="TOML config file (default: $MVP_CONFIG, else the user config dir's config.toml)",
    )
    from mvp_tui.config.schema import KEYS

    for spec in KEYS:
        if spec.flag is None:
            continue
        _add_key_flag(group, spec)


def _add_key_flag(group: argparse._ArgumentGroup, spec: KeySpec) -> None:
    from mvp_tui.config.loader import flag_dest
    from mvp_tui.config.schema import Kind

    assert spec.flag is not None
    dest = flag_dest(spec)
    env = f" [env {spec.env[0]}]" if spec.env else ""
    doc = f"{spec.doc} ({spec.label}){env}"
    if spec.kind is Kind.BOOL:
        group.add_argument(
            spec.flag,
            dest=dest,
            nargs=0,
            action=_FlagValue,
            const_value="true",
            default=argparse.SUPPRESS,
            help=doc,
        )
        no_flag = "--no-" + spec.flag.removeprefix("--")
        group.add_argument(
            no_flag,
            dest=dest,
            nargs=0,
            action=_FlagValue,
            const_value="false",
            default=argparse.SUPPRESS,
            help=argparse.SUPPRESS,
        )
        return
    metavar = spec.name.upper()
    group.add_argument(
        spec.flag,
        dest=dest,
        metavar=metavar,
        action=_FlagValue,
        default=argparse.SUPPRESS,
        help=doc,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mvp-tui",
        usage="mvp-tui [--config PATH] [--KEY VALUE ...] [COMMAND [ARGS ...]]",
        description="Keyboard-driven dashboard: lease a GPU (Vast.ai, RunPod, or this machine), "
        "serve a model, stream tokens from it, and tear down until nothing bills.",
        epilog=f"{EPILOG}\n{docs_line(None)}\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=VERSION)
    _add_config_flags(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    config_cmd = commands.add_parser(
        "config",
        help="print the effective configuration and each value's source",
        epilog=f"{docs_line('config')}\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_config_flags(config_cmd)
    for name, (module, summary) in COMMANDS.items():
        sub = commands.add_parser(
            name,
            module=module,
            help=summary,
            description=summary,
            epilog=f"{EPILOG}\n{docs_line(name)}\n",
            usage=f"mvp-tui {name} [ARGS ...] [--KEY VALUE ...]",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _add_config_flags(sub)
    return parser


class _CommandParser(argparse.ArgumentParser):
    """A command's parser that imports its module (and adds its arguments) only when that
    command is parsed: `--version`, `config` and `ls` never import the engine, SSH or HTTP."""

    def __init__(self, *args: Any, module: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._module = module

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self._module is not None:
            module, self._module = self._module, None
            _command_module(module).add_arguments(self)
        return super().parse_known_args(args, namespace)


def _command_module(name: str) -> Any:
    return importlib.import_module(f"mvp_tui.commands.{name}")


def collect_flags(args: argparse.Namespace) -> dict[str, tuple[str, str]]:
    from mvp_tui.config.loader import flag_dest
    from mvp_tui.config.schema import KEYS

    flags: dict[str, tuple[str, str]] = {}
    for spec in KEYS:
        value = getattr(args, flag_dest(spec), None)
        if isinstance(value, tuple):
            flags[flag_dest(spec)] = (str(value[0]), str(value[1]))
    return flags


def _error(message: str) -> int:
    print(f"mvp-tui: {message}", file=sys.stderr)
    return int(ExitCode.USAGE)


def _run_config(config: Config) -> int:
    from mvp_tui.config.report import render

    sys.stdout.write(render(config))
    return int(ExitCode.OK)


def _run_dashboard(config: Config) -> int:
    from mvp_tui.tui.dashboard import run_dashboard

    return run_dashboard(config)


def main(argv: Sequence[str] | None = None) -> int:
    if list(sys.argv[1:] if argv is None else argv) == ["--version"]:
        print(VERSION)  # what argparse's --version prints, before the parser's config flags
        return int(ExitCode.OK)
    from mvp_tui.foreign_warnings import quiet_foreign_warnings
    from mvp_tui.open_files import raise_open_files_limit

    quiet_foreign_warnings()  # before any dependency is imported: theirs are not the user's
    raise_open_files_limit()  # room for leases, sessions and the prompt RPC's connections
    from mvp_tui.config import ConfigError, ConfigPaths, load_config

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = load_config(
            flags=collect_flags(args),
            env=os.environ,
            paths=ConfigPaths.resolve(getattr(args, "config", None), os.environ),
        )
    except ConfigError as exc:
        return _error(str(exc))
    for warning in config.warnings:  # the seed's keys accepted here without effect
        print(f"mvp-tui: warning: {warning}", file=sys.stderr)
    for caution in config.cautions:  # a key in argv, a key file others can read
        print(f"mvp-tui: warning: {caution}", file=sys.stderr)
    command: str | None = args.command
    if command in COMMANDS:
        module = _command_module(COMMANDS[command][0])
        try:
            return int(module.run(config, args))
        except ConfigError as exc:
            return _error(str(exc))
    handlers: dict[str | None, Callable[[Config], int]] = {
        None: _run_dashboard,
        "config": _run_config,
    }
    try:
        return handlers[command](config)
    except ConfigError as exc:
        return _error(str(exc))


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    entry()
