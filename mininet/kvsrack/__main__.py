"""``python -m kvsrack``: the rack runner's command line (:mod:`kvsrack.cli`)."""

import sys

from kvsrack.cli import main

if __name__ == "__main__":
    sys.exit(main())
