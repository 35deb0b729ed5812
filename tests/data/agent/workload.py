"""Stand-in workload for the agent tests: prints, optionally sleeps, exits with a code.

``workload.py [--exit N] [--sleep S]``; the GPU work is what the stand-in profilers replay.
"""

import argparse
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--exit", type=int, default=0)
parser.add_argument("--sleep", type=float, default=0.0)
options = parser.parse_args()
print("workload running", flush=True)
if options.sleep:
    time.sleep(options.sleep)
sys.exit(options.exit)
