"""``python -m kvswitch`` is the same as the ``kvswitch`` console command."""

from kvswitch.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
