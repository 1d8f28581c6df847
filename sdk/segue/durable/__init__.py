"""Durable execution engines a segue run can run on (`pip install 'segue[dbos]'`: segue.durable.dbos).

segue's own store is the run's journal (segue.run.recovery continues a run from it); an engine decides when a run
continues and numbers its steps, keeping references into that journal, never the history.
"""
