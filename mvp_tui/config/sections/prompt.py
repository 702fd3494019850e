"""[prompt] and [relay]: how prompts reach the node; the seed's relay keys (accepted, not built)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mvp_tui.config.defaults import DEFAULT_RPC_ADDR, NO_IROH, NO_WEB_DASHBOARD
from mvp_tui.config.spec import Kind, Section, key


@dataclass(frozen=True)
class PromptSection(Section):
    """[prompt]: the prompt RPC, token budget, stall limit and local OpenAI port."""

    NAME: ClassVar[str] = "prompt"

    rpc_addr: str = key(
        DEFAULT_RPC_ADDR,
        "JSON-lines prompt RPC address; loopback unless [prompt] rpc_allow_remote = true",
        env="MVP_PROMPT_RPC_BIND", flag="--rpc-bind", kind=Kind.ADDR,
    )
    max_tokens: int = key(
        64, "default max tokens per prompt", env="MVP_PROMPT_MAX_TOKENS", flag="--max-tokens",
        minimum=1,
    )
    system: str | None = key(
        None,
        (
            "the Prompt pane's system prompt, sent first in each request of its conversation "
            "(the prompt RPC's prompts stand alone, as the seed defines them)"
        ),
        env="MVP_PROMPT_SYSTEM", example="You are a concise assistant.",
    )
    temperature: float | None = key(
        None, "sampling temperature of each prompt; unset = the engine's default",
        env="MVP_PROMPT_TEMPERATURE", flag="--temperature", minimum=0, maximum=2, example=0.7,
    )
    top_p: float | None = key(
        None, "nucleus sampling (top_p) of each prompt; unset = the engine's default",
        env="MVP_PROMPT_TOP_P", flag="--top-p", minimum=0, maximum=1, example=0.9,
    )
    seed: int | None = key(
        None, "sampling seed of each prompt (repeatable answers); unset = the engine's choice",
        env="MVP_PROMPT_SEED", flag="--seed", minimum=0, example=42,
    )
    rpc_allow_remote: bool = key(
        False,
        (
            "let rpc_addr be a non-loopback address; the prompt RPC's token travels in CLEAR "
            "TEXT, so anyone who can watch that network can prompt (and spend) your node"
        ),
        env="MVP_PROMPT_RPC_ALLOW_REMOTE", flag="--rpc-bind-unauthenticated",
    )
    dashboard: bool = key(
        False, "the seed's web dashboard (accepted, not built: the terminal UI is the dashboard)",
        env="MVP_DASHBOARD", flag="--dashboard", inert=NO_WEB_DASHBOARD,
    )
    dashboard_port: int | None = key(
        None, "the seed's web dashboard port (accepted, not built)", env="MVP_DASHBOARD_PORT",
        minimum=0, maximum=65535, inert=NO_WEB_DASHBOARD, example=8080,
    )
    stall_secs: float = key(
        60.0,
        (
            "fail the run when no token arrives this long while a prompt runs (a frozen node); 0 "
            "= never"
        ),
        env="MVP_PROMPT_STALL_SECS", flag="--stall-secs", minimum=0, zero_is_unset=True,
    )
    openai_port: int = key(
        8642,
        (
            "local port where the node's OpenAI-compatible endpoint is offered (one address for "
            "every run; taken: another, with a warning); 0 = pick a free one"
        ),
        env="MVP_PROMPT_OPENAI_PORT", flag="--openai-port", minimum=0, maximum=65535,
        note="It asks for the run's key: `mvp-tui endpoint --env` prints address, key and model.",
    )
    concurrency: int = key(
        1,
        (
            "concurrent streams the offer board's tok/s and $/Mtok are for: above 1, the "
            "aggregate `mvp-tui bench` measured at that many on the GPU model or host (else "
            "the one-stream figure, marked ~)"
        ),
        env="MVP_PROMPT_CONCURRENCY", minimum=1, maximum=256,
    )


@dataclass(frozen=True)
class RelaySection(Section):
    """[relay]: the seed's iroh relay (accepted, not built: nodes are reached over SSH)."""

    NAME: ClassVar[str] = "relay"

    mode: str | None = key(
        None, "the seed's iroh relay mode (accepted, not built)", env="MVP_IROH_RELAY_MODE",
        flag="--relay-mode", inert=NO_IROH, example="default",
    )
    url: str | None = key(
        None, "the seed's iroh relay URL (accepted, not built)", env="MVP_IROH_RELAY_URL",
        flag="--relay-url", inert=NO_IROH, example="https://relay.example.com",
    )
