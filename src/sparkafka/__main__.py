"""``python -m sparkafka``: the same command line as the ``sparkafka`` script (see ``sparkafka.cli``)."""

from __future__ import annotations

from sparkafka.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
