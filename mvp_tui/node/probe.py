"""The probe: the node's environment and GPUs (also used by the local provider)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from mvp_tui.node.engine import find_llama_server, image_lacks
from mvp_tui.node.frames import clean_text
from mvp_tui.node.settings import Settings

# ---------------------------------------------------------------------------------------
# Probe


def parse_nvidia_smi(text: str) -> list[dict[str, Any]]:
    """Rows of `nvidia-smi --query-gpu=name,memory.total --format=csv,noheader`."""
    gpus = []
    for line in text.splitlines():
        if "," not in line:
            continue
        name, memory = line.rsplit(",", 1)
        digits = re.sub(r"[^0-9]", "", memory)
        gpus.append(
            {"name": clean_text(name.strip(), 120), "memory_mib": int(digits) if digits else 0}
        )
    return gpus


def probe_gpus() -> tuple[list[dict[str, Any]], str | None]:
    """GPUs from nvidia-smi when it is installed; an error text when it fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return [], None
    try:
        done = subprocess.run(
            [exe, "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            timeout=15,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"nvidia-smi failed: {exc}"
    if done.returncode != 0:
        err = clean_text(done.stderr.decode("utf-8", "replace"), 200)
        return [], f"nvidia-smi exited {done.returncode}: {err}"
    return parse_nvidia_smi(done.stdout.decode("utf-8", "replace")), None


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name from /proc/cpuinfo, else what `platform` knows."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo = ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "Hardware", "cpu model") and value.strip():
            return clean_text(value.strip(), 120)
    return platform.processor() or platform.machine()


def ram_mib(meminfo: str | None = None) -> int:
    """Total RAM in MiB from /proc/meminfo (0 when unknown)."""
    if meminfo is None:
        try:
            meminfo = Path("/proc/meminfo").read_text()
        except OSError:
            meminfo = ""
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            digits = re.sub(r"[^0-9]", "", line)
            return int(digits) // 1024 if digits else 0
    return 0


def probe_environment(settings: Settings, *, serves: bool = True) -> dict[str, Any]:
    """The node as the agent finds it; `lacks` names what this image misses for the job
    (`serves`: this node runs the serving engine, not only an RPC worker)."""
    cache_dir = settings.cache_dir
    gpus, gpu_error = probe_gpus()
    detail: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count() or 0,
        "ram_mib": ram_mib(),
        "gpus": gpus,
        "llama_server": find_llama_server(),
        "llama_cpp_python": importlib.util.find_spec("llama_cpp") is not None,
        "lacks": image_lacks(settings, gpus, serves=serves),
    }
    if gpu_error:
        detail["gpu_probe_error"] = gpu_error
    existing = cache_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    with contextlib.suppress(OSError):
        detail["disk_free_mib"] = shutil.disk_usage(str(existing)).free // (1 << 20)
    return detail


