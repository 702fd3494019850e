"""What a run tells its user about its OpenAI endpoint and its idle stop (headless on stderr,
the dashboard in toasts): one wording for both. Never the key."""

from __future__ import annotations

from mvp_tui.engine.events import EndpointReady, IdleStopNotice


def slots_words(slots: int) -> str:
    """How many requests the engine serves at once, in words ("" when the node did not say:
    a user's own engine command). One is said plainly: a second client's request waits for
    the first's whole answer (llama-cpp-python's server)."""
    if slots == 1:
        return "one request at a time"
    return f"{slots} requests at once" if slots > 1 else ""


def endpoint_lines(event: EndpointReady) -> list[str]:
    """Where the endpoint is, then its warnings (`endpoint_warnings`)."""
    auth = "key: `mvp-tui endpoint --env`" if event.auth == "key" else "UNAUTHENTICATED"
    slots = slots_words(event.slots)
    line = f"OpenAI endpoint {event.base_url}/v1 (model {event.model}; {auth}"
    line += f"; {slots})" if slots else ")"
    return [line, *endpoint_warnings(event)]


def endpoint_warnings(event: EndpointReady) -> list[str]:
    """A fixed port that was taken; an endpoint that checks no key."""
    lines = []
    if event.port_taken:
        port = event.base_url.rsplit(":", 1)[-1]
        held = f" by {event.port_owner}" if event.port_owner else ""
        lines.append(
            f"local port {event.port_taken} ([prompt] openai_port) is taken{held}: the endpoint "
            f"is on {port} instead (`mvp-tui endpoint` says so too)"
        )
    if event.auth != "key":
        lines.append(
            "the node's endpoint checks no key: any local user or web page can use it"
        )
    return lines


def idle_stop_line(event: IdleStopNotice) -> str | None:
    """The warning before an idle stop, and the word that it was postponed."""
    if event.state == "warning":
        left = f"{event.stops_in_s:.0f} s" if event.stops_in_s is not None else "moments"
        window = f"{event.idle_stop_mins:g} min" if event.idle_stop_mins else "its window"
        return (
            f"the node destroys its own lease in {left} (idle stop: {window} with no request "
            "to its model); send a request, or press a key in the dashboard, to keep it"
        )
    if event.state == "postponed":
        return "idle stop postponed: a request came"
    return None
