"""`python -m cutover` runs the CLI."""

from cutover.cli import main

main()
