#!/usr/bin/env python3
"""The ASan job's second chance, for one failure only: LeakSanitizer's own
crash at exit (its tracer thread takes a signal while PoCL's worker threads
wind down), which is no finding: the leak check never ran.

  asan-retry.py list LOG          names of the tests that failed that way
  asan-retry.py merge LOG RETRY   each test of RETRY replaces its line in LOG
  asan-retry.py check LOG         exit 1 when any test in LOG is not OK/SKIP
LOG and RETRY are meson's testlog .json files (a JSON object per line)."""
import json
import sys

CRASH = "LeakSanitizer has encountered a fatal error"
FINDINGS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer: detected", "runtime error:")


def records(path):
    with open(path) as f:
        return [(line, json.loads(line)) for line in f if line.strip()]


def main(argv):
    cmd, log = argv[1], argv[2]
    if cmd == "list":
        for _, r in records(log):
            text = (r.get("stdout") or "") + (r.get("stderr") or "")
            if r["result"] == "FAIL" and CRASH in text and not any(x in text for x in FINDINGS):
                print(r["name"])
        return 0
    if cmd == "merge":
        again = {r["name"]: line for line, r in records(argv[3])}
        lines = [again.get(r["name"], line) for line, r in records(log)]
        with open(log, "w") as f:
            f.write("".join(l if l.endswith("\n") else l + "\n" for l in lines))
        return 0
    if cmd == "check":
        bad = [r["name"] for _, r in records(log) if r["result"] not in ("OK", "SKIP")]
        for n in bad:
            print("ASan job: failed: " + n)
        return 1 if bad else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
