"""The distribution installs `providers/`, `widgets/`, `themes/` under `mvp_tui`, never at the
top of site-packages, and the engine side never pulls in Textual."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _tracked_copy(dest: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in files:
        source = REPO / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())


def test_wheel_maps_subpackages_under_mvp_tui(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _tracked_copy(src)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(src),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = (tmp_path / "dist").glob("mvp_tui-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert "providers" not in tops and "widgets" not in tops and "themes" not in tops
    assert "mvp_tui/providers/base.py" in names
    assert "mvp_tui/widgets/pane.py" in names
    assert "mvp_tui/themes/__init__.py" in names
    assert "mvp_tui/themes/app.tcss" in names
    # Every package of the source tree is in the wheel (setuptools lists them by hand).
    inits = [init.relative_to(REPO).as_posix() for init in REPO.glob("mvp_tui/**/__init__.py")]
    # The mapped folders' subpackages too (a provider's package: providers/vastai/).
    inits += [
        f"mvp_tui/{init.relative_to(REPO).as_posix()}"
        for top in ("providers", "widgets", "themes")
        for init in REPO.glob(f"{top}/**/__init__.py")
    ]
    assert "mvp_tui/providers/vastai/__init__.py" in inits
    for rel in inits:
        assert rel in names, f"{rel} missing from the wheel: add it to [tool.setuptools] packages"
    assert "mvp_tui/node/follow.py" in names
    assert "mvp_tui/node/main.py" in names and "mvp_tui/agent_bundle.py" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "mvp-tui = mvp_tui.cli:main" in text


def test_the_installed_wheel_imports_its_subpackages(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _tracked_copy(src)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q",
         "--target", str(tmp_path / "site"), str(src)],
        check=True, capture_output=True, timeout=300,
    )
    site = tmp_path / "site"
    assert not (site / "providers").exists() and not (site / "widgets").exists()
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import mvp_tui, mvp_tui.providers.base, mvp_tui.widgets.pane, mvp_tui.themes\n"
        "import mvp_tui.node.follow, mvp_tui.tui.app, mvp_tui.agent_bundle as bundle\n"
        "names = [name for name, _ in bundle.agent_members()]\n"
        "assert 'mvp_tui/node/switch.py' in names\n"
        "assert names[-1] == 'mvp_tui/providers/vastai/node_api.py'\n"
        "print(mvp_tui.__file__); print(mvp_tui.themes.APP_CSS_PATH.is_file())\n"
    )
    result = subprocess.run([sys.executable, "-c", code, str(site)], capture_output=True,
                            text=True, check=True, timeout=120)
    where, css = result.stdout.split()
    assert where.startswith(str(site)) and css == "True"


def test_engine_and_providers_never_import_textual() -> None:
    code = (
        "import sys, importlib, pkgutil\n"
        "import mvp_tui.providers, mvp_tui.events, mvp_tui.config, mvp_tui.untrusted\n"
        "for pkg in ('mvp_tui.providers', 'mvp_tui.lease', 'mvp_tui.datastream', 'mvp_tui.ssh',"
        " 'mvp_tui.prompt', 'mvp_tui.engine'):\n"
        "    try:\n"
        "        mod = importlib.import_module(pkg)\n"
        "    except ModuleNotFoundError as exc:\n"
        "        if exc.name != pkg: raise\n"
        "        continue\n"
        "    for info in pkgutil.walk_packages(mod.__path__, pkg + '.'):\n"
        "        importlib.import_module(info.name)\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "", f"textual imported by the engine side: {result.stdout}"


def test_the_licence_is_an_spdx_string() -> None:
    """setuptools refuses the `license = { text = … }` table in builds after 2027-02-18."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    assert "License ::" not in " ".join(project.get("classifiers", []))  # PEP 639: not both


def test_no_formatter_markers_where_no_formatter_runs() -> None:
    """CI runs `ruff check`, not a formatter: a formatter's skip marker guards nothing."""
    marker = "# fmt" + ": skip"
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "*.py"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    found = [
        f"{name}:{n}"
        for name in names
        if (REPO / name).is_file()
        for n, line in enumerate((REPO / name).read_text(encoding="utf-8").splitlines(), 1)
        if marker in line
    ]
    assert not found, f"formatter markers with no formatter in CI: {found[:10]}"
