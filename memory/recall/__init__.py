"""Recall: plan → scope → hard filters → candidates → re-read → score → rank → conflicts → bundle → render → audit."""
