"""docs/fixtures.md's "From Python" example, run as printed from the repository root: it must pass."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_docs_example_runs_and_passes(tmp_path):
    text = (ROOT / "docs" / "fixtures.md").read_text(encoding="utf-8")
    code = text.split("## From Python", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    r = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout and "FAIL" not in r.stdout, r.stdout
