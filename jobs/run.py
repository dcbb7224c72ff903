"""spark-submit entry point for `ackreplay run` (same arguments), e.g.

spark-submit --packages io.delta:delta-spark_4.1_2.13:4.4.0 jobs/run.py --conf conf/local.yaml ...
"""

import sys

from ackreplay.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))
