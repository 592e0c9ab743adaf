"""The docs' examples are run, not pasted (issue 25 item 7): the plain-PyTorch snippet of
docs/integrations.md runs as written, and docs/transfer.md's transcript is what its commands print
now (bench/doc_transcripts.py reruns and checks it)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_the_integrations_plain_pytorch_snippet_runs_as_written(tmp_path):
    pytest.importorskip("torch")
    from budgetdsl.plan.calibration_file import load_calibration

    page = (REPO / "docs" / "integrations.md").read_text()
    section = page[page.index("## Plain PyTorch"):page.index("## Hugging Face")]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    (tmp_path / "gns_example.py").write_text(code)
    done = subprocess.run([sys.executable, "gns_example.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    cal = load_calibration(tmp_path / "calibration.json")
    s = cal.summary
    assert s.steps_measured == 300 and s.b_simple is not None
    assert cal.provenance.batch.accumulation == 4 and cal.provenance.optimizer.name == "adamw"


def test_the_transfer_transcript_is_what_the_commands_print(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "bench" / "doc_transcripts.py")], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_a_stale_transcript_is_caught(tmp_path, monkeypatch):
    """The check can fail: the page with its transcript changed is reported stale."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import doc_transcripts
    finally:
        sys.path.pop(0)
    page = tmp_path / "transfer.md"
    page.write_text(doc_transcripts.PAGE.read_text().replace("$ echo $?\n2\n", "$ echo $?\n0\n"))
    monkeypatch.setattr(doc_transcripts, "PAGE", page)
    monkeypatch.setattr(doc_transcripts, "REPO", REPO)
    assert doc_transcripts.main([]) == 1
