"""The daemon's pipeline as steps (decode → assemble → rebuild → sample → score → store → observe → export →
commit), each a :class:`~monitor.steps.contract.Step`; the run loop (:mod:`monitor.ingest.loop`) drives the
first one."""
