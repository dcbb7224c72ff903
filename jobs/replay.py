"""spark-submit entry point for `ackreplay replay` (same arguments), e.g.

spark-submit --packages io.delta:delta-spark_4.1_2.13:4.4.0 jobs/replay.py --conf conf/local.yaml ...
"""

import sys

from ackreplay.cli import main

if __name__ == "__main__":
    sys.exit(main(["replay", *sys.argv[1:]]))
