"""The built wheel installs into a fresh virtual environment and runs the demo from there."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_from_python_m_build_installs_and_runs_the_quick_demo(tmp_path: Path) -> None:
    # ``python -m build`` on a copy of the checkout (a build/ folder of the checkout would carry stale modules).
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".venv", ".git", "build", "site", "__pycache__", "*.egg-info"))
    dist = tmp_path / "dist"
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(src)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (wheel,) = dist.glob("memsim-*.whl")

    # A fresh venv; the dependencies come from this interpreter's site-packages (a .pth after the venv's own),
    # memsim itself only from the wheel: nothing of the checkout is on the path.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    own = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip())
    (own / "memsim-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
                   check=True, env=env, cwd=tmp_path)
    version = subprocess.run([str(venv / "bin" / "memsim"), "--version"], env=env, cwd=tmp_path, capture_output=True,
                             text=True)
    assert version.returncode == 0 and version.stdout.startswith("memsim "), version.stdout + version.stderr

    where = subprocess.run([str(python), "-c", "import memsim; print(memsim.__file__)"], check=True, env=env,
                           cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert Path(where).resolve().is_relative_to(own.resolve()), f"memsim imported from {where}, not from the wheel"

    run = tmp_path / "demo"
    done = subprocess.run([str(python), "-m", "memsim", "demo", "--quick", "--out", str(run), "--no-progress"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Learning through use" in done.stdout
    metrics = json.loads((run / "metrics.json").read_text())
    assert "naive" in metrics["systems"] and "control-learner" in metrics["systems"]
    assert (run / "report.html").is_file()
    spec = json.loads((run / "spec.json").read_text())
    assert spec["scenario"]["name"] == "life"  # the packaged quick config was found inside the wheel
