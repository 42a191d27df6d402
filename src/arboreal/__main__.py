from arboreal.cli import run

run()
