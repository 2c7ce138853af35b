"""The HTML report as a person sees it: rendered by headless Chromium, plots visible; wheel ships templates."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np

from studyctl.plots import COLOURS
from studyctl.reporting import collect_study

from .test_collect import copy_study

REPO = Path(__file__).resolve().parents[1]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Debian's chromium is required (scripts/test.sh installs it)"
    return found


def screenshot(html: Path, png: Path, profile: Path) -> np.ndarray:
    subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={profile}", f"--screenshot={png}", "--window-size=1280,2600",
                    "--hide-scrollbars", html.as_uri()], check=True, capture_output=True, timeout=120)
    return mpimg.imread(png)[..., :3]


def colour_fraction(img: np.ndarray, hex_colour: str, tol: float = 0.08) -> float:
    rgb = np.array([int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    return float((np.abs(img - rgb) < tol).all(axis=-1).mean())


def test_report_screenshot_shows_the_plots(small_study: Path, tmp_path: Path) -> None:
    study = copy_study(small_study, tmp_path)
    out = collect_study(study)
    img = screenshot(out.report_html, tmp_path / "shot.png", tmp_path / "profile")
    assert img.shape[0] >= 2000
    non_white = (img < 0.95).any(axis=-1).mean()
    assert non_white > 0.05, "the page is (almost) blank"
    # the filesystem's palette colour (lines, markers) is on screen: the plot images loaded and rendered
    assert colour_fraction(img, COLOURS[0]) > 0.0005


def test_report_escapes_html(small_study: Path, tmp_path: Path) -> None:
    study = copy_study(small_study, tmp_path)
    sweep = study / "sweep.yaml"
    sweep.write_text(sweep.read_text().replace("study: small", "study: small\ndescription: <script>alert(1)</script>"))
    html = collect_study(study, force=True).report_html.read_text()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html


def test_wheel_ships_templates(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("studyctl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "studyctl/templates/report.html.j2" in names and "studyctl/templates/report.md.j2" in names
    assert "worker/run.py" in names and "studyctl/cli.py" in names
