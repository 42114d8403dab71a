"""SIGKILL a real host many times while phones pair; print what survived.

    python -m benchmarks.pairing_kills --kills 100

Each kill ends one lifetime of ``mirror-host serve`` at a random moment while a
phone pairs (``tests/crash_campaign.py``, the campaign the test suite runs 20
kills of). Prints the tally: corrupt stores and devices lost after their phone
got ``paired`` must both be 0; orphans (a device saved whose ``paired`` never
left) are allowed.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import trio

from tests.crash_campaign import kill_during_pairings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--seed", type=int, default=29)
    args = parser.parse_args()
    state_dir = Path(tempfile.mkdtemp(prefix="mh-kills-", dir="/tmp"))
    started = time.monotonic()
    try:
        tally = trio.run(lambda: kill_during_pairings(state_dir, args.kills, seed=args.seed))
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)
    print(f"kills                       {tally.kills}")
    print(f"pairings cut off by a kill  {tally.interrupted}")
    print(f"phones that got `paired`    {tally.received}")
    print(f"corrupt stores              {tally.corrupt}")
    print(f"devices lost after `paired` {tally.lost}")
    print(f"orphans (allowed)           {tally.orphans}")
    print(f"took                        {time.monotonic() - started:.0f} s")
    for problem in tally.problems:
        print(problem)
    if tally.corrupt or tally.lost:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
