"""Keys travel over https only (issue 30 item 7): a marketplace API URL or the hub endpoint
(when HF_TOKEN is set) in plain http to anything but loopback is refused with exit 2 before
any request, naming the variable, the value and the fix; loopback http (the fakes, the
rehearsal) stays allowed. The provider client and the node agent refuse the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from mvp_tui.config import ConfigError
from mvp_tui.node.instance_api import SwitchSettings
from mvp_tui.node.settings import ConfigError as NodeConfigError
from mvp_tui.node.settings import Settings
from mvp_tui.node_protocol import base_url_problem
from mvp_tui.providers.base import ProviderError
from mvp_tui.providers.runpod.client import RunPodProvider
from mvp_tui.providers.vastai.client import VastAiProvider
from tests.foundation.test_api_key_sources import KEY, _cli
from tests.foundation.test_config import load


def test_a_plain_http_vast_url_with_a_key_exits_2_before_any_request(tmp_path: Path) -> None:
    done = _cli(tmp_path, "offers", "--provider", "vastai", VASTAI_API_KEY=KEY,
                MVP_VASTAI_API_URL="http://api.example.invalid")
    assert done.returncode == 2, done.stderr
    assert "MVP_VASTAI_API_URL" in done.stderr and "'http://api.example.invalid'" in done.stderr
    assert "use https" in done.stderr and "cannot reach" not in done.stderr
    assert KEY not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"MVP_NODE_PROVIDER": "runpod", "RUNPOD_API_KEY": KEY,
          "MVP_RUNPOD_API_URL": "http://api.example.invalid/v2"}, "MVP_RUNPOD_API_URL"),
        ({"HF_TOKEN": "hf_" + KEY, "MVP_HF_ENDPOINT": "http://hub.example.invalid"},
         "MVP_HF_ENDPOINT"),
        ({"HUGGING_FACE_HUB_TOKEN": "hf_" + KEY, "MVP_HF_ENDPOINT": "HTTP://mirror.example.invalid:8080/"},
         "MVP_HF_ENDPOINT"),
    ],
)
def test_runpod_and_the_hub_with_a_token_are_refused_in_plain_http(
    tmp_path: Path, env: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load(tmp_path, env=env)
    text = str(refused.value)
    assert named in text and "http://" in text.lower() and "https" in text
    assert KEY not in text


@pytest.mark.parametrize(
    "env",
    [
        {"MVP_NODE_PROVIDER": "vastai", "VASTAI_API_KEY": KEY,
         "MVP_VASTAI_API_URL": "http://127.0.0.1:8123"},
        {"MVP_NODE_PROVIDER": "runpod", "RUNPOD_API_KEY": KEY,
         "MVP_RUNPOD_API_URL": "http://localhost:9/v2"},
        {"HF_TOKEN": "hf_" + KEY, "MVP_HF_ENDPOINT": "http://[::1]:8080"},
        {"MVP_HF_ENDPOINT": "http://hub.example.invalid"},  # no token: nothing to leak
    ],
)
def test_loopback_http_and_a_tokenless_hub_stay_allowed(
    tmp_path: Path, env: dict[str, str]
) -> None:
    load(tmp_path, env=env)


def plain_http_off_loopback(url: str) -> bool:
    """The rule every reader of a key's URL applies (config load, clients, node)."""
    problem = base_url_problem(url, plain_http_ok=False)
    return problem == "is plain http to a host that is not loopback"


def test_the_rule_reads_the_host_not_the_text() -> None:
    assert plain_http_off_loopback("http://127.0.0.1.example.com")
    assert plain_http_off_loopback("HTTP://api.example.com")  # the scheme in any case
    assert plain_http_off_loopback("hTTp://127.0.0.1.example.com/v2")
    assert not plain_http_off_loopback("HTTP://127.0.0.1:80/x")
    assert not plain_http_off_loopback("https://api.example.com")
    assert base_url_problem("https://api.example.com", plain_http_ok=False) is None
    # user info is refused outright, whatever the host: `localhost@evil.example` is evil.example
    assert "user info" in str(base_url_problem("http://localhost@evil.example",
                                               plain_http_ok=False))
    assert "user info" in str(base_url_problem("http://user@127.0.0.1:80/x",
                                               plain_http_ok=False))


def test_the_clients_and_the_node_refuse_it_too() -> None:
    with pytest.raises(ProviderError, match="MVP_VASTAI_API_URL"):
        VastAiProvider(api_key=KEY, api_url="http://api.example.invalid")
    with pytest.raises(ProviderError, match="MVP_RUNPOD_API_URL"):
        RunPodProvider(api_key=KEY, api_url="http://api.example.invalid/v2")
    with pytest.raises(NodeConfigError, match="MVP_HF_ENDPOINT"):
        Settings({"HF_TOKEN": "hf_x", "MVP_HF_ENDPOINT": "http://hub.example.invalid"})
    assert Settings({"HF_TOKEN": "hf_x", "MVP_HF_ENDPOINT": "http://127.0.0.1:9"}).hf_token


# Base URLs whose text shows a loopback or known host while every URL parser (httpx's, the
# client that sends the key; urllib's, the node's) connects elsewhere, and URLs that carry
# a secret of their own. "s3cret" must never be printed.
SNEAKY = [
    "http://evil.example?@127.0.0.1",
    "http://evil.example#@127.0.0.1",
    "http://localhost@evil.example",
    "http://evil.example\\@127.0.0.1",
    "https://user:s3cret-pass@console.vast.ai",
    "https://console.vast.ai/?token=s3cret-pass",
    "https://console.vast.ai#s3cret-pass",
]


@pytest.mark.parametrize("url", SNEAKY)
def test_user_info_a_query_or_a_fragment_in_a_base_url_is_refused_at_config_load(
    tmp_path: Path, url: str
) -> None:
    for env, named in (
        ({"MVP_NODE_PROVIDER": "vastai", "VASTAI_API_KEY": KEY, "MVP_VASTAI_API_URL": url},
         "MVP_VASTAI_API_URL"),
        ({"MVP_NODE_PROVIDER": "runpod", "RUNPOD_API_KEY": KEY, "MVP_RUNPOD_API_URL": url},
         "MVP_RUNPOD_API_URL"),
        ({"MVP_HF_ENDPOINT": url}, "MVP_HF_ENDPOINT"),  # a base URL even without a token
    ):
        with pytest.raises(ConfigError) as refused:
            load(tmp_path, env=env)
        text = str(refused.value)
        assert named in text and "fix:" in text and "host only" in text, text
        assert "s3cret" not in text and KEY not in text


@pytest.mark.parametrize("url", SNEAKY)
def test_the_clients_read_the_url_with_their_own_parser_and_refuse_it(url: str) -> None:
    with pytest.raises(ProviderError) as refused:
        VastAiProvider(api_key=KEY, api_url=url)
    assert "MVP_VASTAI_API_URL" in str(refused.value) and "s3cret" not in str(refused.value)
    with pytest.raises(ProviderError) as refused:
        RunPodProvider(api_key=KEY, api_url=url)
    assert "MVP_RUNPOD_API_URL" in str(refused.value) and "s3cret" not in str(refused.value)


@pytest.mark.parametrize("url", SNEAKY)
def test_the_node_checks_again_before_the_instance_key_goes_anywhere(url: str) -> None:
    switch = SwitchSettings({"MVP_WATCHDOG_PROVIDER": "vastai", "MVP_VASTAI_API_URL": url})
    assert switch.api_url == "" and switch.url_problem is not None
    assert "MVP_VASTAI_API_URL" in switch.url_problem and "s3cret" not in switch.url_problem
    with pytest.raises(NodeConfigError, match="MVP_HF_ENDPOINT") as refused:
        Settings({"HF_TOKEN": "hf_x", "MVP_HF_ENDPOINT": url})
    assert "s3cret" not in str(refused.value)


def test_loopback_is_decided_on_the_parsed_host() -> None:
    # httpx reads these as evil.example: refused before the host is looked at
    assert "a query" in str(base_url_problem("http://evil.example?@127.0.0.1",
                                             plain_http_ok=False))
    assert "a fragment" in str(base_url_problem("http://evil.example#@127.0.0.1",
                                                plain_http_ok=False))
    assert plain_http_off_loopback("http://127.0.0.1.nip.io:80")
    ok = SwitchSettings({"MVP_WATCHDOG_PROVIDER": "runpod",
                         "MVP_RUNPOD_API_URL": "HTTP://[::1]:8080/v2/"})
    assert (ok.url_problem, ok.api_url) == (None, "http://[::1]:8080/v2")
    assert "127.0.0.1:9" in repr(VastAiProvider(api_key=KEY, api_url="http://127.0.0.1:9"))
