#!/usr/bin/env python3
"""Per-case results of RMM's C++ tests, run as RMM's CMake registers them: one ctest test per program.

Called by scripts/peer/cpp.sh after ctest:

    cpp_results.py JUNIT XML_DIR PROGRAMS_FILE GTESTS_DIR RESULTS_TXT HOST_MODE

- JUNIT: ctest's --output-junit file (one entry per program: its exit status and time);
- XML_DIR: the GoogleTest XML each program wrote (--gtest_output=xml:XML_DIR/<PROGRAM>.xml);
- PROGRAMS_FILE: the names of the programs that are GoogleTests (one a line; bindings-cpp/peer);
- GTESTS_DIR: where the programs are, to run a program again case by case when it ended without
  writing its XML (a crash or a timeout): every case is then accounted for, the one that crashed
  as failed;
- RESULTS_TXT: written, one line per case (`PASSED`, `FAILED`, `SKIPPED`, `FAILED-NO-GPU`,
  `FAILED-DIFFERS`, then PROGRAM.Suite.Case);
- HOST_MODE: 1 without a GPU (failures that show CUDA missing are then counted apart).

Prints the per-program counts, each failure, and `N passed, N failed, N skipped`. Exit status: 0 all
passed; 2 only failures for lack of a GPU or deliberate differences; 3 other failures.
"""
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

# A failure whose text shows that CUDA is missing (host mode: no driver, no device) is one that
# needs a GPU; RMM's tests do not skip without one.
NO_GPU = ("RMM_ERROR_NO_DRIVER", "RMM_ERROR_NO_DEVICE", "cudaErrorInsufficientDriver", "cudaErrorNoDevice",
          "CUDA driver version is insufficient", "no CUDA-capable device", "is_device_accessible_memory",
          "host-accessible memory is required in host mode")
# Tests whose output cannot show it: Adaptor.STDOUT captures stdout, where GoogleTest reports the
# exception (an allocation from cuda_memory_resource in host mode).
NO_GPU_SILENT = {"LOGGER_TEST.Adaptor.STDOUT"}
# Deliberate differences (docs/testing.md, "Deliberate differences"; docs/design/checked-frees.md):
# our tracking adaptor refuses a free whose size is in another multiple of 256, and refuses (where
# RMM's forwards) one it never tracked unless its upstream knows the pointer; our statistics adaptor
# counts only what it handed out, so an inner adaptor does not go negative (NegativeInnerTracking);
# our callback_memory_resource reports an allocate callback's null for a non-zero size as
# rmm::out_of_memory, where RMM hands the null to the caller (the test's mock returns null).
DELIBERATE = {"TRACKING_TEST.TrackingTest.DeallocWrongBytes", "TRACKING_TEST.TrackingTest.NegativeInnerTracking",
              "TRACKING_TEST.TrackingTest.UntrackedDeallocationDoesNotUnderflowAllocatedBytes",
              "CALLBACK_MR_TEST.CallbackTest.TestCallbacksAreInvoked",
              "STATISTICS_TEST.StatisticsTest.NegativeInnerTracking"}
CASE_TIMEOUT_S = 120  # a case run alone (after its program crashed)


def text_of(element):
    """The failure/skip messages and text under a GoogleTest <testcase>."""
    parts = []
    for child in element:
        parts.append(child.get("message", ""))
        parts.append(child.text or "")
    return "\n".join(parts)


def gtest_cases(path):
    """(Suite.Case, kind, text) for each case in GoogleTest's XML at path."""
    cases = []
    for tc in ET.parse(path).getroot().iter("testcase"):
        name = f"{tc.get('classname')}.{tc.get('name')}"
        text = text_of(tc)
        if tc.find("failure") is not None or tc.find("error") is not None:
            kind = "failed"
        elif tc.find("skipped") is not None or tc.get("result") == "skipped" or tc.get("status") == "notrun":
            kind = "skipped"
        else:
            kind = "passed"
        cases.append((name, kind, text))
    return cases


def list_cases(exe):
    """The cases of a GoogleTest program (--gtest_list_tests), as Suite.Case filters."""
    out = subprocess.run([exe, "--gtest_list_tests"], capture_output=True, text=True, timeout=60).stdout
    cases, suite = [], None
    for line in out.splitlines():
        if not line.strip() or line.startswith("Running main()"):
            continue
        if not line.startswith(" "):
            suite = line.split("#")[0].strip()
        elif suite:
            cases.append(suite + line.split("#")[0].strip())
    return cases


def rerun_case_by_case(prog, exe, xml_dir):
    """Runs each case of prog alone; a case that crashes or hangs is a failure with that reason."""
    results = []
    try:
        names = list_cases(exe)
    except (OSError, subprocess.SubprocessError) as e:
        return [(f"(program {prog})", "failed", f"could not list its cases: {e}")]
    for i, case in enumerate(names):
        xml = os.path.join(xml_dir, f"{prog}.case{i}.xml")
        try:
            p = subprocess.run([exe, f"--gtest_filter={case}", f"--gtest_output=xml:{xml}"], capture_output=True,
                               text=True, timeout=CASE_TIMEOUT_S)
            rc, tail = p.returncode, (p.stdout + p.stderr)[-2000:]
        except subprocess.TimeoutExpired:
            rc, tail = "timeout", f"ran over {CASE_TIMEOUT_S} s"
        if os.path.exists(xml):
            results += gtest_cases(xml)
        else:
            results.append((case, "failed", f"the program ended ({rc}) without its XML: {tail}"))
    return results


def main():
    junit, xml_dir, programs_file, gtests_dir, results_txt, host_mode = sys.argv[1:7]
    host_mode = host_mode == "1"
    try:
        ctest_cases = list(ET.parse(junit).getroot().iter("testcase"))
    except (OSError, ET.ParseError) as e:
        print(f"peer cpp: no ctest results ({e})")
        print("0 passed, 1 failed, 0 skipped")
        return 3
    gtest_programs = set(open(programs_file).read().split()) if os.path.exists(programs_file) else set()
    lines, seconds = [], {}
    for c in ctest_cases:
        prog, status = c.get("name"), c.get("status", "")
        seconds[prog] = float(c.get("time") or 0)
        if status in ("notrun", "disabled"):
            lines.append(("SKIPPED", prog, ""))
            continue
        ctest_failed = c.find("failure") is not None or status == "fail"
        if prog not in gtest_programs:  # not a GoogleTest: one case, its exit status
            out = c.find("system-out")
            lines.append(("FAILED" if ctest_failed else "PASSED", prog, (out.text or "") if out is not None else ""))
            continue
        xml = os.path.join(xml_dir, f"{prog}.xml")
        if os.path.exists(xml):
            cases = gtest_cases(xml)
            if ctest_failed and not any(k == "failed" for _, k, _ in cases):
                cases.append(("(exit)", "failed", "the program failed after its cases passed (exit status)"))
        else:
            print(f"  {prog}: ended without its XML (crash or timeout): running its cases one by one")
            cases = rerun_case_by_case(prog, os.path.join(gtests_dir, prog), xml_dir)
        for name, kind, text in cases:
            lines.append((kind.upper(), f"{prog}.{name}", text))

    counts = {"passed": 0, "failed": 0, "skipped": 0}
    no_gpu = differs = 0
    tagged = []
    for kind, name, text in lines:
        counts[kind.lower()] += 1
        tag = kind
        if kind == "FAILED" and (any(m in text for m in NO_GPU) or (host_mode and name in NO_GPU_SILENT)):
            no_gpu += 1
            tag = "FAILED-NO-GPU"
        elif kind == "FAILED" and name in DELIBERATE:
            differs += 1
            tag = "FAILED-DIFFERS"
        tagged.append((tag, name, text))
    with open(results_txt, "w") as f:
        f.write("".join(f"{tag:14} {name}\n" for tag, name, _ in sorted(tagged, key=lambda t: t[1])))

    by_program = {}
    for tag, name, _ in tagged:
        c = by_program.setdefault(name.split(".", 1)[0], {"PASSED": 0, "FAILED": 0, "SKIPPED": 0,
                                                          "FAILED-NO-GPU": 0, "FAILED-DIFFERS": 0})
        c[tag] += 1
    for prog, c in sorted(by_program.items()):
        f = c["FAILED"] + c["FAILED-NO-GPU"] + c["FAILED-DIFFERS"]
        notes = [f"{c['FAILED-NO-GPU']} for lack of a GPU"] if c["FAILED-NO-GPU"] else []
        notes += [f"{c['FAILED-DIFFERS']} deliberate differences"] if c["FAILED-DIFFERS"] else []
        note = f" ({', '.join(notes)})" if notes else ""
        print(f"  {prog:36} {c['PASSED']:4} passed {f:4} failed {c['SKIPPED']:4} skipped "
              f"{seconds.get(prog, 0):7.2f} s{note}")
    for tag, name, text in sorted(tagged, key=lambda t: t[1]):
        if tag in ("FAILED", "FAILED-DIFFERS"):
            first = next((l.strip() for l in text.splitlines() if l.strip()), "")[:200]
            print(f"  failed: {name}{' (deliberate difference)' if tag == 'FAILED-DIFFERS' else ''}"
                  f"{': ' + first if first and tag == 'FAILED' else ''}")
    others = counts["failed"] - no_gpu - differs
    print(f"peer cpp: {len(ctest_cases)} programs run in {sum(seconds.values()):.1f} s")
    print(f"peer cpp: of the {counts['failed']} failed, {no_gpu} failed for lack of a GPU (CUDA missing: host "
          f"mode), {differs} are deliberate differences and {others} otherwise")
    print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    return 3 if others else (2 if counts["failed"] else 0)


if __name__ == "__main__":
    sys.exit(main())
