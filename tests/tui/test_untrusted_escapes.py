"""Untrusted text never reaches the terminal as an escape sequence or as markup (issue 8).

The main test replays an archive whose channel names, bootstrap phases, details, payloads,
model id and even file name carry terminal escapes (CSI, OSC 52 clipboard writes, OSC 8
hyperlinks, DCS requests, 8-bit C1 controls, BEL, backspace) and Rich/Textual markup, in
the real `mvp-tui replay` on a pseudo-terminal, and checks the bytes the app writes: none of
the injected sequences, and every visible part of the text (markup as literal characters).

Textual itself writes CSI sequences (cursor moves, colours, modes) and one OSC 22 (pointer
shape, ended by BEL), so the checks look for the injected sequences and their payloads,
never for ESC in general.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets._toast import Toast

from mvp_tui.datastream.archive import FrameArchive, read_archive
from mvp_tui.datastream.frame import Frame, node_stream, orchestrator_stream
from mvp_tui.providers.base import ProviderError
from mvp_tui.tui.app import MvpApp
from mvp_tui.untrusted import clean_line
from mvp_tui.widgets.confirm import Choice, ConfirmScreen
from tests.tui.apps import make_app

COLUMNS, ROWS = 200, 50
STARTUP_S = 45.0  # the first paint on a loaded CI machine
STEP_S = 15.0

# Sequences an archive smuggles in; none may reach the terminal.
CLEAR = "\x1b[2J"
CLIPBOARD = "\x1b]52;c;Q0xJUEJPQVJE\x07"  # OSC 52: write "CLIPBOARD" to the clipboard
LINK_OPEN, LINK_CLOSE = "\x1b]8;;https://evil.example/x\x1b\\", "\x1b]8;;\x1b\\"  # OSC 8
DECRQSS = "\x1bP$qm\x1b\\"  # DCS: asks the terminal to answer (type) its SGR state
C1_CSI = "\x9b31m"  # the 8-bit CSI
C1_OSC = "\x9d0;TITLEX\x9c"  # 8-bit OSC: set the window title
APC = "\x1b_Gpayload\x1b\\"
REPORT = "\x1b[6n\x1b[21t"  # cursor position / window title reports: input injection
BEL, BACKSPACE = "\x07", "\x08"

INJECTED: tuple[bytes, ...] = (
    b"\x1b]52",
    b"\x1b[2J",
    b"\x1bP",
    b"\x1b]8;",
    b"\x1b_",
    b"\x1b[6n",
    b"\x1b[21t",
    b"\x08",
    # payloads of the stripped sequences: gone with their sequence
    b"Q0xJUEJPQVJE",
    b"UEhBU0U",
    b"TU9ERUw",
    b"RklMRU5BTUU",
    b"ZXZpbA",
    b"TITLEX",
    b"$qm",
    b"Gpayload",
)
# 8-bit controls, looked for in the decoded text (0x9b alone is also a UTF-8 continuation
# byte of box-drawing glyphs); a raw byte that is not UTF-8 decodes to a lone surrogate.
C1 = ("\x9b", "\x9d", "\x9c", "\x90", "\udc9b", "\udc9d", "\udc9c", "\udc90")
# Textual's own pointer-shape OSC 22 is the one BEL it may write.
_TEXTUAL_OSC = re.compile(rb"\x1b\]22;[a-z-]*\x07")
_CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")

FILE_NAME = f"hostile{CLIPBOARD.replace('Q0xJUEJPQVJE', 'RklMRU5BTUU')}{CLEAR}.jsonl"
CHANNEL = f"{CLEAR}{CLIPBOARD}EVILCHAN{C1_CSI}{DECRQSS}"  # sorts first: ESC < "m"
PHASE = f"\x1b]52;c;UEhBU0U={BEL}PHASEX{CLEAR}{C1_CSI}"
DETAIL = (
    f"\x1b[31mDETAILX\x1b[0m [bold red]MARKUPX[/] {LINK_OPEN}LINKX{LINK_CLOSE} "
    f"{DECRQSS}{BEL}{BACKSPACE}{REPORT}{C1_OSC}"
)
MODEL = f"{CLEAR}[link=https://evil.example]MODELX[/link]\x1b]52;c;TU9ERUw={BEL}"


def payload_line(i: int) -> str:
    return (
        f"PAYLOADX{i} \x1b]52;c;ZXZpbA=={BEL} [bold red]LITERALX[/] {CLEAR}{C1_CSI} "
        f"{DECRQSS} {APC}{BEL}{BACKSPACE} {LINK_OPEN}LINKY{LINK_CLOSE} end"
    )


def _json(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


def write_hostile_archive(directory: Path) -> Path:
    """An archive in the seed's JSONL format, written by the real archive writer."""
    path = directory / FILE_NAME
    node, orch = node_stream(7, 1), orchestrator_stream(7)
    with FrameArchive(path) as archive:
        phase = {"type": "OrchBootstrap", "phase": PHASE, "status": "failed", "run_id": 7}
        archive.record(
            "orchestrator",
            Frame(orch, "mvp.orch.bootstrap", 0, _json({**phase, "detail": {"reason": DETAIL}})),
        )
        for i in range(3):
            archive.record(
                "node_bootstrap_stdio", Frame(node, CHANNEL, i, payload_line(i).encode())
            )
        weights = {"type": "WeightsLoaded", "model_id": MODEL, "port": 18081, "load_ms": 5}
        archive.record("node_bootstrap_stdio", Frame(node, "mvp.worker.weights", 0, _json(weights)))
    assert [r.frame.channel for r in read_archive(path)][1] == CHANNEL  # kept byte for byte
    return path


# -- the real CLI on a pseudo-terminal -------------------------------------------------------


class Terminal:
    """`mvp-tui` on a pty of a fixed size: everything it writes is kept in `output`."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.output = bytearray()
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                env=env,
                cwd=cwd,
                start_new_session=True,
                close_fds=True,
            )
        finally:
            os.close(slave)

    def _read(self, wait_s: float) -> bool:
        """Read what is there within `wait_s`; False once the terminal is closed."""
        ready, _, _ = select.select([self.master], [], [], wait_s)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 1 << 16)
        except OSError:  # EIO: every writer closed the pty
            return False
        self.output += chunk
        return bool(chunk)

    def read_until(self, marker: bytes, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while marker not in self.output:
            if time.monotonic() > deadline or not self._read(0.1):
                raise AssertionError(
                    f"{marker!r} never appeared on the terminal (exit code "
                    f"{self.proc.poll()}); the screen said:\n{visible(bytes(self.output))[-3000:]}"
                )

    def settle(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self._read(0.05):
            pass

    def press(self, key: bytes, settle_s: float = 0.5) -> None:
        os.write(self.master, key)
        self.settle(settle_s)

    def wait_exit(self, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.1)
        code = self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        while self._read(0.1):  # whatever it wrote while restoring the terminal
            pass
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        with contextlib.suppress(OSError):
            os.close(self.master)


def visible(output: bytes) -> str:
    """The text a person would read: the output without Textual's own sequences."""
    return _CSI.sub("", _TEXTUAL_OSC.sub(b"", output).decode("utf-8", "replace"))


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("mvp-tui")
    return [str(script)] if script.exists() else [sys.executable, "-m", "mvp_tui"]


def _env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MVP_", "TEXTUAL", "VAST")) and k not in ("NO_COLOR", "COLORTERM")
    }
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    return env | {
        "TERM": "xterm-256color",
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_STATE_HOME": str(home / "state"),
        "TEXTUAL_ANIMATIONS": "none",
    }


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs a Linux pty")
def test_replay_of_a_hostile_archive_writes_no_injected_sequence(tmp_path: Path) -> None:
    archive = write_hostile_archive(tmp_path)
    term = Terminal([*_cli(), "replay", str(archive), "--speed", "8"], _env(tmp_path), tmp_path)
    try:
        # The whole archive on screen: the channel, the failed phase, the model (last frame).
        for marker in (b"EVILCHAN", b"DETAILX", b"MODELX"):
            term.read_until(marker, STARTUP_S)
        term.settle(1.0)
        for _ in range(3):  # offers → bootstrap → leases → channels
            term.press(b"\t")
        term.press(b"\r")  # the first row (the hostile channel) opens its log
        term.read_until(b"PAYLOADX2", STEP_S)
        term.settle(0.5)
        term.press(b"\x1b", settle_s=1.0)  # back to the dashboard
        term.press(b"q", settle_s=0.0)
        code = term.wait_exit(STEP_S)
    finally:
        term.close()
    output = bytes(term.output)
    screen = visible(output)
    assert code == 0, screen[-3000:]
    assert "Traceback" not in screen

    # Nothing injected reached the terminal, from any pane, border, log or status bar.
    for sequence in INJECTED:
        assert sequence not in output, f"{sequence!r} reached the terminal"
    decoded = output.decode("utf-8", "surrogateescape")
    assert not [c for c in C1 if c in decoded], "an 8-bit control reached the terminal"
    assert b"\x07" not in _TEXTUAL_OSC.sub(b"", output), "a BEL reached the terminal"

    # ...and the text around it did, markup shown as the characters it is.
    for text in (
        "replay hostile.jsonl",  # the status bar: the archive's file name
        "EVILCHAN",  # the channels pane and the log screen's title
        "PHASEX",  # the bootstrap checklist: a phase of the archive
        "DETAILX [bold red]MARKUPX[/] LINKX",  # ...its failure reason
        "[link=https://evil.example]MODELX[/link]",  # the prompt pane's border (the model)
        "PAYLOADX0  [bold red]LITERALX[/]",  # the channel log, line by line
        "PAYLOADX2",
        "LINKY end",
    ):
        assert text in screen, f"{text!r} was not shown"


# -- toasts and modals, at unit level ---------------------------------------------------------

HOSTILE = (
    f"TOASTX {CLEAR}{CLIPBOARD}[bold red]RED[/] [@click=app.quit]CLICKX[/] {LINK_OPEN}LINKX"
    f"{LINK_CLOSE} {DECRQSS}{C1_CSI}{BEL}{BACKSPACE}{REPORT} end"
)
SHOWN = "TOASTX [bold red]RED[/] [@click=app.quit]CLICKX[/] LINKX  end"


def _rendered(app: MvpApp) -> tuple[str, str]:
    """What the current screen would write to the terminal, and its plain text."""
    strips = app.screen._compositor.render_strips()
    return "".join(s.render(app.console) for s in strips), "\n".join(s.text for s in strips)


def _lines_of(app: MvpApp, widget: Widget) -> list[str]:
    """The plain text lines `widget` covers on screen, without its border and padding."""
    region = widget.content_region
    strips = app.screen._compositor.render_strips()[region.y : region.bottom]
    return [s.crop(region.x, region.right).text.strip() for s in strips]


def _toasts(app: MvpApp) -> str:
    return "\n".join(toast.render().plain for toast in app.screen.query(Toast))


def _assert_no_injected(terminal: str) -> None:
    data = terminal.encode()
    for sequence in INJECTED:
        assert sequence not in data, f"{sequence!r} would reach the terminal"
    assert not [c for c in C1 if c in terminal], "an 8-bit control would reach the terminal"
    assert b"\x07" not in data


def test_cleaning_is_idempotent_and_leaves_no_escape() -> None:
    once = clean_line(HOSTILE)
    assert once == SHOWN and clean_line(once) == once
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in once)


async def test_a_toast_of_untrusted_text_shows_it_literally() -> None:
    app = make_app()
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        # The one way a dashboard toast shows provider text: cleaned, never markup.
        app.notify(clean_line(HOSTILE), title="lease failed", severity="error", markup=False)
        await pilot.pause()
        terminal, _ = _rendered(app)
        _assert_no_injected(terminal)
        assert _toasts(app) == f"lease failed\n{SHOWN}"


async def test_the_dashboards_failure_toast_shows_provider_text_literally() -> None:
    app = make_app()

    async def fails() -> None:
        raise ProviderError(HOSTILE, fix="retry")

    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        app.run_worker(fails(), name="offer search", group="engine", exit_on_error=False)
        await pilot.pause(0.2)
        terminal, _ = _rendered(app)
        _assert_no_injected(terminal)
        assert SHOWN in _toasts(app)


async def test_a_confirm_modal_shows_untrusted_text_literally() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.push_screen(
            ConfirmScreen(
                f"Tear down lease {HOSTILE}?",
                f"{HOSTILE}\nsecond {CLIPBOARD}[b]line[/b]\r\n{BEL}third",
                [Choice("cancel", "Cancel"), Choice("destroy", "Tear down", "error")],
                focus="cancel",
                cancel_value="cancel",
            )
        )
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        terminal, _ = _rendered(app)
        _assert_no_injected(terminal)
        lines = _lines_of(app, app.screen.query_one(Vertical))
        assert SHOWN in lines and "second [b]line[/b]" in lines and "third" in lines
        title = "Tear down lease TOASTX [bold red]RED[/] [@click=app.quit]CLICKX[/]"
        assert f"{title} LINKX  end?" in lines  # one line: the title never wraps
