"""The HTML report as a person sees it (headless Chromium, plots visible); the wheel ships templates."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np

from studyctl.analysis.plots.style import COLOURS
from studyctl.api import collect as collect_study
from tests.integration.test_collect import copy_study

REPO = Path(__file__).resolve().parents[2]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Debian's chromium is required (scripts/test.sh installs it)"
    return found


def screenshot(html: Path, png: Path, profile: Path, height: int = 2600) -> np.ndarray:
    subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={profile}", f"--screenshot={png}", f"--window-size=1280,{height}",
                    "--hide-scrollbars", html.as_uri()], check=True, capture_output=True, timeout=120)
    return mpimg.imread(png)[..., :3]


def colour_fraction(img: np.ndarray, hex_colour: str, tol: float = 0.08) -> float:
    rgb = np.array([int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    return float((np.abs(img - rgb) < tol).all(axis=-1).mean())


def test_report_screenshot_shows_the_plots(small_study: Path, tmp_path: Path) -> None:
    study = copy_study(small_study, tmp_path)
    out = collect_study(study)
    html = out.report_html.read_text()
    for text in ("scale</th><td>0.004", "checkpoint size, nominal (full size)",
                 "checkpoint size, written", "projected<br>full-size (s)", "best write (total bytes / total time)"):
        assert text in html, text
    img = screenshot(out.report_html, tmp_path / "shot.png", tmp_path / "profile", height=4000)
    assert img.shape[0] >= 4000
    non_white = (img < 0.95).any(axis=-1).mean()
    assert non_white > 0.04, "the page is (almost) blank"
    # the palette's first colour (lines, markers) is on screen: the plot images loaded and rendered. How much of it
    # depends on the measured figures (~0.05% of a 1280×4000 page here); a page without its images has ~none.
    assert colour_fraction(img, COLOURS[0]) > 0.0002


def test_report_escapes_html(small_study: Path, tmp_path: Path) -> None:
    study = copy_study(small_study, tmp_path)
    sweep = study / "sweep.yaml"
    text = sweep.read_text().replace("study: small", "study: small\ndescription: <script>alert(1)</script>")
    sweep.write_text(text)
    html = collect_study(study, force=True).report_html.read_text()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html


def test_wheel_ships_templates(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("studyctl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "studyctl/templates/report.html.j2" in names and "studyctl/templates/report.md.j2" in names
    assert "worker/run.py" in names and "studyctl/cli/app.py" in names
    # installed from the wheel (not the checkout), collect finds the packaged templates and renders
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    study = tmp_path / "results" / "wheel"
    write_result(study, make_point(), [1.0, 1.1], [1.2])
    code = ("import sys; from pathlib import Path; import studyctl.analysis.report as r; "
            "from studyctl.analysis.collect import collect; "
            "res = collect(Path(sys.argv[1])); print(r.template_dir()); print(res.report_html)")
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, "-c", code, str(study)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    templates, html = proc.stdout.split()
    assert Path(templates) == site / "studyctl" / "templates"
    assert "Checkpoint I/O study: wheel" in Path(html).read_text()


# ------------------------------------------------------------------ generated studies (no MPI)
from studyctl.analysis.collect import PointStatus, collect  # noqa: E402
from studyctl.analysis.report import template_dir  # noqa: E402
from tests.resultgen import make_point, scaling_study, write_error, write_result  # noqa: E402


def study_with_everything(root: Path) -> tuple[Path, list[PointStatus]]:
    """Two filesystems, two I/O modes, 1-4 nodes; a failed point (worker error), a timeout, an exclusion."""
    study = root / "results" / "demo"
    points = scaling_study(study, reps=2, nodes=(1, 2, 4), filesystems=("lustre", "nvme"), zeros=(1, 3))
    failed = make_point(nodes=16)
    write_error(study, failed, 2, "insufficient_space", "needs 12.0 GiB, 3.1 GiB free")
    statuses = [PointStatus(p.point_id, "COMPLETED", 1) for p in points]
    statuses += [PointStatus(failed.point_id, "FAILED", 2,
                             failure_reason="insufficient_space: needs 12.0 GiB"),
                 PointStatus("0badc0ffee00", "TIMEOUT", 1, failure_reason="time limit reached after 7 of 10",
                             resubmit_command="studyctl sweep resubmit demo --point 0badc0ffee00 --time 2h"),
                 PointStatus("e0e0e0e0e0e0", "EXCLUDED", 0, excluded_reason="ZeRO-3 with PP > 1 is not real"),
                 PointStatus("a1a1a1a1a1a1", "PENDING", 1)]
    (study / "sweep.yaml").write_text("study: demo\ndescription: <script>alert(1)</script> & more\n")
    return study, statuses


def test_report_has_plots_failures_commands_and_provenance(tmp_path: Path) -> None:
    study, statuses = study_with_everything(tmp_path)
    res = collect(study, statuses)
    html = res.report_html.read_text()
    md = res.report_md.read_text()
    for plot in res.plots:
        assert f'src="plots/{plot.path.name}"' in html and f"](plots/{plot.path.name})" in md
    failed_id = statuses[-4].point_id
    for text in (html, md):
        assert f"studyctl sweep resubmit demo --point {failed_id}" in text
        assert "studyctl sweep resubmit demo --point 0badc0ffee00 --time 2h" in text  # the caller's command
        assert "insufficient_space: needs 12.0 GiB" in text and "time limit reached after 7 of 10" in text
        assert "ZeRO-3 with PP &gt; 1 is not real" in text or "ZeRO-3 with PP > 1 is not real" in text
        assert "rw,relatime" in text and "MPICH Version: 4.2.0" in text and "2026-11-22T10:00:00" in text
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in html
    assert "e0e0e0e0e0e0" in html and "a1a1a1a1a1a1" in html
    assert ">2</b>failed" in html and ">1</b>excluded" in html


def test_report_without_ledger_uses_the_files(tmp_path: Path) -> None:
    study, _ = study_with_everything(tmp_path)
    res = collect(study)  # no statuses: the worker error alone makes the point a failure
    html = res.report_html.read_text()
    failed = make_point(nodes=16)
    assert f"studyctl sweep resubmit demo --point {failed.point_id}" in html
    assert "insufficient_space: needs 12.0 GiB, 3.1 GiB free" in html and "No ledger states" in html


def test_generated_report_screenshot_is_plot_rich(tmp_path: Path) -> None:
    study, statuses = study_with_everything(tmp_path)
    res = collect(study, statuses)
    img = screenshot(res.report_html, tmp_path / "shot.png", tmp_path / "profile", height=4000)
    assert img.shape[:2] == (4000, 1280)
    non_white = (img < 0.95).any(axis=-1).mean()
    assert non_white > 0.08, "the page is (almost) blank"
    for colour in COLOURS[:2]:  # the first two series colours are on screen: the plots rendered
        assert colour_fraction(img, colour) > 0.001, colour


def test_templates_found_in_checkout() -> None:
    assert (template_dir() / "report.html.j2").is_file() and (template_dir() / "report.md.j2").is_file()
