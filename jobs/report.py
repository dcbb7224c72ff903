"""spark-submit entry point for `ackreplay report` (same arguments)."""

import sys

from ackreplay.cli import main

if __name__ == "__main__":
    sys.exit(main(["report", *sys.argv[1:]]))
