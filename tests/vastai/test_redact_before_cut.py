"""Vast.ai text is redacted before it is cut: the API key echoed at a cut limit (an error
body, a status message, an offer field, an error string) never keeps a prefix (issue 8)."""

from __future__ import annotations

from typing import Any

import httpx

from mvp_tui.providers.base import CreateRequest, Offer, SelectionPolicy
from mvp_tui.providers.vastai.answers import Answer
from mvp_tui.providers.vastai.client import VastAiProvider
from mvp_tui.providers.vastai.instances import lease_status
from mvp_tui.providers.vastai.offers import read_offers
from mvp_tui.secrets import REDACTED, Redactor
from tests.fakes.vastai_server import FakeVast, Fault

KEY = "vast-SECRET-key-4f9c2e7b1a0d5e6f"
REDACT = Redactor([KEY])
OFFER = Offer("vastai", "1001", "RTX 4090", 1, 24564, 0.35, 0.99, 800.0, 600.0, "US")
REQUEST = CreateRequest("mvp-r1-n1", "img:1", {}, 20)


def straddling(limit: int) -> str:
    """The key starting 12 characters before a cut at `limit`."""
    return "x" * (limit - 12) + KEY + " and more"


def assert_no_prefix(*texts: Any) -> None:
    for text in texts:
        assert KEY[:8] not in str(text), text


def test_answer_texts_are_redacted_before_they_are_cut() -> None:
    raw = straddling(300).encode()  # not JSON: the raw text, cut at 300
    assert_no_prefix(Answer.parse(502, raw, "text/html", redact=REDACT).text)
    body = b'{"success": false, "error": "%s", "msg": "%s"}' % (
        straddling(80).encode(),
        straddling(300).encode(),
    )
    answer = Answer.parse(400, body, "application/json", redact=REDACT)
    assert_no_prefix(answer.error_code, answer.message, answer.detail(), answer.text)
    assert REDACTED in answer.message
    # A long body read only in part: the head read may cut the key anywhere.
    for at in range(1900, 2300, 7):
        head = ("y" * at + KEY + "z" * 4000).encode()
        assert_no_prefix(Answer.parse(502, head, "text/plain", redact=REDACT).text)


def test_instance_rows_are_redacted_before_they_are_cut() -> None:
    row = {
        "id": 7001,
        "actual_status": straddling(40),
        "label": straddling(1024),
        "status_msg": straddling(300),
    }
    status = lease_status(row, user="root", redact=REDACT)
    assert_no_prefix(status.raw_state, status.label, status.detail)
    assert REDACTED in status.detail


def test_offer_texts_and_skip_reasons_are_redacted_before_they_are_cut() -> None:
    good = {
        "id": 1001,
        "gpu_name": straddling(200),
        "num_gpus": 1,
        "gpu_ram": 24564,
        "dph_total": 0.3,
        "geolocation": straddling(200),
        "cpu_name": straddling(200),
        "verification": "verified",
    }
    bad = {"id": straddling(40), "gpu_name": "RTX 4090"}
    page = read_offers({"offers": [good, bad]}, SelectionPolicy(), redact=REDACT)
    (offer,) = page.offers
    assert_no_prefix(offer.gpu_name, offer.location, offer.cpu, *page.skipped)
    assert REDACTED in offer.location


def test_a_transport_error_is_redacted_before_it_is_cut() -> None:
    provider = VastAiProvider(api_key=KEY, api_url="http://127.0.0.1:9")
    assert_no_prefix(provider._http.why(httpx.ConnectError(straddling(200)), 30.0))


async def test_the_provider_never_shows_a_prefix_of_its_key() -> None:
    with FakeVast(api_key=KEY) as fake:
        fake.loading_polls = 0
        fake.add_offer(id=1001, geolocation=straddling(200))
        lease = fake.add_instance(label=f"mvp-{straddling(1024)}", status_msg=straddling(300))
        fake.script("create", Fault(status=400, body={"error": "bad", "msg": straddling(300)}))
        provider = VastAiProvider(api_key=KEY, api_url=fake.url, timeout_s=2)
        try:
            offers = await provider.search_offers(SelectionPolicy())
            status = await provider.get(str(lease))
            listed = await provider.list_by_label("mvp-")
            created = await provider.create(OFFER, REQUEST)
        finally:
            await provider.aclose()
    assert_no_prefix(repr(offers), repr(status), repr(listed), repr(created))
    assert REDACTED in created.detail and REDACTED in status.detail
