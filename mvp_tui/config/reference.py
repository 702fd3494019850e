"""docs/configuration.md, derived from the key table as config.example.toml is: each section,
and each key with its type, default, env names, flag and meaning.
`python -m mvp_tui.config.reference > docs/configuration.md` writes it; a test checks the page
is what this derives. The declarations' prose is escaped, so no text in a key's doc is read as
Markdown markup (its `code spans` excepted)."""

from __future__ import annotations

import re

from mvp_tui.config.example import flag_forms, toml_value
from mvp_tui.config.schema import SECTION_CLASSES, UI_KEYS_SECTION, KeySpec, Kind
from mvp_tui.config.spec import ALL, specs_of

COMMAND = "python -m mvp_tui.config.reference > docs/configuration.md"

# A bad value's one line, as the loader writes it.
_ERROR_EXAMPLE = (
    "mvp-tui: [prompt] max_tokens = -3 from file /home/me/.config/mvp-tui/config.toml:2 is not "
    "valid (too small): expected a whole number ≥ 1"
)

HEADER = f"""\
# Configuration reference

<!-- Generated from the key declarations (mvp_tui/config/sections/, providers/*/section.py) by
`{COMMAND}`: edit those, not this page. -->

Layers, later wins: built-in defaults → TOML file → environment → flags. The file is
`--config PATH`, else `$MVP_CONFIG`, else the user config dir's `config.toml`
(`~/.config/mvp-tui/config.toml` on Linux); a missing default file is fine, a missing
explicit one is an error. `mvp-tui config` prints the effective configuration, each value with
its source (file and line, env var, flag, default); secrets print as `<redacted>`.

Every key below is one field of its section's settings class (`mvp_tui/config/sections/`,
a provider's in its package, `providers/<name>/section.py`);
this page and `config.example.toml` (`python -m mvp_tui.config.example > config.example.toml`,
every key commented out at its default) are generated from those fields.

Keys of a provider (`[vastai]`, `[runpod]`, `[docker]`) are parsed only when that provider
runs, so a stray variable for another provider never stops you. A bad value stops everything
before it starts, with one line naming the key, the value, where it came from and what is
accepted, e.g.

```
{_ERROR_EXAMPLE}
```

A 0, an empty list or empty text means what the key's documentation says, never a silent
default: `[limits] max_price_per_hour` and `max_spend_usd` = 0 mean no limit (as unset), the
same for the offer list, the lease walk, the dashboard and the node's switch; `max_hours = 0`
means no deadline (unset means 12 h on a rented provider);
`idle_teardown_mins = 0` turns the silence switch off, `idle_stop_mins = 0` the idle stop;
`openai_port = 0` picks a free port. Where a 0 or an empty value has no meaning (`[ssh]
retry_initial_secs` / `retry_max_secs`, the timeouts, `[lease] reconcile_waits_secs = []`,
empty text for a key that has a default) it is an error of the kind above. An empty optional
text key counts as unset. Text values are trimmed in every layer (an API key pasted with its
newline works); an API key with a space or control character inside is refused, naming the
key and where it came from (never its value).

Unknown keys are errors with a "did you mean" hint. When the app writes the file back (the
theme you pick, the model the picker saves), your comments and layout are kept.
"""

UI_KEYS = f"""\
## `[{UI_KEYS_SECTION}]` {{#ui-keys}}

Remap any binding of the dashboard by its id (`?` in the dashboard lists them; see
[Keys](dashboard.md#keys)), e.g.:

```toml
[{UI_KEYS_SECTION}]
search-offers = "f5"
quit = "ctrl+q"
```
"""

# What Python-Markdown (with attr_list) would read as markup in running text: emphasis, code,
# links and attribute lists ([ and ] escaped, no parenthesis can start a link), HTML.
_MARKUP = re.compile(r"([\\`*_\[\]{}])")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def escape(text: str) -> str:
    """Plain text as Markdown shows it literally."""
    text = "".join(_ENTITIES.get(char, char) for char in text)
    return _MARKUP.sub(r"\\\1", text)


def code(text: str) -> str:
    """A code span that holds `text` whatever backticks it contains."""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def prose(text: str) -> str:
    """A declaration's prose: its balanced `code spans` kept, everything else escaped."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an odd number of backticks: no span is meant
        return escape(text)
    return "".join(code(part) if i % 2 else escape(part) for i, part in enumerate(parts))


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "!", "?")) else ".")


def _default(spec: KeySpec) -> str:
    if spec.default is None or spec.default == "":
        return "unset"
    if spec.kind is Kind.LIST or spec.kind is Kind.FLOAT_LIST:
        return code(toml_value(spec.default)) if spec.default else "empty"
    return code(toml_value(spec.default))


def _key(spec: KeySpec) -> list[str]:
    facts = [f"**type**: {escape(spec.accepted())}", f"**default**: {_default(spec)}"]
    if spec.example is not None:
        facts.append(f"**example**: {code(spec.name + ' = ' + toml_value(spec.example))}")
    if spec.env:
        facts.append("**env**: " + ", ".join(code(name) for name in spec.env))
    if spec.flag:
        facts.append("**flag**: " + " / ".join(code(form) for form in flag_forms(spec)))
    if spec.secret:
        facts.append("**secret**: printed as `<redacted>` everywhere")
    if spec.scope != ALL:
        facts.append(f"**read**: only when provider `{spec.scope}` runs")
    out = [f"### `{spec.name}` {{#{spec.section}-{spec.name}}}", "", prose(_sentence(spec.doc))]
    if spec.note:
        out += ["", prose(_sentence(spec.note))]
    if spec.inert:
        inert = spec.inert.strip().rstrip(".") + "."
        out += ["", "Accepted for the seed's config files, not built: " + prose(inert)]
    out += ["", *(f"- {fact}" for fact in facts), ""]
    return out


def _section_doc(cls: type) -> str:
    doc = (cls.__doc__ or "").strip()
    return doc.split(": ", 1)[1] if doc.startswith("[") and ": " in doc else doc


def render_reference() -> str:
    lines = [HEADER]
    for cls in SECTION_CLASSES:
        name = cls.NAME
        lines += [f"## `[{name}]` {{#{name}}}", "", prose(_sentence(_section_doc(cls))), ""]
        lines += [line for spec in specs_of(cls) for line in _key(spec)]
    lines.append(UI_KEYS)
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    print(render_reference(), end="")
