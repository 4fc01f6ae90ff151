"""``python -m api.cli``: what the dev stack runs its services with, and hints name when ``mnemo`` is not on
PATH."""

from api.cli import main

main()
