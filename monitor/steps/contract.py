"""The step contract, in the manner of getsentry/arroyo's ``ProcessingStrategy``.

A pipeline is a chain of steps, each holding the next one; the run loop (:mod:`monitor.ingest.loop`) hands
records to the first and the last commits. The chain is built back to front (:func:`monitor.app.build_loop`).

* :meth:`Step.submit` takes one :class:`Message` or raises :class:`MessageRejected` having taken nothing; the
  caller keeps the message and offers it again later (that is backpressure: nothing is dropped).
* :meth:`Step.poll` does the step's pending work (retries, timers, forwarding what it carried over) and then
  polls the next step. It never blocks longer than the step's own bounded I/O.
* :meth:`Step.join` finishes what is in flight within ``timeout_s`` without waiting on a failing dependency
  (one attempt each), then joins the next step; used on revocation and shutdown.
* :meth:`Step.close` (no more submits, resources released) and :meth:`Step.terminate` (stop at once) cascade.

Offsets ride with the payload: a message's ``committable`` holds, per partition, the offset that is safe to
commit once this message and every message before it are done. Steps keep messages in order, so the last step
commits the ``committable`` of each message it receives. A step that drops or filters a payload still forwards
its offsets (a message whose ``payload`` is ``None`` carries offsets only).

Two additions to arroyo's contract, both because the chain outlives rebalances (the assembler holds open traces
of the partitions this member keeps, so the chain cannot be rebuilt on each assignment as arroyo does):

* :meth:`Step.forget` drops what belongs to revoked partitions;
* :meth:`Step.pressure` names why the chain would refuse work now (``store``, ``scoring``, ``backlog``,
  ``dead_letter``), so the run loop pauses fetching before a record is refused rather than after.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from types import MappingProxyType
from typing import Generic, Protocol, TypeVar

from monitor.trajectory.assembler import TopicPartition

__all__ = ["Located", "Message", "MessageRejected", "Step", "TopicPartition", "TransformStep"]

T = TypeVar("T")

NO_OFFSETS: Mapping[TopicPartition, int] = MappingProxyType({})


class MessageRejected(Exception):
    """The step cannot take the message now; ``reason`` names the pressure (a ``monitor_consumer_paused``
    label). The caller keeps the message and offers it again."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Message(Generic[T]):
    """A payload (``None``: offsets only) and the offsets safe to commit once it is done."""

    __slots__ = ("committable", "payload")

    def __init__(self, payload: T, committable: Mapping[TopicPartition, int] = NO_OFFSETS) -> None:
        self.payload = payload
        self.committable = committable

    def __repr__(self) -> str:
        return f"Message({self.payload!r}, {dict(self.committable)!r})"


class Step(Protocol[T]):
    """One stage of the pipeline; see the module docstring for the contract."""

    def submit(self, message: Message[T]) -> None: ...
    def poll(self) -> None: ...
    def join(self, timeout_s: float) -> None: ...
    def forget(self, partitions: Set[TopicPartition]) -> int:
        """Drop what belongs to ``partitions`` (revoked); returns how many payloads were dropped here and after."""
        ...

    def pressure(self) -> frozenset[str]: ...
    def close(self) -> None: ...
    def terminate(self) -> None: ...


class Located(Protocol):
    def on(self, partitions: Set[TopicPartition]) -> bool:
        """True when the payload has records on one of ``partitions``."""
        ...


L_in = TypeVar("L_in")
L_out = TypeVar("L_out", bound="Located | None")


class TransformStep(Generic[L_in, L_out]):
    """A one-in-one-out step (arroyo's ``RunTask``): :meth:`process` turns a message into the next step's.

    When the next step rejects the result, this step keeps it (the submit succeeded: the message is taken) and
    rejects further submits with the same reason until :meth:`poll` or :meth:`join` got it through. ``process``
    may itself raise :class:`MessageRejected` to refuse a message (nothing taken). Payloads are ``None`` for
    offsets-only messages (``process`` sees them too)."""

    def __init__(self, next_step: Step[L_out]) -> None:
        self.next = next_step
        self.carried: Message[L_out] | None = None
        self.reason = ""

    def process(self, message: Message[L_in]) -> Message[L_out]:
        raise NotImplementedError

    def submit(self, message: Message[L_in]) -> None:
        if self.carried is not None:
            raise MessageRejected(self.reason)
        self._send(self.process(message))

    def _send(self, message: Message[L_out]) -> None:
        try:
            self.next.submit(message)
        except MessageRejected as exc:
            self.carried = message
            self.reason = exc.reason

    def _forward(self) -> None:
        if self.carried is not None:
            message, self.carried = self.carried, None
            self._send(message)

    def poll(self) -> None:
        self._forward()
        self.next.poll()

    def join(self, timeout_s: float) -> None:
        self._forward()
        self.next.join(timeout_s)

    def forget(self, partitions: Set[TopicPartition]) -> int:
        dropped = 0
        carried = self.carried
        if carried is not None and carried.payload is not None and carried.payload.on(partitions):
            self.carried = None
            dropped = 1
        return dropped + self.next.forget(partitions)

    def pressure(self) -> frozenset[str]:
        return self.next.pressure()

    def close(self) -> None:
        self.next.close()

    def terminate(self) -> None:
        self.next.terminate()
