"""The Docker tests' node image, built offline from this machine's own files and cached.

The image holds exactly what the node agent needs: the Python that runs this test suite
(its standard library, no tests/tkinter/idle), the serving engine's packages
(llama-cpp-python[server] and its dependency closure, copied from `.venv`), and the shared
libraries those binaries link against (found with `ldd`), at the same absolute paths as on
this machine, plus `/usr/bin/python3` pointing at that interpreter. No package manager, no
network, no base image: the root filesystem is written as a tar stream and `docker import`ed.

The tar is cached outside the repo under `~/.cache/mvp-tui/docker-image/` (or
`$MVP_TEST_IMAGE_CACHE`), keyed by a hash of this file, the interpreter and every copied
package's name and version; a cold build takes about 15 s and 130 MB here, an import from the
cache about 3 s. The image tag carries the same key: `mvp-tui-test-node:<key>`.

    .venv/bin/python -m tests.docker.image build     # warm the cache (scripts/peers.sh)
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata as md
import io
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

from packaging.requirements import Requirement

IMAGE_REPO = "mvp-tui-test-node"
ENGINE_DIST = "llama_cpp_python"
ENGINE_EXTRAS = ("server",)
# Standard-library parts the agent and the engine never import: left out of the image.
STDLIB_SKIP = {
    "test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "site-packages",
    "pydoc_data",
}
STDLIB_SKIP_PREFIX = ("config-",)  # libpython*.a, the static build kit
ELF_MAGIC = b"\x7fELF"


def cache_dir() -> Path:
    root = os.environ.get("MVP_TEST_IMAGE_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "mvp-tui" / "docker-image"
    base.mkdir(parents=True, exist_ok=True)
    return base


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def engine_closure() -> list[md.Distribution]:
    """llama-cpp-python[server] and every distribution it needs, as installed here."""
    seen: dict[str, md.Distribution] = {}

    def walk(name: str, extras: tuple[str, ...]) -> None:
        key = _norm(name)
        if key in seen:
            return
        dist = md.distribution(name)
        seen[key] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            wanted = req.marker is None or any(
                req.marker.evaluate({"extra": extra}) for extra in (extras or ("",))
            )
            if wanted:
                walk(req.name, tuple(sorted(req.extras)))

    walk(ENGINE_DIST, ENGINE_EXTRAS)
    return sorted(seen.values(), key=lambda d: _norm(d.metadata["Name"]))


def image_key() -> str:
    """Changes when anything that goes into the image changes."""
    digest = hashlib.sha256()
    digest.update(Path(__file__).read_bytes())
    digest.update(sys.version.encode())
    digest.update(sys.base_prefix.encode())
    for dist in engine_closure():
        digest.update(f"{dist.metadata['Name']}=={dist.version};".encode())
    return digest.hexdigest()[:16]


def image_tag() -> str:
    return f"{IMAGE_REPO}:{image_key()}"


def interpreter() -> Path:
    """The real interpreter behind this (venv) Python."""
    return Path(os.path.realpath(Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}"
                                 f".{sys.version_info[1]}"))


def _stdlib_files() -> Iterator[Path]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    # The venv's stdlib path is the base interpreter's.
    stdlib = Path(sys.base_prefix) / "lib" / stdlib.name
    for entry in sorted(stdlib.iterdir()):
        if entry.name in STDLIB_SKIP or entry.name.startswith(STDLIB_SKIP_PREFIX):
            continue
        if entry.is_dir():
            for path in sorted(entry.rglob("*")):
                if path.is_file() and "/test/" not in str(path) and "/tests/" not in str(path):
                    yield path
        elif entry.is_file():
            yield entry


def _engine_files(target_site: Path) -> Iterator[tuple[Path, Path]]:
    """(source, path in the image) for every file of the engine's distributions."""
    for dist in engine_closure():
        for rel in dist.files or []:
            source = Path(str(dist.locate_file(rel)))
            parts = Path(str(rel)).parts
            if ".." in parts or not source.is_file():
                continue
            yield source, target_site / Path(str(rel))


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(4) == ELF_MAGIC
    except OSError:
        return False


def _linked_libraries(elves: list[Path]) -> set[str]:
    """Every shared library the ELF files load, as resolved on this machine."""
    found: set[str] = set()
    for chunk in range(0, len(elves), 64):
        batch = [str(p) for p in elves[chunk : chunk + 64]]
        done = subprocess.run(["ldd", *batch], capture_output=True, text=True, check=False)
        for line in done.stdout.splitlines():
            line = line.strip()
            if "=>" in line:
                target = line.split("=>", 1)[1].strip().split(" (", 1)[0].strip()
                if target.startswith("/"):
                    found.add(target)
            elif line.startswith("/") and " (" in line:
                found.add(line.split(" (", 1)[0])
    return found


def _add_file(tar: tarfile.TarFile, source: Path, arcname: str, added: set[str]) -> None:
    """A regular file (symlinks followed), once."""
    arcname = arcname.lstrip("/")
    if arcname in added:
        return
    _add_dirs(tar, arcname, added)
    added.add(arcname)
    info = tar.gettarinfo(os.path.realpath(source), arcname)
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    with open(os.path.realpath(source), "rb") as handle:
        tar.addfile(info, handle)


def _add_dirs(tar: tarfile.TarFile, arcname: str, added: set[str]) -> None:
    parts = arcname.split("/")[:-1]
    for i in range(1, len(parts) + 1):
        name = "/".join(parts[:i])
        if name and name not in added:
            added.add(name)
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if name == "tmp" else 0o755
            tar.addfile(info)


def _add_bytes(tar: tarfile.TarFile, arcname: str, data: bytes, added: set[str]) -> None:
    _add_dirs(tar, arcname, added)
    added.add(arcname)
    info = tarfile.TarInfo(arcname)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def _add_symlink(tar: tarfile.TarFile, arcname: str, target: str, added: set[str]) -> None:
    _add_dirs(tar, arcname, added)
    added.add(arcname)
    info = tarfile.TarInfo(arcname)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    tar.addfile(info)


def write_rootfs(dest: Path) -> None:
    """The image's root filesystem as a tar file (written next to `dest`, then renamed)."""
    python = interpreter()
    prefix = Path(sys.base_prefix)
    stdlib = prefix / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = stdlib / "site-packages"
    files: list[tuple[Path, Path]] = [(python, python)]
    files += [(p, p) for p in _stdlib_files()]
    files += list(_engine_files(site))
    libpython = sorted((prefix / "lib").glob("libpython*.so*"))
    files += [(p, p) for p in libpython]
    elves = [src for src, _ in files if src.suffix == ".so" or ".so." in src.name or src == python]
    elves = [p for p in elves if _is_elf(p)]
    # Libraries found through an $ORIGIN rpath (numpy.libs, llama_cpp/lib) travel with their
    # package; only the system's own libraries are added at their paths.
    venv_site = Path(sysconfig.get_paths()["purelib"])
    libs = {
        os.path.normpath(lib)
        for lib in _linked_libraries(elves)
        if not os.path.normpath(lib).startswith((str(venv_site), str(prefix)))
    }
    tmp = dest.with_suffix(".partial")
    added: set[str] = set()
    with tarfile.open(tmp, "w") as tar:
        for name in ("tmp", "root", "etc", "usr/bin", "opt", "models"):
            _add_dirs(tar, name + "/x", added)
        for src, target in files:
            _add_file(tar, src, str(target), added)
        for lib in sorted(libs):
            _add_file(tar, Path(lib), lib, added)
            real = os.path.realpath(lib)
            if real != lib:
                _add_file(tar, Path(real), real, added)
        _add_symlink(tar, "usr/bin/python3", str(python), added)
        _add_bytes(tar, "etc/passwd", b"root:x:0:0:root:/root:/usr/bin/python3\n", added)
        _add_bytes(tar, "etc/group", b"root:x:0:\n", added)
    tmp.replace(dest)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One builder at a time (two pytest workers may ask at once)."""
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def rootfs_tar() -> Path:
    """The cached root filesystem tar for this key, built when missing."""
    key = image_key()
    base = cache_dir()
    tar = base / f"rootfs-{key}.tar"
    with _locked(base / ".lock"):
        if not tar.is_file():
            for stale in base.glob("rootfs-*.tar"):
                stale.unlink()
            write_rootfs(tar)
    return tar


def ensure_image(client: object) -> str:
    """The test image in the daemon behind `client` (a docker.DockerClient): imported from
    the cached tar when the daemon lacks it. Returns its tag."""
    import docker

    assert isinstance(client, docker.DockerClient)
    tag = image_tag()
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    tar = rootfs_tar()
    repo, _, version = tag.partition(":")
    client.api.import_image_from_file(
        str(tar),
        repository=repo,
        tag=version,
        changes=[
            "ENV PATH=/usr/local/bin:/usr/bin:/bin",
            "ENV HOME=/root",
            "ENV PYTHONDONTWRITEBYTECODE=1",
            'CMD ["/usr/bin/python3"]',
        ],
    )
    client.images.get(tag)
    return tag


def main(argv: list[str]) -> int:
    if argv[:1] != ["build"]:
        print("usage: python -m tests.docker.image build", file=sys.stderr)
        return 2
    started = time.monotonic()
    tar = rootfs_tar()
    size = tar.stat().st_size / 1e6
    print(f"test image rootfs: {tar} ({size:.0f} MB, {time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
