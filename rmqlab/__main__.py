"""``python -m rmqlab`` runs the CLI."""

from rmqlab.cli import main

main()
