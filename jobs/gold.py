"""spark-submit entry point for `ackreplay gold` (same arguments)."""

import sys

from ackreplay.cli import main

if __name__ == "__main__":
    sys.exit(main(["gold", *sys.argv[1:]]))
