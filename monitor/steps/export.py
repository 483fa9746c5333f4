"""Export: the results the store took as new go to the result sinks (the OTLP ``gen_ai.evaluation.result``
exporter, :mod:`monitor.export.evaluation_events`). Sinks never block nor raise; a replay sends nothing again."""

from __future__ import annotations

from collections.abc import Sequence

from monitor.steps.contract import Message, Step, TransformStep
from monitor.steps.work import ResultSink, TraceWork, VerdictWork

Work = TraceWork | VerdictWork | None


class ExportStep(TransformStep[Work, Work]):
    def __init__(self, next_step: Step[Work], sinks: Sequence[ResultSink]) -> None:
        super().__init__(next_step)
        self.sinks = tuple(sinks)

    def process(self, message: Message[Work]) -> Message[Work]:
        work = message.payload
        if work is not None and work.rows:
            results = [row.result for row, new in zip(work.rows, work.new, strict=True) if new]
            if results:
                for sink in self.sinks:
                    sink.emit(results)
        return message
