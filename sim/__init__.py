"""Engine, runner, recorder, scorers and run spec.

Importing ``sim`` loads nothing heavy: ``sim.errors`` and ``sim.validate``
are the bottom layer every other package may import; the engine, runner and
answering services are imported from their modules when used.
"""
