"""The bottom layer: errors, argument validation, lazy import, named random streams, atomic writes.

Every other package may import these modules; they import nothing of memsim
above them and no heavy dependency.
"""
