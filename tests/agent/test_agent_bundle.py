"""The agent ships as one built zipapp (mvp_tui/agent_bundle.py): the same bytes from the same
sources, a new name when any module changes, only the modules it needs, and it runs on the
oldest Python the docs promise for nodes (3.8), imports of every module included; a
cached file is used only when it is this build, ours, in a 0700 directory of ours."""

from __future__ import annotations

import glob
import io
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from mvp_tui.agent_bundle import (
    PACKAGE_ROOT,
    SHARED_MODULES,
    agent_members,
    agent_zip,
    content_hash,
    zip_bytes,
)
from mvp_tui.errors import UserError
from tests.agent.agent_run import AgentRun, agent_env
from tests.peers import missing_peer

OLDEST = "3.8"  # docs/providers/index.md: the oldest python3 a node may have
OLDEST_ENV = "MVP_OLDEST_NODE_PYTHON"  # where CI keeps it, when not under pyenv


def _python(version: str) -> str | None:
    """A python<version> that really runs (a pyenv shim may exist without it installed)."""
    candidates = [os.environ.get(OLDEST_ENV, "") if version == OLDEST else ""]
    candidates.append(shutil.which(f"python{version}") or "")
    candidates += sorted(glob.glob(str(Path.home() / f".pyenv/versions/{version}.*/bin/python3")))
    for candidate in filter(None, candidates):
        done = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"],
                              capture_output=True, text=True, check=False)
        if done.returncode == 0 and done.stdout.strip() == str(tuple(map(int, version.split(".")))):
            return candidate
    return None


def oldest_python() -> str:
    """The oldest node Python's interpreter; skipped on a laptop without it, failed under CI."""
    found = _python(OLDEST)
    if found is None:
        missing_peer(f"python{OLDEST}", "no working interpreter found",
                     f"install it (pyenv install {OLDEST}) or set {OLDEST_ENV}")
    return found


def _source_tree(tmp_path: Path) -> Path:
    """A copy of what the builder reads (mvp_tui/'s shared modules and mvp_tui/node/)."""
    root = tmp_path / "src" / "mvp_tui"
    (root / "node").mkdir(parents=True)
    for name in SHARED_MODULES:
        shutil.copy(PACKAGE_ROOT / name, root / name)
    for path in (PACKAGE_ROOT / "node").glob("*.py"):
        shutil.copy(path, root / "node" / path.name)
    return root


def test_the_build_is_byte_identical_twice_and_cached_by_its_hash(tmp_path: Path) -> None:
    first = agent_zip(directory=tmp_path / "a")
    again = agent_zip(directory=tmp_path / "a")
    other = agent_zip(directory=tmp_path / "b")  # a fresh cache: built again, from scratch
    assert first == again and first.read_bytes() == other.read_bytes()
    assert first.name == other.name == f"{content_hash(agent_members())}.pyz"
    assert zip_bytes(agent_members()) == first.read_bytes()
    assert [p.name for p in first.parent.iterdir()] == [first.name]  # no temp file left
    with zipfile.ZipFile(first) as archive:
        assert {i.date_time for i in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def test_a_changed_module_is_a_new_hash_and_new_bytes(tmp_path: Path) -> None:
    root = _source_tree(tmp_path)
    before = agent_zip(root, tmp_path / "cache")
    engine = root / "node" / "engine.py"
    engine.write_text(engine.read_text() + "\n# one more line\n")
    after = agent_zip(root, tmp_path / "cache")
    assert before.name != after.name and before.read_bytes() != after.read_bytes()
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted(
        [before.name, after.name]
    )


def test_the_zip_holds_only_what_the_agent_needs() -> None:
    names = [name for name, _ in agent_members()]
    node = sorted(f"mvp_tui/node/{p.name}" for p in (PACKAGE_ROOT / "node").glob("*.py"))
    shared = [f"mvp_tui/{name}" for name in SHARED_MODULES]
    # Each provider package's node part, under its two package markers.
    parts = ["mvp_tui/providers/__init__.py"] + [
        f"mvp_tui/providers/{name}/{file}"
        for name in ("docker", "local", "runpod", "vastai")
        for file in ("__init__.py", "node_api.py")
    ]
    assert names == ["__main__.py", *shared, *node, *parts]
    assert "mvp_tui/providers/vastai/client.py" not in names
    assert "mvp_tui/agent_bundle.py" not in names
    assert "mvp_tui/datastream/frame_line.py" not in names


async def test_the_zipapp_runs_on_the_oldest_node_python(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    """A whole short run with a fake engine (every module of the agent imported, the switch,
    the probe, the model, the engine, the gate): WeightsLoaded, then a clean shutdown."""
    python = oldest_python()
    env = agent_env(
        tmp_path, PATH=path_with, MVP_GGUF_LOCAL_PATH=str(tiny_model), FAKE_LOADING_PROBES="1",
        MVP_API_KEY="run-key-0123456789", MVP_NODE_PROVIDER="local",
    )

    run = await AgentRun.start(env, python=python)
    try:
        loaded = await run.weights()
        assert loaded["type"] == "WeightsLoaded", loaded
        assert loaded["auth"] == "key"  # through the gate
        assert run.phase_detail("probe", "ready")["python"].startswith(f"{OLDEST}.")
        await run.send("shutdown\n")
        assert await run.wait_exit() == 0
        assert run.non_frames == [] and run.stderr == b"", run.stderr
    finally:
        await run.kill()


def test_every_module_imports_on_the_oldest_node_python() -> None:
    python = oldest_python()
    modules = [n[:-3].replace("/", ".") for n, _ in agent_members() if n.startswith("mvp_tui/")]
    code = "import sys; sys.path.insert(0, sys.argv[1])\n" + "".join(
        f"import {m.removesuffix('.__init__')}\n" for m in modules if m != "mvp_tui.node.__main__"
    )
    done = subprocess.run([python, "-I", "-c", code, str(agent_zip())], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def test_an_older_python_is_told_the_agent_needs_the_oldest() -> None:
    python = _python("3.7") or _python("3.6")
    if python is None:
        missing_peer("python3.7 or python3.6", "no interpreter older than the agent's oldest",
                     "install one (pyenv install 3.7)")
    done = subprocess.run([python, str(agent_zip())], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 1
    assert f"mvp-node needs Python {OLDEST} or later" in done.stderr


def test_python_m_runs_the_package_too() -> None:
    """`python -m mvp_tui.node` (no zip) is the same entry point, for working on the agent."""
    done = subprocess.run([sys.executable, "-m", "mvp_tui.node"], env={"MVP_MAX_CONTEXT": "x"},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "MVP_MAX_CONTEXT" in done.stdout


def _built(tmp_path: Path) -> Path:
    return agent_zip(directory=tmp_path / "cache")


def test_a_foreign_file_under_the_builds_name_is_built_over(tmp_path: Path) -> None:
    """The name is a hash of the sources, not of the file: a zip someone put there (a restored
    cache, a sync tool) is not run; the build replaces it."""
    path = _built(tmp_path)
    expected = path.read_bytes()
    foreign = io.BytesIO()
    with zipfile.ZipFile(foreign, "w") as archive:
        archive.writestr("__main__.py", "print('not the agent')\n")
    path.write_bytes(foreign.getvalue())
    assert _built(tmp_path) == path and path.read_bytes() == expected
    # The right members with one more, or bytes appended, are not the build either.
    path.write_bytes(expected + b"trailing")
    assert _built(tmp_path).read_bytes() == expected
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("mvp_tui/node/extra.py", "import os\n")
    assert _built(tmp_path).read_bytes() == expected


def _planted(members: list[tuple[str, bytes]], name: str, code: bytes) -> list[tuple[str, bytes]]:
    """`members` with `name`'s first bytes replaced by `code` (ending in a comment that eats
    the rest of the cut line), its length kept: the attack the member-bytes check exists for."""
    assert code.endswith(b"#") and b"\n" not in code[:-1]
    planted = []
    for member, body in members:
        if member == name:
            body = code + body[len(code):]
        planted.append((member, body))
    return planted


def test_the_builds_members_with_one_members_bytes_changed_are_rebuilt_never_run(
    tmp_path: Path,
) -> None:
    """Names, order and lengths all the build's, the zip laid out as `zip_bytes` lays it out,
    one member's bytes changed: only the bytes tell it apart, and it is built over, so what the
    run starts is the build (the planted `__main__` would print PLANTED and exit 7)."""
    path = _built(tmp_path)
    expected = path.read_bytes()
    members = agent_members()
    code = b'import os;os.write(1,b"PLANTED\\n");os._exit(7)#'
    planted = _planted(members, "__main__.py", code)
    assert [(n, len(b)) for n, b in planted] == [(n, len(b)) for n, b in members]
    assert planted != members
    path.write_bytes(zip_bytes(planted))
    os.chmod(path, 0o600)
    ran = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                         timeout=60, check=False)
    assert (ran.returncode, ran.stdout) == (7, "PLANTED\n")  # the plant would run, unchecked
    used = _built(tmp_path)
    assert used == path and used.read_bytes() == expected
    done = subprocess.run([sys.executable, str(used)], env={"MVP_MAX_CONTEXT": "x"},
                          capture_output=True, text=True, timeout=60, check=False)
    assert "PLANTED" not in done.stdout
    assert done.returncode == 2 and "MVP_MAX_CONTEXT" in done.stdout
    # A node module changed the same way (its length kept) is not the build either.
    path.write_bytes(zip_bytes(_planted(members, "mvp_tui/node/agent.py", b"x = 'planted' # #")))
    assert _built(tmp_path).read_bytes() == expected


def test_a_link_or_a_file_others_may_write_is_not_trusted(tmp_path: Path) -> None:
    path = _built(tmp_path)
    expected = path.read_bytes()
    elsewhere = tmp_path / "elsewhere.pyz"
    elsewhere.write_bytes(expected)  # even the right bytes, behind a link
    path.unlink()
    path.symlink_to(elsewhere)
    assert _built(tmp_path) == path and not path.is_symlink()
    assert stat.S_ISREG(path.lstat().st_mode) and path.read_bytes() == expected
    os.chmod(path, 0o666)
    before = path.stat().st_ino
    assert _built(tmp_path).stat().st_ino != before  # written afresh, 0600
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_cache_dir_is_ours_and_0700(tmp_path: Path) -> None:
    (tmp_path / "cache").mkdir(mode=0o755)
    os.chmod(tmp_path / "cache", 0o777)
    _built(tmp_path)
    assert stat.S_IMODE((tmp_path / "cache").stat().st_mode) == 0o700
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "linked").symlink_to(real)
    with pytest.raises(UserError, match="not a directory"):
        agent_zip(directory=tmp_path / "linked")
