"""A second implementation of the hash-chain check, written from docs/history.md alone.

It imports nothing of flowtrail (a test checks its imports), so it stands for a third party's
verifier: `python independent_chain_check.py EXPORT` prints `OK <run> <events> <head>` and exits 0,
or prints `BAD <position>` for each position that does not verify and exits 1.
"""

import hashlib
import json
import sys


def sha256(data):
    return hashlib.sha256(data).digest()


def check(lines):
    bad, previous, expected, fresh, run, head = [], None, 1, False, None, None
    for line in lines:
        line = line.strip()
        if not line:
            continue
        parsed = json.loads(line)
        position = parsed["originator_version"]
        run = run or parsed["originator_id"].replace("-", "")
        if previous is None:
            previous = sha256(("flowtrail-chain-v1:" + run).encode("ascii"))
        if position < expected:
            bad.append(position)
            continue
        if position > expected:
            bad.append(expected)
            fresh = True
        expected = position + 1
        chain = parsed.get("chain")
        if chain is None:
            continue
        event = line[:line.rfind(b',"chain":')] + b"}"
        if "content" in chain:
            s, c = sha256(event), bytes.fromhex(chain["content"])
        else:
            c = sha256(event)
            s = bytes.fromhex(chain["skeleton"]) if "skeleton" in chain else c
        link = bytes.fromhex(chain["link"])
        if not fresh and sha256(previous + s + c) != link:
            bad.append(position)
        previous, fresh, head = link, False, chain["link"]
    return run, expected - 1, head, bad


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as export:
        run, events, head, bad = check(export.read().splitlines())
    for position in bad:
        print("BAD", position)
    if not bad:
        print("OK", run, events, head)
    sys.exit(1 if bad else 0)
