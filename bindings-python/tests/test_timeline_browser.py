"""rmm.timeline.to_html rendered in a real browser (headless Chromium): the page's DOM has one row per
segment, one block per snapshot block (by state), a timeline per device and the live allocations;
a screenshot is taken. Skipped with a reason when no headless Chromium is installed (ci/python.sh
installs Debian's chromium-headless-shell). RMM_TIMELINE_SCREENSHOT=PATH keeps the screenshot
(docs/images/timeline-view.png is made so)."""

import os
import re
import shutil
import subprocess

import pytest

import rmm
import rmm.timeline

BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome", "headless_shell")
BROWSER = os.environ.get("RMM_CHROMIUM") or next((b for b in map(shutil.which, BROWSERS) if b), None)
pytestmark = pytest.mark.skipif(
    BROWSER is None, reason="no headless Chromium (apt-get install chromium-headless-shell, or set RMM_CHROMIUM)"
)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
         "--run-all-compositor-stages-before-draw", "--virtual-time-budget=5000"]


def browse(*args, timeout=90):
    proc = subprocess.run([BROWSER, *FLAGS, *args], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def model_step():
    """Allocations a user would see: a pool's blocks (two freed, leaving holes) and a buffer outside
    it, made through a recording adaptor of its own."""
    weights = [rmm.DeviceBuffer(size=n) for n in (1 << 20, 3 << 19, 1 << 20, 1 << 18, 2 << 20)]
    del weights[1], weights[3]
    outside = rmm.mr.RecordingResourceAdaptor(rmm.mr.SystemMemoryResource())
    activations = rmm.DeviceBuffer(size=3 << 20, mr=outside)
    return weights, activations


@pytest.fixture
def snapshot():
    before = rmm.mr.get_current_device_resource()
    rmm.mr.set_current_device_resource(rmm.mr.PoolMemoryResource(rmm.mr.SystemMemoryResource(), 8 << 20, 8 << 20))
    try:
        rmm.timeline.start(clear=True)
        kept = model_step()
        data = rmm.timeline.snapshot()
        del kept
    finally:
        rmm.timeline.stop()
        rmm.timeline.clear()
        rmm.mr.set_current_device_resource(before)
    return data


def test_the_html_view_renders_every_segment_and_block_in_chromium(snapshot, tmp_path):
    page = tmp_path / "timeline.html"
    rmm.timeline.dump_html(page, snapshot)
    dom = browse("--dump-dom", page.as_uri())
    assert 'data-rendered="yes"' in dom, dom[:2000]

    segments = snapshot["segments"]
    blocks = [b for s in segments for b in s["blocks"]]
    assert len(re.findall(r'class="segment"', dom)) == len(segments)
    assert len(re.findall(r'class="block (?:active_allocated|active_pending_free|inactive)"', dom)) == len(blocks)
    live = [b for b in blocks if b["state"] == "active_allocated"]
    assert len(re.findall(r'class="block active_allocated"', dom)) == len(live)
    assert len(re.findall(r'class="block inactive"', dom)) == sum(b["state"] == "inactive" for b in blocks)
    assert len(re.findall(r'class="allocation"', dom)) == min(len(live), 50)
    devices_with_traces = sum(1 for t in snapshot["device_traces"] if any(e["action"] == "alloc" for e in t))
    assert len(re.findall(r"<polyline", dom)) == devices_with_traces >= 1
    summary = re.search(r'<div id="summary">([^<]*)</div>', dom).group(1)
    assert summary.startswith(f"{len(segments)} segments, ")
    assert "model_step" in dom  # the frames that made the blocks, in the tooltips and the table

    shot = screenshot(page, tmp_path)
    keep = os.environ.get("RMM_TIMELINE_SCREENSHOT")
    if keep:
        shutil.copyfile(shot, keep)


def screenshot(page, tmp_path):
    shot = tmp_path / "timeline.png"
    browse(f"--screenshot={shot}", "--window-size=1100,760", page.as_uri())
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, len(data)
    return shot
