"""Recall: plan → hard filters → candidates → re-read → score → rank → conflicts → bundle → render → audit.

The entry point is :func:`memory.recall.service.recall`; each stage is a module of its own.
"""
