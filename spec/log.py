"""Operations on one replica's log and leader-epoch cache (pure functions on tuples).

The cache follows Kafka's LeaderEpochFileCache: one (epoch, start offset) entry per
leader epoch that wrote, or was assigned at, an offset of this log.
"""

from __future__ import annotations

UNDEFINED = -1  # Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET


def assign_epoch(cache: tuple, epoch: int, offset: int) -> tuple:
    """Record that `epoch` starts at `offset` (makeLeader, or a follower's first record of an epoch)."""
    if cache and cache[-1][0] >= epoch:
        return cache
    # Entries starting at or after the new one are overwritten, as Kafka's assign does.
    kept = tuple(e for e in cache if e[1] < offset)
    return kept + ((epoch, offset),)


def append(log: tuple, cache: tuple, records: tuple) -> tuple[tuple, tuple]:
    for rec in records:
        cache = assign_epoch(cache, rec[0], len(log))
        log = log + (rec,)
    return log, cache


def truncate(log: tuple, cache: tuple, offset: int, cache_at_end: bool = False) -> tuple[tuple, tuple]:
    """Drop every record at or above `offset` (UnifiedLog.truncateTo / truncateFromEnd). At or
    past the log end the log stays; with cache_at_end the leader-epoch cache still loses the
    entries that start at the log end (an epoch this replica led without appending: KAFKA-10706)."""
    if offset >= len(log):
        if cache_at_end and cache and cache[-1][1] >= len(log):
            return log, tuple(e for e in cache if e[1] < len(log))
        return log, cache
    return log[:offset], tuple(e for e in cache if e[1] < offset)


def end_offset_for_epoch(cache: tuple, leo: int, requested: int) -> tuple[int, int]:
    """(epoch, end offset) as OffsetsForLeaderEpoch answers it for `requested` (KIP-101/279)."""
    if requested == UNDEFINED or not cache:
        return UNDEFINED, UNDEFINED
    if cache[-1][0] == requested:
        return requested, leo
    higher = next((e for e in cache if e[0] > requested), None)
    if higher is None:
        return UNDEFINED, UNDEFINED  # requested is newer than any epoch we know
    floor = None
    for e in cache:
        if e[0] <= requested:
            floor = e
    if floor is None:
        return requested, higher[1]  # older than anything we know
    return floor[0], higher[1]


def truncation_offset(cache: tuple, leo: int, hw: int, leader_epoch: int, leader_end: int) -> tuple[int, bool]:
    """Where a follower truncates given the leader's (epoch, end offset); and whether it is done.

    Follows the fetcher's getOffsetTruncationState: when the follower does not know the
    leader's epoch it truncates to its own end of the largest earlier epoch and asks again.
    """
    if leader_end == UNDEFINED:
        return min(hw, leo), True
    if leader_epoch == UNDEFINED:
        return min(leader_end, leo), True
    own_epoch, own_end = end_offset_for_epoch(cache, leo, leader_epoch)
    if own_epoch == UNDEFINED:
        return min(leader_end, leo), True
    if own_epoch != leader_epoch:
        return min(own_end, leo), False
    return min(own_end, leader_end, leo), True
