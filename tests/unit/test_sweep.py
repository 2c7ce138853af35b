"""Sweep files: valid ones load; each kind of mistake gives one line naming file, line, key, allowed values."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from studyctl.definition.planning.sweep import load_sweep
from studyctl.errors import UserError

REPO = Path(__file__).resolve().parents[2]

GOOD = """\
study: t1
models: [llama_7b]
matrix:
  zero_stage: [1, 3]
  nodes: [1, 2]
  ranks_per_node: 2
filesystems:
  scratch: {path: /tmp/x}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(UserError) as info:
        load_sweep(write(tmp_path, text))
    message = str(info.value)
    assert "\n" not in message
    assert info.value.exit_code == 2
    return message


def test_shipped_sweeps_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("USER", "someone")  # the cluster sweeps name per-user scratch; CI's shell may not set it
    monkeypatch.setenv("STUDYCTL_S3_ENDPOINT", "http://127.0.0.1:8333")  # quickstart-s3: the server's env file
    for path in sorted((REPO / "sweeps").glob("*.yaml")):
        sweep = load_sweep(path)
        assert sweep.study and sweep.filesystems


def test_aliases_ddp_and_fsdp(tmp_path: Path) -> None:
    sweep = load_sweep(write(tmp_path, GOOD.replace("[1, 3]", "[ddp, fsdp]")))
    assert sweep.matrix.zero_stage == [0, 3]


def test_env_vars_in_paths_expand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRATCH_ROOT", "/scratch/me")
    sweep = load_sweep(write(tmp_path, GOOD.replace("/tmp/x", "$SCRATCH_ROOT/ckpt")))
    assert sweep.filesystems["scratch"].path == "/scratch/me/ckpt"


BAD = [
    # (name, yaml, expected fragments: line, key, message)
    ("zero stage out of range", GOOD.replace("[1, 3]", "[1, 5]"),
     [":4:", "matrix.zero_stage.1", "5 is not one of 0, 1, 2, 3"]),
    ("unknown top-level key", GOOD + "repetitons: 3\n", [":9:", "repetitons", "did you mean 'repetitions'"]),
    ("unknown matrix axis", GOOD.replace("  nodes:", "  node:"), [":5:", "matrix.node", "did you mean 'nodes'"]),
    ("unknown model", GOOD.replace("[llama_7b]", "[llama-7b]"), [":2:", "models", "not in the catalog",
                                                                "did you mean 'llama_7b'"]),
    ("bad io mode", GOOD + "  \n", []),  # placeholder replaced below
    ("missing filesystems", "study: t\nmodels: [llama_7b]\n", ["filesystems", "required key is missing"]),
    ("negative nodes", GOOD.replace("[1, 2]", "[1, -2]"), [":5:", "matrix.nodes.1", "greater than 0"]),
    ("filesystem not defined", GOOD.replace("  ranks_per_node: 2", "  ranks_per_node: 2\n  filesystem: [lustre]"),
     [":7:", "matrix.filesystem", "'lustre' is not one of scratch"]),
    ("bad study name", GOOD.replace("study: t1", "study: a/b"), [":1:", "study", "names files and directories"]),
    ("invalid yaml", GOOD.replace("matrix:", "matrix: [unclosed"), ["invalid YAML"]),
    ("scale above 1", GOOD + "checkpoint: {scale: 2}\n", [":9:", "checkpoint.scale", "less than or equal to 1"]),
    ("zip lengths differ", GOOD + "zip:\n  - {tensor_parallel: [1, 2], pipeline_parallel: [1]}\n",
     [":10:", "zip", "equal"]),
    ("exclude unknown axis", GOOD + "exclude:\n  - {zero: 3}\n", [":10:", "exclude", "unknown axis 'zero'"]),
    ("exclude bad condition", GOOD + "exclude:\n  - nodes <<< 2\n", [":10:", "exclude", "cannot parse"]),
    ("relative filesystem path", GOOD.replace("/tmp/x", "tmp/x"), [":8:", "filesystems.scratch.path", "absolute"]),
    ("not a mapping", "- just\n- a list\n", ["YAML mapping"]),
    ("inline model missing key", GOOD.replace("[llama_7b]", "\n  - {name: tiny, num_layers: 2, hidden_size: 64}"),
     [":3:", "models.0", "needs ffn_hidden_size, num_attention_heads, vocab_size"]),
]
BAD[4] = ("bad io mode", GOOD.replace("  ranks_per_node: 2", "  ranks_per_node: 2\n  io_mode: [posix]"),
          [":7:", "matrix.io_mode.0", "'posix' is not one of 'buffered', 'direct', 'hybrid'"])


@pytest.mark.parametrize(("name", "text", "fragments"), BAD, ids=[b[0] for b in BAD])
def test_bad_sweep_one_line_error(tmp_path: Path, name: str, text: str, fragments: list[str]) -> None:
    message = error_of(tmp_path, text)
    assert message.startswith(str(tmp_path / "s.yaml"))
    for fragment in fragments:
        assert fragment in message, (name, message)


def test_cli_bad_sweep_exit_2_no_traceback_nothing_created(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("[1, 3]", "[1, 5]"))
    results = tmp_path / "results"
    proc = subprocess.run([sys.executable, "-m", "studyctl.cli", "sweep", "submit", str(path), "--results",
                           str(results)], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0
    assert "matrix.zero_stage" in proc.stderr
    assert not results.exists()
