"""`python -m cutover` runs the CLI."""

from cutover.cli.main import main

main()
