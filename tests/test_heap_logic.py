"""The collector kept off the traffic's path (load/heap.py): the objects that exist when traffic
starts are frozen until the last traffic of the process ends (no server)."""

import gc

from pytest_triton_ready.load.heap import frozen_heap


def test_the_objects_are_frozen_while_traffic_runs_and_unfrozen_after_the_last_one():
    assert gc.get_freeze_count() == 0
    with frozen_heap():
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with frozen_heap():  # a second traffic meanwhile: the same freeze
            assert gc.get_freeze_count() == frozen
        assert gc.get_freeze_count() == frozen  # the first still runs
    assert gc.get_freeze_count() == 0


def test_a_full_collection_meanwhile_scans_only_what_was_made_since():
    keep = [[n] for n in range(50_000)]  # tracked objects made before the traffic
    with frozen_heap():
        made = [[n] for n in range(100)]
        gc.collect()
        assert len(gc.get_objects(generation=2)) < 50_000  # the 50,000 lists are out of the scan
    assert len(gc.get_objects(generation=2)) >= 50_000
    del keep, made


def test_a_process_that_froze_its_own_objects_keeps_its_freeze():
    gc.freeze()
    try:
        mine = gc.get_freeze_count()
        with frozen_heap():
            pass
        assert gc.get_freeze_count() == mine
    finally:
        gc.unfreeze()
